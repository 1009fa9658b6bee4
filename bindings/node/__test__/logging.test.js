'use strict'
// baton's log records in Node (issue 31, item 2): warnings reach standard error by default (the
// core's log bridge is installed when the addon loads), `setLogger(fn, { level })` routes them to
// a function through an unref'd thread-safe function, and an untimed acquire against a Consul
// that does not answer says so within about a second instead of waiting in silence.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { Client, setLogger } = require('..')
const { useServer, closedPort, destroySession, waitFor } = require('./helpers')

const fx = useServer()
const pkg = path.resolve(__dirname, '..')

// The core warns after 1 s without any answer; the test allows for a loaded machine.
const WARN_DEADLINE_MS = 3000

/** Records given to the logger, as { level, message, target }. */
function collect(options) {
  const records = []
  setLogger((level, message, target) => records.push({ level, message, target }), options)
  return records
}

/**
 * Runs `script` (CommonJS, `baton` in scope) in a child process; resolves once a line of its
 * stderr matches `pattern` (with the stderr so far) or rejects after `timeoutMs`, then kills it.
 */
function childStderr(script, pattern, { env = {}, timeoutMs = 20000 } = {}) {
  const child = spawn(process.execPath, ['-e', `const baton = require(${JSON.stringify(pkg)});\n${script}`], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stderr = ''
  let stdout = ''
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`no stderr line matching ${pattern} within ${timeoutMs} ms; stderr: ${JSON.stringify(stderr)}, stdout: ${JSON.stringify(stdout)}`))
    }, timeoutMs)
    child.stdout.on('data', (d) => {
      stdout += d
    })
    child.stderr.on('data', (d) => {
      stderr += d
      if (pattern.test(stderr)) {
        clearTimeout(timer)
        child.kill('SIGKILL')
        resolve({ stderr, stdout })
      }
    })
    child.once('exit', (code, sig) => {
      // Let a last chunk of stderr arrive first.
      setImmediate(() => {
        if (pattern.test(stderr)) return
        clearTimeout(timer)
        reject(new Error(`child exited (${code ?? sig}) without a stderr line matching ${pattern}; stderr: ${JSON.stringify(stderr)}, stdout: ${JSON.stringify(stdout)}`))
      })
    })
  })
}

test('setLogger routes baton warnings to a function (level, message, target); null restores the default', async () => {
  const records = collect()
  try {
    const c = fx.client()
    const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
    await destroySession(fx.addr, s.id)
    assert.equal(await s.waitLost({ timeoutMs: 10000 }), 'invalidated')
    const r = await waitFor('a warning naming the lost session', () => records.find((x) => x.message.includes(s.id)))
    assert.equal(r.level, 'warn')
    assert.match(r.message, /lost/)
    assert.match(r.target, /^baton/)
  } finally {
    setLogger(null)
  }
  // After setLogger(null) the function gets nothing more.
  const before = records.length
  const c = fx.client()
  const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  await destroySession(fx.addr, s.id)
  assert.equal(await s.waitLost({ timeoutMs: 10000 }), 'invalidated')
  await c.close()
  assert.equal(records.length, before, JSON.stringify(records.slice(before)))
})

test('by default baton warnings go to stderr', async () => {
  const { stderr } = await childStderr(
    `(async () => {
      const c = new baton.Client({ address: ${JSON.stringify(fx.addr)} })
      const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
      console.log(s.id)
      const http = require('node:http')
      await new Promise((resolve, reject) => http.request('http://${fx.addr}/v1/session/destroy/' + s.id, { method: 'PUT' }, (res) => { res.resume(); res.on('end', resolve) }).on('error', reject).end())
      await s.waitLost()
      setInterval(() => {}, 1000) // until the parent has seen the line
    })()`,
    /baton warn: .*session .* lost/,
  )
  assert.match(stderr, /^baton warn: baton session [0-9a-f-]{36} lost: invalidated$/m)
})

test('setLogger checks its arguments', () => {
  assert.throws(() => setLogger('console'), { name: 'TypeError', message: /logger must be a function \(level, message, target\) or null/ })
  assert.throws(() => setLogger(() => {}, { level: 'verbose' }), { name: 'TypeError', message: /level must be one of 'off', 'error', 'warn', 'info', 'debug', 'trace', got "verbose"/ })
  assert.throws(() => setLogger(() => {}, { levle: 'warn' }), { name: 'TypeError', message: /unknown setLogger option "levle" \(did you mean level\?\)/ })
  assert.throws(() => setLogger(null, { level: 'info' }), { name: 'TypeError', message: /setLogger\(null\) restores the default/ })
})

test('a logger does not keep the process alive', async () => {
  // The child sets a logger and has nothing else to do: it must exit by itself.
  const child = spawn(process.execPath, ['-e', `require(${JSON.stringify(pkg)}).setLogger(() => {}, { level: 'trace' }); console.log('set')`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  child.stdout.on('data', (d) => {
    out += d
  })
  const exited = new Promise((resolve) => child.once('exit', (code, sig) => resolve(code ?? sig)))
  const timer = setTimeout(() => child.kill('SIGKILL'), 20000)
  try {
    assert.equal(await exited, 0, 'the child did not exit by itself within 20 s (killed)')
  } finally {
    clearTimeout(timer)
  }
  assert.equal(out.trim(), 'set')
})

test('an untimed acquire against a closed port warns within about a second, then aborts cleanly', async () => {
  const port = await closedPort()
  const records = collect()
  const c = new Client({ address: `127.0.0.1:${port}` })
  const stop = new AbortController()
  const started = Date.now()
  const pending = c.lock('newcomer/unreachable').acquire({ signal: stop.signal }).then(
    () => assert.fail('acquired against a closed port'),
    (e) => e,
  )
  try {
    const r = await waitFor(
      `a warning naming 127.0.0.1:${port}`,
      () => records.find((x) => x.message.includes(`127.0.0.1:${port}`)),
      WARN_DEADLINE_MS,
    )
    assert.equal(r.level, 'warn')
    assert.match(r.target, /^baton/)
    console.log(`warned after ${Date.now() - started} ms: ${r.message}`)
  } finally {
    stop.abort()
    setLogger(null)
  }
  const err = await pending
  assert.equal(err.name, 'AbortError', String(err))
  assert.equal(err.code, 'ABORT_ERR')
  assert.equal(await c.close(), true)
})

test('the warning of an untimed acquire against a closed port reaches stderr by default', async () => {
  const port = await closedPort()
  const address = `127.0.0.1:${port}`
  const { stderr } = await childStderr(
    `const c = new baton.Client({ address: ${JSON.stringify(address)} })
    c.lock('newcomer/unreachable').acquire().catch(() => {})
    setInterval(() => {}, 1000)`,
    new RegExp(`baton warn: .*${address.replace(/\./g, '\\.')}`),
    { timeoutMs: WARN_DEADLINE_MS + 2000 }, // + the child's start-up
  )
  assert.match(stderr, /^baton warn: /m)
})
