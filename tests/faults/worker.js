// The Node worker of the fault harness (tests/faults/run.py starts it; the protocol is in
// tests/faults/README.md, shared with worker.rs, worker.c and worker.py).
//
//   worker.js NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [LIMIT]
//
// Loops session -> acquire KEY -> 200 ms of fenced increments of COUNTER -> end, printing
// `@event t=<CLOCK_MONOTONIC ns> ...` lines (`process.hrtime.bigint()`), until stdin ends or
// says `quit`; then it releases, closes the client (destroying its session), prints `@bye`.
// With LIMIT it holds a slot of the semaphore on KEY (a prefix) instead, checking every 10 ms
// during the 200 ms that it still does; COUNTER is unused.
'use strict'

const path = require('node:path')
const readline = require('node:readline')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require(path.join(__dirname, '..', '..', 'bindings', 'node'))

const HOLD_NS = 200_000_000n
const WORK_MS = 20
const SLOT_CHECK_MS = 10 // how often a semaphore holder looks whether it still holds its slot
const ACQUIRE_TIMEOUT_MS = 1000
const REQUEST_TIMEOUT_MS = 2000
// guardedPut refused because the session no longer holds the key: the check-session failed
// (BATON_CONFLICT, "stale sequencer ...") or Consul called the session invalid.
const FENCED = new Set(['BATON_CONFLICT', 'BATON_SESSION_INVALIDATED'])

const now = () => process.hrtime.bigint()
// One line per event, `t` first. Pipes are asynchronous in Node on POSIX, but libuv writes at
// once when nothing is queued, so the line is in the pipe when write() returns; whatever is
// still queued at exit is flushed because the process ends by draining its loop, never by
// process.exit().
const say = (name, t, fields = '') => process.stdout.write(`@${name} t=${t}${fields}\n`)
const what = (e) => {
  const text = e && e.code ? `${e.code}: ${e.message}` : String((e && e.message) || e)
  return text.replace(/\s+/g, ' ').trim()
}
const error = (e) => say('error', now(), ` what=${what(e)}`)

let stopping = false
let input = null
function stop() {
  if (stopping) return
  stopping = true
  // Nothing more to read: let stdin stop holding the event loop open.
  input?.close()
  process.stdin.destroy()
}

// The end of a holding (of a Lock or a Semaphore): `t` as the protocol defines it, and why.
async function endHolding(held, holding, why, t, deadline) {
  let err = null
  if (why === 'released') {
    try {
      await held.release()
    } catch (e) {
      err = e
    }
  }
  say('end', t, ` token=${holding.token} why=${why} deadline=${deadline}`)
  if (err) error(err)
}

// 3.-4. Hold for 200 ms, doing the mode's `work` while still held, then end.
async function hold(session, held, holding, work) {
  let deadline = 0n
  // The session's deadline, sampled every 5 ms beside the work (not only between two pieces of
  // it: one blocked across a renew, a partition's timed-out request, would leave `deadline` a
  // renew behind the real one); a lost session has no time left and is not sampled.
  const sample = () => {
    const t0 = now()
    const left = session.timeLeftMs()
    if (left !== null && left > 0) {
      const d = t0 + BigInt(Math.floor(left * 1e6))
      if (d > deadline) deadline = d
    }
  }
  const sampler = setInterval(sample, 5)
  try {
    for (;;) {
      const isHeld = held.isHeld()
      const seen = now()
      if (!isHeld || holding.lostAt !== null) {
        let t = holding.lostAt ?? seen
        if (!isHeld && seen < t) t = seen
        return await endHolding(held, holding, 'lost', t, deadline)
      }
      if (stopping || seen - holding.start >= HOLD_NS) {
        return await endHolding(held, holding, 'released', now(), deadline)
      }
      sample()
      await work(holding)
    }
  } finally {
    clearInterval(sampler)
  }
}

// One fenced increment of `counter`: read, work, write `value + 1` without checking again.
async function increment(client, counter, holding) {
  let value
  try {
    const buf = await client.kvGet(counter)
    const text = buf ? buf.toString('ascii').trim() : ''
    value = text === '' ? 0 : Number(text)
    if (!Number.isSafeInteger(value)) throw new Error(`${counter} holds ${JSON.stringify(text)}, not a count`)
  } catch (e) {
    error(e)
    await sleep(WORK_MS)
    return
  }
  await sleep(WORK_MS) // the work: a freeze here leaves a stale holder about to write
  const next = value + 1
  try {
    await client.guardedPut(holding.sequencer, counter, String(next))
    say('inc', now(), ` value=${next} token=${holding.token}`)
  } catch (e) {
    if (FENCED.has(e && e.code)) {
      say('fenced', now(), ` value=${next} token=${holding.token}`)
    } else {
      say('incunk', now(), ` value=${next} token=${holding.token} err=${(e && (e.code || e.name)) || 'UNKNOWN'}`)
    }
  }
}

// What the two modes contend for, how a holding starts (`@start`; false: nothing to hold after
// all) and the work done while holding it.
function lockMode(client, name, key, counter) {
  return {
    make: (session) => client.lock(key, { value: name, session }),
    start(lock, holding, session) {
      const seq = lock.sequencer
      if (!seq) {
        // Lost between the grant and this line: never held as far as this worker knows.
        error(new Error('the lock was lost before its sequencer could be read'))
        return false
      }
      holding.sequencer = seq
      holding.token = String(seq.token)
      say('start', holding.start, ` token=${seq.token} lock_index=${seq.lockIndex} session=${session.id}`)
      return true
    },
    work: (holding) => increment(client, counter, holding),
  }
}

function semaphoreMode(client, name, prefix, limit) {
  let holdings = 0 // a semaphore has no sequencer: the token counts this worker's holdings
  return {
    make: (session) => client.semaphore(prefix, limit, { value: name, session }),
    start(_sem, holding, session) {
      holdings += 1
      holding.token = String(holdings)
      say('start', holding.start, ` token=${holding.token} session=${session.id}`)
      return true
    },
    work: () => sleep(SLOT_CHECK_MS),
  }
}

async function main(argv) {
  const limit = argv.length === 6 ? Number(argv[5]) : null // a semaphore's limit: semaphore mode
  if ((argv.length !== 5 && argv.length !== 6) || !(limit === null || (Number.isSafeInteger(limit) && limit > 0))) {
    process.stderr.write('usage: worker.js NAME KEY COUNTER TTL_MS LOCK_DELAY_MS [LIMIT]\n')
    process.exitCode = 2
    return
  }
  const [name, key, counter] = argv
  const ttlMs = Number(argv[3])
  const lockDelayMs = Number(argv[4])

  input = readline.createInterface({ input: process.stdin })
  input.on('line', (line) => {
    if (line.trim() === 'quit') stop()
  })
  input.on('close', stop)
  process.stdout.on('error', stop) // the reader is gone (EPIPE): nobody to report to

  const client = new Client({ requestTimeoutMs: REQUEST_TIMEOUT_MS })
  const mode = limit === null ? lockMode(client, name, key, counter) : semaphoreMode(client, name, key, limit)
  let session = null
  try {
    while (!stopping) {
      // 1. Session.
      if (!session || !session.isValid()) {
        session = null
        try {
          session = await client.createSession({ name: `faults-${name}`, ttlMs, lockDelayMs, behavior: 'release' })
        } catch (e) {
          error(e)
          await sleep(100)
          continue
        }
        say('session', now(), ` id=${session.id}`)
      }

      // 2. Acquire. A Lock (Semaphore) per attempt: its 'lost' events can only be about its
      // own holding, so a late notification of an earlier holding never counts for this one.
      const held = mode.make(session)
      const holding = { start: 0n, lostAt: null, sequencer: null, token: '' }
      held.on('lost', () => {
        if (holding.lostAt === null) holding.lostAt = now()
      })
      try {
        await held.acquire({ timeoutMs: ACQUIRE_TIMEOUT_MS })
      } catch (e) {
        if (e && e.code === 'BATON_TIMEOUT') continue
        error(e)
        await sleep(50)
        continue
      }
      holding.start = now()
      if (!mode.start(held, holding, session)) continue

      // 3.-4. Hold, then end.
      await hold(session, held, holding, mode.work)
      if (stopping) break
      await sleep(Math.floor(Math.random() * 31))
    }
  } finally {
    // 5. Quit.
    try {
      await client.close(5000)
    } catch (e) {
      error(e)
    }
  }
  say('bye', now())
}

main(process.argv.slice(2)).catch((e) => {
  process.stderr.write(`faults worker.js: ${(e && e.stack) || e}\n`)
  process.exitCode = 1
  stop()
})
