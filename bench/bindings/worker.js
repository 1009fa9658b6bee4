// The Node worker of `make bench-bindings` (bench/bindings/run.py drives it; same protocol as
// worker.rs):
//
//   worker.js ADDR cycles N KEY     N uncontended acquire+release cycles on KEY
//   worker.js ADDR handoff N KEY    N hand-offs of KEY between two holders
//   worker.js ADDR lag N PREFIX     event-loop lag while N acquires on N keys are pending
//   worker.js ADDR floor N KEY      N cycles of the floor client driven by the event loop: the
//                                   floor of worker.rs (two raw PUTs on one keep-alive
//                                   connection, no checks) written and read by a net.Socket,
//                                   no baton: what Node's loop costs above the wire
//
// ADDR as worker.rs takes it: `HOST:PORT`, `https://HOST:PORT` or `unix:///PATH`. baton's
// clients read `CONSUL_CACERT` from the environment over HTTPS, as an application's do; the
// floor trusts the same CA file (a tls.TLSSocket, Node's own TLS over OpenSSL) and reaches a
// unix socket with net.connect({ path }).
//
// Prints one line, `RESULT {json}`; cycles and lag report `cpu_secs`, the process's user+sys
// CPU time (process.cpuUsage) over the measured part. lag: one client holds PREFIX/0..N-1, another starts an
// acquire of each, and perf_hooks.monitorEventLoopDelay (10 ms resolution) records the loop's
// delay for LAG_SECS seconds: `{pending, p50_ms, p99_ms, max_ms}`.
'use strict'

const fs = require('node:fs')
const net = require('node:net')
const tls = require('node:tls')
const path = require('node:path')
const { monitorEventLoopDelay } = require('node:perf_hooks')
const { Client } = require(path.join(__dirname, '..', '..', 'bindings', 'node'))

const LONG = 30000
// Warm-up cycles before measuring: BENCH_WARM, which run.py sets (2,500 for Node, whose JIT goes
// on compiling the lock path until about the 2,100th cycle; see run.py), else 300.
const WARM = Number(process.env.BENCH_WARM || 300)
const LAG_SECS = 3
const now = () => Number(process.hrtime.bigint()) / 1e3 // microseconds
// User+sys CPU time of the process so far, in seconds.
const cpuSecs = () => {
  const u = process.cpuUsage()
  return (u.user + u.system) / 1e6
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

function pct(sorted, p) {
  if (sorted.length === 0) return 0
  return sorted[Math.round((sorted.length - 1) * p)]
}

async function cycles(addr, n, key) {
  const c = new Client({ address: addr })
  const lock = c.lock(key)
  for (let i = 0; i < WARM; i++) {
    await lock.acquire({ timeoutMs: LONG })
    await lock.release()
  }
  const lat = []
  const cpu = cpuSecs()
  const start = now()
  for (let i = 0; i < n; i++) {
    const t = now()
    await lock.acquire({ timeoutMs: LONG })
    await lock.release()
    lat.push(now() - t)
  }
  const secs = (now() - start) / 1e6
  const cpu_secs = cpuSecs() - cpu
  await c.close()
  lat.sort((x, y) => x - y)
  return { cycles: n, secs, p50_us: pct(lat, 0.5), p99_us: pct(lat, 0.99), cpu_secs }
}

/** The floor client of worker.rs on the event loop (see the header). */
async function floor(addr, n, key) {
  let sock, hostHeader
  const opened = (s, event) =>
    new Promise((resolve, reject) => {
      s.once(event, resolve)
      s.once('error', reject)
    })
  if (addr.startsWith('unix://')) {
    sock = net.connect({ path: addr.slice('unix://'.length) })
    hostHeader = 'localhost'
    await opened(sock, 'connect')
  } else {
    const secure = addr.startsWith('https://')
    hostHeader = addr.replace(/^https?:\/\//, '')
    const [host, port] = hostHeader.split(':')
    sock = net.connect({ host, port: Number(port), noDelay: true })
    await opened(sock, 'connect')
    if (secure) {
      // TLS on the connected TCP socket (so noDelay is set on the socket itself), verified
      // against CONSUL_CACERT for `host`.
      sock = tls.connect({ socket: sock, host, ca: fs.readFileSync(process.env.CONSUL_CACERT) })
      await opened(sock, 'secureConnect')
    }
  }
  let waiting = null
  let buf = Buffer.alloc(0)
  sock.on('data', (d) => {
    buf = buf.length ? Buffer.concat([buf, d]) : d
    const end = buf.indexOf('\r\n\r\n')
    if (end < 0) return
    const m = /content-length: *(\d+)/i.exec(buf.subarray(0, end).toString('latin1'))
    const len = m ? Number(m[1]) : 0
    if (buf.length < end + 4 + len) return
    const body = buf.subarray(end + 4, end + 4 + len).toString()
    buf = buf.subarray(end + 4 + len)
    const w = waiting
    waiting = null
    w.resolve(body)
  })
  sock.on('error', (e) => waiting && waiting.reject(e))
  const put = (path, body) =>
    new Promise((resolve, reject) => {
      waiting = { resolve, reject }
      sock.write(`PUT ${path} HTTP/1.1\r\nHost: ${hostHeader}\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
    })
  const id = JSON.parse(await put('/v1/session/create', '{"TTL":"60s","LockDelay":"0s"}')).ID
  const acquire = `/v1/kv/${key}?acquire=${id}`
  const release = `/v1/kv/${key}?release=${id}`
  for (let i = 0; i < WARM; i++) {
    await put(acquire, '')
    await put(release, '')
  }
  const lat = []
  const cpu = cpuSecs()
  const start = now()
  for (let i = 0; i < n; i++) {
    const t = now()
    await put(acquire, '')
    await put(release, '')
    lat.push(now() - t)
  }
  const secs = (now() - start) / 1e6
  const cpu_secs = cpuSecs() - cpu
  await put(`/v1/session/destroy/${id}`, '')
  sock.end()
  lat.sort((x, y) => x - y)
  return { cycles: n, secs, p50_us: pct(lat, 0.5), p99_us: pct(lat, 0.99), cpu_secs }
}

async function handoff(addr, rounds, key) {
  const a = new Client({ address: addr })
  const b = new Client({ address: addr })
  let holder = a.lock(key)
  let waiter = b.lock(key)
  await holder.acquire({ timeoutMs: LONG })
  const lat = []
  for (let i = 0; i < rounds; i++) {
    const acquired = waiter.acquire({ timeoutMs: LONG }).then(() => now())
    await sleep(20) // let the waiter find the key held and park on it
    const released = now()
    await holder.release()
    lat.push((await acquired) - released)
    ;[holder, waiter] = [waiter, holder]
  }
  await holder.release()
  await a.close()
  await b.close()
  lat.sort((x, y) => x - y)
  return { rounds, p50_us: pct(lat, 0.5), p99_us: pct(lat, 0.99) }
}

async function lag(addr, n, prefix) {
  const a = new Client({ address: addr })
  const b = new Client({ address: addr })
  const held = []
  for (let i = 0; i < n; i++) {
    const l = a.lock(`${prefix}/${i}`)
    await l.acquire({ timeoutMs: LONG })
    held.push(l)
  }
  const stop = new AbortController()
  const pending = []
  let finished = 0
  for (let i = 0; i < n; i++) {
    const p = b.lock(`${prefix}/${i}`).acquire({ timeoutMs: LONG, signal: stop.signal })
    pending.push(p.then(() => finished++, () => {}))
  }
  await sleep(500) // every acquire has found its key held
  if (finished) throw new Error(`${finished} acquires finished while their keys were held`)
  const h = monitorEventLoopDelay({ resolution: 10 })
  const cpu = cpuSecs()
  h.enable()
  await sleep(LAG_SECS * 1000)
  h.disable()
  const cpu_secs = cpuSecs() - cpu
  stop.abort()
  await Promise.all(pending)
  for (const l of held) await l.release()
  await a.close()
  await b.close()
  // The histogram records the whole delay of each 10 ms timer; the lag is what exceeds 10 ms.
  const lagMs = (ns) => Math.max(0, ns / 1e6 - 10)
  return {
    pending: n,
    p50_ms: lagMs(h.percentile(50)),
    p99_ms: lagMs(h.percentile(99)),
    max_ms: lagMs(h.max),
    secs: LAG_SECS,
    cpu_secs,
  }
}

async function main() {
  const [addr, mode, nText, key] = process.argv.slice(2)
  const modes = { cycles, handoff, lag, floor }
  if (!key || !modes[mode]) {
    console.error('usage: worker.js ADDR cycles|handoff|lag|floor N KEY')
    process.exit(2)
  }
  const result = await modes[mode](addr, Number(nText), key)
  console.log('RESULT ' + JSON.stringify(result))
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
