'use strict'
// LeaderObserver: an async iterator over an election's leader.

const { kToken } = require('./symbols.js')
const { waitOptions } = require('./checks.js')
const { cancellable } = require('./cancel.js')
const { Leader } = require('./values.js')

/**
 * Follows an election: an async iterator of `Leader` (or null for "no leader"). The first
 * value is the current state, later ones only changes. Ends (`done: true`) when `return()` is
 * called (a `break` out of `for await`) or its client is closed, also while a `next()` is
 * pending; rejects with an AbortError when the signal aborts, with BATON_TIMEOUT when
 * `timeoutMs` passes without a change.
 */
class LeaderObserver {
  #native
  #signal
  #timeoutMs
  #done = false
  #pending = null
  constructor(token, n, options) {
    if (token !== kToken) throw new TypeError('use election.observe() or client.observeLeader()')
    const { signal, timeoutMs } = waitOptions('observe', options)
    this.#native = n
    this.#signal = signal
    this.#timeoutMs = timeoutMs
  }
  get key() {
    return this.#native.key
  }
  async next() {
    if (this.#done) return { done: true, value: undefined }
    try {
      const ev = await cancellable(
        this.#signal,
        (c) => {
          this.#pending = c
          return this.#native.next(this.#timeoutMs, c)
        },
        undefined,
        { token: true },
      )
      return { done: false, value: ev ? new Leader(ev) : null }
    } catch (e) {
      // return() was called meanwhile: whatever the pending wait ended with, the iteration is over.
      if (this.#done) return { done: true, value: undefined }
      this.#finish()
      // The client was closed (before or during this wait): the observation is over, not failed.
      // A rejection here would surface as an unhandled one in a `for await` that a shutdown
      // handler interrupted by closing the client.
      if (e?.code === 'BATON_CLOSED') return { done: true, value: undefined }
      throw e
    } finally {
      this.#pending = null
    }
  }
  async return(value) {
    this.#finish()
    return { done: true, value }
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

module.exports = { LeaderObserver }
