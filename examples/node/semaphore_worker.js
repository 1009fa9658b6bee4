'use strict'
// Semaphore-limited workers, one process each: at most LIMIT of them at work at any moment.
//
// Run without arguments it is the coordinator: it starts WORKERS copies of itself as worker
// processes (`semaphore_worker.js worker <n> <prefix>`). Each worker takes a slot of the
// semaphore, does two jobs while watching the slot's `lostSignal`, and prints one JSON line
// per job with when (wall clock, ms) it held the slot. The coordinator checks from those
// intervals that no more than LIMIT workers ever worked at once. Exits 0 on success.
//
//   node examples/node/semaphore_worker.js     (CONSUL_HTTP_ADDR, or a dev server it starts)
const { spawn } = require('node:child_process')
const readline = require('node:readline')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require('../../bindings/node')
const { target, runPrefix } = require('./target')

const LIMIT = 2
const WORKERS = 5
const JOBS = 2

async function worker(n, prefix) {
  const client = new Client()
  const slots = client.semaphore(prefix, LIMIT, { value: `worker-${n}` })
  try {
    for (let job = 1; job <= JOBS; job++) {
      await slots.acquire({ timeoutMs: 60000 })
      const start = Date.now()
      let abandoned = false
      try {
        await sleep(150, undefined, { signal: slots.lostSignal })
      } catch (e) {
        if (e.name !== 'AbortError') throw e
        abandoned = true
      }
      const end = Date.now()
      await slots.release()
      console.log(JSON.stringify({ worker: n, job, start, end, abandoned }))
    }
  } finally {
    await client.close()
  }
}

async function coordinator() {
  const t = await target()
  const prefix = `${runPrefix('semaphore-worker')}/slots`
  const env = t.address ? { ...process.env, CONSUL_HTTP_ADDR: t.address } : process.env
  const jobs = []
  try {
    await Promise.all(
      Array.from({ length: WORKERS }, async (_, i) => {
        const n = i + 1
        const child = spawn(process.execPath, [__filename, 'worker', String(n), prefix], {
          env,
          stdio: ['ignore', 'pipe', 'inherit'],
        })
        readline.createInterface({ input: child.stdout }).on('line', (line) => {
          const r = JSON.parse(line)
          jobs.push(r)
          console.log(`worker ${r.worker}: job ${r.job} held a slot for ${r.end - r.start} ms${r.abandoned ? ' (slot lost, abandoned)' : ''}`)
        })
        const code = await new Promise((resolve) => child.on('exit', resolve))
        if (code !== 0) throw new Error(`worker ${n} exited with ${code}`)
      }),
    )
  } finally {
    await t.stop()
  }
  // The most intervals open at once; at equal times an end comes before a start (a slot
  // given back at t and taken at t did not overlap).
  const events = jobs.flatMap((j) => [[j.start, 1], [j.end, -1]]).sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let now = 0
  let most = 0
  for (const [, d] of events) {
    now += d
    most = Math.max(most, now)
  }
  console.log(`done: ${jobs.length} jobs by ${WORKERS} worker processes, at most ${most} at work at once (limit ${LIMIT})`)
  if (jobs.length !== WORKERS * JOBS || most > LIMIT || most === 0) process.exitCode = 1
}

const main = process.argv[2] === 'worker' ? () => worker(Number(process.argv[3]), process.argv[4]) : coordinator
main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
