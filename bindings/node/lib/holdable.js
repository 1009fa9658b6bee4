'use strict'
// Loss notifications (one registry of ids for every client of this JS environment) and the
// Holdable base of Lock, Semaphore and Election.

const { EventEmitter } = require('node:events')
const { kLost, kClientClosed } = require('./symbols.js')
const { LostError, settle, timeoutError, translate, outcome } = require('./errors.js')
const { waitOptions } = require('./checks.js')
const { cancellable } = require('./cancel.js')

// id -> WeakRef of a Lock, Semaphore, Election or Session, for the loss notifications of every
// client of this JS environment. Entries go when their object is collected.
const holders = new Map()
const collected = new FinalizationRegistry(({ id, owned }) => {
  holders.delete(id)
  owned.delete(id)
})
let nextId = 0

function freeId() {
  do {
    nextId = nextId >= 0xffffffff ? 1 : nextId + 1
  } while (holders.has(nextId))
  return nextId
}

function register(obj, id, owned) {
  holders.set(id, new WeakRef(obj))
  owned.add(id)
  collected.register(obj, { id, owned })
}

function dispatchLost(id, reason) {
  const obj = holders.get(id)?.deref()
  if (!obj) return
  try {
    obj[kLost](reason)
  } catch (e) {
    // A throwing 'lost' listener is an uncaught exception, as for any EventEmitter.
    process.nextTick(() => {
      throw e
    })
  }
}

// The protected part of Holdable, for its subclasses (symbols: not on the public surface):
// kAcquire and kRelease run the lifecycle; a subclass gives kWhat (how a LostError names it),
// kMissed (the message of an acquisition that timed out) and, to acquire other than with the
// native `acquire(timeoutMs, cancel)`, kStart.
const kAcquire = Symbol('baton.acquire')
const kRelease = Symbol('baton.release')
const kWhat = Symbol('baton.what')
const kMissed = Symbol('baton.missed')
const kStart = Symbol('baton.start')

/**
 * The one holding lifecycle of Lock, Semaphore and Election, over their native object (the
 * addon gives the three the same methods, src/holding.rs: release, abandon, isHeld,
 * lostReason, lostSessionReason, waitLost): the 'lost' event, `lostSignal`, `isHeld()`,
 * `lostReason`, `waitLost()`, the acquisition and the release.
 *
 * What a holdable keeps is what every pending acquire costs (`make bench-scale`), so names
 * and messages are made when asked for, not per object.
 */
class Holdable extends EventEmitter {
  // The signal of the current holding is made when first asked for: most holdings are never
  // asked, and an AbortController with a LostError (an Error captures a stack trace) per
  // acquire and release showed up in profiles of acquire+release cycles.
  #controller = null
  #holding = false
  #lastReason = 'released'
  #native
  constructor(native) {
    super()
    this.#native = native
  }

  /**
   * An AbortSignal of the current holding: it aborts (with a `LostError` as its reason) when
   * the holding ends — lost, released, or the client closed. While not held it is the
   * already-aborted signal of the last holding (or an aborted one with reason 'released').
   */
  get lostSignal() {
    if (!this.#controller) {
      this.#controller = new AbortController()
      if (!this.#holding) this.#controller.abort(new LostError(this[kWhat], this.#lastReason))
    }
    return this.#controller.signal
  }

  /**
   * Why the last holding ended ('released', 'key_changed', 'removed', 'session_lost',
   * 'client_closed'), or null while held and before the first acquire.
   */
  get lostReason() {
    return this.#native.lostReason()
  }

  /**
   * With `lostReason` 'session_lost': why the session was lost, as the session itself reports
   * it ('invalidated', 'deadline_exceeded', 'destroyed'); else null.
   */
  get lostSessionReason() {
    return this.#native.lostSessionReason()
  }

  /** Whether held: acquired, not released or lost, session deadline not passed (local check). */
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

  /**
   * An acquisition (`name`: 'acquire', 'tryAcquire', 'campaign'): `this[kStart](timeoutMs,
   * cancel, arg)` runs the native wait. An abort that reaches it in time cancels it (the core
   * then holds nothing); a success that was already on its way when `options.signal` aborted is
   * handed back with the native `abandon` (see cancellable). With `rejects` it resolves with
   * this object and rejects with BATON_TIMEOUT (`this[kMissed](timeoutMs)`) at the timeout;
   * without, it tries once by default and resolves whether held.
   *
   * Not an async function, and without a signal nothing but the native call's promise and one
   * reaction on it (errors.js `outcome`) is kept while it waits.
   */
  [kAcquire](name, options, rejects, arg) {
    try {
      const { timeoutMs, signal } = waitOptions(name, options, rejects ? undefined : 0)
      if (signal !== undefined) return this.#acquireAborting(signal, timeoutMs, rejects, arg)
      return outcome(this[kStart](timeoutMs, undefined, arg), (held) =>
        this.#acquired(held, rejects, timeoutMs),
      )
    } catch (e) {
      return Promise.reject(translate(e))
    }
  }

  /** [kAcquire] with a signal: the native wait gets a cancel token the signal fires. */
  #acquireAborting(signal, timeoutMs, rejects, arg) {
    return cancellable(
      signal,
      (c) => this[kStart](timeoutMs, c, arg),
      (h) => h && this.#native.abandon(),
    ).then((held) => this.#acquired(held, rejects, timeoutMs))
  }

  /** The native acquisition (an election overrides it: it campaigns with a value, `arg`). */
  [kStart](timeoutMs, cancel) {
    return this.#native.acquire(timeoutMs, cancel)
  }

  /** What an acquisition resolves with, once the native call answered `held`. */
  #acquired(held, rejects, timeoutMs) {
    if (held) this._started()
    if (!rejects) return held
    if (!held) throw timeoutError(this[kMissed](timeoutMs))
    return this
  }

  /** Gives the holding up (release, resign); resolves false if nothing was held. */
  [kRelease]() {
    this._ended('released')
    return settle(() => this.#native.release())
  }

  /** Gives the holding up if held (for `await using`). */
  async [Symbol.asyncDispose]() {
    await this[kRelease]()
  }

  /** Called once an acquire succeeded: a new holding, a new signal. */
  _started() {
    this._ended('released')
    this.#holding = true
    this.#controller = null
  }

  _ended(reason) {
    if (!this.#holding) return
    this.#holding = false
    this.#lastReason = reason
    const c = this.#controller
    if (c && !c.signal.aborted) c.abort(new LostError(this[kWhat], reason))
  }

  /**
   * A loss `waitLost` reported: the 'lost' notification travels through another queue and may
   * come later, so the signal is brought in line with the answer now (once not held).
   */
  _lostAnswer(reason) {
    if (!this.isHeld()) this._ended(reason)
    return reason
  }

  [kLost](reason) {
    // The notification can be for an earlier holding if a new one began meanwhile.
    if (!this.isHeld()) this._ended(reason)
    this.emit('lost', reason)
  }

  [kClientClosed]() {
    this._ended('client_closed')
  }
}

module.exports = {
  holders,
  freeId,
  register,
  dispatchLost,
  Holdable,
  kAcquire,
  kRelease,
  kWhat,
  kMissed,
  kStart,
}
