// The Node worker of `make bench-scale` (bench/scale/run.py drives it; same protocol as
// worker.py and the Rust worker, src/main.rs):
//
//   worker.js ADDR pending N KEY TIMEOUT   N acquires of KEY (held by another process) with
//                                          TIMEOUT seconds each, all pending at once
//   worker.js ADDR held N NAMES HOLD       N locks held for HOLD seconds, named by NAMES:
//                                          prefixed, flat or segments (see run.py)
//
// Prints one line, `RESULT {json}`: threads of the process (before, peak, after close),
// sockets, RSS in KiB, event-loop lag (perf_hooks, 10 ms resolution) while pending, and what
// happened to the calls.
'use strict'

const fs = require('node:fs')
const path = require('node:path')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { Client } = require(path.join(__dirname, '..', '..', 'bindings', 'node'))

const threads = () => fs.readdirSync('/proc/self/task').length
const sockets = () =>
  fs.readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')
    } catch {
      return false
    }
  }).length
const rssKib = () => {
  const m = /VmRSS:\s+(\d+)/.exec(fs.readFileSync('/proc/self/status', 'utf8'))
  return m ? Number(m[1]) : 0
}
// Threads by name (a name's trailing digits dropped): where the threads are.
const threadNames = () => {
  const by = {}
  for (const t of fs.readdirSync('/proc/self/task')) {
    try {
      const n = fs.readFileSync(`/proc/self/task/${t}/comm`, 'utf8').trim().replace(/[-_ ]?\d+$/, '')
      by[n] = (by[n] || 0) + 1
    } catch {}
  }
  return by
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
const pct = (sorted, p) => (sorted.length ? sorted[Math.round((sorted.length - 1) * p)] : 0)

async function pending(addr, n, key, timeout) {
  const c = new Client({ address: addr })
  const warm = c.lock(key + '-warm')
  await warm.acquire({ timeoutMs: 10000 })
  await warm.release()
  const before = { threads: threads(), rss: rssKib() }
  const locks = Array.from({ length: n }, () => c.lock(key))
  const ends = []
  const started = performance.now()
  const calls = locks.map(async (lock) => {
    const t0 = performance.now()
    let got
    try {
      got = await lock.acquire({ timeoutMs: timeout * 1000 })
    } catch (e) {
      // A timed-out acquire rejects with BATON_TIMEOUT in Node.
      if (e.code !== 'BATON_TIMEOUT') throw e
      got = false
    }
    ends.push(performance.now() - t0 - timeout * 1000)
    return got
  })
  const startSecs = (performance.now() - started) / 1000
  let peakThreads = threads()
  let peakRss = rssKib()
  const h = monitorEventLoopDelay({ resolution: 10 })
  h.enable()
  const until = performance.now() + Math.max(500, timeout * 1000 - 1000)
  while (performance.now() < until) {
    await sleep(100)
    peakThreads = Math.max(peakThreads, threads())
    peakRss = Math.max(peakRss, rssKib())
  }
  h.disable()
  const got = await Promise.all(calls)
  const heldAfter = locks.filter((l) => l.isHeld()).length
  await c.close()
  ends.sort((a, b) => a - b)
  const lagMs = (ns) => Math.max(0, ns / 1e6 - 10)
  return {
    lang: 'node', mode: 'pending', n,
    threads_before: before.threads, threads_peak: peakThreads, threads_after: threads(),
    rss_before_kib: before.rss, rss_peak_kib: peakRss,
    rss_per_call_kib: (peakRss - before.rss) / n,
    start_secs: startSecs,
    acquired: got.filter(Boolean).length, held_after: heldAfter,
    end_late_p50_ms: pct(ends, 0.5), end_late_max_ms: ends[ends.length - 1],
    lag_p99_ms: lagMs(h.percentile(99)), lag_max_ms: lagMs(h.max),
  }
}

function keyName(names, run, i) {
  if (names === 'prefixed') return `scale/${run}/k-${i}`
  if (names === 'flat') return `${run}-k-${i}`
  if (names === 'random') return require('node:crypto').randomUUID().replaceAll('-', '')
  return `${run}-${i}/lock`
}

async function held(addr, n, names, hold) {
  const run = `js${process.pid}`
  const c = new Client({ address: addr })
  const threadsBefore = threads()
  const locks = Array.from({ length: n }, (_, i) => c.lock(keyName(names, run, i)))
  let failed = 0
  let started = performance.now()
  for (const l of locks) {
    try {
      if (!(await l.acquire({ timeoutMs: 30000 }))) failed++
    } catch (e) {
      failed++
      console.error(`acquire failed: ${e.message}`)
    }
  }
  const acquireSecs = (performance.now() - started) / 1000
  let peakThreads = threads()
  let peakNames = threadNames()
  let peakSockets = sockets()
  let peakRss = rssKib()
  console.log('HOLDING')
  const end = performance.now() + hold * 1000
  while (performance.now() < end) {
    await sleep(200)
    if (threads() > peakThreads) peakNames = threadNames()
    peakThreads = Math.max(peakThreads, threads())
    peakSockets = Math.max(peakSockets, sockets())
    peakRss = Math.max(peakRss, rssKib())
  }
  console.log('RELEASING')
  const lost = locks.filter((l) => !l.isHeld()).length - failed
  let releaseFailed = 0
  started = performance.now()
  for (const l of locks) {
    try {
      await l.release()
    } catch (e) {
      releaseFailed++
      console.error(`release failed: ${e.message}`)
    }
  }
  const releaseSecs = (performance.now() - started) / 1000
  await c.close()
  return {
    lang: 'node', mode: 'held', n, names, hold_secs: hold,
    threads_before: threadsBefore, threads_peak: peakThreads, threads_after: threads(),
    sockets_peak: peakSockets, rss_peak_kib: peakRss, thread_names: peakNames,
    acquire_failed: failed, lost, release_failed: releaseFailed,
    acquire_secs: acquireSecs, release_secs: releaseSecs,
  }
}

async function main() {
  const [addr, mode, nText, arg, num] = process.argv.slice(2)
  const modes = { pending, held }
  if (num === undefined || !modes[mode]) {
    console.error('usage: worker.js ADDR pending N KEY TIMEOUT | ADDR held N NAMES HOLD')
    process.exit(2)
  }
  const result = await modes[mode](addr, Number(nText), arg, Number(num))
  console.log('RESULT ' + JSON.stringify(result))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
