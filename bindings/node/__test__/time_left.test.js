'use strict'
// Session.timeLeftMs(): the time left until the session's local lease deadline.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { setTimeout: sleep } = require('node:timers/promises')
const { useServer, destroySession, realConsul } = require('./helpers')

// Each test gets a client of its own (closed after it, before the no-session-left check).
const fx = useServer()
let server
let client
beforeEach(() => {
  server = fx.server
  client = fx.client()
})

test('timeLeftMs is within the TTL while held and 0 once lost', async () => {
  const s = await client.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  const left = s.timeLeftMs()
  assert.equal(typeof left, 'number')
  assert.ok(left > 0 && left <= 10000, `timeLeftMs ${left}`)
  await destroySession(server.addr, s.id)
  assert.equal(await s.waitLost({ timeoutMs: 10000 }), 'invalidated')
  assert.equal(s.timeLeftMs(), 0)
})

test('renewals move the deadline forward', async () => {
  // Consul's session_ttl_min is 10 s: against a real Consul the first renewal comes after ~3.3 s.
  const ttlMs = realConsul ? 10000 : 1000
  const s = await client.createSession({ ttlMs, lockDelayMs: 0 })
  // Renewed about every TTL/3: a later reading is larger than an earlier one.
  let prev = s.timeLeftMs()
  let moved = false
  const end = Date.now() + (realConsul ? 12000 : 5000)
  while (!moved && Date.now() < end) {
    await sleep(5)
    const left = s.timeLeftMs()
    moved = left > prev
    prev = left
  }
  assert.ok(moved, 'the deadline never moved forward')
  assert.ok(s.isValid())
  await s.destroy()
})

test('no TTL (asked for with ttlMs: null): null; destroyed: 0', async () => {
  const s = await client.createSession({ ttlMs: null, lockDelayMs: 0 })
  assert.equal(s.timeLeftMs(), null)
  await s.destroy()
  assert.equal(s.timeLeftMs(), 0)
})
