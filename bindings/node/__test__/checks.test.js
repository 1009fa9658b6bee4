'use strict'
// Sessions bound to health checks (client.agent, createSession's check options) and adopted
// sessions, against a real baton-devserver process (or BATON_TEST_CONSUL).
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { once, EventEmitter } = require('node:events')
const { setTimeout: delay } = require('node:timers/promises')
const { randomUUID } = require('node:crypto')
const { performance } = require('node:perf_hooks')
const { Client, Agent, BatonError } = require('..')
const { useServer, freshKey, rawEntry, realConsul } = require('./helpers')

const PATIENCE_MS = 30000 // a bound for "eventually", not a speed assertion
const SLACK_MS = 1000 // the acceptance bound: lost within the check's TTL + 1 s of its last pass
const SESSION_TTL_MS = 10000 // Consul's minimum; renewed, so only the check ends the session

// The file's server; every test's clients are closed after it and it must leave no session.
const fx = useServer()
let addr
// Each test (not the file's `before`, which may run before the fixture's has finished).
beforeEach(() => {
  addr = fx.addr
})

function client() {
  return fx.client()
}

function checkId(name) {
  return `baton-node-${name}-${process.pid}-${randomUUID().slice(0, 8)}`
}

test('a lock bound to a TTL check is lost within TTL + 1 s of the last pass', async () => {
  const checkTtlMs = realConsul ? 2000 : 1000
  const a = client()
  const b = client()
  const id = checkId('lock')
  assert.ok(a.agent instanceof Agent)
  await a.agent.checkRegister(id, { ttlMs: checkTtlMs, notes: 'baton node test' })
  await a.agent.checkPass(id)
  const session = await a.createSession({
    ttlMs: SESSION_TTL_MS,
    lockDelayMs: 0,
    nodeChecks: ['serfHealth', id],
    name: 'bound',
  })
  const key = freshKey('bound-lock')
  const lock = a.lock(key, { session })
  await lock.acquire({ timeoutMs: PATIENCE_MS })
  let lostAt = null
  let lostWhy = null
  const lost = once(lock, 'lost').then(([why]) => {
    lostAt = performance.now()
    lostWhy = why
  })

  // The recipe's health loop: pass more often than the TTL while healthy.
  let healthy = true
  let lastPass = null
  const passes = new EventEmitter()
  const keeper = (async () => {
    while (healthy) {
      const sent = performance.now()
      await a.agent.checkPass(id, 'healthy')
      lastPass = sent
      passes.emit('pass', sent)
      await delay(checkTtlMs / 4) // the reporting period, not a wait for a condition
    }
  })()
  // Passing keeps the lock: wait for passes spanning three TTLs.
  const [first] = await once(passes, 'pass')
  for (;;) {
    const [t] = await once(passes, 'pass')
    if (t - first > 3 * checkTtlMs) break
  }
  assert.equal(lostAt, null, 'lost while the check was passing')
  assert.equal(lock.isHeld(), true)

  // Another process waits for the lock.
  const other = b.lock(key)
  const acquired = other.acquire({ timeoutMs: PATIENCE_MS }).then(() => performance.now())

  healthy = false // the health function fails: no more passes
  await keeper
  await lost
  const acquiredAt = await acquired
  assert.ok(['session_lost', 'key_changed'].includes(lostWhy), lostWhy)
  console.log(
    `check TTL ${checkTtlMs} ms: lost ${(lostAt - lastPass).toFixed(0)} ms, acquired by another ` +
      `${(acquiredAt - lastPass).toFixed(0)} ms after the last pass`,
  )
  assert.ok(lostAt - lastPass <= checkTtlMs + SLACK_MS, `lost ${lostAt - lastPass} ms after the last pass`)
  assert.ok(acquiredAt - lastPass <= checkTtlMs + SLACK_MS, `acquired ${acquiredAt - lastPass} ms after the last pass`)
  assert.equal(lock.isHeld(), false)
  await other.release()
  await a.agent.checkDeregister(id)
})

test('a failing service check invalidates the session', async () => {
  const c = client()
  const service = checkId('svc')
  const id = `${service}:ttl`
  await c.agent.serviceRegister({ name: service, port: 8080, tags: ['baton'] })
  await c.agent.checkRegister(id, { ttlMs: 30000, serviceId: service, status: 'passing' })
  const s = await c.createSession({ ttlMs: SESSION_TTL_MS, lockDelayMs: 0, serviceChecks: [id] })
  await c.agent.checkUpdate(id, 'warning', 'slow')
  await c.agent.checkFail(id, 'broken')
  assert.equal(await s.waitLost({ timeoutMs: PATIENCE_MS }), 'invalidated')
  await c.agent.serviceDeregister(service)
})

test('checks (Consul\'s older name) are honoured, not ignored', async () => {
  const c = client()
  const id = checkId('critical')
  await c.agent.checkRegister(id, { ttlMs: 30000 }) // a TTL check starts critical
  await assert.rejects(c.createSession({ checks: [id] }), (e) => e instanceof BatonError && e.message.includes(id))
  await assert.rejects(c.createSession({ nodeChecks: [id] }), (e) => e instanceof BatonError && e.message.includes(id))
  await c.agent.checkDeregister(id)
})

test('node is sent, not ignored', async () => {
  const c = client()
  await assert.rejects(c.createSession({ node: 'baton-no-such-node' }), (e) => e instanceof BatonError && /Missing node registration/.test(e.message))
})

test('bad arguments name the problem', async () => {
  const c = client()
  await assert.rejects(c.createSession({ serviceCheck: ['x'] }), (e) => e instanceof TypeError && /serviceCheck/.test(e.message))
  await assert.rejects(c.createSession({ nodeChecks: 'serfHealth' }), (e) => e instanceof TypeError && /nodeChecks/.test(e.message))
  await assert.rejects(c.createSession({ nodeChecks: [], checks: [] }), (e) => e.code === 'BATON_INVALID_ARGUMENT' && /not both/.test(e.message))
  await assert.rejects(c.createSession({ serviceChecks: [''] }), (e) => e.code === 'BATON_INVALID_ARGUMENT' && /serviceChecks\[0\]/.test(e.message))
  assert.throws(() => c.agent.checkRegister('x', { ttlMs: 0 }), RangeError)
  assert.throws(() => c.agent.checkRegister('x', { ttl: 1000 }), /unknown check option "ttl"/)
  assert.throws(() => c.agent.checkUpdate('x', 'fine'), /status must be/)
  assert.throws(() => c.agent.checkPass(''), /id must not be empty/)
  await assert.rejects(c.adoptSession('nope'), (e) => e.code === 'BATON_INVALID_ARGUMENT' && /not a UUID/.test(e.message))
  await assert.rejects(c.adoptSession(randomUUID()), (e) => e.code === 'BATON_NOT_FOUND' && /does not exist/.test(e.message))
})

test('an adopted session holds locks and survives its adopter closing', async () => {
  const owner = client()
  const theirs = await owner.createSession({ ttlMs: SESSION_TTL_MS, lockDelayMs: 0 })
  const c = new Client({ address: addr })
  const s = await c.adoptSession(theirs.id.toUpperCase())
  assert.equal(s.id, theirs.id)
  assert.ok(s.isValid() && s.timeLeftMs() > 0)
  const key = freshKey('adopted')
  const lock = c.lock(key, { session: s })
  await lock.acquire({ timeoutMs: 0 })
  assert.equal((await rawEntry(addr, key)).Session, theirs.id)
  await c.close()
  assert.equal(theirs.isValid(), true)
  assert.equal((await rawEntry(addr, key)).Session, undefined, 'released on close, not destroyed')
  const mine = owner.lock(key, { session: theirs })
  await mine.acquire({ timeoutMs: 0 })
  await mine.release()
})
