'use strict'
// Metrics (issue 47): known operations on a fresh client and the exact counts `client.metrics()`
// shows for them (acquired, not acquired, timed out, cancelled, a release, a loss by key change
// and by session invalidation, a semaphore's acquire, exactly N 429s from a dev server's full
// connection limit), and `registerMetrics`' prom-client exposition, parsed by a small text
// parser of its own. Asynchronous events (a loss) are awaited by polling the snapshot.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const net = require('node:net')
const path = require('node:path')
const readline = require('node:readline')
const { Registry } = require('prom-client')
const { Client, METRICS, registerMetrics } = require('..')
const { useServer, freshKey, waitFor, destroySession, root } = require('./helpers')

// The file's server; every test's clients are closed after it and it must leave no session.
const fx = useServer()
let addr
beforeEach(() => {
  addr = fx.addr
})

/** Generous bound for "eventually": a failure bound, not a speed assertion. */
const PATIENCE = 20000

const sum = (obj) => Object.values(obj).reduce((a, b) => a + b, 0)
/** Every count of a two-level metric (`acquires`, `losses`, `requests`), added up. */
const total = (nested) => sum(Object.values(nested).map(sum))

test('METRICS is the core table, and a snapshot holds each metric under its name', () => {
  const names = METRICS.map((m) => m.name)
  for (const n of ['baton_held', 'baton_acquires_total', 'baton_acquire_wait_seconds', 'baton_losses_total', 'baton_requests_total', 'baton_owed']) {
    assert.ok(names.includes(n), `${n} in ${names}`)
  }
  for (const m of METRICS) {
    assert.ok(['gauge', 'counter', 'histogram'].includes(m.type), m.name)
    assert.equal(m.type === 'counter', m.name.endsWith('_total'), m.name)
    assert.ok(m.help.length > 0, m.name)
    assert.ok(Array.isArray(m.labels), m.name)
  }
  const acquires = METRICS.find((m) => m.name === 'baton_acquires_total')
  assert.deepEqual(acquires.labels, ['recipe', 'outcome'])
  assert.ok(Object.isFrozen(METRICS) && Object.isFrozen(acquires))

  const c = fx.client()
  const s = c.metrics()
  for (const m of METRICS) {
    const key = m.name.replace(/^baton_/, '').replace(/_total$/, '')
    assert.ok(key in s, `${m.name} has no '${key}' in the snapshot`)
  }
  const h = s.acquire_wait_seconds.lock
  assert.deepEqual(Object.keys(h).sort(), ['bounds', 'buckets', 'count', 'sum'])
  assert.equal(h.buckets.length, h.bounds.length + 1)
  assert.equal(h.count, 0)
  assert.equal(total(s.acquires), 0)
  assert.equal(s.held.lock, 0)
  assert.equal(s.lease_left_seconds, null, 'no session yet')
  assert.deepEqual(s.owed, { unlocks: 0, slots: 0, sessions: 0 })
})

test('acquires, a release and losses by key change and by session invalidation are counted exactly', async () => {
  const c = fx.client({ defaultSession: { lockDelayMs: 0 } })
  const other = fx.client()
  const [k, taken] = [freshKey('metrics-a'), freshKey('metrics-taken')]

  // One acquire.
  const l = c.lock(k)
  await l.acquire({ timeoutMs: PATIENCE })
  let s = c.metrics()
  assert.equal(s.acquires.lock.acquired, 1)
  assert.equal(total(s.acquires), 1)
  assert.equal(s.held.lock, 1)
  assert.equal(s.acquire_wait_seconds.lock.count, 1)
  assert.ok(s.lease_left_seconds > 0, `${s.lease_left_seconds}`)

  // A try of a key another client holds; a wait for it that times out; an aborted one.
  const theirs = other.lock(taken)
  await theirs.acquire({ timeoutMs: PATIENCE })
  const mine = c.lock(taken)
  assert.equal(await mine.tryAcquire(), false)
  await assert.rejects(mine.acquire({ timeoutMs: 300 }), { code: 'BATON_TIMEOUT' })
  const ac = new AbortController()
  const aborter = setTimeout(() => ac.abort(), 200)
  await assert.rejects(mine.acquire({ signal: ac.signal }), { name: 'AbortError' })
  clearTimeout(aborter)
  s = c.metrics()
  assert.deepEqual(s.acquires.lock, { acquired: 1, not_acquired: 1, timed_out: 1, cancelled: 1, error: 0 })
  assert.equal(total(s.acquires), 4)
  assert.equal(s.acquire_wait_seconds.lock.count, 4)
  assert.equal(s.acquire_wait_seconds.lock.buckets.reduce((a, b) => a + b, 0), 4)
  assert.equal(s.held.lock, 1)

  // A release: nothing held, one hold-time sample, no loss.
  assert.equal(await l.release(), true)
  s = c.metrics()
  assert.equal(s.held.lock, 0)
  assert.equal(s.hold_seconds.lock.count, 1)
  assert.equal(total(s.losses), 0)

  // A loss by key change: another client deletes the key.
  await l.acquire({ timeoutMs: PATIENCE })
  assert.equal(await other.kvDelete(k), true)
  s = await waitFor('the key_changed loss', () => {
    const m = c.metrics()
    return m.losses.lock.key_changed === 1 && m
  }, PATIENCE)
  assert.equal(s.held.lock, 0)
  assert.equal(s.hold_seconds.lock.count, 2)
  assert.equal(total(s.losses), 1)

  // A loss by session invalidation: another client destroys the session.
  await l.acquire({ timeoutMs: PATIENCE })
  const session = await c.defaultSession()
  await destroySession(addr, session.id)
  s = await waitFor('the invalidation loss', () => {
    const m = c.metrics()
    return m.losses.lock.invalidated === 1 && m
  }, PATIENCE)
  assert.equal(s.losses.lock.key_changed, 1)
  assert.equal(total(s.losses), 2)
  assert.equal(s.held.lock, 0)
  assert.equal(s.hold_seconds.lock.count, 3)
  assert.equal(s.acquires.lock.acquired, 3)

  // A semaphore's acquire, counted as the semaphore's.
  const sem = c.semaphore(freshKey('metrics-sem'), 2)
  await sem.acquire({ timeoutMs: PATIENCE })
  s = c.metrics()
  assert.equal(s.acquires.semaphore.acquired, 1)
  assert.equal(total(s.acquires), 7)
  assert.equal(s.held.semaphore, 1)
  assert.equal(s.acquires.lock.acquired, 3)
  assert.equal(await sem.release(), true)
  s = c.metrics()
  assert.equal(s.held.semaphore, 0)
  assert.equal(s.hold_seconds.semaphore.count, 1)

  // Requests: answered, none refused for the connection limit.
  assert.ok(s.requests.kv['2xx'] + s.requests.txn['2xx'] > 0, JSON.stringify(s.requests))
  assert.equal(s.requests.kv['429'], 0)
  assert.equal(await theirs.release(), true)
  // The other client saw only its own: one acquire, one release.
  const o = other.metrics()
  assert.equal(total(o.acquires), 1)
  assert.equal(o.hold_seconds.lock.count, 1)
  assert.equal(o.held.lock, 0)
})

test("an election's campaign counts as the election's", async () => {
  const c = fx.client()
  const e = c.election(freshKey('metrics-elect'))
  await e.campaign('me', { timeoutMs: PATIENCE })
  let s = c.metrics()
  assert.equal(s.acquires.election.acquired, 1)
  assert.equal(s.held.election, 1)
  assert.equal(s.acquires.lock.acquired, 0)
  assert.equal(s.held.lock, 0)
  assert.equal(await e.resign(), true)
  s = c.metrics()
  assert.equal(s.held.election, 0)
  assert.equal(total(s.losses), 0)
})

// ---- the dev server's connection limit --------------------------------------------------------

const LIMIT = 4
const REFUSED = 3

/** A dev server of this test's own with `--max-conns-per-client LIMIT`: { host, port, stop }. */
async function limitedServer() {
  const bin = process.env.BATON_DEVSERVER_BIN ?? path.join(root, 'target/debug/baton-devserver')
  // stdin a pipe this process holds: the server ends with the test run, even a killed one.
  const args = ['--port', '0', '--exit-on-stdin-eof', '--max-conns-per-client', String(LIMIT)]
  const server = spawn(bin, args, { stdio: ['pipe', 'pipe', 'ignore'] })
  const line = await new Promise((resolve, reject) => {
    readline.createInterface({ input: server.stdout }).once('line', resolve)
    server.once('exit', (code) => reject(new Error(`devserver exited ${code}`)))
  })
  assert.match(line, /^BATON_DEVSERVER_ADDR=/)
  const [host, port] = line.split('=')[1].split(':')
  return { host, port: Number(port), stop: () => server.kill('SIGTERM') }
}

/**
 * A raw TCP connection that sent GET /v1/status/leader; resolves `{ socket, status }` once the
 * answer's status line came (a 200 means the server counts the connection as open: it is kept,
 * HTTP/1.1 keep-alive).
 */
function rawGet({ host, port }, close) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host)
    let got = ''
    socket.on('error', reject)
    socket.on('data', (d) => {
      got += d
      const m = /^HTTP\/1\.1 (\d{3})/.exec(got)
      if (m) resolve({ socket, status: Number(m[1]) })
    })
    socket.on('close', () => reject(new Error(`connection closed before an answer: ${JSON.stringify(got)}`)))
    socket.write(`GET /v1/status/leader HTTP/1.1\r\nHost: ${host}\r\n${close ? 'Connection: close\r\n' : ''}\r\n`)
  })
}

test('a full connection limit shows as exactly the 429s caused', async () => {
  const srv = await limitedServer()
  const held = []
  const c = new Client({ address: `${srv.host}:${srv.port}` })
  try {
    // Fill the limit with connections of our own, each answered (so counted by the server).
    for (let i = 0; i < LIMIT; i++) {
      const r = await rawGet(srv, false)
      held.push(r.socket)
      assert.equal(r.status, 200)
    }
    for (let i = 0; i < REFUSED; i++) {
      await assert.rejects(c.kvGet('metrics/limited'), (e) => {
        assert.equal(e.status, 429, `${e}`)
        return true
      })
    }
    let s = c.metrics()
    assert.equal(s.requests.kv['429'], REFUSED, JSON.stringify(s.requests))
    const all429 = sum(Object.values(s.requests).map((o) => o['429']))
    assert.equal(all429, REFUSED)
    assert.equal(total(s.requests), REFUSED, JSON.stringify(s.requests))

    // Answered again once the server has seen our connections go (probed with raw requests,
    // which the client does not count).
    for (const sock of held.splice(0)) sock.destroy()
    await waitFor('the server to see our connections close', async () => {
      const r = await rawGet(srv, true)
      r.socket.destroy()
      return r.status === 200
    }, PATIENCE)
    assert.equal(await c.kvGet('metrics/limited'), null)
    // The missing key's 404, and no more 429s.
    s = c.metrics()
    assert.equal(s.requests.kv['4xx'], 1, JSON.stringify(s.requests))
    assert.equal(s.requests.kv['429'], REFUSED)
    assert.equal(total(s.requests), REFUSED + 1, JSON.stringify(s.requests))
  } finally {
    for (const sock of held) sock.destroy()
    await c.close()
    srv.stop()
  }
})

// ---- prom-client ------------------------------------------------------------------------------

/**
 * The text exposition as `{ samples: Map('name{k="v",...}' (labels sorted) → value), help: Map,
 * type: Map }`.
 */
function parseExposition(text) {
  const samples = new Map()
  const help = new Map()
  const type = new Map()
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    let m = /^# (HELP|TYPE) (\S+) (.*)$/.exec(line)
    if (m) {
      ;(m[1] === 'HELP' ? help : type).set(m[2], m[3])
      continue
    }
    if (line.startsWith('#')) continue
    m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    assert.ok(m, `not a sample line: ${JSON.stringify(line)}`)
    const labels = []
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels.push(`${l[1]}="${l[2]}"`)
    labels.sort()
    const key = labels.length ? `${m[1]}{${labels.join(',')}}` : m[1]
    assert.ok(!samples.has(key), `${key} twice`)
    const value = m[3] === '+Inf' ? Infinity : Number(m[3])
    assert.ok(!Number.isNaN(value), line)
    samples.set(key, value)
  }
  return { samples, help, type }
}

/** The sample `name{labels}` (labels in any order) of a parsed exposition; fails when absent. */
function sample(parsed, name, labels = {}, text = '') {
  const l = Object.entries(labels).map(([k, v]) => `${k}="${v}"`).sort()
  const key = l.length ? `${name}{${l.join(',')}}` : name
  assert.ok(parsed.samples.has(key), `${key} missing in\n${text}`)
  return parsed.samples.get(key)
}

test("registerMetrics exposes the snapshot in a prom-client registry, parsed", async () => {
  const c = fx.client()
  const register = new Registry()
  const registered = registerMetrics(c, register)
  assert.deepEqual(registered.map((m) => m.name), METRICS.map((m) => m.name))

  // Before anything: zeros, and no lease-left sample (no session yet).
  let text = await register.metrics()
  let p = parseExposition(text)
  for (const m of METRICS) {
    assert.equal(p.help.get(m.name), m.help, `${m.name}'s HELP in\n${text}`)
    assert.equal(p.type.get(m.name), m.type, `${m.name}'s TYPE in\n${text}`)
  }
  assert.equal(sample(p, 'baton_acquires_total', { recipe: 'lock', outcome: 'acquired' }, text), 0)
  assert.ok(![...p.samples.keys()].some((k) => k.startsWith('baton_lease_left_seconds')), text)

  // One lock acquired: counted, held, waited once.
  const l = c.lock(freshKey('metrics-prom'))
  await l.acquire({ timeoutMs: PATIENCE })
  text = await register.metrics()
  p = parseExposition(text)
  const s = c.metrics()
  assert.equal(sample(p, 'baton_acquires_total', { recipe: 'lock', outcome: 'acquired' }, text), 1)
  assert.equal(sample(p, 'baton_acquires_total', { recipe: 'lock', outcome: 'timed_out' }, text), 0)
  assert.equal(sample(p, 'baton_held', { recipe: 'lock' }, text), 1)
  assert.equal(sample(p, 'baton_held', { recipe: 'semaphore' }, text), 0)
  assert.equal(sample(p, 'baton_acquire_wait_seconds_count', { recipe: 'lock' }, text), 1)
  assert.equal(sample(p, 'baton_acquire_wait_seconds_bucket', { recipe: 'lock', le: '+Inf' }, text), 1)
  assert.equal(sample(p, 'baton_acquire_wait_seconds_sum', { recipe: 'lock' }, text), s.acquire_wait_seconds.lock.sum)
  // The buckets are cumulative: each the snapshot's per-bucket counts added up to its bound.
  const h = s.acquire_wait_seconds.lock
  let cumulative = 0
  h.bounds.forEach((b, i) => {
    cumulative += h.buckets[i]
    assert.equal(sample(p, 'baton_acquire_wait_seconds_bucket', { recipe: 'lock', le: String(b) }, text), cumulative, `le ${b}`)
  })
  assert.equal(sample(p, 'baton_hold_seconds_count', { recipe: 'lock' }, text), 0)
  assert.equal(sample(p, 'baton_losses_total', { recipe: 'lock', reason: 'key_changed' }, text), 0)
  assert.ok(sample(p, 'baton_lease_left_seconds', {}, text) > 0)
  assert.equal(sample(p, 'baton_owed', { kind: 'unlocks' }, text), 0)
  assert.equal(sample(p, 'baton_retries_total', {}, text), 0)
  assert.equal(sample(p, 'baton_renewals_total', { outcome: 'failed' }, text), 0)
  assert.ok(sample(p, 'baton_renewal_seconds_count', {}, text) >= 0)
  assert.ok(sample(p, 'baton_requests_total', { family: 'kv', outcome: '2xx' }, text) + sample(p, 'baton_requests_total', { family: 'txn', outcome: '2xx' }, text) >= 1)
  assert.equal(sample(p, 'baton_leaderless_seconds_total', {}, text), 0)
  // Every acquire and loss count of the snapshot, and nothing else under those names.
  const counts = [...p.samples.keys()].filter((k) => k.startsWith('baton_acquires_total{') || k.startsWith('baton_losses_total{'))
  assert.equal(counts.length, Object.values(s.acquires).length * 5 + Object.values(s.losses).length * 7)
  for (const [recipe, byOutcome] of Object.entries(s.acquires)) {
    for (const [outcome, n] of Object.entries(byOutcome)) assert.equal(sample(p, 'baton_acquires_total', { recipe, outcome }, text), n)
  }

  // The OpenMetrics format: a counter's family without `_total`, its samples with it.
  const om = new Registry(Registry.OPENMETRICS_CONTENT_TYPE)
  registerMetrics(c, om)
  const omText = await om.metrics()
  assert.match(omText, /^# TYPE baton_acquires counter$/m)
  assert.match(omText, /^baton_acquires_total\{recipe="lock",outcome="acquired"\} 1$/m)

  // A second client's metrics in the same registry: refused, none registered.
  const before = register.getMetricsAsArray().length
  assert.throws(() => registerMetrics(fx.client(), register), /baton_held is registered already/)
  assert.equal(register.getMetricsAsArray().length, before)
  assert.equal(await l.release(), true)
  p = parseExposition(await register.metrics())
  assert.equal(sample(p, 'baton_held', { recipe: 'lock' }), 0)
  assert.equal(sample(p, 'baton_hold_seconds_count', { recipe: 'lock' }), 1)
})

test('registerMetrics checks its arguments', () => {
  const c = fx.client()
  assert.throws(() => registerMetrics({}, new Registry()), { name: 'TypeError', message: /client must be a Client/ })
  assert.throws(() => registerMetrics(c, {}), { name: 'TypeError', message: /register must be a prom-client Registry/ })
  assert.throws(() => registerMetrics(c, null), { name: 'TypeError' })
})
