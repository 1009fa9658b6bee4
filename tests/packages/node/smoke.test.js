'use strict'
// Smoke test of the installed consul-baton npm tarball, run by `node --test` in a fresh npm
// project outside the repository: startDevServer() (the packaged dev server), a lock, an
// election, and a loss caused by the dev server's restart fault.
const assert = require('node:assert/strict')
const path = require('node:path')
const { test } = require('node:test')
const { Client, startDevServer } = require('consul-baton')

test('resolved from node_modules, not the repository', () => {
  const where = require.resolve('consul-baton')
  assert.ok(where.split(path.sep).includes('node_modules'), where)
})

test('lock, election and loss against the packaged dev server', async () => {
  const server = await startDevServer({ sessionTtlMin: '100ms' })
  const a = new Client({ address: server.addr })
  const b = new Client({ address: server.addr })
  try {
    const session = await a.createSession({ ttlMs: 1000, lockDelayMs: 0 })
    const lock = a.lock('smoke/lock', { value: 'a', session })
    await lock.acquire({ timeoutMs: 10_000 })
    await assert.rejects(b.lock('smoke/lock').acquire({ timeoutMs: 0 }), (e) => e.code === 'BATON_TIMEOUT')

    const election = a.election('smoke/leader', { session })
    await election.campaign('leader-a', { timeoutMs: 10_000 })
    const leader = await b.leader('smoke/leader')
    assert.equal(leader.value.toString(), 'leader-a')

    const lost = new Promise((resolve) => lock.once('lost', resolve))
    await server.restart() // every session is gone
    assert.ok(await lost)
    assert.equal(lock.isHeld(), false)
    await election.waitLost({ timeoutMs: 30_000 })
    await b.lock('smoke/lock').acquire({ timeoutMs: 10_000 })
  } finally {
    await a.close()
    await b.close()
    await server.stop()
  }
})

test('fault controls: no cluster leader', async () => {
  const server = await startDevServer()
  const client = new Client({ address: server.addr })
  try {
    await server.setLeader(false)
    await assert.rejects(client.kvPut('smoke/k', 'v'), (e) => /No cluster leader/.test(e.message))
    await server.setLeader(true)
    assert.equal(await client.kvPut('smoke/k', 'v'), true)
    assert.ok(await server.requestCounts())
  } finally {
    await client.close()
    await server.stop()
  }
})

test('ESM import gives the same classes', async () => {
  const esm = await import('consul-baton')
  assert.equal(esm.Client, Client)
  assert.equal(typeof esm.startDevServer, 'function')
})
