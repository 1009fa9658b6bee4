'use strict'
// Leader election.

const { kToken } = require('./symbols.js')
const { settle, callSync } = require('./errors.js')
const { toBuffer } = require('./checks.js')
const { Holdable, kAcquire, kRelease, kWhat, kMissed, kStart } = require('./holdable.js')
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
    super(n)
    this.#native = n
  }
  get [kWhat]() {
    return `leadership of ${JSON.stringify(this.key)}`
  }
  [kMissed](t) {
    return `not elected for ${JSON.stringify(this.key)} within ${t} ms`
  }
  [kStart](timeoutMs, cancel, value) {
    return this.#native.campaign(value, timeoutMs, cancel)
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
    return this[kAcquire]('campaign', options, true, toBuffer('value', value))
  }
  /** Steps down (no lock-delay); resolves false if not leader. */
  resign() {
    return this[kRelease]()
  }
  /** Replaces the leader's value, keeping the LockIndex (sequencers stay valid). */
  async proclaim(value) {
    const v = toBuffer('value', value)
    return settle(() => this.#native.proclaim(v))
  }
  /** Whether this participant leads (local check). */
  isLeader() {
    return this.isHeld()
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
}

module.exports = { Election }
