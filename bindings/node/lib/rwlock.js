'use strict'
// Read-write locks and multi-key locks: holdings with the lifecycle of a Lock (lib/holdable.js).

const { kToken } = require('./symbols.js')
const { Holdable, kAcquire, kRelease, kWhat, kMissed } = require('./holdable.js')
const { Sequencer } = require('./values.js')

/**
 * One side (reader or writer) of the read-write lock on a prefix: readers share it, a writer
 * holds it alone, and contenders are served in arrival order, so a waiting writer is not starved
 * by readers that come after it. Each acquire makes its own contender key under the prefix, bound
 * to the client's default session. Emits 'lost' (with the reason: 'key_changed', 'session_lost')
 * when a holding ends other than by `release()`.
 */
class RwLock extends Holdable {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.readLock() or client.writeLock() to make a RwLock')
    super(n)
    this.#native = n
  }
  get [kWhat]() {
    return `${this.mode} lock ${JSON.stringify(this.prefix)}`
  }
  [kMissed](t) {
    return `${this[kWhat]} not acquired within ${t} ms`
  }
  /** The prefix (without a trailing '/'). */
  get prefix() {
    return this.#native.prefix
  }
  /** 'read' or 'write'. */
  get mode() {
    return this.#native.mode
  }
  /** The contender key of the current holding, or null when not held. */
  get key() {
    return this.#native.key() ?? null
  }
  /**
   * Waits until held and resolves with the lock itself (`await using held = await rw.acquire()`
   * works). Rejects with code BATON_TIMEOUT when `timeoutMs` passes first (the contender key is
   * deleted: nothing is left queued), an AbortError when `signal` aborts (nothing held),
   * BATON_CONFLICT when a key under the prefix is not a read-write lock contender.
   */
  acquire(options) {
    return this[kAcquire]('acquire', options, true)
  }
  /** Like acquire, but resolves false instead of rejecting at the timeout (default 0: look once). */
  tryAcquire(options) {
    return this[kAcquire]('tryAcquire', options, false)
  }
  /** Releases (deletes the contender key); resolves false if it was not held. */
  release() {
    return this[kRelease]()
  }
  /**
   * The fencing sequencer of the current holding (the contender key; `token` its CreateIndex,
   * larger for later holdings of either side), or null.
   */
  get sequencer() {
    const s = this.#native.sequencer()
    return s ? new Sequencer(s) : null
  }
}

/**
 * A lock on several keys at once: an acquire takes all of them in one transaction or none, and
 * waits while any one is held (by another MultiLock, a Lock, or Go's `api.Lock`). Emits 'lost'
 * ('key_changed', 'session_lost') when the holding ends other than by `release()`: losing any one
 * key ends the holding of all.
 */
class MultiLock extends Holdable {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.multiLock() to make a MultiLock')
    super(n)
    this.#native = n
  }
  get [kWhat]() {
    return `multi-key lock ${JSON.stringify(this.keys)}`
  }
  [kMissed](t) {
    return `${this[kWhat]} not acquired within ${t} ms`
  }
  /** The keys, sorted, duplicates dropped. */
  get keys() {
    return this.#native.keys
  }
  /** The value written to every key on acquire (a copy). */
  get value() {
    return this.#native.value()
  }
  /**
   * Waits until every key is held and resolves with the lock itself. Never holds part of the
   * set: BATON_TIMEOUT at `timeoutMs`, an AbortError on `signal`, with nothing held.
   */
  acquire(options) {
    return this[kAcquire]('acquire', options, true)
  }
  /** Like acquire, but resolves false instead of rejecting at the timeout (default 0: try once). */
  tryAcquire(options) {
    return this[kAcquire]('tryAcquire', options, false)
  }
  /** Releases every key; resolves false if nothing was held. */
  release() {
    return this[kRelease]()
  }
  /** The sequencer of the first key's holding, or null. */
  get sequencer() {
    const s = this.#native.sequencer()
    return s ? new Sequencer(s) : null
  }
  /** One sequencer per key (in `keys` order) while held; an empty array otherwise. */
  get sequencers() {
    return this.#native.sequencers().map((s) => new Sequencer(s))
  }
}

module.exports = { RwLock, MultiLock }
