'use strict'
// Value classes: Sequencer, Leader, KvEntry (64-bit fields as BigInt, `toJSON()` as strings).

const native = require('./addon.js')
const { optionsOf } = require('../options.js')
const { translate } = require('./errors.js')
const { checkKey, u64 } = require('./checks.js')

/**
 * Proof of one acquisition: key, session, LockIndex and a monotonic fencing `token` (both
 * BigInt). `String(seq)` / `toJSON()` give the stable form `<lockIndex>:<token>:<session>:<key>`
 * that `Sequencer.parse` reads back.
 */
class Sequencer {
  constructor(fields) {
    const { key, session, lockIndex, token } = optionsOf('Sequencer', fields, ['key', 'session', 'lockIndex', 'token'])
    checkKey(key)
    if (typeof session !== 'string' || session === '') throw new TypeError('session must be a non-empty string')
    this.key = key
    this.session = session
    this.lockIndex = BigInt(u64('lockIndex', typeof lockIndex === 'string' ? BigInt(lockIndex) : lockIndex))
    this.token = BigInt(u64('token', typeof token === 'string' ? BigInt(token) : token))
    Object.freeze(this)
  }
  static parse(text) {
    if (typeof text !== 'string') throw new TypeError(`sequencer text must be a string, got ${typeof text}`)
    let n
    try {
      n = native.parseSequencer(text)
    } catch (e) {
      const t = translate(e)
      const err = new TypeError(t.message)
      err.code = 'BATON_INVALID_ARGUMENT'
      throw err
    }
    return new Sequencer(n)
  }
  toString() {
    return `${this.lockIndex}:${this.token}:${this.session}:${this.key}`
  }
  toJSON() {
    return this.toString()
  }
}

/** The leader of an election: its value, session, LockIndex and ModifyIndex (`token`). */
class Leader {
  constructor(n) {
    this.value = n.value
    this.session = n.session
    this.lockIndex = BigInt(n.lockIndex)
    this.token = BigInt(n.token)
    Object.freeze(this)
  }
  toJSON() {
    return { value: this.value.toString(), session: this.session, lockIndex: String(this.lockIndex), token: String(this.token) }
  }
}

/** A KV entry as a transaction returned it; the 64-bit fields are BigInt. */
class KvEntry {
  constructor(n) {
    this.key = n.key
    this.value = n.value ?? null
    this.flags = BigInt(n.flags)
    this.session = n.session ?? null
    this.lockIndex = BigInt(n.lockIndex)
    this.createIndex = BigInt(n.createIndex)
    this.modifyIndex = BigInt(n.modifyIndex)
    Object.freeze(this)
  }
  toJSON() {
    return {
      key: this.key,
      value: this.value === null ? null : this.value.toString('base64'),
      flags: String(this.flags),
      session: this.session,
      lockIndex: String(this.lockIndex),
      createIndex: String(this.createIndex),
      modifyIndex: String(this.modifyIndex),
    }
  }
}

module.exports = { Sequencer, Leader, KvEntry }
