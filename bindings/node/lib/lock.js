'use strict'
// Locks.

const { kToken } = require('./symbols.js')
const { settle, timeoutError } = require('./errors.js')
const { waitOptions, toBuffer } = require('./checks.js')
const { cancellable } = require('./cancel.js')
const { Holdable } = require('./holdable.js')
const { Sequencer } = require('./values.js')

/**
 * A distributed lock on one key, wire-compatible with Go's `api.Lock`. Emits 'lost' (with the
 * reason: 'key_changed', 'session_lost') when a holding ends other than by `release()`.
 */
class Lock extends Holdable {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.lock() to make a Lock')
    super(`lock ${JSON.stringify(n.key)}`)
    this.#native = n
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
  async acquire(options) {
    const { timeoutMs, signal } = waitOptions('acquire', options)
    const held = await cancellable(
      signal,
      (c) => this.#native.acquire(timeoutMs, c),
      (h) => h && this.#native.release(),
    )
    if (!held) throw timeoutError(`lock ${JSON.stringify(this.key)} not acquired within ${timeoutMs} ms`)
    this._started()
    return this
  }
  /** Like acquire, but resolves false instead of rejecting at the timeout (default 0: try once). */
  async tryAcquire(options) {
    const { timeoutMs, signal } = waitOptions('tryAcquire', options, 0)
    const held = await cancellable(
      signal,
      (c) => this.#native.acquire(timeoutMs, c),
      (h) => h && this.#native.release(),
    )
    if (held) this._started()
    return held
  }
  /** Releases the lock (no lock-delay for the next holder); resolves false if it was not held. */
  async release() {
    this._ended('released')
    return settle(() => this.#native.release())
  }
  /** Why the last holding ended ('released', 'key_changed', 'removed', 'session_lost', 'client_closed'), or null while held and before the first acquire. */
  get lostReason() {
    return this.#native.lostReason()
  }
  /** With `lostReason` 'session_lost': why the session was lost, as the session itself reports it ('invalidated', 'deadline_exceeded', 'destroyed'); else null. */
  get lostSessionReason() {
    return this.#native.lostSessionReason()
  }
  /** Whether the lock is held: acquired, not released or lost, session deadline not passed. */
  isHeld() {
    return this.#native.isHeld()
  }
  /** The fencing sequencer of the current holding, or null. */
  get sequencer() {
    const s = this.#native.sequencer()
    return s ? new Sequencer(s) : null
  }
  /**
   * Resolves with why the current holding ended (at once when not held). `lostSignal` is aborted
   * by the time it resolves; the 'lost' event comes through its own queue and may follow.
   */
  async waitLost(options) {
    const { timeoutMs, signal } = waitOptions('waitLost', options)
    return this._lostAnswer(await cancellable(signal, (c) => this.#native.waitLost(timeoutMs, c)))
  }
  /** Deletes the key if nobody holds it (Go's `Destroy`). */
  destroy() {
    return settle(() => this.#native.destroy())
  }
  /** Releases the lock if held (for `await using`). */
  async [Symbol.asyncDispose]() {
    await this.release()
  }
}

module.exports = { Lock }
