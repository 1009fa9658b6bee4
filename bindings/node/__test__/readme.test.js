'use strict'
// The README's runnable snippet, run as written against a dev server.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { once } = require('node:events')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('..')
const { useServer } = require('./helpers')

// The README snippet's process must leave no session either.
const fx = useServer()

test('README snippet runs', async () => {
  const readme = fs.readFileSync(path.join(__dirname, '../README.md'), 'utf8')
  const m = /```js\n\/\/ readme-snippet[^\n]*\n([\s\S]*?)```/.exec(readme)
  assert.ok(m, 'README has a readme-snippet block')
  // Inside the package directory, so that require('consul-baton') resolves to this package.
  const file = path.join(__dirname, `.readme-snippet-${process.pid}.js`)
  fs.writeFileSync(file, m[1])
  try {
    const child = spawn(process.execPath, [file], {
      env: { ...process.env, CONSUL_HTTP_ADDR: fx.addr },
      stdio: ['ignore', 'inherit', 'inherit'],
    })
    const [code] = await once(child, 'exit')
    assert.equal(code, 0)
  } finally {
    fs.unlinkSync(file)
  }
  const c = new Client({ address: fx.addr })
  const config = JSON.parse((await c.kvGet('service/config')).toString())
  assert.equal(config.owner, 'host-a')
  assert.match(config.token, /^\d+$/)
  await c.close()
})
