'use strict'
// A dev server started by startDevServer() or by `npx baton-devserver` (bin/baton-devserver.js)
// ends when its starter dies, by any signal (issue 43): a test runner killed with SIGKILL (a CI
// timeout) must not leave a server re-parented to PID 1 and still listening.
const test = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const net = require('node:net')
const path = require('node:path')
const readline = require('node:readline')

const root = path.resolve(__dirname, '..')
const DEADLINE_MS = 10_000 // a bound for "eventually", not a speed assertion

function firstLine(child, pattern) {
  return new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout })
    rl.on('line', (l) => {
      if (pattern.test(l)) {
        rl.close()
        resolve(l)
      }
    })
    child.once('exit', (code, sig) => reject(new Error(`the starter exited (${code ?? sig}) before printing an address`)))
  })
}

function serverPid(addr) {
  return new Promise((resolve, reject) => {
    const req = http.get(`http://${addr}/_devserver/status`, { timeout: 5000 }, (res) => {
      const chunks = []
      res.on('data', (c) => chunks.push(c))
      res.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString()).pid))
    })
    req.on('timeout', () => req.destroy(new Error('GET /_devserver/status timed out')))
    req.on('error', reject)
  })
}

function refuses(addr) {
  const [host, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))]
  return new Promise((resolve) => {
    const s = net.connect({ host, port })
    s.setTimeout(1000)
    s.once('connect', () => {
      s.destroy()
      resolve(false)
    })
    s.once('timeout', () => {
      s.destroy()
      resolve(false)
    })
    s.once('error', () => resolve(true))
  })
}

function alive(pid) {
  try {
    process.kill(pid, 0)
  } catch (e) {
    return e.code === 'EPERM'
  }
  // A zombie (exited, not yet reaped by its new parent) counts as gone.
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return true
  }
}

async function killParentAndExpectServerGone(parent, addr) {
  const pid = await serverPid(addr)
  assert.notEqual(pid, parent.pid)
  try {
    const exited = new Promise((resolve) => parent.once('exit', resolve))
    parent.kill('SIGKILL')
    await exited
    const deadline = Date.now() + DEADLINE_MS
    while (!((await refuses(addr)) && !alive(pid))) {
      assert.ok(Date.now() < deadline, `the dev server (pid ${pid}, ${addr}) outlived its SIGKILLed starter by ${DEADLINE_MS} ms`)
      await new Promise((r) => setTimeout(r, 50)) // polling interval of the condition above
    }
  } finally {
    if (alive(pid)) process.kill(pid, 'SIGKILL')
  }
}

test('a startDevServer() server ends when its starter is killed with SIGKILL', { skip: process.platform === 'win32' }, async () => {
  const script = `
    const { startDevServer } = require(${JSON.stringify(path.join(root, 'devserver.js'))})
    startDevServer().then((s) => console.log('ADDR=' + s.addr), (e) => { console.error(e); process.exit(1) })
  `
  const parent = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
  try {
    const line = await firstLine(parent, /^ADDR=/)
    await killParentAndExpectServerGone(parent, line.slice('ADDR='.length))
  } finally {
    if (parent.exitCode === null && parent.signalCode === null) parent.kill('SIGKILL')
  }
})

test('an `npx baton-devserver` server ends when the wrapper is killed with SIGKILL', { skip: process.platform === 'win32' }, async () => {
  const parent = spawn(process.execPath, [path.join(root, 'bin', 'baton-devserver.js'), '--port', '0'], { stdio: ['ignore', 'pipe', 'ignore'] })
  try {
    const line = await firstLine(parent, /^BATON_DEVSERVER_ADDR=/)
    await killParentAndExpectServerGone(parent, line.slice('BATON_DEVSERVER_ADDR='.length))
  } finally {
    if (parent.exitCode === null && parent.signalCode === null) parent.kill('SIGKILL')
  }
})
