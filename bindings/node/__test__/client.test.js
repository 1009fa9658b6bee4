'use strict'
// Runs against a real baton-devserver process (never a mocked HTTP client).
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const { Client, BatonError } = require('..')
const { useServer, destroySession, request, parseJson } = require('./helpers')

// A dev server (pretty-printing when BATON_TEST_DEVSERVER_PRETTY is set), or BATON_TEST_CONSUL;
// every test must leave no session at it once its clients are closed.
const fx = useServer()
let addr
// Each test (not the file's `before`, which may run before the fixture's has finished).
beforeEach(() => {
  addr = fx.addr
})

/** Destroys a session as another client would; the answer must be 200 `true`. */
function destroyFromOutside(id) {
  return destroySession(addr, id)
}

test('kv round trip, missing key is null; Symbol.asyncDispose closes', async () => {
  // `await using` needs a newer V8 than Node 20's; the protocol it calls is tested directly.
  const c = new Client({ address: addr })
  try {
    assert.equal(await c.kvPut('node/greeting', 'hello'), true)
    assert.deepEqual(await c.kvGet('node/greeting'), Buffer.from('hello'))
    assert.equal(await c.kvGet('node/missing'), null)
  } finally {
    await c[Symbol.asyncDispose]()
  }
  await assert.rejects(c.kvGet('node/greeting'), { code: 'BATON_CLOSED' })
})

test('client from CONSUL_HTTP_ADDR', async () => {
  process.env.CONSUL_HTTP_ADDR = addr
  const c = new Client()
  assert.ok(c.address.endsWith(addr))
  assert.equal(await c.close(), true)
  delete process.env.CONSUL_HTTP_ADDR
})

test('bad arguments are TypeError / RangeError with clear messages', async () => {
  const c = new Client({ address: addr })
  await assert.rejects(c.kvGet(''), { code: 'BATON_INVALID_ARGUMENT', message: /missing key/ })
  assert.throws(() => c.kvGet(42), { name: 'TypeError', message: /key must be a string/ })
  assert.throws(() => c.kvPut('k', 42), { name: 'TypeError', message: /Buffer or a string/ })
  await assert.rejects(c.createSession({ ttlMs: -5 }), { name: 'RangeError', message: /ttlMs must be a non-negative/ })
  await assert.rejects(c.createSession({ ttlMs: Infinity }), { name: 'RangeError', message: /ttlMs must be finite/ })
  await assert.rejects(c.createSession({ lockDelayMs: 'soon' }), { name: 'TypeError' })
  await assert.rejects(c.createSession({ behavior: 'explode' }), { name: 'TypeError', message: /behavior must be/ })
  assert.throws(() => new Client(5), { name: 'TypeError' })
  await c.close()
})

test('server errors carry code and Consul text', async () => {
  const c = new Client({ address: addr })
  await assert.rejects(c.createSession({ ttlMs: 10 }), (e) => {
    assert.ok(e instanceof BatonError)
    assert.equal(e.code, 'BATON_INVALID_ARGUMENT')
    assert.match(e.message, /Invalid Session TTL/)
    assert.equal(e.transient, false) // a refusal: trying again will not help
    return true
  })
  await c.close()
})

test('unreachable server is BATON_CONNECTION', async () => {
  const c = new Client({ address: '127.0.0.1:1', requestTimeoutMs: 2000 })
  await assert.rejects(c.kvGet('x'), { code: 'BATON_CONNECTION', transient: true })
  await c.close()
})

test('waitLost: timeout, abort, and loss by another client', async () => {
  const c = new Client({ address: addr })
  const s = await c.createSession({ ttlMs: 10000, lockDelayMs: 0 })
  assert.equal(s.isValid(), true)
  await assert.rejects(s.waitLost({ timeoutMs: 200 }), { code: 'BATON_TIMEOUT' })
  const ac = new AbortController()
  const waiting = s.waitLost({ signal: ac.signal })
  setTimeout(() => ac.abort(new Error('stop')), 100)
  await assert.rejects(waiting, { name: 'AbortError' })
  const lost = s.waitLost({ timeoutMs: 5000 })
  await destroyFromOutside(s.id)
  assert.equal(await lost, 'invalidated')
  assert.equal(s.isValid(), false)
  await c.close()
})

test('pending waits do not starve libuv: fs work completes while 64 waits are parked', async () => {
  const c = new Client({ address: addr })
  const s = await c.createSession({ ttlMs: 10000 })
  const ac = new AbortController()
  require('node:events').setMaxListeners(100, ac.signal)
  const waits = Array.from({ length: 64 }, () => s.waitLost({ signal: ac.signal }).catch((e) => e))
  const t = process.hrtime.bigint()
  await fs.promises.readFile(__filename)
  const ms = Number(process.hrtime.bigint() - t) / 1e6
  console.log(`readFile with 64 parked waits took ${ms.toFixed(1)} ms`)
  ac.abort()
  for (const e of await Promise.all(waits)) assert.equal(e.name, 'AbortError')
  await c.close()
})

// ---- session defaults and options (issue 22) --------------------------------------------

/** Consul's own record of a session: its TTL ("15s", "" for none) and lock-delay (ns). */
async function sessionInfo(id) {
  const r = await request(addr, 'GET', `/v1/session/info/${id}`)
  assert.equal(r.status, 200, r.body)
  const [info] = parseJson(r.body)
  return info
}

test('createSession defaults to a 15 s TTL and Consul\'s lock-delay; no TTL only when asked (ttlMs: null)', async () => {
  const c = new Client({ address: addr })
  try {
    const s = await c.createSession()
    const info = await sessionInfo(s.id)
    assert.equal(info.TTL, '15s')
    assert.equal(Number(info.LockDelay), 15e9)
    const left = s.timeLeftMs()
    assert.ok(left > 0 && left <= 15000, `timeLeftMs ${left}`)
    // Options without ttlMs keep the default TTL.
    const named = await c.createSession({ name: 'named' })
    assert.equal((await sessionInfo(named.id)).TTL, '15s')
    const none = await c.createSession({ ttlMs: null })
    assert.equal((await sessionInfo(none.id)).TTL, '')
    assert.equal(none.timeLeftMs(), null)
    await none.destroy()
    const ten = await c.createSession({ ttlMs: 10000 })
    assert.equal((await sessionInfo(ten.id)).TTL, '10s')
  } finally {
    assert.equal(await c.close(), true)
  }
})

test('session options: unknown keys and unitless durations are a TypeError naming the key', async () => {
  const c = new Client({ address: addr })
  try {
    await assert.rejects(c.createSession({ ttl: 10 }), {
      name: 'TypeError',
      message: /unknown session option "ttl" \(did you mean ttlMs\? durations are in milliseconds\)/,
    })
    await assert.rejects(c.createSession({ lockDelay: 0 }), { name: 'TypeError', message: /"lockDelay".*lockDelayMs/ })
    await assert.rejects(c.createSession({ serviceCheck: ['x'] }), { name: 'TypeError', message: /unknown session option "serviceCheck"/ })
    assert.throws(() => new Client({ address: addr, defaultSession: { ttl: 10 } }), {
      name: 'TypeError',
      message: /unknown session option "ttl"/,
    })
  } finally {
    await c.close()
  }
})

test('close() resolves true once everything finished within its timeout', async () => {
  const c = new Client({ address: addr })
  const s = await c.createSession()
  const lock = c.lock(`node/close-${process.pid}`)
  await lock.acquire({ timeoutMs: 5000 })
  assert.equal(await c.close(5000), true)
  assert.equal(lock.isHeld(), false)
  assert.equal(s.isValid(), false)
  // Nothing is left to do: a second close also finished everything.
  assert.equal(await c.close(), true)
})
