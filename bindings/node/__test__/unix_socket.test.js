'use strict'
// A Consul agent serving HTTP on a unix socket (Consul's addresses.http = "unix:///path"),
// reached as unix:///path (as CONSUL_HTTP_ADDR may say): locks, semaphores and the event loop's
// warm calls all go through the socket. A dev server of its own, serving on a socket beside TCP
// (`baton-devserver --addr unix:///path`); no real Consul needed or used.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { Client } = require('..')
const { warmInFlight } = require('../native.js')
const { freshKey, listSessions, rawEntry, root } = require('./helpers')

let server
let tcp
let socketUrl

before(async () => {
  const bin = process.env.BATON_DEVSERVER_BIN ?? path.join(root, 'target/debug/baton-devserver')
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-node-'))
  const socket = path.join(dir, 'consul.sock')
  server = spawn(bin, ['--port', '0', '--addr', `unix://${socket}`, '--session-ttl-min', '100ms', '--exit-on-stdin-eof'], {
    stdio: ['pipe', 'pipe', 'ignore'],
  })
  const lines = {}
  await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: server.stdout })
    rl.on('line', (line) => {
      const [name, value] = line.split(/=(.*)/s)
      lines[name] = value
      if (name === 'BATON_DEVSERVER_UNIX_ADDR') resolve()
    })
    server.once('exit', (code) => reject(new Error(`devserver exited ${code} (lines: ${JSON.stringify(lines)})`)))
  })
  tcp = lines.BATON_DEVSERVER_ADDR
  socketUrl = lines.BATON_DEVSERVER_UNIX_ADDR
  assert.equal(socketUrl, `unix://${socket}`)
})

after(() => server?.kill('SIGTERM'))

test('locks go warm and semaphores work over a unix socket', async () => {
  const c = new Client({ address: socketUrl })
  try {
    assert.equal(c.address, socketUrl, 'the address says the socket')
    const key = freshKey('unix-lock')
    const lock = c.lock(key)
    // A cold cycle opens the loop connection (to the socket); the next calls are warm.
    await lock.acquire({ timeoutMs: 10000 })
    assert.equal(await lock.release(), true)
    for (let round = 0; round < 3; round++) {
      const acquiring = lock.acquire({ timeoutMs: 10000 })
      assert.equal(warmInFlight(), 1, 'the acquire is a warm call')
      await acquiring
      assert.equal((await rawEntry(tcp, key)).Session, lock.sequencer.session)
      const releasing = lock.release()
      assert.equal(warmInFlight(), 1, 'the release is a warm call')
      assert.equal(await releasing, true)
    }
    const sem = c.semaphore(freshKey('unix-sem'), 2)
    await sem.acquire({ timeoutMs: 10000 })
    await sem.release()
  } finally {
    assert.equal(await c.close(10000), true)
  }
  assert.deepEqual(await listSessions({ addr: tcp }), [], 'sessions left after close')
})

test('a missing socket is a connection error that names it', async () => {
  const missing = path.join(os.tmpdir(), `baton-node-none-${process.pid}.sock`)
  const c = new Client({ address: `unix://${missing}`, requestTimeoutMs: 2000 })
  try {
    await assert.rejects(c.kvGet('k'), (e) => {
      assert.equal(e.code, 'BATON_CONNECTION', e.message)
      assert.ok(e.message.includes(missing), e.message)
      return true
    })
  } finally {
    await c.close(10000)
  }
})
