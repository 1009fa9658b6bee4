'use strict'
// The leader task: campaign, run an async task while leading, resign, campaign again.

const native = require('./addon.js')
const { kToken } = require('./symbols.js')
const { LostError, BatonError, settle, callSync } = require('./errors.js')
const { Sequencer, Leader } = require('./values.js')
const { optionsOf } = require('../options.js')

/**
 * Runs an async task only while this candidate leads the election on a key (client-go's
 * leaderelection, Curator's LeaderSelector): `run(task)` campaigns, calls `task(signal)` once
 * elected, where `signal` aborts the moment leadership is lost (or `run`'s own signal aborts),
 * resigns when the task returns, and with `requeue` (the default) campaigns again. Every wait
 * (the campaign, the hand-over after a term, the watch for the loss) holds no thread.
 */
class LeaderTask {
  #native
  #observe
  #onStarted
  #onStopped
  #onNewLeader
  #running = false
  constructor(token, n, callbacks, observe) {
    if (token !== kToken) throw new TypeError('use client.leaderTask() to make a LeaderTask')
    this.#native = n
    this.#onStarted = callbacks.onStartedLeading
    this.#onStopped = callbacks.onStoppedLeading
    this.#onNewLeader = callbacks.onNewLeader
    this.#observe = observe
  }
  /** The election's key. */
  get key() {
    return this.#native.key
  }
  /** Whether this candidate leads now (local check). */
  isLeader() {
    return this.#native.isLeader()
  }
  /** The fencing sequencer of the current term, or null when not leading. */
  get sequencer() {
    const s = this.#native.sequencer()
    return s ? new Sequencer(s) : null
  }
  /** The current leader of the election (one consistent read), or null. */
  async leader() {
    const l = await settle(() => this.#native.leader())
    return l ? new Leader(l) : null
  }
  /**
   * Campaigns and runs `task(signal)` (an async function) each time this candidate is elected.
   * `signal` aborts (reason: a LostError) the moment leadership ends or `options.signal` aborts;
   * the task should return soon after. When it returns (or throws) the candidate resigns if it
   * still leads, and campaigns again unless `requeue` is off.
   *
   * Resolves when `options.signal` aborts (while campaigning: at once, nothing held; while
   * leading: once the task returned and leadership was given back), or with `requeue` off after
   * the one term. Rejects with the task's own error when it threw and `requeue` is off; with a
   * campaign's error that is not transient (BATON_CLOSED when the client closes, BATON_CONFLICT
   * for a key that is not an election key); with the error of a callback that threw (after
   * resigning); with BATON_CONFLICT when `run` is already running on this task.
   */
  async run(task, options) {
    if (typeof task !== 'function') throw new TypeError(`task must be a function, got ${typeof task}`)
    const { signal } = optionsOf('run', options, ['signal'])
    if (signal !== undefined && signal !== null && !(signal instanceof AbortSignal)) {
      throw new TypeError('signal must be an AbortSignal')
    }
    if (this.#running) throw new BatonError(`leader task ${JSON.stringify(this.key)} is already running`, 'BATON_CONFLICT')
    this.#running = true
    const stop = new native.NativeCancel()
    let halted = false
    const halt = () => {
      halted = true
      stop.cancel()
    }
    signal?.addEventListener('abort', halt, { once: true })
    if (signal?.aborted) halt()
    // The first error of a callback: it stops the task, and `run` rejects with it at the end.
    let failure = null
    const fail = (e) => {
      if (failure === null) failure = { error: e }
      halt()
    }
    let terms
    try {
      terms = callSync(() => this.#native.terms(stop))
    } catch (e) {
      signal?.removeEventListener('abort', halt)
      this.#running = false
      throw e
    }
    const observer = this.#onNewLeader ? this.#observe() : null
    const observing = observer ? this.#follow(observer, fail) : null
    try {
      for (;;) {
        const term = await settle(() => terms.nextTerm())
        if (!term) break
        if (!(await this.#term(term, task, () => halted, fail))) break
      }
    } finally {
      signal?.removeEventListener('abort', halt)
      terms.end()
      if (observer) {
        await observer.return()
        await observing
      }
      this.#running = false
    }
    if (failure) throw failure.error
  }

  /** One term: the task, then the finish; resolves whether to campaign again. */
  async #term(term, task, halted, fail) {
    const done = new native.NativeCancel()
    const controller = new AbortController()
    // Settled (and keeping the process alive) while the term lasts: the moment the term's token
    // fires (leadership lost, or `stop`), the task's signal aborts.
    const ended = settle(() => term.ended(done)).then(
      () => {
        const why = halted() ? 'stopped' : this.#native.lostReason() ?? 'lost'
        controller.abort(new LostError(`leadership of ${JSON.stringify(this.key)}`, why))
      },
      () => {},
    )
    let threw = null
    let started = true
    try {
      this.#onStarted?.()
    } catch (e) {
      // The task does not start; the stop makes the finish resign and end the run.
      started = false
      fail(e)
    }
    if (started) {
      try {
        await task(controller.signal)
      } catch (e) {
        threw = { error: e }
      }
    }
    done.cancel()
    await ended
    this.#native.takeStopped()
    let again = false
    let finishError = null
    try {
      again = await settle(() => term.finish(threw ? String(threw.error?.message ?? threw.error) : null))
    } catch (e) {
      finishError = e
    }
    const info = this.#native.takeStopped()
    if (info && this.#onStopped) {
      try {
        this.#onStopped({
          reason: info.reason,
          lostReason: info.lostReason ?? null,
          error: info.reason === 'failed' && threw ? threw.error : null,
        })
      } catch (e) {
        fail(e)
      }
    }
    if (finishError) {
      // Requeue off and the task failed: its own error, not a copy of its message.
      if (threw && info?.reason === 'failed') throw threw.error
      throw finishError
    }
    return again
  }

  /** Calls onNewLeader with each state of the election until the observer ends. */
  async #follow(observer, fail) {
    try {
      for await (const leader of observer) this.#onNewLeader(leader)
    } catch (e) {
      fail(e)
    }
  }
}

module.exports = { LeaderTask }
