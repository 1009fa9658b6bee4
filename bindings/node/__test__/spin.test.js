'use strict'
// spin.js: the event loop polls without sleeping only while a call is young, only for a call
// made in the loop turn that took a baton outcome (the baton thread that delivered it is still
// awake: src/settle.rs), and only while calls have been settling quickly.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { performance } = require('node:perf_hooks')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require('..')
const spin = require('../spin.js')
const { inTurn, warmInFlight } = require('../native.js')
const { useServer, request, realConsul, consulBefore } = require('./helpers')

// Each test gets a client of its own (closed after it, before the no-session-left check).
const fx = useServer()
let server
let client
beforeEach(() => {
  server = fx.server
  client = fx.client()
})

/** Polls `cond` every few ms until it holds or `ms` pass; returns whether it held. */
async function eventually(cond, ms = 2000) {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) return false
    await sleep(5)
  }
  return true
}

test('the spin stops while a call is still pending', async () => {
  const other = new Client({ address: server.addr })
  const key = `spin/pending/${process.pid}`
  const held = other.lock(key)
  await held.acquire({ timeoutMs: 5000 })
  const waiter = client.lock(key)
  const stop = new AbortController()
  const pending = waiter.acquire({ timeoutMs: 30000, signal: stop.signal }).catch((e) => e)
  try {
    assert.equal(spin.state().pending, 1)
    // Long past the window, the acquire still waits and the loop sleeps again.
    assert.ok(await eventually(() => !spin.state().spinning), `still spinning: ${JSON.stringify(spin.state())}`)
    assert.equal(spin.state().pending, 1)
  } finally {
    stop.abort()
  }
  const err = await pending
  assert.equal(err.name, 'AbortError')
  assert.equal(spin.state().pending, 0)
  await held.release()
  await other.close()
})

/** Resolves in a later loop turn than the current one (after its check phase). */
const laterTurn = () => new Promise((resolve) => setImmediate(resolve))

test('an outcome opens a turn that ends in the check phase', async () => {
  await laterTurn()
  assert.equal(inTurn(), false)
  await client.kvGet(`spin/turn/${process.pid}`)
  // The continuation runs in the turn that took the outcome ...
  assert.equal(inTurn(), true)
  // ... which is over once the loop reaches its check phase.
  await laterTurn()
  assert.equal(inTurn(), false)
})

test('slow calls switch the spin off, quick ones switch it back on', async () => {
  const key = `spin/slow/${process.pid}`
  // Calls that take longer than the window (started 10 ms ago) ...
  for (let i = 0; i < 20; i++) {
    spin.started()
    spin.ended(performance.now() - 10)
  }
  assert.ok(spin.state().quick < 0.5, JSON.stringify(spin.state()))
  await eventually(() => !spin.state().spinning)
  // ... leave a new call without a spin, even one made in a turn that took an outcome,
  await client.kvGet(key)
  assert.equal(inTurn(), true)
  const t = spin.started()
  assert.equal(spin.state().spinning, false)
  spin.ended(t)
  // and calls settling at once bring it back.
  for (let i = 0; i < 20; i++) spin.ended(spin.started())
  assert.ok(spin.state().quick >= 0.5, JSON.stringify(spin.state()))
  await laterTurn()
  await client.kvGet(key)
  const u = spin.started()
  assert.equal(spin.state().spinning, true)
  spin.ended(u)
  assert.ok(await eventually(() => !spin.state().spinning))
})

test('a call made after the turn that took an outcome does not spin', async () => {
  for (let i = 0; i < 20; i++) spin.ended(spin.started())
  assert.ok(spin.state().quick >= 0.5)
  await eventually(() => !spin.state().spinning)
  await client.kvGet(`spin/later/${process.pid}`)
  // The turn is over: the baton thread that delivered the outcome parks (waking it beats
  // spinning).
  await laterTurn()
  const t = spin.started()
  assert.equal(spin.state().spinning, false)
  spin.ended(t)
})

test('calls held up by the server count as slow', { skip: realConsul && 'needs the dev server' }, async () => {
  for (let i = 0; i < 20; i++) spin.ended(spin.started())
  assert.ok(spin.state().quick >= 0.5)
  assert.equal((await request(server.addr, 'PUT', '/_devserver/pause')).status, 200)
  const gets = Array.from({ length: 20 }, (_, i) => client.kvGet(`spin/paused/${i}`))
  await sleep(20)
  assert.equal((await request(server.addr, 'PUT', '/_devserver/resume')).status, 200)
  await Promise.all(gets)
  assert.ok(spin.state().quick < 0.5, JSON.stringify(spin.state()))
})

test('a warm call does not spin', async () => {
  // Its answer comes on the socket the loop sleeps on, as a blocking call's does: polling
  // would only spend a core.
  const lock = client.lock(`spin/warm/${process.pid}`)
  await lock.acquire({ timeoutMs: 10000 })
  await lock.release() // the loop connection is open: the next calls are warm
  for (let i = 0; i < 20; i++) spin.ended(spin.started())
  assert.ok(spin.state().quick >= 0.5)
  assert.ok(await eventually(() => !spin.state().spinning))
  assert.equal(inTurn(), false)
  const warmAcquire = !(await consulBefore(server.addr, '1.6.2'))
  await laterTurn()
  const acquiring = lock.acquire({ timeoutMs: 10000 })
  assert.equal(warmInFlight(), warmAcquire ? 1 : 0)
  assert.equal(spin.state().spinning, false)
  await acquiring
  const releasing = lock.release()
  assert.equal(warmInFlight(), 1, 'the release is a warm call (on every Consul version)')
  await releasing
})
