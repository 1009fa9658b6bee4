'use strict'
// Errors: BatonError (with the stable `code`), AbortError, LostError, and the translation of the
// addon's errors into them.

require('./addon.js')
const spin = require('../spin.js')

/** Base of every error baton raises; `code` is stable across languages. */
class BatonError extends Error {
  constructor(message, code, details = {}) {
    super(message)
    this.name = 'BatonError'
    this.code = code
    if (details.status !== undefined) this.status = details.status
    if (details.serverText !== undefined) this.serverText = details.serverText
    if (details.endpoint !== undefined) this.endpoint = details.endpoint
    if (details.url !== undefined) this.url = details.url
    if (details.txnErrors !== undefined) this.txnErrors = details.txnErrors
    this.transient = details.transient === true
  }
}

/** Rejection of a call whose AbortSignal fired (like Node's own: code 'ABORT_ERR'). */
class AbortError extends Error {
  constructor(message = 'The operation was aborted', options = undefined) {
    super(message, options)
    this.name = 'AbortError'
    this.code = 'ABORT_ERR'
  }
}

/** The reason a holding's `lostSignal` aborted with; `reason` says why the holding ended. */
class LostError extends Error {
  constructor(what, reason) {
    super(`${what} is no longer held: ${reason}`)
    this.name = 'LostError'
    this.reason = reason
  }
}

function translate(err) {
  if (!(err instanceof Error)) return err
  const m = /^(BATON_[A-Z_]+): ([\s\S]*)$/.exec(err.message)
  if (m) {
    const sep = m[2].indexOf('\x1f')
    let details = {}
    let text = m[2]
    if (sep >= 0) {
      text = m[2].slice(0, sep)
      try {
        details = JSON.parse(m[2].slice(sep + 1))
      } catch {
        details = {}
      }
    }
    return new BatonError(text, m[1], details)
  }
  if (err.code === 'InvalidArg') {
    const e = new TypeError(err.message)
    e.code = 'BATON_INVALID_ARGUMENT'
    return e
  }
  return err
}

/**
 * Settles as `pending` (the promise of a native call just made) does, with its rejection
 * translated and its value passed through `then` when given; the loop spins while it is pending
 * (spin.js).
 *
 * Not an async function, and `then` is applied in the one reaction on `pending`: a call waiting
 * keeps only that (`make bench-scale` counts what each pending acquire keeps; the three nested
 * async functions an acquire went through were 1.4 KiB of heap each).
 */
function outcome(pending, then) {
  const began = spin.started()
  return pending.then(
    (value) => {
      spin.ended(began)
      return then === undefined ? value : then(value)
    },
    (e) => {
      spin.ended(began)
      throw translate(e)
    },
  )
}

/** The outcome of `start()`, a native call, as [outcome]; a throw of the call rejects. */
function settle(start) {
  try {
    return outcome(Promise.resolve(start()))
  } catch (e) {
    return Promise.reject(translate(e))
  }
}

function callSync(fn) {
  try {
    return fn()
  } catch (e) {
    throw translate(e)
  }
}

function abortError(signal) {
  return new AbortError('The operation was aborted', { cause: signal.reason })
}

function timeoutError(message) {
  return new BatonError(message, 'BATON_TIMEOUT')
}

module.exports = {
  BatonError,
  AbortError,
  LostError,
  translate,
  outcome,
  settle,
  callSync,
  abortError,
  timeoutError,
}
