'use strict'
// Argument checks shared by the classes: keys, durations, session and wait options, values and
// 64-bit numbers.

const { optionsOf } = require('../options.js')

const MAX_U64 = (1n << 64n) - 1n

// Key rules are the core's, one place for every language (see `core/src/foundations/keys.rs`): one leading
// '/' is dropped (`c.lock('/a')` is the lock on 'a', as in Python, C and Rust, and so is a
// transaction op on '/a'); an empty key, a key still beginning with '/' after that, or one with
// a NUL byte is BATON_INVALID_ARGUMENT naming the problem. Here only the JS type is checked.
function checkKey(key, name = 'key') {
  if (typeof key !== 'string') throw new TypeError(`${name} must be a string, got ${typeof key}`)
}

/** The longest finite duration accepted (Go's and Python's limit: 2^63 ns, about 292 years). */
const MAX_MS = 9223372036000

function checkMillis(name, v, { positive = false } = {}) {
  if (v === undefined || v === null) return
  if (typeof v !== 'number') throw new TypeError(`${name} must be a number of milliseconds, got ${typeof v}`)
  if (Number.isNaN(v) || v < 0 || (positive && v === 0) || (v === Infinity && positive)) {
    throw new RangeError(`${name} must be a ${positive ? 'positive' : 'non-negative'} number of milliseconds, got ${v}`)
  }
  if (v !== Infinity && v > MAX_MS) {
    throw new RangeError(`${name} must be at most ${MAX_MS} ms (about 292 years)${positive ? '' : ' or Infinity'}, got ${v}`)
  }
}

const SESSION_OPTION_KEYS = ['name', 'ttlMs', 'lockDelayMs', 'behavior', 'node', 'nodeChecks', 'serviceChecks', 'checks']

function checkStringList(name, v) {
  if (v === undefined || v === null) return
  if (!Array.isArray(v)) throw new TypeError(`${name} must be an array of check IDs, got ${typeof v}`)
  v.forEach((c, i) => {
    if (typeof c !== 'string') throw new TypeError(`${name}[${i}] must be a string, got ${typeof c}`)
  })
}

/**
 * Session options as the addon takes them. Absent `ttlMs`: the default TTL (15 s). `ttlMs: 0` is
 * refused (Consul would make a session that never expires); `ttlMs: null` asks for no TTL, sent
 * as `noTtl` (the addon cannot tell null from absent).
 */
function checkSessionOptions(options) {
  const o = optionsOf('session', options, SESSION_OPTION_KEYS)
  checkStringList('nodeChecks', o.nodeChecks)
  checkStringList('serviceChecks', o.serviceChecks)
  checkStringList('checks', o.checks)
  if (o.node !== undefined && o.node !== null && typeof o.node !== 'string') {
    throw new TypeError(`node must be a string, got ${typeof o.node}`)
  }
  checkMillis('ttlMs', o.ttlMs)
  if (o.ttlMs === Infinity) throw new RangeError('ttlMs must be finite (ttlMs: null for a session without a TTL)')
  if (o.ttlMs === 0) {
    throw new RangeError(
      'ttlMs must be positive: 0 would create a session that never expires (a crashed process would keep ' +
        'its locks while its node lives); pass ttlMs: null to ask for a session without a TTL',
    )
  }
  checkMillis('lockDelayMs', o.lockDelayMs)
  if (o.behavior !== undefined && o.behavior !== 'release' && o.behavior !== 'delete') {
    throw new TypeError(`behavior must be 'release' or 'delete', got ${JSON.stringify(o.behavior)}`)
  }
  if (o.ttlMs !== null) return o
  const { ttlMs, ...rest } = o
  return { ...rest, noTtl: true }
}

/** `{ signal, timeoutMs }` of a waiting call; `timeoutMs: Infinity` (or absent) waits forever. */
function waitOptions(what, options, defaultTimeout = undefined) {
  const o = optionsOf(what, options, ['timeoutMs', 'signal'])
  const timeoutMs = o.timeoutMs ?? defaultTimeout
  checkMillis('timeoutMs', timeoutMs)
  const { signal } = o
  if (signal !== undefined && signal !== null && !(signal instanceof AbortSignal)) {
    throw new TypeError('signal must be an AbortSignal')
  }
  return { timeoutMs: timeoutMs === Infinity ? undefined : timeoutMs, signal: signal ?? undefined }
}

function toBuffer(name, v) {
  if (typeof v === 'string') return Buffer.from(v)
  if (Buffer.isBuffer(v)) return v
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength)
  throw new TypeError(`${name} must be a Buffer, a Uint8Array or a string`)
}

/** A uint64 given as bigint or safe integer, as the decimal string the addon takes. */
function u64(name, v) {
  if (typeof v === 'bigint') {
    if (v < 0n || v > MAX_U64) throw new RangeError(`${name} must be between 0 and 2^64-1, got ${v}`)
    return v.toString()
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v) || v < 0) {
      throw new RangeError(`${name} must be a non-negative safe integer (or a BigInt), got ${v}`)
    }
    return v.toString()
  }
  throw new TypeError(`${name} must be a BigInt or a number, got ${typeof v}`)
}

const MIN_I64 = -(1n << 63n)
const MAX_I64 = (1n << 63n) - 1n

/**
 * An int64 given as bigint or safe integer (a counter's value), as the decimal string the addon
 * takes. A number that is not a safe integer is a RangeError: it may already have lost digits.
 */
function i64(name, v) {
  if (typeof v === 'bigint') {
    if (v < MIN_I64 || v > MAX_I64) throw new RangeError(`${name} must be between -2^63 and 2^63-1, got ${v}`)
    return v.toString()
  }
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) {
      throw new RangeError(`${name} must be a safe integer (or a BigInt for larger values), got ${v}`)
    }
    return v.toString()
  }
  throw new TypeError(`${name} must be a BigInt or a number, got ${typeof v}`)
}

function checkNote(name, v) {
  if (v !== undefined && v !== null && typeof v !== 'string') throw new TypeError(`${name} must be a string, got ${typeof v}`)
}

module.exports = {
  MAX_MS,
  checkKey,
  checkMillis,
  checkStringList,
  checkSessionOptions,
  checkNote,
  waitOptions,
  toBuffer,
  u64,
  i64,
}
