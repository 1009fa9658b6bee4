'use strict'
// Leader election.

const { kToken } = require('./symbols.js')
const { settle, callSync, timeoutError } = require('./errors.js')
const { waitOptions, toBuffer } = require('./checks.js')
const { cancellable } = require('./cancel.js')
const { Holdable } = require('./holdable.js')
const { Sequencer, Leader } = require('./values.js')
const { LeaderObserver } = require('./observer.js')

/**
 * A participant in the leader election on one key (built on a Lock, so Go `api.Lock` users of
 * the key take part). Emits 'lost' when leadership ends other than by `resign()`.
 */
class Election extends Holdable {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.election() to make an Election')
    super(`leadership of ${JSON.stringify(n.key)}`)
    this.#native = n
  }
  get key() {
    return this.#native.key
  }
  /**
   * Campaigns with `value` until elected and resolves with the election (so
   * `await using e = await election.campaign(v)` resigns at the end of the block). Rejects with
   * BATON_TIMEOUT / AbortError; leadership won while aborting is resigned.
   */
  async campaign(value, options) {
    const v = toBuffer('value', value)
    const { timeoutMs, signal } = waitOptions('campaign', options)
    const won = await cancellable(
      signal,
      (c) => this.#native.campaign(v, timeoutMs, c),
      (w) => w && this.#native.resign(),
    )
    if (!won) throw timeoutError(`not elected for ${JSON.stringify(this.key)} within ${timeoutMs} ms`)
    this._started()
    return this
  }
  /** Steps down (no lock-delay); resolves false if not leader. */
  async resign() {
    this._ended('released')
    return settle(() => this.#native.resign())
  }
  /** Replaces the leader's value, keeping the LockIndex (sequencers stay valid). */
  async proclaim(value) {
    const v = toBuffer('value', value)
    return settle(() => this.#native.proclaim(v))
  }
  /** Why the last leadership ended ('released', 'key_changed', 'removed', 'session_lost', 'client_closed'), or null while held and before the first acquire. */
  get lostReason() {
    return this.#native.lostReason()
  }
  /** With `lostReason` 'session_lost': why the session was lost, as the session itself reports it ('invalidated', 'deadline_exceeded', 'destroyed'); else null. */
  get lostSessionReason() {
    return this.#native.lostSessionReason()
  }
  /** Whether this participant leads (local check). */
  isLeader() {
    return this.#native.isLeader()
  }
  isHeld() {
    return this.#native.isLeader()
  }
  /** The current leader (one consistent read), or null. */
  async leader() {
    const l = await settle(() => this.#native.leader())
    return l ? new Leader(l) : null
  }
  /** An async iterator over leader changes (see LeaderObserver). */
  observe(options) {
    return new LeaderObserver(kToken, callSync(() => this.#native.observe()), options)
  }
  /** The fencing sequencer while leading, or null. */
  get sequencer() {
    const s = this.#native.sequencer()
    return s ? new Sequencer(s) : null
  }
  /**
   * Resolves with why leadership ended (at once when not leading). `lostSignal` is aborted
   * by the time it resolves; the 'lost' event comes through its own queue and may follow.
   */
  async waitLost(options) {
    const { timeoutMs, signal } = waitOptions('waitLost', options)
    return this._lostAnswer(await cancellable(signal, (c) => this.#native.waitLost(timeoutMs, c)))
  }
  async [Symbol.asyncDispose]() {
    await this.resign()
  }
}

module.exports = { Election }
