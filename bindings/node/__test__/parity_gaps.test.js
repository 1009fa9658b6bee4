'use strict'
// Capabilities of the README's "Capabilities by language" table that no other Node test
// covered: session behaviour 'delete' and lockDelayMs, the default session's options, several
// semaphore slots in one process, removing a 'lost' listener, and waitLost of semaphores and
// elections.
// Against a real baton-devserver process.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { once } = require('node:events')
const { useServer, destroySession, rawEntry, request, parseJson, freshKey } = require('./helpers')

// The file's server; every test's clients are closed after it and it must leave no session.
const fx = useServer()
let addr
// Each test (not the file's `before`, which may run before the fixture's has finished).
beforeEach(() => {
  addr = fx.addr
})

/** A client closed after the test (the fixture closes it). */
function client(extra = {}) {
  return fx.client({ defaultSession: { lockDelayMs: 0 }, ...extra })
}

/** The session as Consul reports it (GET /v1/session/info/<id>). */
async function sessionInfo(id) {
  const r = await request(addr, 'GET', `/v1/session/info/${id}`)
  assert.equal(r.status, 200, r.body)
  const [info] = parseJson(r.body)
  assert.ok(info, `session ${id} does not exist`)
  return info
}

test('session behavior delete deletes the held key when the session ends', async () => {
  const c = client()
  const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0, behavior: 'delete' })
  assert.equal((await sessionInfo(s.id)).Behavior, 'delete')
  const key = freshKey('behavior-delete')
  const lock = await c.lock(key, { session: s, value: 'held' }).acquire({ timeoutMs: 10000 })
  assert.equal((await c.kvGet(key)).toString(), 'held')
  const waitLost = lock.waitLost({ timeoutMs: 10000 })
  await destroySession(addr, s.id)
  assert.equal(await waitLost, 'session_lost')
  assert.equal(await rawEntry(addr, key), null)

  // The default behaviour keeps the key, released.
  const kept = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  assert.equal((await sessionInfo(kept.id)).Behavior, 'release')
  const key2 = freshKey('behavior-release')
  const lock2 = await c.lock(key2, { session: kept, value: 'held' }).acquire({ timeoutMs: 10000 })
  const waitLost2 = lock2.waitLost({ timeoutMs: 10000 })
  await destroySession(addr, kept.id)
  assert.equal(await waitLost2, 'session_lost')
  assert.equal((await c.kvGet(key2)).toString(), 'held')
})

test('lockDelayMs reaches Consul', async () => {
  const c = client()
  const none = await c.createSession({ lockDelayMs: 0 })
  const some = await c.createSession({ lockDelayMs: 2500 })
  assert.equal(Number((await sessionInfo(none.id)).LockDelay), 0)
  assert.equal(Number((await sessionInfo(some.id)).LockDelay), 2500 * 1e6) // ns
  await none.destroy()
  await some.destroy()
})

test("defaultSession options reach the session the client's locks hold", async () => {
  const name = `node-default-${process.pid}-${Date.now()}`
  const c = client({ defaultSession: { name, ttlMs: 20000, lockDelayMs: 0 } })
  const key = freshKey('default-session')
  const lock = await c.lock(key).acquire({ timeoutMs: 10000 })
  const entry = await rawEntry(addr, key)
  assert.equal(entry.Session, lock.sequencer.session)
  const info = await sessionInfo(entry.Session)
  assert.equal(info.Name, name)
  assert.equal(info.TTL, '20s')
  assert.equal(Number(info.LockDelay), 0)
  await lock.release()
})

test('semaphores of one client hold several slots at once', async () => {
  const c = client()
  const prefix = freshKey('several-slots')
  const sems = [c.semaphore(prefix, 3), c.semaphore(prefix, 3), c.semaphore(prefix, 3)]
  assert.deepEqual(sems.map((s) => s.limit), [3, 3, 3])
  for (const s of sems) assert.equal(await s.tryAcquire({ timeoutMs: 10000 }), true)
  assert.deepEqual(sems.map((s) => s.isHeld()), [true, true, true])
  const fourth = c.semaphore(prefix, 3)
  assert.equal(await fourth.tryAcquire(), false, 'all 3 slots are taken')
  await sems[0].release()
  assert.equal(await fourth.tryAcquire({ timeoutMs: 10000 }), true, 'a freed slot is taken')
  for (const s of [...sems.slice(1), fourth]) await s.release()
})

test("a removed 'lost' listener is not called", async () => {
  const c = client()
  const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  const lock = c.lock(freshKey('removed-listener'), { session: s })
  let removedCalls = 0
  const removed = () => { removedCalls += 1 }
  lock.on('lost', removed)
  lock.off('lost', removed)
  // Listeners of one emit run in order: one added later ran, so the removed one would have.
  const lost = once(lock, 'lost')
  await lock.acquire({ timeoutMs: 10000 })
  await destroySession(addr, s.id)
  assert.deepEqual(await lost, ['session_lost'])
  assert.equal(removedCalls, 0)
})

test('semaphore and election waitLost report why the holding ended', async () => {
  const c = client()
  const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  const sem = await c.semaphore(freshKey('sem-wait'), 2, { session: s }).acquire({ timeoutMs: 10000 })
  const semLost = sem.waitLost({ timeoutMs: 10000 })
  await destroySession(addr, s.id)
  assert.equal(await semLost, 'session_lost')
  assert.equal(sem.isHeld(), false)

  const e = await c.election(freshKey('election-wait')).campaign('me', { timeoutMs: 10000 })
  const signal = e.lostSignal
  const leadershipEnded = e.waitLost({ timeoutMs: 10000 })
  assert.equal(await e.resign(), true)
  assert.equal(await leadershipEnded, 'released')
  assert.equal(signal.aborted, true)
  assert.equal(await e.waitLost({ timeoutMs: 0 }), 'released', 'not leading: at once')
})
