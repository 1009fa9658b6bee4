#!/usr/bin/env node
'use strict'
// `npx baton-devserver [options]`: the packaged dev server in the foreground (--help lists options).
const { spawn } = require('node:child_process')
const { devserverBinary } = require('../devserver.js')

// stdin is a pipe from this wrapper and --exit-on-stdin-eof stops the server when it closes,
// which the kernel does when the wrapper dies by any signal (SIGKILL included): the server
// never outlives it. SIGINT/SIGTERM are forwarded so it also stops cleanly on those.
const child = spawn(devserverBinary(), ['--exit-on-stdin-eof', ...process.argv.slice(2)], { stdio: ['pipe', 'inherit', 'inherit'] })
child.stdin.on('error', () => {})
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig))
child.on('exit', (code, sig) => process.exit(code ?? (sig ? 1 : 0)))
