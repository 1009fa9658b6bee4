'use strict'
// A lost holding names the session's own reason (issue 22: a lock reported only 'session_lost'
// where its session said 'deadline_exceeded').
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { useServer, request, freshKey, realConsul } = require('./helpers')

// The file's server; every test's clients are closed after it and it must leave no session.
const fx = useServer()
let addr
// Each test (not the file's `before`, which may run before the fixture's has finished).
beforeEach(() => {
  addr = fx.addr
})

async function control(path) {
  const r = await request(addr, 'PUT', `/_devserver/${path}`)
  assert.equal(r.status, 200, r.body)
}

test('a lock lost past its deadline says deadline_exceeded, as its session does', { skip: realConsul && 'needs dev-server control: pause' }, async () => {
  const c = fx.client({ requestTimeoutMs: 500 })
  const session = await c.createSession({ ttlMs: 1000, lockDelayMs: 0 })
  const lock = c.lock(freshKey('deadline'), { session })
  assert.equal(lock.lostReason, null)
  assert.equal(lock.lostSessionReason, null)
  await lock.acquire({ timeoutMs: 5000 })
  await control('pause')
  try {
    assert.equal(await lock.waitLost({ timeoutMs: 10000 }), 'session_lost')
  } finally {
    await control('resume')
  }
  assert.equal(lock.lostReason, 'session_lost')
  assert.equal(await session.waitLost({ timeoutMs: 5000 }), 'deadline_exceeded')
  assert.equal(lock.lostSessionReason, 'deadline_exceeded')
})

test('a semaphore whose session is invalidated says invalidated; a resign is no session loss', { skip: realConsul && 'needs dev-server control: session invalidation' }, async () => {
  const c = fx.client({ defaultSession: { lockDelayMs: 0 } })
  const prefix = freshKey('sem')
  const sem = await c.semaphore(prefix, 2).acquire({ timeoutMs: 5000 })
  // The semaphore's own session names its contender key, `<prefix>/<session>`.
  const r = await request(addr, 'GET', `/v1/kv/${prefix}/?keys`)
  const contender = JSON.parse(r.body).filter((k) => !k.endsWith('/.lock'))
  assert.equal(contender.length, 1, r.body)
  await control(`session/invalidate/${contender[0].split('/').pop()}`)
  assert.equal(await sem.waitLost({ timeoutMs: 10000 }), 'session_lost')
  assert.deepEqual([sem.lostReason, sem.lostSessionReason], ['session_lost', 'invalidated'])

  const e = c.election(freshKey('election'))
  await e.campaign('me', { timeoutMs: 5000 })
  assert.equal(e.lostReason, null)
  await e.resign()
  assert.deepEqual([e.lostReason, e.lostSessionReason], ['released', null])
})

test("a session's lostSignal read before the 'lost' notification names the session's reason", async () => {
  const { destroySession } = require('./helpers')
  const c = fx.client()
  const s = await c.createSession({ ttlMs: 30000, lockDelayMs: 0 })
  await destroySession(addr, s.id)
  // Synchronously, so the 'lost' notification (a callback of the event loop) cannot arrive
  // before the signal is read: the session's own state is all there is to go by.
  const end = Date.now() + 10000
  while (s.isValid() && Date.now() < end) {
    // spin until baton's session watch has seen the destroy
  }
  assert.equal(s.isValid(), false, 'the destroy was not seen within 10 s')
  const signal = s.lostSignal
  assert.equal(signal.aborted, true)
  assert.equal(signal.reason.reason, 'invalidated')
})
