'use strict'
// Sessions.

const { EventEmitter } = require('node:events')
const { kNative, kToken, kLost, kClientClosed } = require('./symbols.js')
const { LostError, settle } = require('./errors.js')
const { waitOptions } = require('./checks.js')
const { cancellable } = require('./cancel.js')

/**
 * A Consul session renewed in the background by baton's own threads. It emits 'lost' (with the
 * reason: 'invalidated', 'deadline_exceeded', ...) once when Consul or the local lease deadline
 * ends it, and `lostSignal` aborts then (also when it is destroyed or its client closed).
 */
class Session extends EventEmitter {
  #native
  #controller = new AbortController()
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.createSession() to make a Session')
    super()
    this.#native = n
  }
  get [kNative]() {
    return this.#native
  }
  /** The session ID. */
  get id() {
    return this.#native.id
  }
  /** True while the session is held (false from its local lease deadline on). */
  isValid() {
    return this.#native.isValid()
  }
  /**
   * An AbortSignal that aborts (with a `LostError` whose `reason` says why) when the session is
   * lost, destroyed, or its client closed: pass it to work that must stop with the session.
   */
  get lostSignal() {
    if (!this.#controller.signal.aborted) {
      // Lost before the notification arrived: the reason the session itself reports.
      const reason = this.#native.lostReason()
      if (reason) this.#end(reason)
    }
    return this.#controller.signal
  }
  /**
   * Milliseconds (fractional) left until the session's local lease deadline: how long its
   * holdings can still be trusted without another successful renew ("is there enough lease
   * left to start this job?"). The deadline is the send time of the last successful renew +
   * TTL - a margin (TTL/10, at most 2 s) and moves forward with each renew. 0 once the session
   * is lost or the deadline has passed; null for a session without a TTL.
   */
  timeLeftMs() {
    return this.#native.timeLeftMs()
  }
  /** Resolves with the loss reason; rejects with code BATON_TIMEOUT, or an AbortError. */
  async waitLost(options) {
    const { timeoutMs, signal } = waitOptions('waitLost', options)
    const reason = await cancellable(signal, (c) => this.#native.waitLost(timeoutMs, c))
    this.#end(reason)
    return reason
  }
  /** Destroys the session now (its locks are released; lock-delay applies). */
  async destroy() {
    await settle(() => this.#native.destroy())
    this.#end('destroyed')
  }
  #end(reason) {
    if (!this.#controller.signal.aborted) this.#controller.abort(new LostError('session', reason))
  }
  [kLost](reason) {
    this.#end(reason)
    this.emit('lost', reason)
  }
  [kClientClosed]() {
    this.#end('client_closed')
  }
}

function sessionOf(s) {
  if (s === undefined || s === null) return undefined
  if (!(s instanceof Session)) throw new TypeError('session must be a Session from client.createSession()')
  return s[kNative]
}

module.exports = { Session, sessionOf }
