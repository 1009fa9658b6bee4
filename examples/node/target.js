'use strict'
// Shared setup of the Node examples: talk to the Consul named by CONSUL_HTTP_ADDR, or start
// the dev server (./target/debug/baton-devserver, built by `cargo build -p consul-baton-devserver`;
// BATON_DEVSERVER_BIN overrides the path) when it is unset.
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const http = require('node:http')
const path = require('node:path')
const readline = require('node:readline')

const root = path.resolve(__dirname, '../..')

/** The sessions the dev server at `address` holds (Consul's JSON). */
function sessions(address) {
  return new Promise((resolve, reject) => {
    const req = http.get(`http://${address}/v1/session/list`, (res) => {
      let body = ''
      res.on('data', (d) => {
        body += d
      })
      res.on('end', () => {
        try {
          resolve(JSON.parse(body))
        } catch (e) {
          reject(new Error(`GET /v1/session/list answered ${res.statusCode} ${body}: ${e.message}`))
        }
      })
    })
    req.setTimeout(5000, () => req.destroy(new Error('GET /v1/session/list: no answer within 5 s')))
    req.on('error', reject)
  })
}

/**
 * Resolves { address, stop() }. With a dev server of its own, `stop()` (async) first checks that
 * the example left no session behind (every client closed, every session destroyed), and fails
 * the run (exit status 1) if it did.
 */
async function target() {
  if (process.env.CONSUL_HTTP_ADDR) {
    console.log(`using Consul at ${process.env.CONSUL_HTTP_ADDR}`)
    return { address: undefined, async stop() {} }
  }
  const bin = process.env.BATON_DEVSERVER_BIN ?? path.join(root, 'target/debug/baton-devserver')
  if (!fs.existsSync(bin)) {
    throw new Error(`CONSUL_HTTP_ADDR is unset and ${bin} is missing: run cargo build -p consul-baton-devserver`)
  }
  // BATON_TEST_DEVSERVER_PRETTY: answer in `consul agent -dev`'s layout (indented JSON).
  const pretty = !['', '0'].includes(process.env.BATON_TEST_DEVSERVER_PRETTY ?? '')
  const args = ['--port', '0', '--session-ttl-min', '1s', ...(pretty ? ['--pretty'] : [])]
  const server = spawn(bin, args, { stdio: ['ignore', 'pipe', 'ignore'] })
  const line = await new Promise((resolve, reject) => {
    readline.createInterface({ input: server.stdout }).once('line', resolve)
    server.once('exit', (code) => reject(new Error(`the dev server exited with ${code}`)))
  })
  const address = line.replace(/^BATON_DEVSERVER_ADDR=/, '')
  console.log(`CONSUL_HTTP_ADDR is unset: started a dev server at ${address}`)
  return {
    address,
    async stop() {
      try {
        const left = await sessions(address)
        if (left.length > 0) {
          console.error(`sessions left at the dev server after every client closed: ${left.map((x) => `${x.ID} (${JSON.stringify(x.Name)})`).join(', ')}`)
          process.exitCode = 1
        }
      } finally {
        server.kill('SIGTERM')
      }
    },
  }
}

/** A key prefix unique to this run, so repeated runs against one Consul do not mix. */
function runPrefix(example) {
  return `baton-examples/${example}/${process.pid}`
}

module.exports = { target, runPrefix }
