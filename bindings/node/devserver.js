'use strict'
// startDevServer(): the Consul-compatible dev server for users' test suites (node --test, jest,
// mocha). It runs the baton-devserver executable this package carries (bin/, prebuilt next to
// the addon for the same platform) as a child process and hands back its address and fault
// controls, which are the server's /_devserver/ HTTP API.

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const readline = require('node:readline')
const { optionsOf } = require('./options.js')

/**
 * Where the executable is: options.bin, BATON_DEVSERVER_BIN, the one packaged in bin/, or (in the
 * baton repository itself, where Cargo.toml sits next to this file) the cargo-built one.
 */
function devserverBinary(explicit) {
  const candidates = [explicit, process.env.BATON_DEVSERVER_BIN, path.join(__dirname, 'bin', `baton-devserver-${process.platform}-${process.arch}`)]
  if (fs.existsSync(path.join(__dirname, 'Cargo.toml'))) {
    for (const profile of ['debug', 'release']) candidates.push(path.join(__dirname, '..', '..', 'target', profile, 'baton-devserver'))
  }
  for (const c of candidates) {
    if (c && fs.existsSync(c)) return c
  }
  const e = new Error(
    `consul-baton: no baton-devserver executable for ${process.platform}-${process.arch} in this installation ` +
      '(the package carries one for linux-x64); pass startDevServer({ bin }) or set BATON_DEVSERVER_BIN ' +
      'to one built with `cargo build -p consul-baton-devserver` (or `cargo install consul-baton-devserver`)',
  )
  e.code = 'ERR_CONSUL_BATON_NO_DEVSERVER'
  throw e
}

/** A Go duration string from milliseconds or a string ('100ms'). */
function goDuration(v) {
  return typeof v === 'string' ? v : `${Math.round(Number(v))}ms`
}

/** A running dev server: `addr` (host:port, for CONSUL_HTTP_ADDR / new Client({ address })), fault controls, stop(). */
class DevServer {
  constructor(child, addr) {
    this._child = child
    this.addr = addr
    this.url = `http://${addr}`
  }

  _control(method, p) {
    return new Promise((resolve, reject) => {
      const req = http.request(`${this.url}/_devserver/${p}`, { method }, (res) => {
        const chunks = []
        res.on('data', (c) => chunks.push(c))
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString()
          if (res.statusCode !== 200) {
            reject(new Error(`${method} /_devserver/${p}: ${res.statusCode} ${body}`))
            return
          }
          try {
            resolve(body.trim() ? JSON.parse(body) : null)
          } catch (e) {
            reject(e)
          }
        })
      })
      req.on('error', reject)
      req.end()
    })
  }

  /** Stop answering /v1/ requests (they hang), like a silent partition. */
  pause() { return this._control('PUT', 'pause') }
  /** Answer again after pause(). */
  resume() { return this._control('PUT', 'resume') }
  /** Restart with every session, key and index lost. */
  restart() { return this._control('PUT', 'restart') }
  /** A fixed delay (ms or '50ms') before every request; 0 turns it off. */
  setLatency(delay) { return this._control('PUT', `latency?d=${goDuration(delay)}`) }
  /** false: "No cluster leader" answers (TTL timers stop); true: a leader again. */
  setLeader(present) { return this._control('PUT', `leader?present=${present ? 'true' : 'false'}`) }
  /** Invalidate a session as a failed TTL or health check would. */
  invalidateSession(id) { return this._control('PUT', `session/invalidate/${encodeURIComponent(id)}`) }
  /** The node's serfHealth turns critical (sessions bound to it are invalidated). */
  failNode() { return this._control('PUT', 'node/fail') }
  /** The node's serfHealth passes again. */
  healNode() { return this._control('PUT', 'node/heal') }
  /** Requests served so far, per route. */
  requestCounts() { return this._control('GET', 'requests') }
  /** The server's state. */
  status() { return this._control('GET', 'status') }

  /** Stops the server (SIGTERM) and resolves once it has exited. */
  stop() {
    const child = this._child
    if (child.exitCode !== null || child.signalCode !== null) {
      child.stdin?.destroy()
      return Promise.resolve()
    }
    return new Promise((resolve) => {
      child.once('exit', () => {
        child.stdin?.destroy()
        resolve()
      })
      child.kill('SIGTERM')
    })
  }

  async [Symbol.asyncDispose]() {
    await this.stop()
  }
}

/**
 * Starts a dev server on a free port and resolves once it answers.
 * Options: sessionTtlMin (ms or '100ms'; default Consul's 10s), args (more baton-devserver
 * options), bin (the executable), stderr ('ignore' | 'inherit').
 * The server ends with this process however it ends (SIGKILL included): its stdin is a pipe
 * this process holds open, and it shuts down when that pipe closes.
 */
async function startDevServer(opts) {
  const options = optionsOf('startDevServer', opts, ['port', 'sessionTtlMin', 'args', 'bin', 'stderr'])
  const bin = devserverBinary(options.bin)
  // stdin is a pipe this process keeps the write end of, and --exit-on-stdin-eof stops the
  // server when it closes: the kernel closes it when this process dies, however it dies
  // (SIGKILL of a test runner, a CI timeout), so no server outlives its starter.
  const args = ['--exit-on-stdin-eof', '--port', String(options.port ?? 0), '--session-ttl-min', goDuration(options.sessionTtlMin ?? '10s'), ...(options.args ?? [])]
  const child = spawn(bin, args, { stdio: ['pipe', 'pipe', options.stderr ?? 'ignore'] })
  // A write end nobody writes to: an error on it (the server gone) is no concern of ours.
  child.stdin.on('error', () => {})
  const lines = readline.createInterface({ input: child.stdout })
  let line
  try {
    line = await new Promise((resolve, reject) => {
      lines.once('line', resolve)
      child.once('error', reject)
      child.once('exit', (code, sig) => reject(new Error(`baton-devserver (${bin}) exited (${code ?? sig}) before it was ready; run it by hand to see why`)))
    })
  } finally {
    lines.close()
  }
  if (!line.startsWith('BATON_DEVSERVER_ADDR=')) {
    child.kill('SIGKILL')
    throw new Error(`baton-devserver printed ${JSON.stringify(line)} instead of BATON_DEVSERVER_ADDR=...`)
  }
  // The child (and its stdout pipe) keeps the event loop alive until stop(), so a test that
  // awaits a loss notification is not cut short; a process that exits without stop() still
  // takes its dev server down.
  child.stdout.resume()
  const reap = () => child.kill('SIGKILL')
  process.once('exit', reap)
  child.once('exit', () => process.removeListener('exit', reap))
  return new DevServer(child, line.slice('BATON_DEVSERVER_ADDR='.length))
}

module.exports = { startDevServer, DevServer, devserverBinary }
