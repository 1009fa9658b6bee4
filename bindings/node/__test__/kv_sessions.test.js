'use strict'
// KV check-and-set, kvDelete, the default session's handle and Session loss events (issue 22:
// capabilities Rust, C and Python have that Node lacked).
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { once } = require('node:events')
const { Client, KvEntry, LostError } = require('..')
const { useServer, request, freshKey, realConsul } = require('./helpers')

// The file's server; every test's clients are closed after it and it must leave no session.
const fx = useServer()
let addr
// Each test (not the file's `before`, which may run before the fixture's has finished).
beforeEach(() => {
  addr = fx.addr
})

function client(extra = {}) {
  return fx.client(extra)
}

test('kvGetEntry, kvPut with cas and flags, kvDelete with and without cas', async () => {
  const c = client()
  const key = freshKey('cas')
  assert.equal(await c.kvGetEntry(key), null)
  // cas 0: only if absent.
  assert.equal(await c.kvPut(key, 'one', { cas: 0, flags: 42n }), true)
  assert.equal(await c.kvPut(key, 'again', { cas: 0 }), false)
  const e = await c.kvGetEntry(key)
  assert.ok(e instanceof KvEntry)
  assert.deepEqual([e.key, e.value, e.flags], [key, Buffer.from('one'), 42n])
  assert.equal(typeof e.modifyIndex, 'bigint')
  // A stale index is refused; the current one applies.
  assert.equal(await c.kvPut(key, 'two', { cas: e.modifyIndex }), true)
  assert.equal(await c.kvPut(key, 'stale', { cas: e.modifyIndex }), false)
  assert.deepEqual(await c.kvGet(key), Buffer.from('two'))
  const e2 = await c.kvGetEntry(key)
  assert.equal(await c.kvDelete(key, { cas: e.modifyIndex }), false)
  assert.deepEqual(await c.kvGet(key), Buffer.from('two'))
  assert.equal(await c.kvDelete(key, { cas: e2.modifyIndex }), true)
  assert.equal(await c.kvGet(key), null)
  assert.equal(await c.kvPut(key, 'x'), true)
  assert.equal(await c.kvDelete(key), true)
  assert.equal(await c.kvGetEntry(key), null)
  // Bad options are refused before anything is sent.
  assert.throws(() => c.kvPut(key, 'x', { cass: 1 }), { name: 'TypeError', message: /unknown kvPut option "cass" \(did you mean cas\?\)/ })
  assert.throws(() => c.kvDelete(key, { cas: -1 }), { name: 'RangeError' })
  assert.throws(() => c.kvDelete(key, { cas: '1' }), { name: 'TypeError' })
})

test('defaultSession() is the session the client locks hold', async () => {
  const c = client({ defaultSession: { ttlMs: 20000, lockDelayMs: 0 } })
  const s = await c.defaultSession()
  assert.equal((await c.defaultSession()).id, s.id)
  const lock = await c.lock(freshKey('default')).acquire({ timeoutMs: 5000 })
  assert.equal(lock.sequencer.session, s.id)
  assert.ok(s.timeLeftMs() > 0 && s.timeLeftMs() <= 20000)
  assert.equal(s.lostSignal.aborted, false)
  await lock.release()
})

test("a session emits 'lost' with its reason and aborts lostSignal", { skip: realConsul && 'needs dev-server control: session invalidation' }, async () => {
  const c = client()
  const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  const lost = once(s, 'lost')
  const signal = s.lostSignal
  assert.equal(signal.aborted, false)
  const r = await request(addr, 'PUT', `/_devserver/session/invalidate/${s.id}`)
  assert.equal(r.status, 200, r.body)
  assert.deepEqual(await lost, ['invalidated'])
  assert.equal(signal.aborted, true)
  assert.ok(signal.reason instanceof LostError)
  assert.equal(signal.reason.reason, 'invalidated')
})

test('a destroyed session aborts its lostSignal; a closed client aborts the rest', async () => {
  const c = new Client({ address: addr })
  const a = await c.createSession({ ttlMs: 10000 })
  const b = await c.createSession({ ttlMs: 10000 })
  await a.destroy()
  assert.equal(a.lostSignal.aborted, true)
  assert.equal(a.lostSignal.reason.reason, 'destroyed')
  assert.equal(b.lostSignal.aborted, false)
  await c.close()
  assert.equal(b.lostSignal.aborted, true)
  assert.equal(b.lostSignal.reason.reason, 'client_closed')
})
