'use strict'
// A fencing token taken after DevServer.restart() is above one taken before it (issue 43): the
// restart loses the sessions and keys, as a cluster losing its sessions does, but keeps the raft
// index, so a token never goes backwards.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startDevServer } = require('../devserver.js')
const { Client } = require('..')

const PATIENCE_MS = 30000 // a bound for "eventually", not a speed assertion

test('a fencing token after restart() is above the one before', async () => {
  const server = await startDevServer({ sessionTtlMin: '100ms' })
  let c = new Client({ address: server.addr })
  try {
    for (let i = 0; i < 5; i++) await c.kvPut(`restart/k${i}`, 'v')
    let lock = c.lock('restart/lock')
    await lock.acquire({ timeoutMs: PATIENCE_MS })
    const before = lock.sequencer.token
    const statusBefore = (await server.status()).index
    await server.restart()
    assert.ok((await server.status()).index >= statusBefore)
    await c.close()
    c = new Client({ address: server.addr })
    lock = c.lock('restart/lock')
    await lock.acquire({ timeoutMs: PATIENCE_MS })
    const after = lock.sequencer.token
    assert.ok(after > before, `fencing token ${after} after the restart, ${before} before`)
    await lock.release()
  } finally {
    await c.close()
    await server.stop()
  }
})
