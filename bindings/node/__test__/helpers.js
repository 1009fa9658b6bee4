'use strict'
// Shared fixtures: a baton-devserver process per test file (or the Consul in BATON_TEST_CONSUL),
// and raw HTTP helpers that act "from outside" (another Consul client).
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const fs = require('node:fs')
const readline = require('node:readline')
const http = require('node:http')

const root = path.resolve(__dirname, '../../..')
const realConsul = Boolean(process.env.BATON_TEST_CONSUL)
// BATON_TEST_DEVSERVER_PRETTY (set, not empty, not "0"): the dev server pretty-prints every JSON
// answer as `consul agent -dev` does (indented, ending with a newline), like a real -dev agent.
const pretty = !['', '0'].includes(process.env.BATON_TEST_DEVSERVER_PRETTY ?? '')
// BATON_TEST_CONSUL_VERSION (e.g. 1.0.8): the dev server emulates that Consul version's
// client-visible differences (baton-devserver --consul-version).
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
  const args = ['--port', '0', '--session-ttl-min', '100ms', ...(pretty ? ['--pretty'] : []), ...consulVersion]
  const server = spawn(bin, args, { stdio: ['ignore', 'pipe', 'ignore'] })
  const line = await new Promise((resolve, reject) => {
    readline.createInterface({ input: server.stdout }).once('line', resolve)
    server.once('exit', (code) => reject(new Error(`devserver exited ${code}`)))
  })
  assert.match(line, /^BATON_DEVSERVER_ADDR=/)
  return { addr: line.split('=')[1], stop: () => server.kill('SIGTERM') }
}

/** One HTTP request; resolves { status, body }. */
function request(addr, method, urlPath, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(`http://${addr}${urlPath}`, { method }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, body: Buffer.concat(chunks).toString() }))
    })
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

/**
 * Whether the emulated Consul (BATON_TEST_CONSUL_VERSION) is older than `version` ('1.6.2').
 * False for the current version and against a real Consul, whose version the tests do not know
 * (consulBefore asks it).
 */
function emulatedBefore(version) {
  const v = process.env.BATON_TEST_CONSUL_VERSION ?? ''
  if (realConsul || v === '' || v === 'current') return false
  return versionBefore(v, version)
}

/**
 * Whether the Consul at `addr` is older than `version`: emulatedBefore for the tests' own dev
 * server, and for BATON_TEST_CONSUL the version the agent reports (GET /v1/agent/self).
 */
async function consulBefore(addr, version) {
  if (!realConsul) return emulatedBefore(version)
  const r = await request(addr, 'GET', '/v1/agent/self')
  assert.equal(r.status, 200, `cannot read the Consul version from /v1/agent/self: ${r.body}`)
  const reported = parseJson(r.body).Config?.Version
  assert.match(String(reported), /^v?\d+\.\d+/, `unexpected Config.Version ${reported}`)
  return versionBefore(reported, version)
}

module.exports = { consulBefore, emulatedBefore, startServer, request, parseJson, destroySession, rawEntry, deleteKey, freshKey, realConsul, root }
