'use strict'
// Loss notifications (one registry of ids for every client of this JS environment) and the
// Holdable base of Lock, Semaphore and Election.

const { EventEmitter } = require('node:events')
const { kLost, kClientClosed } = require('./symbols.js')
const { LostError } = require('./errors.js')

// id -> WeakRef of a Lock, Semaphore or Election, for the loss notifications of every client
// of this JS environment. Entries go when their object is collected.
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

/** What Lock, Semaphore and Election share: the 'lost' event and `lostSignal`. */
class Holdable extends EventEmitter {
  // The signal of the current holding is made when first asked for: most holdings are never
  // asked, and an AbortController with a LostError (an Error captures a stack trace) per
  // acquire and release showed up in profiles of acquire+release cycles.
  #controller = null
  #holding = false
  #lastReason = 'released'
  #what
  constructor(what) {
    super()
    this.#what = what
  }

  /**
   * An AbortSignal of the current holding: it aborts (with a `LostError` as its reason) when
   * the holding ends — lost, released, or the client closed. While not held it is the
   * already-aborted signal of the last holding (or an aborted one with reason 'released').
   */
  get lostSignal() {
    if (!this.#controller) {
      this.#controller = new AbortController()
      if (!this.#holding) this.#controller.abort(new LostError(this.#what, this.#lastReason))
    }
    return this.#controller.signal
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
    if (c && !c.signal.aborted) c.abort(new LostError(this.#what, reason))
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

module.exports = { holders, freeId, register, dispatchLost, Holdable }
