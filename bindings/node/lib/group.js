'use strict'
// Group membership: members are session-bound keys under a prefix; a watch reports joins,
// leaves and updates.

const { EventEmitter } = require('node:events')
const { kToken, kLost, kClientClosed } = require('./symbols.js')
const { LostError, settle, callSync } = require('./errors.js')
const { waitOptions, toBuffer } = require('./checks.js')
const { cancellable } = require('./cancel.js')
const { optionsOf } = require('../options.js')
const { sessionOf } = require('./session.js')
const { NativeStream } = require('./stream.js')

/** One live member as read from Consul; `createIndex` and `modifyIndex` are BigInt. */
class MemberInfo {
  constructor(n) {
    /** The member's id (the last segment of its key). */
    this.id = n.id
    /** The value it joined with (or last set with `updateValue`). */
    this.value = n.value
    /** The session its key is acquired with. */
    this.session = n.session
    /** The raft index that created its key: members sorted by it are in joining order. */
    this.createIndex = BigInt(n.createIndex)
    /** The raft index of the key's last change. */
    this.modifyIndex = BigInt(n.modifyIndex)
    Object.freeze(this)
  }
  toJSON() {
    return {
      id: this.id,
      value: this.value.toString('base64'),
      session: this.session,
      createIndex: String(this.createIndex),
      modifyIndex: String(this.modifyIndex),
    }
  }
}

function eventOf(n) {
  switch (n.type) {
    case 'snapshot':
      return { type: 'snapshot', members: n.members.map((m) => new MemberInfo(m)) }
    case 'joined':
    case 'updated':
      return { type: n.type, member: new MemberInfo(n.member) }
    case 'left':
      return { type: 'left', id: n.id }
    default:
      return { type: n.type }
  }
}

/**
 * A group of members under one KV prefix (`<prefix>/<id>`, each key acquired with its member's
 * session, so the group lists exactly the live processes). A handle holds no state at Consul:
 * any number of handles, in any processes, may share a prefix.
 */
class Group {
  #native
  #track
  constructor(token, n, track) {
    if (token !== kToken) throw new TypeError('use client.group() to make a Group')
    this.#native = n
    this.#track = track
  }
  /** The prefix (without a trailing '/'). */
  get prefix() {
    return this.#native.prefix
  }
  /**
   * Joins as member `id` with `value` (Buffer or string), under the client's default session or
   * `options.session`, and resolves with the Member. Rejects with BATON_CONFLICT when the id is
   * taken by a live session (or within the lock-delay of its last holder's session),
   * BATON_INVALID_ARGUMENT for an id that is not one key segment.
   */
  async join(id, value, options) {
    if (typeof id !== 'string') throw new TypeError(`id must be a string, got ${typeof id}`)
    const v = toBuffer('value', value ?? '')
    const o = optionsOf('join', options, ['session'])
    const s = sessionOf(o.session)
    return this.#track((lostId) => settle(() => this.#native.join(id, v, s, lostId)), (n) => new Member(kToken, n))
  }
  /** The live members, sorted by id. */
  async members() {
    const list = await settle(() => this.#native.members())
    return list.map((m) => new MemberInfo(m))
  }
  /**
   * An async iterator of the group's events: first `{ type: 'snapshot', members }`, then
   * `{ type: 'joined', member }`, `{ type: 'left', id }`, `{ type: 'updated', member }` as they
   * happen. `options.signal` aborts it, `options.timeoutMs` bounds each wait (BATON_TIMEOUT);
   * `close()` or `break` ends it.
   */
  watch(options) {
    const n = callSync(() => this.#native.watch())
    return new MembersWatch(kToken, n, this.prefix, options)
  }
}

/** The events of a group (see Group.watch). */
class MembersWatch extends NativeStream {
  #prefix
  constructor(token, n, prefix, options) {
    if (token !== kToken) throw new TypeError('use group.watch() to make a MembersWatch')
    super(`group ${JSON.stringify(prefix)} watch`, n, options, eventOf)
    this.#prefix = prefix
  }
  /** The group's prefix. */
  get prefix() {
    return this.#prefix
  }
}

/**
 * This process's membership of a group. Emits 'lost' (with the reason: 'key_changed',
 * 'session_lost') when it ends other than by `leave()`; `lostSignal` aborts when it ends for
 * any reason.
 */
class Member extends EventEmitter {
  #native
  #controller = new AbortController()
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use group.join() to make a Member')
    super()
    this.#native = n
  }
  /** The member's id. */
  get id() {
    return this.#native.id
  }
  /** The member's key (`<prefix>/<id>`). */
  get key() {
    return this.#native.key
  }
  /** The ID of the session the member key is acquired with. */
  get sessionId() {
    return this.#native.sessionId
  }
  /** Whether still a member: not left, not lost, session valid (local check). */
  isMember() {
    return this.#native.isMember()
  }
  /** Why the membership ended ('left', 'key_changed', 'session_lost'), or null while it lasts. */
  get lostReason() {
    return this.#native.lostReason() ?? null
  }
  /** With `lostReason` 'session_lost': why the session was lost; else null. */
  get lostSessionReason() {
    return this.#native.lostSessionReason() ?? null
  }
  /** An AbortSignal that aborts (with a LostError) when the membership ends. */
  get lostSignal() {
    if (!this.#controller.signal.aborted) {
      const reason = this.#native.lostReason()
      if (reason) this.#end(reason)
    }
    return this.#controller.signal
  }
  /**
   * Resolves with why the membership ended (at once if it has); rejects with BATON_TIMEOUT while
   * still a member at `timeoutMs`, an AbortError when `signal` aborts.
   */
  async waitLost(options) {
    const { timeoutMs, signal } = waitOptions('waitLost', options)
    const reason = await cancellable(signal, (c) => this.#native.waitLost(timeoutMs, c))
    this.#end(reason)
    return reason
  }
  /**
   * Replaces the member's value (what `members()` lists and watches report as 'updated');
   * BATON_CONFLICT when no longer a member.
   */
  async updateValue(value) {
    const v = toBuffer('value', value)
    await settle(() => this.#native.updateValue(v))
  }
  /** Leaves the group (the member key is deleted); resolves false if no longer a member. */
  async leave() {
    const left = await settle(() => this.#native.leave())
    this.#end(this.#native.lostReason() ?? 'left')
    return left
  }
  /** Leaves if still a member (for `await using`). */
  async [Symbol.asyncDispose]() {
    await this.leave()
  }
  #end(reason) {
    if (!this.#controller.signal.aborted) this.#controller.abort(new LostError(`member ${JSON.stringify(this.id)}`, reason))
  }
  [kLost](reason) {
    this.#end(reason)
    if (reason !== 'left') this.emit('lost', reason)
  }
  [kClientClosed]() {
    this.#end('client_closed')
  }
}

module.exports = { Group, Member, MembersWatch, MemberInfo }
