'use strict'
// Shared setup of the Node examples: talk to the Consul named by CONSUL_HTTP_ADDR, or start
// the dev server (./target/debug/baton-devserver, built by `cargo build -p consul-baton-devserver`;
// BATON_DEVSERVER_BIN overrides the path) when it is unset.
const { spawn } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const readline = require('node:readline')

const root = path.resolve(__dirname, '../..')

/** Resolves { address, stop() }. */
async function target() {
  if (process.env.CONSUL_HTTP_ADDR) {
    console.log(`using Consul at ${process.env.CONSUL_HTTP_ADDR}`)
    return { address: undefined, stop() {} }
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
  return { address, stop: () => server.kill('SIGTERM') }
}

/** A key prefix unique to this run, so repeated runs against one Consul do not mix. */
function runPrefix(example) {
  return `baton-examples/${example}/${process.pid}`
}

module.exports = { target, runPrefix }
