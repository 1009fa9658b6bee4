'use strict'
// Logging: baton's log records to a JavaScript function.

const native = require('./addon.js')
const { optionsOf } = require('../options.js')

const LOG_LEVELS = ['off', 'error', 'warn', 'info', 'debug', 'trace']

/**
 * Routes baton's log records (a Consul that cannot be reached, a session lost, a release that
 * failed on close, ...) to `logger(level, message, target)`, called on the JS thread for each
 * record up to `level` ('error', 'warn' (default), 'info', 'debug', 'trace'; 'off' silences
 * baton). `level` is one of those names, `target` the Rust module (`baton::...`). `null`
 * restores the default: warnings and errors written to standard error as `baton warn: ...`.
 * Records travel through an unref'd thread-safe function: a pending record never keeps the
 * process alive, and baton's threads never wait for the JS thread. One logger per process (the
 * last call wins). A logger that throws is an uncaught exception.
 */
function setLogger(logger, options) {
  if (logger !== null && typeof logger !== 'function') {
    throw new TypeError(`logger must be a function (level, message, target) or null, got ${typeof logger}`)
  }
  const o = optionsOf('setLogger', options, ['level'])
  if (logger === null) {
    if (o.level !== undefined) throw new TypeError('level applies to a logger function; setLogger(null) restores the default (warnings and errors to stderr)')
    native.setLogger(null)
    return
  }
  const level = o.level ?? 'warn'
  if (!LOG_LEVELS.includes(level)) {
    throw new TypeError(`level must be one of ${LOG_LEVELS.map((l) => `'${l}'`).join(', ')}, got ${JSON.stringify(level)}`)
  }
  native.setLogger((lvl, target, message) => {
    try {
      logger(lvl, message, target)
    } catch (e) {
      process.nextTick(() => {
        throw e
      })
    }
  }, level)
}

module.exports = { setLogger }
