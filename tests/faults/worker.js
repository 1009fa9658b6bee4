// The Node worker of the fault harness (tests/faults/run.py starts it; the protocol is in
// tests/faults/README.md, shared with worker.rs, worker.c and worker.py).
//
//   worker.js NAME KEY COUNTER TTL_MS LOCK_DELAY_MS
//
// Loops session -> acquire KEY -> 200 ms of fenced increments of COUNTER -> end, printing
// `@event t=<CLOCK_MONOTONIC ns> ...` lines (`process.hrtime.bigint()`), until stdin ends or
// says `quit`; then it releases, closes the client (destroying its session), prints `@bye`.
'use strict'

const path = require('node:path')
const readline = require('node:readline')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require(path.join(__dirname, '..', '..', 'bindings', 'node'))

const HOLD_NS = 200_000_000n
const WORK_MS = 20
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

// The end of a holding: `t` as the protocol defines it, and why.
async function endHolding(lock, holding, why, t, deadline) {
  let err = null
  if (why === 'released') {
    try {
      await lock.release()
    } catch (e) {
      err = e
    }
  }
  say('end', t, ` token=${holding.token} why=${why} deadline=${deadline}`)
  if (err) error(err)
}

async function hold(client, session, lock, holding, counter) {
  let deadline = 0n
  for (;;) {
    const held = lock.isHeld()
    const seen = now()
    if (!held || holding.lostAt !== null) {
      let t = holding.lostAt ?? seen
      if (!held && seen < t) t = seen
      return endHolding(lock, holding, 'lost', t, deadline)
    }
    if (stopping || seen - holding.start >= HOLD_NS) {
      return endHolding(lock, holding, 'released', now(), deadline)
    }
    const t0 = now()
    const left = session.timeLeftMs()
    if (left !== null) {
      const d = t0 + BigInt(Math.floor(left * 1e6))
      if (d > deadline) deadline = d
    }
    let value
    try {
      const buf = await client.kvGet(counter)
      const text = buf ? buf.toString('ascii').trim() : ''
      value = text === '' ? 0 : Number(text)
      if (!Number.isSafeInteger(value)) throw new Error(`${counter} holds ${JSON.stringify(text)}, not a count`)
    } catch (e) {
      error(e)
      await sleep(WORK_MS)
      continue
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
}

async function main(argv) {
  if (argv.length !== 5) {
    process.stderr.write('usage: worker.js NAME KEY COUNTER TTL_MS LOCK_DELAY_MS\n')
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

      // 2. Acquire. A Lock per attempt: its 'lost' events can only be about its own holding,
      // so a late notification of an earlier holding never counts for this one.
      const lock = client.lock(key, { value: name, session })
      const holding = { start: 0n, lostAt: null, sequencer: null, token: '' }
      lock.on('lost', () => {
        if (holding.lostAt === null) holding.lostAt = now()
      })
      try {
        await lock.acquire({ timeoutMs: ACQUIRE_TIMEOUT_MS })
      } catch (e) {
        if (e && e.code === 'BATON_TIMEOUT') continue
        error(e)
        await sleep(50)
        continue
      }
      holding.start = now()
      const seq = lock.sequencer
      if (!seq) {
        // Lost between the grant and this line: never held as far as this worker knows.
        error(new Error('the lock was lost before its sequencer could be read'))
        continue
      }
      holding.sequencer = seq
      holding.token = String(seq.token)
      say('start', holding.start, ` token=${seq.token} lock_index=${seq.lockIndex} session=${session.id}`)

      // 3.-4. Hold, then end.
      await hold(client, session, lock, holding, counter)
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
