'use strict'
// Barriers: one key that holds every waiter back, and the double barrier of N participants.

const { kToken } = require('./symbols.js')
const { settle } = require('./errors.js')
const { waitOptions } = require('./checks.js')
const { cancellable } = require('./cancel.js')
const { optionsOf } = require('../options.js')
const { sessionOf } = require('./session.js')

/**
 * A barrier on one key: while the key is there `wait()` waits; once it is removed every waiter
 * goes on. Any process may raise (`hold`) or lower (`release`) it: the key carries no owner.
 */
class Barrier {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.barrier() to make a Barrier')
    this.#native = n
  }
  /** The barrier's key. */
  get key() {
    return this.#native.key
  }
  /**
   * Raises the barrier; resolves true when this call raised it, false when it was already up.
   * Without a session the key stays until someone releases it, whatever happens to this
   * process; with `{ session }` it falls when the session ends.
   */
  async hold(options) {
    const o = optionsOf('hold', options, ['session'])
    const s = sessionOf(o.session)
    return settle(() => this.#native.hold(s))
  }
  /** Lowers the barrier (every waiter goes on); resolves whether it was up. */
  async release() {
    return settle(() => this.#native.release())
  }
  /** Whether the barrier is up (one read of the key). */
  async isHeld() {
    return settle(() => this.#native.isHeld())
  }
  /**
   * Resolves true once the barrier is down (at once if it is not up), false when `timeoutMs`
   * passes first; rejects with an AbortError when `signal` aborts. Waits with no thread of its
   * own.
   */
  async wait(options) {
    const { timeoutMs, signal } = waitOptions('wait', options)
    return cancellable(signal, (c) => this.#native.wait(timeoutMs, c))
  }
}

/**
 * A double barrier: `count` participants `enter()` and all go on together once the last one
 * arrives; each then `leave()`s, and all go on once every one has left.
 */
class DoubleBarrier {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.doubleBarrier() to make a DoubleBarrier')
    this.#native = n
  }
  /** The prefix (without a trailing '/'). */
  get prefix() {
    return this.#native.prefix
  }
  /** The number of participants a round waits for. */
  get count() {
    return this.#native.count
  }
  /** Whether this handle has entered and not left yet. */
  isEntered() {
    return this.#native.isEntered()
  }
  /**
   * Registers this participant and resolves true once a round of `count` participants that
   * counts it opens, false when `timeoutMs` passes first (the participant is removed again);
   * rejects with an AbortError when `signal` aborts (removed too).
   */
  async enter(options) {
    const { timeoutMs, signal } = waitOptions('enter', options)
    return cancellable(signal, (c) => this.#native.enter(timeoutMs, c))
  }
  /**
   * Leaves (this participant's key is removed first) and resolves true once every participant
   * of the round has left, false when `timeoutMs` passes first; rejects with an AbortError when
   * `signal` aborts.
   */
  async leave(options) {
    const { timeoutMs, signal } = waitOptions('leave', options)
    return cancellable(signal, (c) => this.#native.leave(timeoutMs, c))
  }
}

module.exports = { Barrier, DoubleBarrier }
