#!/usr/bin/env node
'use strict'
// `npx baton-devserver [options]`: the packaged dev server in the foreground (--help lists options).
const { spawn } = require('node:child_process')
const { devserverBinary } = require('../devserver.js')

const child = spawn(devserverBinary(), process.argv.slice(2), { stdio: 'inherit' })
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => child.kill(sig))
child.on('exit', (code, sig) => process.exit(code ?? (sig ? 1 : 0)))
