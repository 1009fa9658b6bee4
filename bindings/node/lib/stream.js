'use strict'
// NativeStream: an async iterator over a native watch whose `next(timeoutMs, cancel)` resolves
// with the next item, or null when `timeoutMs` passes (a counter's values, a group's events).

const { waitOptions } = require('./checks.js')
const { cancellable } = require('./cancel.js')
const { timeoutError } = require('./errors.js')

/**
 * The iteration of a counter watch or a membership watch: `next()` waits with no thread of its
 * own. It ends (`done: true`) on `close()` / `return()` (a `break` out of `for await`) or when its
 * client is closed, also while a `next()` is pending; it rejects with an AbortError when the
 * signal aborts and with BATON_TIMEOUT when `timeoutMs` passes without a new item.
 */
class NativeStream {
  #native
  #signal
  #timeoutMs
  #convert
  #what
  #done = false
  #pending = null
  constructor(what, n, options, convert) {
    const { signal, timeoutMs } = waitOptions('watch', options)
    this.#what = what
    this.#native = n
    this.#signal = signal
    this.#timeoutMs = timeoutMs
    this.#convert = convert
  }
  /** The next item: `{ done: false, value }`, or `{ done: true }` once closed. */
  async next() {
    if (this.#done) return { done: true, value: undefined }
    let item
    try {
      item = await cancellable(
        this.#signal,
        (c) => {
          this.#pending = c
          return this.#native.next(this.#timeoutMs, c)
        },
        undefined,
        { token: true },
      )
    } catch (e) {
      // close() was called meanwhile: whatever the pending wait ended with, the iteration is over.
      if (this.#done) return { done: true, value: undefined }
      if (e?.code === 'BATON_CLOSED') {
        this.#finish()
        return { done: true, value: undefined }
      }
      if (e?.name === 'AbortError') this.#finish()
      throw e
    } finally {
      this.#pending = null
    }
    if (this.#done) return { done: true, value: undefined }
    if (item === null) throw timeoutError(`${this.#what}: nothing new within ${this.#timeoutMs} ms`)
    return { done: false, value: this.#convert(item) }
  }
  /** Ends the iteration (a pending `next()` resolves `done`); the watch is dropped. */
  async return(value) {
    this.#finish()
    return { done: true, value }
  }
  /** Ends the iteration, as `return()` does. */
  close() {
    this.#finish()
  }
  #finish() {
    if (this.#done) return
    this.#done = true
    this.#pending?.cancel()
    this.#native.close()
  }
  [Symbol.asyncIterator]() {
    return this
  }
}

module.exports = { NativeStream }
