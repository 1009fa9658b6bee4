'use strict'
// One meaning per operation (issue 31, item 5): an unknown option name is refused in every
// options object of the package, naming it; `ttlMs: 0` is refused (Consul would read it as "no
// TTL") and `ttlMs: null` is the explicit way to a session without a TTL; `release()` of
// something not held resolves false and `lostReason` says why.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { Client, Sequencer, setLogger, startDevServer } = require('..')
const { useServer, destroySession, freshKey, listSessions, parseJson, request } = require('./helpers')

const fx = useServer()
let addr
beforeEach(() => {
  addr = fx.addr
})

async function sessionInfo(id) {
  const r = await request(addr, 'GET', `/v1/session/info/${id}`)
  assert.equal(r.status, 200, r.body)
  return parseJson(r.body)[0]
}

test('new Client({ adress }) is a TypeError naming the option, not a fall-back to the environment', () => {
  const saved = process.env.CONSUL_HTTP_ADDR
  process.env.CONSUL_HTTP_ADDR = addr
  try {
    assert.throws(() => new Client({ adress: addr }), {
      name: 'TypeError',
      message: /^unknown Client option "adress" \(did you mean address\?\) \(known: address, token, datacenter, requestTimeoutMs, defaultSession\)$/,
    })
    assert.throws(() => new Client({ address: addr, requestTimeout: 100 }), {
      name: 'TypeError',
      message: /unknown Client option "requestTimeout" \(did you mean requestTimeoutMs\? durations are in milliseconds\)/,
    })
    assert.throws(() => new Client({ address: addr, defaultSession: { ttl: 10000 } }), {
      name: 'TypeError',
      message: /unknown session option "ttl" \(did you mean ttlMs\?/,
    })
    assert.throws(() => new Client({ address: 42 }), { name: 'TypeError', message: /address must be a string/ })
  } finally {
    if (saved === undefined) delete process.env.CONSUL_HTTP_ADDR
    else process.env.CONSUL_HTTP_ADDR = saved
  }
})

test('every options object refuses an unknown key, naming it', async () => {
  const c = fx.client()
  const session = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  const lock = c.lock(freshKey('opts'))
  await lock.acquire({ timeoutMs: 10000 })
  const seq = lock.sequencer
  const sem = c.semaphore(freshKey('opts-sem'), 2)
  const election = c.election(freshKey('opts-election'))
  const bogus = { bogus: 1 }
  // [what the message names, the call]; each throws or rejects.
  const calls = [
    ['session', () => c.createSession(bogus)],
    ['lock', () => c.lock('k', bogus)],
    ['semaphore', () => c.semaphore('p', 1, bogus)],
    ['election', () => c.election('k', bogus)],
    ['acquire', () => lock.acquire(bogus)],
    ['tryAcquire', () => lock.tryAcquire(bogus)],
    ['waitLost', () => lock.waitLost(bogus)],
    ['acquire', () => sem.acquire(bogus)],
    ['tryAcquire', () => sem.tryAcquire(bogus)],
    ['waitLost', () => sem.waitLost(bogus)],
    ['campaign', () => election.campaign('v', bogus)],
    ['waitLost', () => election.waitLost(bogus)],
    ['observe', () => election.observe(bogus)],
    ['observe', () => c.observeLeader('k', bogus)],
    ['waitLost', () => session.waitLost(bogus)],
    ['kvPut', () => c.kvPut('k', 'v', bogus)],
    ['kvDelete', () => c.kvDelete('k', bogus)],
    ['guardedPut', () => c.guardedPut(seq, 'k', 'v', bogus)],
    ['ops[0]', () => c.guardedTxn(seq, [{ verb: 'set', key: 'k', ...bogus }])],
    ['check', () => c.agent.checkRegister('x', { ttlMs: 1000, ...bogus })],
    ['service', () => c.agent.serviceRegister({ name: 'x', ...bogus })],
    ['Sequencer', () => new Sequencer({ key: 'k', session: 's', lockIndex: 1, token: 1, ...bogus })],
    ['setLogger', () => setLogger(() => {}, bogus)],
    ['startDevServer', () => startDevServer(bogus)],
  ]
  for (const [what, call] of calls) {
    await assert.rejects(async () => call(), { name: 'TypeError', message: new RegExp(`^unknown ${what.replace(/[[\]]/g, '\\$&')} option "bogus" \\(known: `) }, what)
  }
  // A near miss says what was meant.
  await assert.rejects(async () => lock.acquire({ timeout: 10 }), { message: /unknown acquire option "timeout" \(did you mean timeoutMs\? durations are in milliseconds\)/ })
  assert.throws(() => c.lock('k', { sesion: session }), { message: /unknown lock option "sesion" \(did you mean session\?\)/ })
  // Nothing was left running by a refused call: the lock is still ours, nothing else held.
  assert.equal(lock.isHeld(), true)
  assert.equal(sem.isHeld(), false)
  assert.equal(election.isLeader(), false)
  assert.equal(await lock.release(), true)
})

test('ttlMs: 0 is refused naming ttlMs, and creates nothing', async () => {
  const c = fx.client()
  const before = (await listSessions({ addr })).length
  await assert.rejects(c.createSession({ ttlMs: 0 }), {
    name: 'RangeError',
    message: /^ttlMs must be positive: 0 would create a session that never expires .*pass ttlMs: null to ask for a session without a TTL$/,
  })
  assert.throws(() => new Client({ address: addr, defaultSession: { ttlMs: 0 } }), { name: 'RangeError', message: /^ttlMs must be positive/ })
  assert.equal((await listSessions({ addr })).length, before)
})

test('ttlMs: null asks for a session without a TTL, for createSession and the default session', async () => {
  const c = fx.client()
  const s = await c.createSession({ ttlMs: null, lockDelayMs: 0 })
  assert.equal((await sessionInfo(s.id)).TTL, '')
  assert.equal(s.timeLeftMs(), null)
  const d = fx.client({ defaultSession: { ttlMs: null, lockDelayMs: 0 } })
  const lock = await d.lock(freshKey('no-ttl')).acquire({ timeoutMs: 10000 })
  assert.equal((await sessionInfo(lock.sequencer.session)).TTL, '')
  assert.equal(await lock.release(), true)
  // A client's close() destroys both: such a session never expires by itself.
  assert.equal(await c.close(), true)
  assert.equal(await d.close(), true)
  const ids = (await listSessions({ addr })).map((x) => x.ID)
  assert.ok(!ids.includes(s.id), `session ${s.id} (no TTL) left after close`)
})

test('release() of something not held resolves false; lostReason says why', async () => {
  const c = fx.client()
  const lock = c.lock(freshKey('not-held'))
  // Never acquired.
  assert.equal(await lock.release(), false)
  assert.equal(lock.lostReason, null)
  // Released already.
  await lock.acquire({ timeoutMs: 10000 })
  assert.equal(await lock.release(), true)
  assert.equal(await lock.release(), false)
  assert.equal(lock.lostReason, 'released')
  // Lost: its session was destroyed by someone else.
  const session = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  const lost = c.lock(freshKey('not-held-lost'), { session })
  await lost.acquire({ timeoutMs: 10000 })
  await destroySession(addr, session.id)
  assert.equal(await lost.waitLost({ timeoutMs: 10000 }), 'session_lost')
  assert.equal(await lost.release(), false)
  assert.equal(lost.lostReason, 'session_lost')
  assert.equal(lost.lostSessionReason, 'invalidated')
  // The client closed.
  const sem = await c.semaphore(freshKey('not-held-sem'), 1).acquire({ timeoutMs: 10000 })
  assert.equal(await c.close(), true)
  assert.equal(sem.lostReason, 'client_closed')
  assert.equal(await sem.release(), false)
})
