'use strict'
// Cancellation of a native waiting call through an AbortSignal.

const native = require('./addon.js')
const { translate, abortError, outcome, settle } = require('./errors.js')

/**
 * Runs `start(cancel)`, a native waiting call, and settles as errors.js `settle` does. With a
 * `signal` (or `token`: the caller keeps the token) the call gets a cancel token, cancelled
 * when `signal` aborts; it then rejects with an AbortError once the native call has returned,
 * and a success that raced the abort is undone first with `undo(result)`.
 */
function cancellable(signal, start, undo, { token = false } = {}) {
  if (signal || token) return aborting(signal, start, undo)
  return settle(() => start(undefined))
}

/** [cancellable] with a cancel token. */
async function aborting(signal, start, undo) {
  if (signal?.aborted) throw abortError(signal)
  const cancel = new native.NativeCancel()
  const onAbort = () => cancel.cancel()
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    let result
    try {
      result = await outcome(start(cancel))
    } catch (e) {
      const t = translate(e)
      if (signal?.aborted && t?.code === 'BATON_CANCELLED') throw abortError(signal)
      throw t
    }
    if (signal?.aborted) {
      if (undo) {
        try {
          await undo(result)
        } catch {
          // The holding ends with its session at the latest; nothing better to do here.
        }
      }
      throw abortError(signal)
    }
    return result
  } finally {
    signal?.removeEventListener('abort', onAbort)
  }
}

module.exports = { cancellable }
