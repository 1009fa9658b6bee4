// The Node worker of `make demo` and of the cross-language test (demo/run.py and
// tests/cross/run.py start it; `require('consul-baton')` is bindings/node).
//
//   worker.js leader NAME KEY TTL_MS LOCK_DELAY_MS
//   worker.js semaphore NAME PREFIX LIMIT ROUNDS HOLD_MS TTL_MS
//   worker.js contend NAME LOCK_KEY SEM_PREFIX ROUNDS
//
// Prints `@event t=<unix ms> ...` lines. SIGTERM aborts the pending wait (AbortSignal):
// a leader resigns, anyone else stops; the client then closes, destroying its session.
'use strict'

const path = require('node:path')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require(path.join(__dirname, '..', 'bindings', 'node'))

const stop = new AbortController()
process.on('SIGTERM', () => stop.abort())
process.on('SIGINT', () => stop.abort())

const event = (name, fields = {}) => {
  const extra = Object.entries(fields).map(([k, v]) => ` ${k}=${v}`).join('')
  console.log(`@${name} t=${Date.now()}${extra}`)
}
const aborted = (e) => e && e.name === 'AbortError'

async function leader(client, name, key, ttlMs, lockDelayMs) {
  const session = await client.createSession({ name: `demo-${name}`, ttlMs, lockDelayMs })
  const election = client.election(key, { session })
  event('campaigning')
  try {
    await election.campaign(name, { signal: stop.signal })
  } catch (e) {
    if (aborted(e)) return event('stopped')
    throw e
  }
  event('leading', { token: election.sequencer.token })
  try {
    const why = await election.waitLost({ signal: stop.signal })
    event('lost', { reason: why })
    process.exitCode = 1
  } catch (e) {
    if (!aborted(e)) throw e
    await election.resign()
    event('resigned')
  }
}

async function semaphore(client, name, prefix, limit, rounds, holdMs, ttlMs) {
  const session = await client.createSession({ name: `demo-${name}`, ttlMs, lockDelayMs: 0, behavior: 'delete' })
  const sem = client.semaphore(prefix, limit, { value: name, session })
  try {
    for (let i = 0; i < rounds; i++) {
      await sem.acquire({ signal: stop.signal })
      event('slot', { state: 'acquired' })
      await sleep(holdMs)
      event('slot', { state: 'releasing' })
      await sem.release()
    }
    event('done')
  } catch (e) {
    if (!aborted(e)) throw e
    event('stopped')
  }
}

async function contend(client, name, key, prefix, rounds) {
  // Microseconds of CLOCK_MONOTONIC (libuv's hrtime), the clock every contender of the
  // cross-language test reads: the wall clock may be stepped or slewed during a run, and a
  // wall-clock origin taken at start plus monotonic time drifts from the others' reads.
  const us = () => process.hrtime.bigint() / 1000n
  const value = `${name}:${process.pid}`
  const lock = client.lock(key, { value })
  for (let i = 0; i < rounds; i++) {
    await lock.acquire({ timeoutMs: 60000 })
    const start = us()
    const token = lock.sequencer.token
    await sleep(1)
    const end = us()
    await lock.release()
    event('hold', { kind: 'lock', start, end, token })
    const seen = await client.leader(key)
    if (seen) event('saw', { value: seen.value.toString(), token: seen.token })
  }
  const sem = client.semaphore(prefix, 2, { value })
  for (let i = 0; i < Math.floor(rounds / 2); i++) {
    await sem.acquire({ timeoutMs: 60000 })
    const start = us()
    await sleep(2)
    const end = us()
    await sem.release()
    event('hold', { kind: 'sem', start, end })
  }
  event('done')
}

// What the client counted, for the demo's closing summary: one `@metrics` line.
function reportMetrics(client, mode) {
  const m = client.metrics()
  const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0)
  const total = (by) => sum(Object.values(by).map(sum))
  const each = (by, k) => sum(Object.values(by).map((o) => o[k]))
  event('metrics', {
    mode,
    acquired: each(m.acquires, 'acquired'),
    timed_out: each(m.acquires, 'timed_out'),
    losses: total(m.losses),
    renewals: m.renewals.ok,
    renewals_failed: m.renewals.failed,
    requests: total(m.requests),
    refused_429: each(m.requests, '429')
  })
}

async function main(argv) {
  const [mode, name, ...rest] = argv
  const client = new Client()
  try {
    if (mode === 'leader' && rest.length === 3) {
      await leader(client, name, rest[0], Number(rest[1]), Number(rest[2]))
    } else if (mode === 'semaphore' && rest.length === 5) {
      const [prefix, limit, rounds, holdMs, ttlMs] = rest
      await semaphore(client, name, prefix, Number(limit), Number(rounds), Number(holdMs), Number(ttlMs))
    } else if (mode === 'contend' && rest.length === 3) {
      await contend(client, name, rest[0], rest[1], Number(rest[2]))
    } else {
      console.error('usage: worker.js leader NAME KEY TTL_MS LOCK_DELAY_MS | semaphore NAME PREFIX LIMIT ROUNDS HOLD_MS TTL_MS | contend NAME LOCK_KEY SEM_PREFIX ROUNDS')
      process.exitCode = 2
    }
  } finally {
    await client.close(5000)
    if (mode === 'leader' || mode === 'semaphore') reportMetrics(client, mode)
  }
}

main(process.argv.slice(2)).catch((e) => {
  console.error(`${e.code || e.name}: ${e.message}`)
  process.exitCode = 1
})
