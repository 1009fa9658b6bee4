'use strict'
// Shared fixtures: a baton-devserver process per test file (or the Consul in BATON_TEST_CONSUL),
// and raw HTTP helpers that act "from outside" (another Consul client).
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const fs = require('node:fs')
const readline = require('node:readline')
const http = require('node:http')
const { before, after, beforeEach, afterEach } = require('node:test')

const root = path.resolve(__dirname, '../../..')
const realConsul = Boolean(process.env.BATON_TEST_CONSUL)
// BATON_TEST_DEVSERVER_PRETTY (set, not empty, not "0"): the dev server pretty-prints every JSON
// answer as `consul agent -dev` does (indented, ending with a newline), like a real -dev agent.
const pretty = !['', '0'].includes(process.env.BATON_TEST_DEVSERVER_PRETTY ?? '')
// BATON_TEST_CONSUL_VERSION (e.g. 1.0.8): the dev server these tests start emulates that Consul
// version's client-visible differences (baton-devserver --consul-version). It says nothing of the
// server under test: a test asks the server (consulBefore).
const consulVersion = ['', 'current'].includes(process.env.BATON_TEST_CONSUL_VERSION ?? '')
  ? []
  : ['--consul-version', process.env.BATON_TEST_CONSUL_VERSION]

/**
 * Starts a dev server (sessions may have TTLs down to 100 ms; pretty-printing when
 * BATON_TEST_DEVSERVER_PRETTY is set); returns { addr, stop }.
 */
async function startServer() {
  if (realConsul) {
    // The spawned dev server's stdout pipe keeps the event loop alive until stop(); loss
    // notifications ('lost', lostSignal) come through an unref'd thread-safe function, so a test
    // awaiting one would otherwise end with "Promise resolution is still pending but the event
    // loop has already resolved" (and cancel every later test of the file). Same conditions here.
    const keepAlive = setInterval(() => {}, 2 ** 30)
    return {
      addr: process.env.BATON_TEST_CONSUL.replace(/^https?:\/\//, ''),
      stop: () => clearInterval(keepAlive),
    }
  }
  const bin = process.env.BATON_DEVSERVER_BIN ?? path.join(root, 'target/debug/baton-devserver')
  assert.ok(fs.existsSync(bin), `${bin} is not built: run cargo build -p consul-baton-devserver`)
  // stdin a pipe this process holds: the server ends with the test run, even a killed one.
  const args = ['--port', '0', '--session-ttl-min', '100ms', '--exit-on-stdin-eof', ...(pretty ? ['--pretty'] : []), ...consulVersion]
  const server = spawn(bin, args, { stdio: ['pipe', 'pipe', 'ignore'] })
  const line = await new Promise((resolve, reject) => {
    readline.createInterface({ input: server.stdout }).once('line', resolve)
    server.once('exit', (code) => reject(new Error(`devserver exited ${code}`)))
  })
  assert.match(line, /^BATON_DEVSERVER_ADDR=/)
  return { addr: line.split('=')[1], stop: () => server.kill('SIGTERM') }
}

/**
 * One HTTP request; resolves { status, body }. `options.token` is sent as X-Consul-Token;
 * `options.timeoutMs` bounds it (rejecting with an error naming the request).
 */
function request(addr, method, urlPath, body, options = {}) {
  return new Promise((resolve, reject) => {
    const headers = options.token ? { 'X-Consul-Token': options.token } : {}
    const req = http.request(`http://${addr}${urlPath}`, { method, headers }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }))
    })
    if (options.timeoutMs) {
      req.setTimeout(options.timeoutMs, () => {
        req.destroy(new Error(`${method} http://${addr}${urlPath}: no answer within ${options.timeoutMs} ms`))
      })
    }
    req.on('error', reject)
    req.end(body)
  })
}

const BIG = '\u0000bigint:'

/**
 * JSON.parse, except that integers beyond Number.MAX_SAFE_INTEGER come back as exact BigInts
 * (Consul's Flags and indexes are uint64; Go's api.Lock flag is above 2^53, and plain JSON.parse
 * would round it). Node 20 has no reviver source access, so such literals are first quoted with
 * a marker, string contents left alone, whatever the layout (compact or pretty).
 */
function parseJson(text) {
  const token = /"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g
  const marked = text.replace(token, (t) =>
    t[0] !== '"' && /^-?\d+$/.test(t) && !Number.isSafeInteger(Number(t)) ? JSON.stringify(BIG + t) : t,
  )
  return JSON.parse(marked, (_, v) => (typeof v === 'string' && v.startsWith(BIG) ? BigInt(v.slice(BIG.length)) : v))
}

/** Destroys a session as another client would (works on Consul and the dev server). */
async function destroySession(addr, id) {
  const r = await request(addr, 'PUT', `/v1/session/destroy/${id}`)
  assert.equal(r.status, 200, r.body)
  assert.equal(parseJson(r.body), true, r.body)
}

/** The raw KV entry of `key` (Consul's JSON), or null. */
async function rawEntry(addr, key) {
  const r = await request(addr, 'GET', `/v1/kv/${key}`)
  if (r.status === 404) return null
  assert.equal(r.status, 200, r.body)
  return parseJson(r.body)[0]
}

/** Deletes `key` as another client would. */
async function deleteKey(addr, key) {
  const r = await request(addr, 'DELETE', `/v1/kv/${key}`)
  assert.equal(r.status, 200, r.body)
  assert.equal(parseJson(r.body), true, r.body)
}

/**
 * Polls `cond` (sync or async) every 10 ms until it returns a truthy value, which it resolves
 * with; rejects with an error naming `what` once `timeoutMs` pass first.
 */
async function waitFor(what, cond, timeoutMs = 10000) {
  const end = Date.now() + timeoutMs
  for (;;) {
    const v = await cond()
    if (v) return v
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms`)
    await new Promise((r) => setTimeout(r, 10))
  }
}

/** A TCP port of 127.0.0.1 nothing listens on (one just released). */
async function closedPort() {
  const net = require('node:net')
  const srv = net.createServer()
  await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve))
  const { port } = srv.address()
  await new Promise((resolve) => srv.close(resolve))
  return port
}

let unique = 0
/** A key no other test uses. */
function freshKey(prefix) {
  unique += 1
  return `node-test/${process.pid}/${prefix}-${unique}`
}

/** Whether version string `a` ('1.0.8', 'v1.6.1', '1.15.2+ent') is older than `b`. */
function versionBefore(a, b) {
  const parts = (s) => s.replace(/^v/, '').split(/[^0-9.]/)[0].split('.').map(Number)
  const [x, y] = [parts(a), parts(b)]
  for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) < (y[i] ?? 0)
  return false
}

/** The Config.Version each server reported in /v1/agent/self, by address (asked once). */
const reportedVersions = new Map()

/**
 * Whether the Consul at `addr` is older than `version` ('1.6.2'), as the server itself says in
 * GET /v1/agent/self (a dev server reports the version it emulates), for our dev server and for
 * BATON_TEST_CONSUL alike; never from BATON_TEST_CONSUL_VERSION. Asked once per server.
 */
async function consulBefore(addr, version) {
  if (!reportedVersions.has(addr)) {
    reportedVersions.set(
      addr,
      (async () => {
        const r = await request(addr, 'GET', '/v1/agent/self', undefined, {
          timeoutMs: 10000,
          token: realConsul ? process.env.CONSUL_HTTP_TOKEN || undefined : undefined,
        })
        assert.equal(r.status, 200, `cannot read the Consul version from /v1/agent/self: ${r.body}`)
        const reported = parseJson(r.body).Config?.Version
        assert.match(String(reported), /^v?\d+\.\d+/, `unexpected Config.Version ${reported}`)
        return String(reported)
      })(),
    )
  }
  let reported
  try {
    reported = await reportedVersions.get(addr)
  } catch (e) {
    reportedVersions.delete(addr)
    throw e
  }
  return versionBefore(reported, version)
}

// ---- no session left behind -----------------------------------------------------------------
//
// Every test checks, once its clients are closed, that the server holds no session created while
// it ran (issue 31: close() must leave nothing at Consul). Against the tests' own dev server (one
// per test file) every session is ours. Against BATON_TEST_CONSUL the sessions present before the
// test are ignored, and the tests of every file take turns (a KV key used as a mutex, see
// `exclusive`), since `node --test` runs files in parallel on machines with more cores; a session
// another program creates on that Consul during a test would still be reported:
// BATON_TEST_SESSION_CHECK=0 turns the check off for a busy shared cluster. A test that leaves a
// session on purpose (a process it killed, a session it made with raw HTTP and hands to nobody)
// says so with `leavesSessions(reason)`; its sessions are destroyed after it either way, so that
// the next test starts clean.
const sessionCheckOff = process.env.BATON_TEST_SESSION_CHECK === '0'
const MUTEX_KEY = 'baton-node-tests/session-check-mutex'

/**
 * Takes the suite's mutex at a shared Consul (`target`): creates MUTEX_KEY with `?cas=0`, waiting
 * (blocking queries) while another test process holds it. A holder that is gone (a process of
 * this host that no longer exists, or a claim older than 10 minutes) is taken over. Resolves with
 * the release function.
 */
async function exclusive({ addr, token }) {
  const os = require('node:os')
  const me = JSON.stringify({ host: os.hostname(), pid: process.pid, at: Date.now() })
  const end = Date.now() + 15 * 60_000
  for (;;) {
    const put = await request(addr, 'PUT', `/v1/kv/${MUTEX_KEY}?cas=0`, me, { token, timeoutMs: 10000 })
    assert.equal(put.status, 200, `PUT /v1/kv/${MUTEX_KEY}: ${put.status} ${put.body}`)
    if (parseJson(put.body) === true) break
    assert.ok(Date.now() < end, `the test mutex ${MUTEX_KEY} at ${addr} was not free within 15 minutes`)
    const got = await request(addr, 'GET', `/v1/kv/${MUTEX_KEY}`, undefined, { token, timeoutMs: 10000 })
    if (got.status === 404) continue
    assert.equal(got.status, 200, `GET /v1/kv/${MUTEX_KEY}: ${got.status} ${got.body}`)
    const entry = parseJson(got.body)[0]
    let holder = {}
    try {
      holder = JSON.parse(Buffer.from(entry.Value ?? '', 'base64').toString())
    } catch {
      holder = {}
    }
    // Ours (a release that never ran) or a process that is gone: take it over.
    let gone = Date.now() - (holder.at ?? 0) > 10 * 60_000 || (holder.host === os.hostname() && holder.pid === process.pid)
    if (!gone && holder.host === os.hostname()) {
      try {
        process.kill(holder.pid, 0)
      } catch (e) {
        gone = e.code === 'ESRCH'
      }
    }
    if (gone) {
      await request(addr, 'DELETE', `/v1/kv/${MUTEX_KEY}?cas=${entry.ModifyIndex}`, undefined, { token, timeoutMs: 10000 })
      continue
    }
    // Until the key changes (released or taken over), at most 5 s.
    await request(addr, 'GET', `/v1/kv/${MUTEX_KEY}?index=${entry.ModifyIndex}&wait=5s`, undefined, { token, timeoutMs: 20000 })
  }
  return async () => {
    const got = await request(addr, 'GET', `/v1/kv/${MUTEX_KEY}`, undefined, { token, timeoutMs: 10000 })
    if (got.status !== 200) return
    const entry = parseJson(got.body)[0]
    if (Buffer.from(entry.Value ?? '', 'base64').toString() !== me) return
    await request(addr, 'DELETE', `/v1/kv/${MUTEX_KEY}?cas=${entry.ModifyIndex}`, undefined, { token, timeoutMs: 10000 })
  }
}

/** The sessions at the server, as Consul lists them (a token for an ACL-enabled server). */
async function listSessions({ addr, token }) {
  const r = await request(addr, 'GET', '/v1/session/list', undefined, { token, timeoutMs: 10000 })
  assert.equal(r.status, 200, `GET /v1/session/list on ${addr}: ${r.status} ${r.body}`)
  const list = parseJson(r.body)
  assert.ok(Array.isArray(list), `GET /v1/session/list on ${addr} answered ${r.body}`)
  return list
}

function describeSession(s) {
  const checks = [...(s.NodeChecks ?? s.Checks ?? []), ...(s.ServiceChecks ?? []).map((c) => c.ID ?? c)]
  return `${s.ID} (name ${JSON.stringify(s.Name)}, TTL ${JSON.stringify(s.TTL)}, checks [${checks.join(', ')}])`
}

/**
 * Registers beforeEach / afterEach hooks on the calling test file: after each test, the clients
 * handed to `track()` during it are closed and each server of `targets()` (`[{ addr, token }]`,
 * read when the hooks run) must hold no session created during the test. With `shared` (a
 * server other test processes use too), tests hold the suite's mutex there while they run.
 * Returns `{ track, leavesSessions }`.
 */
function checkNoSessionLeft(targets, { shared = false } = {}) {
  let baseline = null // per target: the IDs present before the test
  let tracked = []
  let excuse = null
  let release = null
  // Node 20 runs no afterEach for a test that calls t.skip(): what it left is settled here.
  async function settleSkipped() {
    const clients = tracked
    tracked = []
    for (const c of clients) await c.close()
  }
  beforeEach(async () => {
    await settleSkipped()
    excuse = null
    if (sessionCheckOff) return
    // Still held when the last test's afterEach did not run.
    if (shared && release === null) release = await exclusive(targets()[0])
    baseline = await Promise.all(targets().map(async (t) => new Set((await listSessions(t)).map((s) => s.ID))))
  })
  after(async () => {
    await settleSkipped()
    const r = release
    release = null
    await r?.()
  })
  afterEach(async (t) => {
    const clients = tracked
    tracked = []
    try {
      // The test's own close() came first where it made one; a second close resolves true at once.
      for (const c of clients) await c.close()
      await check(t)
    } finally {
      const r = release
      release = null
      await r?.()
    }
  })
  async function check(t) {
    const seen = baseline
    baseline = null
    if (!seen) return
    const problems = []
    const list = targets()
    for (let i = 0; i < list.length; i++) {
      const left = (await listSessions(list[i])).filter((s) => !seen[i].has(s.ID))
      for (const s of left) {
        await request(list[i].addr, 'PUT', `/v1/session/destroy/${s.ID}`, undefined, { token: list[i].token, timeoutMs: 10000 })
      }
      if (left.length > 0) problems.push(`${list[i].addr}: ${left.map(describeSession).join('; ')}`)
    }
    if (problems.length === 0) return
    if (excuse !== null) {
      t.diagnostic(`sessions left on purpose (${excuse}), destroyed: ${problems.join(' | ')}`)
      return
    }
    assert.fail(
      `the test left ${problems.length === 1 ? '' : 'on several servers '}sessions at the server after its clients were closed ` +
        `(each client's close() must destroy the sessions it made; a session made otherwise must be destroyed by the test, ` +
        `or the test must call leavesSessions(reason)): ${problems.join(' | ')}`,
    )
  }
  return {
    /** Closes `client` after the current test, before the check. */
    track(client) {
      tracked.push(client)
      return client
    },
    /** The current test leaves sessions on purpose: they are destroyed, not reported. */
    leavesSessions(reason) {
      assert.ok(typeof reason === 'string' && reason !== '', 'leavesSessions needs a reason')
      excuse = reason
    },
  }
}

/**
 * The fixture of a test file: a server for the file (startServer: a dev server, or
 * BATON_TEST_CONSUL) and the no-session-left check of every test. `fx.addr` / `fx.server` are set
 * once the file's `before` hooks ran; `fx.client(options)` makes a client of that server that is
 * closed after the current test (before the check); `fx.leavesSessions(reason)` excuses the
 * current test (see checkNoSessionLeft).
 */
function useServer() {
  const token = realConsul ? process.env.CONSUL_HTTP_TOKEN || undefined : undefined
  const fx = {
    server: undefined,
    addr: undefined,
    client(options = {}) {
      // Loaded here: helpers.js is also used by tests that never load the addon.
      const { Client } = require('..')
      return guard.track(new Client({ address: fx.addr, ...options }))
    },
    leavesSessions(reason) {
      guard.leavesSessions(reason)
    },
  }
  before(async () => {
    fx.server = await startServer()
    fx.addr = fx.server.addr
  })
  const guard = checkNoSessionLeft(() => [{ addr: fx.addr, token }], { shared: realConsul })
  after(() => fx.server?.stop())
  return fx
}

module.exports = {
  checkNoSessionLeft,
  closedPort,
  waitFor,
  consulBefore,
  listSessions,
  startServer,
  useServer,
  request,
  parseJson,
  destroySession,
  rawEntry,
  deleteKey,
  freshKey,
  realConsul,
  root,
}
