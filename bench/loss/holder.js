// The Node holder of `make bench-loss` (bench/loss/run.py drives it; same protocol as holder.rs).
//
//   holder.js ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS
//
// Prints READY once connected; for each `acquire` line on stdin: creates a session, acquires KEY
// with it, watches the loss signals, prints HELD, and once the holding is lost prints
// `RESULT {json}` with CLOCK_MONOTONIC nanoseconds (`process.hrtime.bigint()`; null: missing
// SIGNAL_TIMEOUT_MS after the deadline) of:
//
//   is_held    the first `lock.isHeld()` false, polled every ~1 ms (setInterval);
//   callback   the lock's 'lost' event;
//   wait_lost  the `lock.waitLost()` promise settling;
//   token      the holding's `lock.lostSignal` 'abort' event.
//
// All four are observed on the event loop, so each includes the loop's delay in running it.
// The deadline: the poll reads `session.timeLeftMs()` while held; each reading gives a lower
// bound (clock read before the call + time left) and the largest is kept (the deadline only
// moves forward). `quit` or the end of stdin closes the client.
'use strict'

const path = require('node:path')
const readline = require('node:readline')
const { Client } = require(path.join(__dirname, '..', '..', 'bindings', 'node'))

const SIGNALS = ['is_held', 'callback', 'wait_lost', 'token']
const now = () => process.hrtime.bigint()
const say = (line) => process.stdout.write(line + '\n')

async function episode(client, key, ttlMs, lockDelayMs, signalTimeoutNs, n) {
  const session = await client.createSession({ name: 'bench-loss-node', ttlMs, lockDelayMs })
  const lock = client.lock(key, { session })
  const at = {}
  const reason = {}
  let deadline = 0n
  let wake = () => {}
  const record = (name, t, why = '') => {
    if (at[name] !== undefined) return
    at[name] = t
    reason[name] = why
    wake()
  }
  lock.on('lost', (why) => record('callback', now(), why))
  await lock.acquire({ timeoutMs: 60000 })
  const acquired = now()
  const stop = new AbortController()
  lock.lostSignal.addEventListener('abort', () => record('token', now()), { once: true })
  lock
    .waitLost({ signal: stop.signal })
    .then((why) => record('wait_lost', now(), why))
    .catch((e) => {
      if (e.name !== 'AbortError') throw e
    })
  const poll = setInterval(() => {
    const t0 = now()
    if (!lock.isHeld()) {
      record('is_held', now())
      clearInterval(poll)
      return
    }
    const left = session.timeLeftMs()
    if (left) {
      const est = t0 + BigInt(Math.floor(left * 1e6))
      if (est > deadline) deadline = est
    }
  }, 1)
  say('HELD')

  // Until the first signal the driver bounds the wait; after it, every other signal has
  // SIGNAL_TIMEOUT_MS past the deadline.
  await new Promise((resolve) => {
    wake = resolve
    if (Object.keys(at).length) resolve()
  })
  const first = Object.values(at).reduce((a, b) => (a < b ? a : b))
  const bound = (deadline > first ? deadline : first) + signalTimeoutNs
  while (Object.keys(at).length < SIGNALS.length) {
    const leftMs = Number(bound - now()) / 1e6
    if (leftMs <= 0) break
    await new Promise((resolve) => {
      wake = resolve
      setTimeout(resolve, Math.ceil(leftMs))
    })
  }
  clearInterval(poll)
  stop.abort()
  const result = { lang: 'node', episode: n, acquired: acquired.toString(), deadline: deadline ? deadline.toString() : null }
  for (const s of SIGNALS) result[s] = at[s] === undefined ? null : at[s].toString()
  result.callback_reason = reason.callback ?? ''
  result.wait_lost_reason = reason.wait_lost ?? ''
  // Nanosecond counts beyond 2^53 stay exact as strings; the driver reads both forms.
  say('RESULT ' + JSON.stringify(result))
}

async function main() {
  const args = process.argv.slice(2)
  if (args.length !== 5) {
    console.error('usage: holder.js ADDR KEY TTL_MS LOCK_DELAY_MS SIGNAL_TIMEOUT_MS')
    process.exit(2)
  }
  const [addr, key] = args
  const [ttlMs, lockDelayMs, timeoutMs] = args.slice(2).map(Number)
  const client = new Client({ address: addr })
  say('READY')
  let n = 0
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const cmd = line.trim()
    if (cmd === 'quit') break
    if (cmd !== 'acquire') throw new Error(`unknown command ${JSON.stringify(cmd)}`)
    n += 1
    await episode(client, key, ttlMs, lockDelayMs, BigInt(timeoutMs) * 1000000n, n)
  }
  await client.close()
}

main().catch((e) => {
  console.error('bench-loss holder.js:', e)
  process.exit(1)
})
