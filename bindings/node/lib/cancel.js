'use strict'
// Cancellation: a native waiting call tied to an AbortSignal.

const native = require('./addon.js')
const spin = require('../spin.js')
const { translate, abortError } = require('./errors.js')

/**
 * Runs a native waiting call with a cancel token tied to `signal`. Rejects with an AbortError
 * once the native call has returned; a success that raced the abort is undone first.
 */
async function cancellable(signal, start, undo, { token = false } = {}) {
  if (signal?.aborted) throw abortError(signal)
  // Without a signal nothing cancels the call unless the caller keeps the token (`token`).
  const cancel = signal || token ? new native.NativeCancel() : undefined
  const onAbort = () => cancel.cancel()
  signal?.addEventListener('abort', onAbort, { once: true })
  try {
    let result
    let began
    try {
      const pending = start(cancel)
      began = spin.started()
      result = await pending
    } catch (e) {
      const t = translate(e)
      if (signal?.aborted && t?.code === 'BATON_CANCELLED') throw abortError(signal)
      throw t
    } finally {
      if (began !== undefined) spin.ended(began)
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
