'use strict'
// Counters: an int64 in one KV key, changed atomically from any number of processes.

const { kToken } = require('./symbols.js')
const { settle, callSync } = require('./errors.js')
const { i64 } = require('./checks.js')
const { NativeStream } = require('./stream.js')

/**
 * A 64-bit signed counter kept in one KV key (an absent key is 0). Values are BigInt, as every
 * 64-bit number of this package; arguments may be BigInt or safe-integer numbers (a number that
 * is not a safe integer is a RangeError). Every write is a check-and-set retried on a lost race,
 * so concurrent adds from any number of clients all count, exactly once each.
 */
class Counter {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.counter() to make a Counter')
    this.#native = n
  }
  /** The key. */
  get key() {
    return this.#native.key
  }
  /** The current value (a consistent read; 0n for an absent key). */
  async get() {
    return BigInt(await settle(() => this.#native.get()))
  }
  /** Writes `value` whatever the key holds (the way to reset it). */
  async set(value) {
    const v = i64('value', value)
    await settle(() => this.#native.set(v))
  }
  /**
   * Adds `delta` atomically and resolves with the new value. Rejects with
   * BATON_INVALID_ARGUMENT when the sum overflows an int64 (nothing written).
   */
  async add(delta) {
    const d = i64('delta', delta)
    return BigInt(await settle(() => this.#native.add(d)))
  }
  /** `add(1)`. */
  async increment() {
    return this.add(1n)
  }
  /** `add(-1)`. */
  async decrement() {
    return this.add(-1n)
  }
  /** Writes `next` if the value is `expected`, atomically; resolves whether it did. */
  async compareAndSet(expected, next) {
    const e = i64('expected', expected)
    const n = i64('next', next)
    return settle(() => this.#native.compareAndSet(e, n))
  }
  /**
   * An async iterator of the counter's values: first the current one, then each value that
   * differs from the last one yielded (changes close together may be seen once, as the latest).
   * `options.signal` aborts it, `options.timeoutMs` bounds each wait (BATON_TIMEOUT);
   * `close()` or `break` ends it.
   */
  watch(options) {
    const n = callSync(() => this.#native.watch())
    return new CounterWatch(kToken, n, this.key, options)
  }
}

/** The values of a counter (see Counter.watch): an async iterator of BigInt. */
class CounterWatch extends NativeStream {
  #key
  constructor(token, n, key, options) {
    if (token !== kToken) throw new TypeError('use counter.watch() to make a CounterWatch')
    super(`counter ${JSON.stringify(key)} watch`, n, options, (v) => BigInt(v))
    this.#key = key
  }
  /** The counter's key. */
  get key() {
    return this.#key
  }
}

module.exports = { Counter, CounterWatch }
