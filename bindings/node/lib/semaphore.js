'use strict'
// Semaphores.

const { kToken } = require('./symbols.js')
const { settle } = require('./errors.js')
const { Holdable, kAcquire, kRelease, kWhat, kMissed } = require('./holdable.js')

/**
 * A counting semaphore on a prefix, wire-compatible with Go's `api.Semaphore`. Emits 'lost'
 * ('removed', 'session_lost') when a holding ends other than by `release()`.
 */
class Semaphore extends Holdable {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.semaphore() to make a Semaphore')
    super(n)
    this.#native = n
  }
  get [kWhat]() {
    return `semaphore ${JSON.stringify(this.prefix)}`
  }
  [kMissed](t) {
    return `semaphore ${JSON.stringify(this.prefix)}: no slot within ${t} ms`
  }
  /** The prefix. */
  get prefix() {
    return this.#native.prefix
  }
  /** The number of slots. */
  get limit() {
    return Number(this.#native.limit)
  }
  /** Waits for a slot and resolves with the semaphore; BATON_TIMEOUT / AbortError as for locks. */
  acquire(options) {
    return this[kAcquire]('acquire', options, true)
  }
  /** Resolves true with a slot, false at the timeout (default 0: try once). */
  tryAcquire(options) {
    return this[kAcquire]('tryAcquire', options, false)
  }
  /** Gives the slot back; resolves false if not held. */
  release() {
    return this[kRelease]()
  }
  /** Deletes the coordination key when no live holder remains (Go's `Destroy`). */
  destroy() {
    return settle(() => this.#native.destroy())
  }
}

module.exports = { Semaphore }
