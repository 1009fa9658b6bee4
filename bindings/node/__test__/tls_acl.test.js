'use strict'
// TLS, mutual TLS and ACLs from Node, configured with the CONSUL_* variables as a user would: a
// verified server, a wrong name and an unknown CA refused, CONSUL_HTTP_SSL_VERIFY=false,
// CONSUL_CAPATH, CONSUL_TLS_SERVER_NAME, mTLS with and without a client certificate, a CA:TRUE
// certificate used as the server's, a lock and election round trip over mTLS; a lock refused for
// lack of key:write and a session for lack of session:write. Each refusal's text says what to
// set, and no token shows in an error.
//
// These always use dev servers of their own (also with BATON_TEST_CONSUL): a real agent's TLS
// and ACL setup cannot be chosen from a test. Certificates come from `baton-devserver tls`, which
// writes the files `consul tls ca create` / `consul tls cert create` write.
const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn, execFileSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { Client, BatonError } = require('..')
const { checkNoSessionLeft } = require('./helpers')

const root = path.resolve(__dirname, '../../..')
const bin = process.env.BATON_DEVSERVER_BIN ?? path.join(root, 'target/debug/baton-devserver')

const CONSUL_VARS = [
  'CONSUL_HTTP_ADDR', 'CONSUL_HTTP_SSL', 'CONSUL_HTTP_SSL_VERIFY', 'CONSUL_CACERT', 'CONSUL_CAPATH',
  'CONSUL_CLIENT_CERT', 'CONSUL_CLIENT_KEY', 'CONSUL_TLS_SERVER_NAME', 'CONSUL_HTTP_TOKEN',
  'CONSUL_HTTP_TOKEN_FILE',
]
const MANAGEMENT = 'mgmt-s3cret-node'
const READER = 'reader-s3cret-node' // key:read on jobs/, session:write
const NO_SESSION = 'nosession-s3cret-node' // key:write on jobs/, no session rule
const LOCKER = 'locker-s3cret-node' // key:write on jobs/, session:write
const UNKNOWN = 'unknown-s3cret-node'

let dir
const procs = []
// Each server's plain-HTTP address (and the token that may list its sessions): every test must
// leave no session at any of them once its clients are closed.
const servers = []
const sessionCheck = checkNoSessionLeft(() => servers)
let https, mtls, selfSigned, acl

const file = (name) => path.join(dir, name)
const tls = (...args) => execFileSync(bin, ['tls', ...args], { stdio: 'ignore' })

/** Starts a dev server; resolves { http, https } from the lines it prints. */
async function start(args, token = undefined) {
  const proc = spawn(bin, ['--port', '0', '--session-ttl-min', '1s', ...args], {
    stdio: ['ignore', 'pipe', 'ignore'],
  })
  procs.push(proc)
  const want = args.includes('--https-port') ? 2 : 1
  const lines = await new Promise((resolve, reject) => {
    const got = []
    const rl = readline.createInterface({ input: proc.stdout })
    rl.on('line', (l) => {
      got.push(l)
      if (got.length === want) resolve(got)
    })
    proc.once('exit', (code) => reject(new Error(`devserver exited ${code}`)))
  })
  assert.match(lines[0], /^BATON_DEVSERVER_ADDR=/)
  const out = { http: lines[0].split('=')[1] }
  servers.push({ addr: out.http, token })
  if (want === 2) {
    assert.match(lines[1], /^BATON_DEVSERVER_HTTPS_ADDR=/)
    out.https = `https://${lines[1].split('=')[1]}`
  }
  return out
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'baton-tls-node-'))
  tls('ca', 'create', '-dir', dir)
  tls('cert', 'create', '-server', '-dir', dir)
  tls('cert', 'create', '-client', '-dir', dir)
  tls('self-signed', 'create', '-dir', dir)
  fs.mkdirSync(file('other'))
  tls('ca', 'create', '-domain', 'other', '-dir', file('other'))
  fs.mkdirSync(file('capath'))
  fs.copyFileSync(file('other/other-agent-ca.pem'), file('capath/a-other.pem'))
  fs.copyFileSync(file('consul-agent-ca.pem'), file('capath/b-consul.pem'))
  const withTls = ['--https-port', '0', '--tls-ca', file('consul-agent-ca.pem')]
  const server = ['--tls-cert', file('dc1-server-consul-0.pem'), '--tls-key', file('dc1-server-consul-0-key.pem')]
  https = (await start([...withTls, ...server])).https
  mtls = (await start([...withTls, ...server, '--verify-incoming'])).https
  selfSigned = (await start([...withTls, '--tls-cert', file('self-signed.pem'), '--tls-key', file('self-signed-key.pem')])).https
  acl = (await start([
    '--acl-token', MANAGEMENT,
    '--acl-token-rules', `${READER}=key_prefix "jobs/" { policy = "read" } session_prefix "" { policy = "write" }`,
    '--acl-token-rules', `${NO_SESSION}=key_prefix "jobs/" { policy = "write" }`,
    '--acl-token-rules', `${LOCKER}=key_prefix "jobs/" { policy = "write" } session_prefix "" { policy = "write" }`,
  ], MANAGEMENT)).http
})

after(async () => {
  for (const p of procs) p.kill('SIGTERM')
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

/** A client configured from exactly these CONSUL_* variables (the rest unset), closed after the test. */
function clientWith(env) {
  for (const v of CONSUL_VARS) delete process.env[v]
  Object.assign(process.env, env)
  const c = new Client({ requestTimeoutMs: 10000 })
  for (const v of CONSUL_VARS) delete process.env[v]
  return sessionCheck.track(c)
}

async function roundTrip(c) {
  assert.equal(await c.kvPut('tls/node', 'over tls'), true)
  assert.deepEqual(await c.kvGet('tls/node'), Buffer.from('over tls'))
}

async function refusal(c) {
  const e = await c.kvGet('tls/node').then(
    () => assert.fail('expected a refusal'),
    (err) => err,
  )
  assert.ok(e instanceof BatonError, String(e))
  console.log(`refused as: ${e.message}`)
  return e
}

test('a server signed by the trusted CA is verified', async () => {
  await roundTrip(clientWith({ CONSUL_HTTP_ADDR: https, CONSUL_CACERT: file('consul-agent-ca.pem') }))
  await roundTrip(clientWith({
    CONSUL_HTTP_ADDR: https.replace('https://', ''),
    CONSUL_HTTP_SSL: 'true',
    CONSUL_CACERT: file('consul-agent-ca.pem'),
  }))
})

test('an unknown CA is refused, naming CONSUL_CACERT', async () => {
  let e = await refusal(clientWith({ CONSUL_HTTP_ADDR: https }))
  assert.equal(e.code, 'BATON_CONNECTION')
  assert.equal(e.transient, false)
  assert.match(e.message, /signed by a CA this client does not trust: set CONSUL_CACERT/)
  e = await refusal(clientWith({ CONSUL_HTTP_ADDR: https, CONSUL_CACERT: file('other/other-agent-ca.pem') }))
  assert.match(e.message, /signed by none of the CAs in CONSUL_CACERT=/)
})

test('a wrong name is refused; CONSUL_TLS_SERVER_NAME verifies against the right one', async () => {
  const ca = file('consul-agent-ca.pem')
  const e = await refusal(clientWith({ CONSUL_HTTP_ADDR: https, CONSUL_CACERT: ca, CONSUL_TLS_SERVER_NAME: 'consul.example.com' }))
  assert.equal(e.code, 'BATON_CONNECTION')
  assert.ok(e.message.includes('not valid for the name "consul.example.com" (it holds server.dc1.consul, localhost, 127.0.0.1)'), e.message)
  assert.ok(e.message.includes('set CONSUL_TLS_SERVER_NAME to a name the certificate holds'), e.message)
  await roundTrip(clientWith({ CONSUL_HTTP_ADDR: https, CONSUL_CACERT: ca, CONSUL_TLS_SERVER_NAME: 'server.dc1.consul' }))
})

test('CONSUL_HTTP_SSL_VERIFY=false and CONSUL_CAPATH', async () => {
  await roundTrip(clientWith({ CONSUL_HTTP_ADDR: https, CONSUL_HTTP_SSL_VERIFY: 'false' }))
  await roundTrip(clientWith({ CONSUL_HTTP_ADDR: https, CONSUL_CAPATH: file('capath') }))
})

test('a CA certificate used as the server\'s is explained', async () => {
  const e = await refusal(clientWith({ CONSUL_HTTP_ADDR: selfSigned, CONSUL_CACERT: file('self-signed.pem') }))
  assert.match(e.message, /CaUsedAsEndEntity/)
  assert.ok(e.message.includes('the server presents a CA certificate (CA:TRUE'), e.message)
})

test('mTLS without a client certificate says what to set; with one it works', async () => {
  const ca = file('consul-agent-ca.pem')
  const e = await refusal(clientWith({ CONSUL_HTTP_ADDR: mtls, CONSUL_CACERT: ca }))
  assert.equal(e.code, 'BATON_CONNECTION')
  assert.ok(e.message.includes('set CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY'), e.message)
  await roundTrip(clientWith({
    CONSUL_HTTP_ADDR: mtls,
    CONSUL_CACERT: ca,
    CONSUL_CLIENT_CERT: file('dc1-client-consul-0.pem'),
    CONSUL_CLIENT_KEY: file('dc1-client-consul-0-key.pem'),
  }))
})

test('a lock and an election round trip over mTLS', async () => {
  const env = {
    CONSUL_HTTP_ADDR: mtls,
    CONSUL_CACERT: file('consul-agent-ca.pem'),
    CONSUL_CLIENT_CERT: file('dc1-client-consul-0.pem'),
    CONSUL_CLIENT_KEY: file('dc1-client-consul-0-key.pem'),
    CONSUL_TLS_SERVER_NAME: 'server.dc1.consul',
  }
  const a = clientWith(env)
  const b = clientWith(env)
  const la = a.lock('tls/node-lock')
  const lb = b.lock('tls/node-lock')
  await la.acquire({ timeoutMs: 20000 })
  assert.equal(la.isHeld(), true)
  assert.equal(await lb.tryAcquire({ timeoutMs: 0 }), false)
  assert.equal(await la.release(), true)
  await lb.acquire({ timeoutMs: 20000 })
  assert.equal(await lb.release(), true)
  const e = a.election('tls/node-leader')
  await e.campaign('node', { timeoutMs: 20000 })
  const leader = await b.leader('tls/node-leader')
  assert.deepEqual(leader.value, Buffer.from('node'))
  assert.equal(await e.resign(), true)
  assert.equal(await b.leader('tls/node-leader'), null)
})

async function lockRefusal(token, key = 'jobs/node') {
  const env = { CONSUL_HTTP_ADDR: acl }
  if (token !== undefined) env.CONSUL_HTTP_TOKEN = token
  const c = clientWith(env)
  const e = await c.lock(key).acquire({ timeoutMs: 20000 }).then(
    () => assert.fail('expected a refusal'),
    (err) => err,
  )
  console.log(`refused as: ${e.message}`)
  assert.ok(e instanceof BatonError, String(e))
  assert.equal(e.code, 'BATON_PERMISSION_DENIED')
  for (const secret of [MANAGEMENT, READER, NO_SESSION, LOCKER, UNKNOWN]) {
    for (const text of [e.message, e.stack, e.serverText ?? '', JSON.stringify(e)]) {
      assert.ok(!text.includes(secret), `${secret} shown in ${text}`)
    }
  }
  return e.message
}

test('ACL denials name the permission, the key or node, and what to set', async () => {
  const ok = clientWith({ CONSUL_HTTP_ADDR: acl, CONSUL_HTTP_TOKEN: LOCKER })
  const lock = ok.lock('jobs/node-ok')
  await lock.acquire({ timeoutMs: 20000 })
  assert.equal(await lock.release(), true)

  let t = await lockRefusal(READER)
  assert.ok(t.includes('key:write on "jobs/node"') && !t.includes('session:write'), t)
  t = await lockRefusal(NO_SESSION)
  assert.ok(t.includes('lacks permission \'session:write\' on "baton-dev"'), t)
  assert.ok(t.includes('the ACL token lacks session:write on the node "baton-dev"'), t)
  t = await lockRefusal(undefined)
  assert.ok(t.includes('no ACL token was sent') && t.includes('set CONSUL_HTTP_TOKEN'), t)
  t = await lockRefusal(UNKNOWN)
  assert.ok(t.includes('ACL not found') && t.includes('does not know this ACL token'), t)
})
