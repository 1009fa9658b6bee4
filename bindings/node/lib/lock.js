'use strict'
// Locks.

const { kToken } = require('./symbols.js')
const { settle } = require('./errors.js')
const { toBuffer } = require('./checks.js')
const { Holdable, kAcquire, kRelease, kWhat, kMissed } = require('./holdable.js')
const { Sequencer } = require('./values.js')

/**
 * A distributed lock on one key, wire-compatible with Go's `api.Lock`. Emits 'lost' (with the
 * reason: 'key_changed', 'session_lost') when a holding ends other than by `release()`.
 */
class Lock extends Holdable {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.lock() to make a Lock')
    super(n)
    this.#native = n
  }
  get [kWhat]() {
    return `lock ${JSON.stringify(this.key)}`
  }
  [kMissed](t) {
    return `lock ${JSON.stringify(this.key)} not acquired within ${t} ms`
  }
  /** The key. */
  get key() {
    return this.#native.key
  }
  /** The value written on acquire (a copy); settable before acquiring. */
  get value() {
    return this.#native.value()
  }
  set value(v) {
    this.#native.setValue(toBuffer('value', v))
  }
  /**
   * Waits until the lock is held and resolves with the lock itself (so
   * `await using held = await lock.acquire()` works). Rejects with code BATON_TIMEOUT when
   * `timeoutMs` passes first (BATON_CONNECTION, naming the address, when nothing answered in
   * that time), an AbortError when `signal` aborts.
   */
  acquire(options) {
    return this[kAcquire]('acquire', options, true)
  }
  /** Like acquire, but resolves false instead of rejecting at the timeout (default 0: try once). */
  tryAcquire(options) {
    return this[kAcquire]('tryAcquire', options, false)
  }
  /** Releases the lock (no lock-delay for the next holder); resolves false if it was not held. */
  release() {
    return this[kRelease]()
  }
  /** The fencing sequencer of the current holding, or null. */
  get sequencer() {
    const s = this.#native.sequencer()
    return s ? new Sequencer(s) : null
  }
  /** Deletes the key if nobody holds it (Go's `Destroy`). */
  destroy() {
    return settle(() => this.#native.destroy())
  }
}

module.exports = { Lock }
