'use strict'
// The client: KV, sessions, the agent, the recipes' factories, fencing, close.

const native = require('./addon.js')
const { optionsOf } = require('../options.js')
const { kToken, kClientClosed } = require('./symbols.js')
const { settle, callSync } = require('./errors.js')
const { checkKey, checkMillis, checkNote, checkSessionOptions, toBuffer, u64 } = require('./checks.js')
const { holders, freeId, register, dispatchLost } = require('./holdable.js')
const { Sequencer, Leader, KvEntry } = require('./values.js')
const { Session, sessionOf } = require('./session.js')
const { Agent } = require('./agent.js')
const { Lock } = require('./lock.js')
const { Semaphore } = require('./semaphore.js')
const { Election } = require('./election.js')
const { LeaderObserver } = require('./observer.js')
const { RwLock, MultiLock } = require('./rwlock.js')
const { LeaderTask } = require('./leader_task.js')
const { Group } = require('./group.js')
const { Barrier, DoubleBarrier } = require('./barrier.js')
const { Counter } = require('./counter.js')

const TXN_VERBS = new Set([
  'set', 'cas', 'lock', 'unlock', 'get', 'get-or-empty', 'get-tree', 'check-session',
  'check-index', 'check-not-exists', 'delete', 'delete-cas', 'delete-tree',
])

function txnOp(op, i) {
  if (op === null || typeof op !== 'object') throw new TypeError(`ops[${i}] must be an object`)
  optionsOf(`ops[${i}]`, op, ['verb', 'key', 'value', 'flags', 'index', 'session'])
  if (!TXN_VERBS.has(op.verb)) throw new TypeError(`ops[${i}].verb must be one of ${[...TXN_VERBS].join(', ')}, got ${JSON.stringify(op.verb)}`)
  checkKey(op.key, `ops[${i}].key`)
  const out = { verb: op.verb, key: op.key }
  if (op.value !== undefined && op.value !== null) out.value = toBuffer(`ops[${i}].value`, op.value)
  if (op.flags !== undefined) out.flags = u64(`ops[${i}].flags`, op.flags)
  if (op.index !== undefined) out.index = u64(`ops[${i}].index`, op.index)
  if (op.session !== undefined) {
    if (typeof op.session !== 'string') throw new TypeError(`ops[${i}].session must be a string`)
    out.session = op.session
  }
  return out
}

function checkSequencerArg(seq) {
  if (!(seq instanceof Sequencer)) throw new TypeError('sequencer must be a Sequencer (lock.sequencer or Sequencer.parse())')
  return seq.toString()
}

const CLIENT_OPTION_KEYS = ['address', 'token', 'datacenter', 'requestTimeoutMs', 'defaultSession']

/** A connection to Consul, configured from CONSUL_* variables and `options`. */
class Client {
  #native
  #owned = new Set()
  constructor(options) {
    let o = optionsOf('Client', options, CLIENT_OPTION_KEYS)
    for (const k of ['address', 'token', 'datacenter']) checkNote(k, o[k])
    checkMillis('requestTimeoutMs', o.requestTimeoutMs)
    if (o.defaultSession !== undefined && o.defaultSession !== null) {
      o = { ...o, defaultSession: checkSessionOptions(o.defaultSession) }
    }
    this.#native = callSync(() => new native.NativeClient(o, dispatchLost))
  }
  get address() {
    return this.#native.address
  }
  /** The value at `key` as a Buffer, or null. */
  kvGet(key) {
    checkKey(key)
    return settle(() => this.#native.kvGet(key))
  }
  /** The entry at `key` (value, flags, session, indexes as BigInt), or null. */
  async kvGetEntry(key) {
    checkKey(key)
    const e = await settle(() => this.#native.kvGetEntry(key))
    return e ? new KvEntry(e) : null
  }
  /**
   * Writes `value` (Buffer or string) at `key`. `{ flags }` sets the key's flags; `{ cas }`
   * writes only if the key's ModifyIndex is `cas` (0: only if the key does not exist) and
   * resolves false when it is not.
   */
  kvPut(key, value, options) {
    checkKey(key)
    const buf = typeof value === 'string' ? Buffer.from(value) : value
    if (!Buffer.isBuffer(buf)) throw new TypeError('value must be a Buffer or a string')
    const o = optionsOf('kvPut', options, ['flags', 'cas'])
    if (o.flags === undefined && o.cas === undefined) return settle(() => this.#native.kvPut(key, buf))
    const flags = o.flags === undefined ? undefined : u64('flags', o.flags)
    const cas = o.cas === undefined ? undefined : u64('cas', o.cas)
    return settle(() => this.#native.kvPutWith(key, buf, flags, cas))
  }
  /**
   * Deletes `key` (a missing key counts as deleted). `{ cas }` deletes only if its ModifyIndex
   * is `cas` and resolves false when it is not.
   */
  kvDelete(key, options) {
    checkKey(key)
    const o = optionsOf('kvDelete', options, ['cas'])
    const cas = o.cas === undefined ? undefined : u64('cas', o.cas)
    return settle(() => this.#native.kvDelete(key, cas))
  }
  /** Creates a session renewed in the background. */
  async createSession(options) {
    const o = checkSessionOptions(options)
    return this.#session(await settle(() => this.#native.createSession(o)))
  }
  /**
   * The client's default session, the one its locks, semaphores and elections share when given
   * none (created on first use with `defaultSession` options; replaced by a new one once lost).
   */
  async defaultSession() {
    return this.#session(await settle(() => this.#native.defaultSession()))
  }
  #session(n) {
    const id = freeId()
    const session = new Session(kToken, n)
    register(session, id, this.#owned)
    this.#native.watchSession(n, id)
    return session
  }
  /**
   * Manages a session created elsewhere (another process, the `consul` CLI): renewed if it has
   * a TTL, watched for invalidation, never destroyed by `close()`. Rejects with
   * 'BATON_INVALID_ARGUMENT' for an ID that is not a UUID, 'BATON_NOT_FOUND' for a session
   * Consul does not know.
   */
  async adoptSession(id) {
    if (typeof id !== 'string') throw new TypeError(`id must be a string, got ${typeof id}`)
    return this.#session(await settle(() => this.#native.adoptSession(id)))
  }
  /** The local agent's check and service endpoints. */
  get agent() {
    return new Agent(kToken, this.#native)
  }
  /** A lock on `key`; `value` is written on acquire; `session` defaults to the client's. */
  lock(key, options) {
    checkKey(key)
    const o = optionsOf('lock', options, ['value', 'session'])
    const value = o.value === undefined ? undefined : toBuffer('value', o.value)
    const session = sessionOf(o.session)
    return this.#make(Lock, (id) => this.#native.lock(key, value, session, id))
  }
  /**
   * A semaphore with `limit` slots on `prefix`. A session holds at most one slot of a
   * semaphore: contenders in one process need a session each (`options.session`) or queue.
   */
  semaphore(prefix, limit, options) {
    checkKey(prefix, 'prefix')
    if (typeof limit !== 'number' && typeof limit !== 'bigint') {
      throw new TypeError(`limit must be a positive integer, got ${typeof limit}`)
    }
    if (limit <= 0 || (typeof limit === 'number' && !Number.isSafeInteger(limit))) {
      throw new RangeError(`limit must be a positive integer, got ${limit}`)
    }
    const o = optionsOf('semaphore', options, ['value', 'session'])
    const value = o.value === undefined ? undefined : toBuffer('value', o.value)
    const session = sessionOf(o.session)
    const l = u64('limit', limit)
    return this.#make(Semaphore, (id) => this.#native.semaphore(prefix, l, value, session, id))
  }
  /** A participant in the election on `key`. */
  election(key, options) {
    checkKey(key)
    const o = optionsOf('election', options, ['session', 'flags'])
    const session = sessionOf(o.session)
    const flags = o.flags === undefined || o.flags === null ? undefined : u64('flags', o.flags)
    return this.#make(Election, (id) => this.#native.election(key, session, id, flags))
  }
  /**
   * The reader side of the read-write lock on `prefix`: readers share it, and wait only for a
   * writer that arrived before them. Each call is an independent handle (its own contender key
   * per acquire, under the client's default session).
   */
  readLock(prefix) {
    checkKey(prefix, 'prefix')
    return this.#make(RwLock, (id) => this.#native.rwLock(prefix, false, id))
  }
  /** The writer side of the read-write lock on `prefix`: held alone, in arrival order. */
  writeLock(prefix) {
    checkKey(prefix, 'prefix')
    return this.#make(RwLock, (id) => this.#native.rwLock(prefix, true, id))
  }
  /**
   * A lock on all of `keys` at once (duplicates dropped, sorted): all or none, each key
   * excluding a Lock (or Go's `api.Lock`) on it. `value` is written to every key; `session`
   * defaults to the client's.
   */
  multiLock(keys, options) {
    if (!Array.isArray(keys)) throw new TypeError(`keys must be an array of strings, got ${typeof keys}`)
    keys.forEach((k, i) => checkKey(k, `keys[${i}]`))
    const o = optionsOf('multiLock', options, ['value', 'session'])
    const value = o.value === undefined ? undefined : toBuffer('value', o.value)
    const session = sessionOf(o.session)
    return this.#make(MultiLock, (id) => this.#native.multiLock(keys, value, session, id))
  }
  /**
   * A leader task on the election `key`, campaigning with `value`: see LeaderTask.run.
   * `requeue` (default true): campaign again after a term; `requeueDelayMs` (default 500): how
   * long, after its task returned, this candidate lets another take over first;
   * `onStartedLeading()`, `onStoppedLeading({ reason, lostReason, error })` and
   * `onNewLeader(leader | null)` are called on the JS thread.
   */
  leaderTask(key, value, options) {
    checkKey(key)
    const v = toBuffer('value', value)
    const o = optionsOf('leaderTask', options, ['requeue', 'requeueDelayMs', 'onStartedLeading', 'onStoppedLeading', 'onNewLeader'])
    if (o.requeue !== undefined && typeof o.requeue !== 'boolean') throw new TypeError(`requeue must be a boolean, got ${typeof o.requeue}`)
    checkMillis('requeueDelayMs', o.requeueDelayMs)
    if (o.requeueDelayMs === Infinity) throw new RangeError('requeueDelayMs must be finite')
    for (const k of ['onStartedLeading', 'onStoppedLeading', 'onNewLeader']) {
      if (o[k] !== undefined && o[k] !== null && typeof o[k] !== 'function') throw new TypeError(`${k} must be a function, got ${typeof o[k]}`)
    }
    const n = callSync(() => this.#native.leaderTask(key, v, { requeue: o.requeue, requeueDelayMs: o.requeueDelayMs ?? undefined }))
    const observe = () => new LeaderObserver(kToken, callSync(() => this.#native.observeLeader(key)))
    const callbacks = { onStartedLeading: o.onStartedLeading ?? undefined, onStoppedLeading: o.onStoppedLeading ?? undefined, onNewLeader: o.onNewLeader ?? undefined }
    return new LeaderTask(kToken, n, callbacks, observe)
  }
  /** The group membership recipe on `prefix` (members are `<prefix>/<id>`). */
  group(prefix) {
    checkKey(prefix, 'prefix')
    const n = callSync(() => this.#native.group(prefix))
    const track = async (start, make) => {
      const id = freeId()
      const obj = make(await start(id))
      register(obj, id, this.#owned)
      return obj
    }
    return new Group(kToken, n, track)
  }
  /** A barrier on `key` (nothing is written until `hold()`). */
  barrier(key) {
    checkKey(key)
    return new Barrier(kToken, callSync(() => this.#native.barrier(key)))
  }
  /**
   * A double barrier of `count` participants on `prefix`; each participant's key is bound to the
   * client's default session, or to `options.session`.
   */
  doubleBarrier(prefix, count, options) {
    checkKey(prefix, 'prefix')
    if (typeof count !== 'number') throw new TypeError(`count must be a positive integer, got ${typeof count}`)
    if (!Number.isInteger(count) || count < 1 || count > 0xffffffff) throw new RangeError(`count must be a positive integer, got ${count}`)
    const o = optionsOf('doubleBarrier', options, ['session'])
    const session = sessionOf(o.session)
    return new DoubleBarrier(kToken, callSync(() => this.#native.doubleBarrier(prefix, count, session)))
  }
  /** A counter kept in `key` (an absent key is 0; nothing is sent until a call). */
  counter(key) {
    checkKey(key)
    return new Counter(kToken, callSync(() => this.#native.counter(key)))
  }
  #make(Class, create) {
    const id = freeId()
    const obj = new Class(kToken, callSync(() => create(id)))
    register(obj, id, this.#owned)
    return obj
  }
  /** The current leader of the election on `key` (one consistent read), or null. */
  async leader(key) {
    checkKey(key)
    const l = await settle(() => this.#native.leader(key))
    return l ? new Leader(l) : null
  }
  /** Follows the election on `key` without taking part: see LeaderObserver. */
  observeLeader(key, options) {
    checkKey(key)
    return new LeaderObserver(kToken, callSync(() => this.#native.observeLeader(key)), options)
  }
  /** Whether `sequencer` is still current: its session holds the key at its LockIndex. */
  async checkSequencer(sequencer) {
    const s = checkSequencerArg(sequencer)
    return settle(() => this.#native.checkSequencer(s))
  }
  /**
   * Runs KV operations in one transaction that applies only while `sequencer`'s session still
   * holds its lock (a `check-session` in front). A stale holder gets BATON_CONFLICT (message
   * starting 'stale sequencer') and nothing is written. Resolves with the entries Consul
   * returned for `ops`.
   */
  async guardedTxn(sequencer, ops) {
    const s = checkSequencerArg(sequencer)
    if (!Array.isArray(ops)) throw new TypeError('ops must be an array')
    const list = ops.map(txnOp)
    const entries = await settle(() => this.#native.guardedTxn(s, list))
    return entries.map((e) => new KvEntry(e))
  }
  /** Writes `value` at `key` only while `sequencer` is current (see guardedTxn). */
  async guardedPut(sequencer, key, value, options) {
    checkKey(key, 'key')
    const o = optionsOf('guardedPut', options, ['flags'])
    const op = { verb: 'set', key, value: toBuffer('value', value) }
    if (o.flags !== undefined) op.flags = o.flags
    await this.guardedTxn(sequencer, [op])
  }
  /**
   * A snapshot of this client's metrics, counted since it was made (see `ClientMetrics` in
   * index.d.ts for every field): a plain object, each metric of `METRICS` under its name less
   * `baton_` and `_total` (`acquires.lock.timed_out`, `held.lock`), durations in seconds.
   * Synchronous and cheap: it reads counters, no request is made.
   */
  metrics() {
    return JSON.parse(this.#native.metricsJson())
  }
  /**
   * Releases held locks, destroys the sessions this client created and joins its threads.
   * The `lostSignal`s of its locks, semaphores and elections abort with reason 'client_closed'
   * (no 'lost' event: like the core, callbacks stop at close).
   */
  async close(timeoutMs) {
    checkMillis('timeoutMs', timeoutMs)
    const closed = await settle(() => this.#native.close(timeoutMs))
    for (const id of this.#owned) holders.get(id)?.deref()?.[kClientClosed]()
    // The thread that ran the close (and any other idle one) ends now, not 10 s from now.
    native.endIdleThreads()
    return closed
  }
  async [Symbol.asyncDispose]() {
    await this.close()
  }
}

module.exports = { Client }
