'use strict'
// Semaphores.

const { kToken } = require('./symbols.js')
const { settle, timeoutError } = require('./errors.js')
const { waitOptions } = require('./checks.js')
const { cancellable } = require('./cancel.js')
const { Holdable } = require('./holdable.js')

/**
 * A counting semaphore on a prefix, wire-compatible with Go's `api.Semaphore`. Emits 'lost'
 * ('removed', 'session_lost') when a holding ends other than by `release()`.
 */
class Semaphore extends Holdable {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.semaphore() to make a Semaphore')
    super(`semaphore ${JSON.stringify(n.prefix)}`)
    this.#native = n
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
  async acquire(options) {
    const { timeoutMs, signal } = waitOptions('acquire', options)
    const held = await cancellable(
      signal,
      (c) => this.#native.acquire(timeoutMs, c),
      (h) => h && this.#native.release(),
    )
    if (!held) throw timeoutError(`semaphore ${JSON.stringify(this.prefix)}: no slot within ${timeoutMs} ms`)
    this._started()
    return this
  }
  /** Resolves true with a slot, false at the timeout (default 0: try once). */
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
  /** Gives the slot back; resolves false if not held. */
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
  /** Whether a slot is held. */
  isHeld() {
    return this.#native.isHeld()
  }
  /**
   * Resolves with why the current holding ended (at once when not held). `lostSignal` is aborted
   * by the time it resolves; the 'lost' event comes through its own queue and may follow.
   */
  async waitLost(options) {
    const { timeoutMs, signal } = waitOptions('waitLost', options)
    return this._lostAnswer(await cancellable(signal, (c) => this.#native.waitLost(timeoutMs, c)))
  }
  /** Deletes the coordination key when no live holder remains (Go's `Destroy`). */
  destroy() {
    return settle(() => this.#native.destroy())
  }
  async [Symbol.asyncDispose]() {
    await this.release()
  }
}

module.exports = { Semaphore }
