'use strict'
// A lock whose session is bound to an HTTP check is lost when the service stops answering
// (issue 43): the server probes the check as a Consul agent does, the check turns critical,
// the session is invalidated and the lock's 'lost' event fires.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { once } = require('node:events')
const http = require('node:http')
const { randomUUID } = require('node:crypto')
const { performance } = require('node:perf_hooks')
const { useServer, freshKey, request, waitFor } = require('./helpers')

const PATIENCE_MS = 30000 // a bound for "eventually", not a speed assertion
const INTERVAL_MS = 1000 // the check's interval (Consul's minimum)

const fx = useServer()
let addr
beforeEach(() => {
  addr = fx.addr
})

async function checkStatus(id) {
  const r = await request(addr, 'GET', '/v1/agent/checks', undefined, { timeoutMs: 10000 })
  assert.equal(r.status, 200, r.body)
  return JSON.parse(r.body)[id]?.Status
}

test('a lock bound to an HTTP check is lost when the service stops answering', async () => {
  let code = 200
  const svc = http.createServer((req, res) => {
    res.writeHead(code, { 'Content-Length': 2, Connection: 'close' })
    res.end('ok')
  })
  await new Promise((resolve) => svc.listen(0, '127.0.0.1', resolve))
  const id = `baton-node-http-${process.pid}-${randomUUID().slice(0, 8)}`
  try {
    const def = { ID: id, Name: id, Interval: '1s', Timeout: '1s', HTTP: `http://127.0.0.1:${svc.address().port}/health` }
    const r = await request(addr, 'PUT', '/v1/agent/check/register', JSON.stringify(def), { timeoutMs: 10000 })
    assert.equal(r.status, 200, r.body)
    await waitFor('the HTTP check passes', async () => (await checkStatus(id)) === 'passing', PATIENCE_MS)
    const a = fx.client()
    const session = await a.createSession({ ttlMs: 10000, lockDelayMs: 0, nodeChecks: ['serfHealth', id], name: 'http-bound' })
    const lock = a.lock(freshKey('http-bound-lock'), { session })
    await lock.acquire({ timeoutMs: PATIENCE_MS })
    const lost = once(lock, 'lost').then(([why]) => ({ why, at: performance.now() }))
    const failedAt = performance.now()
    code = 500
    let timer
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no 'lost' within ${PATIENCE_MS} ms`)), PATIENCE_MS)
    })
    const { why, at } = await Promise.race([lost, timeout]).finally(() => clearTimeout(timer))
    assert.ok(['session_lost', 'key_changed'].includes(why), String(why))
    const after = at - failedAt
    console.log(`HTTP check every ${INTERVAL_MS} ms: lock lost ${Math.round(after)} ms after the service answered 500`)
    assert.ok(after <= 2 * INTERVAL_MS + 1000, `lost ${after} ms after the service failed`)
    assert.equal(lock.isHeld(), false)
    assert.equal(await checkStatus(id), 'critical')
  } finally {
    await request(addr, 'PUT', `/v1/agent/check/deregister/${id}`, '', { timeoutMs: 10000 })
    await new Promise((resolve) => svc.close(resolve))
  }
})
