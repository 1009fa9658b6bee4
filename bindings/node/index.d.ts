/// <reference types="node" />
import type { EventEmitter } from 'node:events'
export { startDevServer, DevServer } from './devserver'
export type { DevServerOptions } from './devserver'
import type {
  ClientOptions as NativeClientOptions,
  ServiceOptions,
  SessionOptions as NativeSessionOptions,
  TtlCheckOptions,
} from './native'

/**
 * Options of `createSession` and of `ClientOptions.defaultSession`; every duration is in
 * milliseconds and says so in its name. Defaults, the same as C's and the default session's:
 * `ttlMs` 15000 (15 s) when absent, and Consul's lock-delay (15 s) when `lockDelayMs` is absent
 * (`0`: none). `ttlMs: 0` is a RangeError (Consul would read it as "no TTL"); a session without
 * a TTL only when asked for with `ttlMs: null` — it costs: nothing expires it, so a crashed
 * process keeps its locks for as long as its node lives (until someone destroys the session or
 * a health check it is bound to fails). Use it only with `nodeChecks` / `serviceChecks` that
 * fail when the process dies.
 * An unknown key is a TypeError naming it (`ttl`, `lockDelay`: "did you mean ttlMs?").
 * `nodeChecks` / `serviceChecks` bind the session to health checks: it is invalidated (its
 * locks released) when one turns critical; pass `lockDelayMs: 0` for a lock another process
 * must get right after. `checks` is Consul's older name, treated as `nodeChecks`.
 */
export type SessionOptions = Omit<NativeSessionOptions, 'ttlMs' | 'noTtl'> & {
  /** TTL in milliseconds, positive (Consul: 10 s to 24 h); absent: 15000; `null`: no TTL (see SessionOptions). */
  ttlMs?: number | null
}
/** A TTL check for `agent.checkRegister` (`ttlMs` in milliseconds). */
export type { TtlCheckOptions }
/** A service for `agent.serviceRegister`. */
export type { ServiceOptions }

/** A check's status. */
export type CheckStatus = 'passing' | 'warning' | 'critical'

/** The same as SessionOptions (kept for code written against earlier typings). */
export type SessionOptionsIn = SessionOptions

/**
 * Options of a client; unset fields come from the `CONSUL_*` environment variables. An unknown
 * key is a TypeError naming it (`adress`: "did you mean address?"), never a silent fall-back to
 * the environment; so is an unknown key in any options object of this package. An address that
 * makes no URL is refused here, naming it (BatonError 'BATON_INVALID_ARGUMENT').
 */
export interface ClientOptions extends Omit<NativeClientOptions, 'defaultSession'> {
  /**
   * Options of the session the client's locks, semaphores and elections share by default
   * (name "baton", TTL 15 s and Consul's lock-delay unless set here; see SessionOptions).
   */
  defaultSession?: SessionOptions
}

/** A log record's level (`'off'` as a filter silences baton). */
export type LogLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace'

/**
 * Routes baton's log records — a Consul that does not answer (an untimed acquire against a wrong
 * address says so within about a second), a session or a holding lost, a release or session
 * destroy `close()` could not confirm — to `logger(level, message, target)`, called on the JS
 * thread for each record up to `options.level` (default `'warn'`; `'off'` silences baton).
 * `target` is the Rust module (`baton::...`). `setLogger(null)` restores the default: warnings
 * and errors written to standard error, one line each (`baton warn: ...`). Records travel through
 * an unref'd thread-safe function: a pending record never keeps the process alive and baton's
 * threads never wait for the JS thread. One logger per process (the last call wins). A logger
 * that throws is an uncaught exception.
 */
export declare function setLogger(
  logger: ((level: LogLevel, message: string, target: string) => void) | null,
  options?: { level?: LogLevel | 'off' },
): void

// ---- metrics (issue 47) ----------------------------------------------------------------------

/** The recipes holdings are counted by (label `recipe`). */
export type MetricsRecipe = 'lock' | 'semaphore' | 'rwlock' | 'multilock' | 'election'
/**
 * How an acquire call ended (label `outcome` of `baton_acquires_total`): `not_acquired`, a
 * try-once call (`tryAcquire()`, timeout 0) that found it taken; `timed_out`, a call whose
 * timeout passed first (resolved false or rejected 'BATON_TIMEOUT'); `cancelled`, ended by its
 * signal; `error`, any other error.
 */
export type MetricsAcquireOutcome = 'acquired' | 'not_acquired' | 'timed_out' | 'cancelled' | 'error'
/**
 * Why a holding was lost (label `reason`): the loss's own name (`key_changed`, a semaphore's
 * `removed`, `client_closed`), or for a lost session the session's reason.
 */
export type MetricsLossReason =
  | 'key_changed'
  | 'removed'
  | 'invalidated'
  | 'deadline_exceeded'
  | 'destroyed'
  | 'client_closed'
  | 'other'
/** The endpoint families of requests to Consul (label `family`). */
export type MetricsRequestFamily = 'kv' | 'session' | 'txn' | 'agent' | 'status' | 'other'
/** How a request ended (label `outcome` of `baton_requests_total`): `4xx` is every 4xx but 429. */
export type MetricsRequestOutcome = '2xx' | '4xx' | '429' | '5xx' | 'no_answer'

/** A histogram of a metrics snapshot: observations, in seconds, counted into fixed buckets. */
export interface MetricsHistogram {
  /** The buckets' upper bounds in seconds, ascending (the last bucket, +Inf, has none). */
  bounds: number[]
  /**
   * The observations per bucket, NOT cumulative: one more entry than `bounds`, the last counting
   * those above every bound.
   */
  buckets: number[]
  /** The number of observations (the sum of `buckets`). */
  count: number
  /** The sum of the observations, in seconds. */
  sum: number
}

/**
 * A snapshot of one client's metrics (`client.metrics()`), counted in the core since the client
 * was made: each metric of `METRICS` under its name less `baton_` and `_total`, its labels as
 * nested objects in label order (`acquires.lock.timed_out`), every label value listed, durations
 * in seconds. The same shape as Python's `client.metrics()`.
 */
export interface ClientMetrics {
  /**
   * Holdings held now, by recipe: acquired and not yet released or lost (one whose session's
   * deadline passed counts until the client notices).
   */
  held: Record<MetricsRecipe, number>
  /**
   * Acquire calls by recipe and outcome: one call of `acquire`, `tryAcquire` or `campaign` is one,
   * however many requests it made. A read-write lock's both sides count as `rwlock`, an
   * election's campaigns (and a leader task's) as `election`.
   */
  acquires: Record<MetricsRecipe, Record<MetricsAcquireOutcome, number>>
  /** How long acquire calls took, whatever their outcome, by recipe. */
  acquire_wait_seconds: Record<MetricsRecipe, MetricsHistogram>
  /** How long holdings lasted, from acquired to released or lost, by recipe. */
  hold_seconds: Record<MetricsRecipe, MetricsHistogram>
  /** Holdings lost (ended other than by their release), by recipe and reason. */
  losses: Record<MetricsRecipe, Record<MetricsLossReason, number>>
  /** Session renewals by the client's renewer: confirmed by Consul (`ok`) or not (`failed`). */
  renewals: { ok: number; failed: number }
  /** The latency of renewals, ok and failed. */
  renewal_seconds: MetricsHistogram
  /**
   * The smallest lease time left (local, conservative deadline minus now) of the client's live
   * sessions with a TTL; null when there is none.
   */
  lease_left_seconds: number | null
  /**
   * HTTP requests to Consul by endpoint family and outcome (a request cancelled by its caller or
   * interrupted by close is not counted).
   */
  requests: Record<MetricsRequestFamily, Record<MetricsRequestOutcome, number>>
  /**
   * The latency of requests by family (not blocking queries, whose latency is their wait), so its
   * counts may be below `requests`'.
   */
  request_seconds: Record<MetricsRequestFamily, MetricsHistogram>
  /** Requests sent again: a retry after a transient failure (no leader, 429, 503, refused) or a stale connection. */
  retries: number
  /** Seconds calls spent waiting out a Consul without a leader, summed over calls. */
  leaderless_seconds: number
  /**
   * Work owed to Consul and waiting now: `unlocks` of locks and elections, `slots` (every other
   * release: semaphore slots, multi-key and read-write lock releases, barrier and group leaves),
   * `sessions` declared lost and waiting to be destroyed.
   */
  owed: { unlocks: number; slots: number; sessions: number }
}

/** One metric every language exposes (an entry of `METRICS`). */
export interface MetricDef {
  /** The Prometheus name (`baton_acquires_total`). */
  readonly name: string
  /** Its type. */
  readonly type: 'gauge' | 'counter' | 'histogram'
  /** Its label names, in order (the nesting order of its entry in `ClientMetrics`). */
  readonly labels: readonly string[]
  /** The help text. */
  readonly help: string
}

/**
 * Every metric a client exposes, in exposition order: the core's table (names, types, label
 * names, help texts), the same in every language.
 */
export declare const METRICS: readonly MetricDef[]

/** What `registerMetrics` needs of a registry: prom-client's `Registry` (or its global `register`). */
export interface PromRegistryLike {
  registerMetric(metric: any): void
  getSingleMetric?(name: string): unknown
}

/**
 * One metric `registerMetrics` registered: prom-client's metric interface, its `get()` reading the
 * client's snapshot.
 */
export interface SnapshotMetric {
  readonly name: string
  readonly help: string
  readonly type: 'gauge' | 'counter' | 'histogram'
  readonly labelNames: string[]
  /** How prom-client's cluster mode merges workers' values: 'min' for the lease left, else 'sum'. */
  readonly aggregator: 'sum' | 'min'
  /** The metric's samples in the client's current snapshot (as prom-client's metrics give them). */
  get(): Promise<{
    name: string
    help: string
    type: string
    aggregator: string
    values: { value: number; labels: Record<string, string | number>; metricName?: string }[]
  }>
  /** Does nothing: the counts are the core's (`registry.resetMetrics()` calls it). */
  reset(): void
}

/**
 * Registers `client`'s metrics in a prom-client registry (`register`; default: prom-client's
 * global `register`, which needs the optional peer dependency `prom-client` installed): one
 * metric per entry of `METRICS`, with its name, help text and labels (counters end in `_total`),
 * its values read from one `client.metrics()` snapshot per scrape, exact as the core counted
 * them. `baton_lease_left_seconds` has no sample while the client has no session with a TTL.
 * Throws, registering none, when a metric of that name is in the registry already: one client
 * per registry (a registry per client and `Registry.merge` expose several). Returns the
 * registered metrics (`register.removeSingleMetric(m.name)` for each unregisters them).
 */
export declare function registerMetrics(client: Client, register?: PromRegistryLike): SnapshotMetric[]

/**
 * Base of every error baton raises. `code` is stable across languages ('BATON_TIMEOUT',
 * 'BATON_CONFLICT', 'BATON_CANCELLED', 'BATON_CLOSED', 'BATON_SESSION_INVALIDATED',
 * 'BATON_CONNECTION', 'BATON_PERMISSION_DENIED', 'BATON_NOT_FOUND', 'BATON_INVALID_ARGUMENT',
 * 'BATON_SERVER', 'BATON_BAD_RESPONSE', 'BATON_UNSUPPORTED'); errors from a Consul answer also carry it.
 */
export declare class BatonError extends Error {
  readonly name: 'BatonError'
  readonly code: BatonErrorCode
  /** The HTTP status Consul answered with. */
  readonly status?: number
  /** Consul's own error text (the trimmed plain-text body). */
  readonly serverText?: string
  /** The endpoint of the failing request, e.g. `PUT /v1/txn`. */
  readonly endpoint?: string
  /** The full URL the failing request went to (address prefix included, no query string). */
  readonly url?: string
  /** For a failed transaction: every failing operation Consul listed. */
  readonly txnErrors?: ReadonlyArray<{ opIndex: number; what: string }>
  /**
   * True when Consul could not be reached or could not serve the request *now* (no raft
   * leader, a refused or reset connection, a request timeout, 429/502/503/504): worth trying
   * again later. False for refusals (403, 400, a conflict, a bad argument). Acquires, campaigns
   * and semaphore waits already wait transient failures out within their timeout.
   */
  readonly transient: boolean
}

export type BatonErrorCode =
  | 'BATON_CONNECTION'
  | 'BATON_TIMEOUT'
  | 'BATON_CANCELLED'
  | 'BATON_PERMISSION_DENIED'
  | 'BATON_NOT_FOUND'
  | 'BATON_INVALID_ARGUMENT'
  | 'BATON_CONFLICT'
  | 'BATON_SESSION_INVALIDATED'
  | 'BATON_SERVER'
  | 'BATON_BAD_RESPONSE'
  | 'BATON_UNSUPPORTED'
  | 'BATON_CLOSED'

/**
 * Rejection of a call whose `signal` aborted (like Node's own AbortError); `cause` is the
 * signal's reason. By the time it rejects, anything the call acquired has been released.
 */
export declare class AbortError extends Error {
  readonly name: 'AbortError'
  readonly code: 'ABORT_ERR'
}

/** Why a holding ended: the core's names. */
export type LostReason =
  | 'released'
  | 'key_changed'
  | 'removed'
  | 'session_lost'
  | 'client_closed'

/** Why a session was lost: the core's names (`Session.waitLost` resolves with one). */
export type SessionLostReason = 'invalidated' | 'deadline_exceeded' | 'destroyed' | 'client_closed'

/** The reason a `lostSignal` aborts with. */
export declare class LostError extends Error {
  readonly name: 'LostError'
  readonly reason: LostReason
}

/** `{ signal, timeoutMs }` of every call that can wait. */
export interface WaitOptions {
  /** How long to wait, in milliseconds (absent or Infinity: forever; 0: try once). */
  timeoutMs?: number
  signal?: AbortSignal
}

/** A value written to Consul: bytes, or a string (UTF-8). */
export type Bytes = Buffer | Uint8Array | string

/** A uint64: BigInt, or a non-negative safe integer. */
export type U64 = bigint | number

/**
 * Proof of one acquisition. `lockIndex` and `token` are BigInt; `String(seq)` and `toJSON()`
 * give the stable form `<lockIndex>:<token>:<session>:<key>`, which `Sequencer.parse` reads.
 * `token` (the acquisition's ModifyIndex) only grows across holders: hand it to storage that
 * refuses writes with a lower token than it saw.
 */
export declare class Sequencer {
  constructor(fields: { key: string; session: string; lockIndex: U64 | string; token: U64 | string })
  readonly key: string
  readonly session: string
  readonly lockIndex: bigint
  readonly token: bigint
  /** Throws a TypeError (code 'BATON_INVALID_ARGUMENT') for a malformed string. */
  static parse(text: string): Sequencer
  toString(): string
  toJSON(): string
}

/** The leader of an election. `toJSON()` gives the 64-bit fields as decimal strings. */
export declare class Leader {
  /** The value the leader campaigned (or last proclaimed) with. */
  readonly value: Buffer
  /** The leader's session. */
  readonly session: string
  /** The key's LockIndex: changes with each new leader, not with `proclaim`. */
  readonly lockIndex: bigint
  /** The key's ModifyIndex (monotonic). */
  readonly token: bigint
  toJSON(): { value: string; session: string; lockIndex: string; token: string }
}

/** A KV entry a transaction returned. `toJSON()` gives 64-bit fields as strings, value as base64. */
export declare class KvEntry {
  readonly key: string
  /** Null for write operations: Consul returns values only for reads. */
  readonly value: Buffer | null
  readonly flags: bigint
  readonly session: string | null
  readonly lockIndex: bigint
  readonly createIndex: bigint
  readonly modifyIndex: bigint
  toJSON(): {
    key: string
    value: string | null
    flags: string
    session: string | null
    lockIndex: string
    createIndex: string
    modifyIndex: string
  }
}

/** One operation of a guarded transaction (Consul's KV verbs). */
export interface TxnOp {
  verb:
    | 'set'
    | 'cas'
    | 'lock'
    | 'unlock'
    | 'get'
    | 'get-or-empty'
    | 'get-tree'
    | 'check-session'
    | 'check-index'
    | 'check-not-exists'
    | 'delete'
    | 'delete-cas'
    | 'delete-tree'
  key: string
  value?: Bytes | null
  flags?: U64
  index?: U64
  session?: string
}

interface SessionEvents {
  /** The session was lost: Consul ended it ('invalidated') or its lease deadline passed. */
  lost: [reason: SessionLostReason]
}

/**
 * A Consul session renewed in the background. Emits 'lost' once when it is lost; `lostSignal`
 * aborts then, and also when it is destroyed or its client closed.
 */
export declare class Session extends EventEmitter {
  private constructor()
  readonly id: string
  isValid(): boolean
  on<K extends keyof SessionEvents>(event: K, listener: (...args: SessionEvents[K]) => void): this
  once<K extends keyof SessionEvents>(event: K, listener: (...args: SessionEvents[K]) => void): this
  off<K extends keyof SessionEvents>(event: K, listener: (...args: SessionEvents[K]) => void): this
  /** Aborts (reason: a LostError naming why) when the session ends. */
  readonly lostSignal: AbortSignal
  /**
   * Milliseconds (fractional) left until the local lease deadline, which each successful renew
   * moves forward; 0 once lost or past it; null for a session without a TTL.
   */
  timeLeftMs(): number | null
  waitLost(options?: WaitOptions): Promise<SessionLostReason>
  destroy(): Promise<void>
}

interface HoldableEvents {
  /** A holding ended other than by release/resign (not emitted for client close). */
  lost: [reason: LostReason]
}

/** What locks, semaphores and elections share. */
declare class Holdable extends EventEmitter {
  on<K extends keyof HoldableEvents>(event: K, listener: (...args: HoldableEvents[K]) => void): this
  once<K extends keyof HoldableEvents>(event: K, listener: (...args: HoldableEvents[K]) => void): this
  off<K extends keyof HoldableEvents>(event: K, listener: (...args: HoldableEvents[K]) => void): this
  addListener<K extends keyof HoldableEvents>(event: K, listener: (...args: HoldableEvents[K]) => void): this
  removeListener<K extends keyof HoldableEvents>(event: K, listener: (...args: HoldableEvents[K]) => void): this
  /**
   * Aborts (reason: a LostError) when the current holding ends: lost, released, or the client
   * closed. While nothing is held it is an already-aborted signal. Each acquire makes a new one.
   */
  readonly lostSignal: AbortSignal
  isHeld(): boolean
  /**
   * Why the last holding ended, or null while held and before the first acquire: also the
   * reason a `release()` resolved false ('released': already released; 'client_closed'; a loss).
   */
  readonly lostReason: LostReason | null
  /**
   * With `lostReason` 'session_lost': why the session was lost, the reason the session itself
   * reports ('invalidated', 'deadline_exceeded', 'destroyed'); else null.
   */
  readonly lostSessionReason: SessionLostReason | null
}

export interface LockOptions {
  /** Written on acquire and sent again on release. */
  value?: Bytes
  /** Hold with this session instead of the client's default one. */
  session?: Session
}

/** A distributed lock on one key, wire-compatible with Go's `api.Lock`. */
export declare class Lock extends Holdable {
  private constructor()
  readonly key: string
  /** The value written on acquire (a copy); settable before acquiring. */
  get value(): Buffer
  set value(v: Bytes)
  /**
   * Resolves with the lock once held. Rejects with BatonError code 'BATON_TIMEOUT' after
   * `timeoutMs` (someone else holds it, or Consul answered but could not decide), but with
   * 'BATON_CONNECTION' naming the address when no request got any answer from Consul in that
   * time (a wrong address, an agent that is down); AbortError when `signal` aborts;
   * 'BATON_CONFLICT' for a key used otherwise. Without `timeoutMs` it keeps waiting, and an
   * unreachable Consul is logged at warn level within about a second (see setLogger).
   */
  acquire(options?: WaitOptions): Promise<this>
  /** Resolves false instead of rejecting at the timeout (default timeoutMs 0: try once). */
  tryAcquire(options?: WaitOptions): Promise<boolean>
  /**
   * Resolves false if it was not held (never acquired, already released, lost, or its client
   * closed): `lostReason` says which.
   */
  release(): Promise<boolean>
  isHeld(): boolean
  /** The fencing sequencer of the current holding, or null. */
  readonly sequencer: Sequencer | null
  /**
   * Resolves with why the current holding ended (at once when not held).
   * `lostSignal` is aborted by the time it resolves; the 'lost' event comes through its own
   * queue and may follow.
   */
  waitLost(options?: WaitOptions): Promise<LostReason>
  /** Deletes the key if nobody holds it (Go's `Destroy`). */
  destroy(): Promise<void>
  /** Releases if held: `await using lock = await client.lock(k).acquire()`. */
  [Symbol.asyncDispose](): Promise<void>
}

export interface SemaphoreOptions {
  /** The value of this holder's contender key. */
  value?: Bytes
  /** A session holds at most one slot of a semaphore; contenders in one process need their own. */
  session?: Session
}

/** A counting semaphore on a prefix, wire-compatible with Go's `api.Semaphore`. */
export declare class Semaphore extends Holdable {
  private constructor()
  readonly prefix: string
  readonly limit: number
  acquire(options?: WaitOptions): Promise<this>
  tryAcquire(options?: WaitOptions): Promise<boolean>
  /** Resolves false if no slot was held; `lostReason` says why. */
  release(): Promise<boolean>
  isHeld(): boolean
  /**
   * Resolves with why the holding ended (at once when not held). `lostSignal` is aborted by the
   * time it resolves; the 'lost' event comes through its own queue and may follow.
   */
  waitLost(options?: WaitOptions): Promise<LostReason>
  destroy(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * Follows an election: yields the current leader first (null: no leader), then each change.
 * `break` (or `return()`) ends it, and so does closing its client (`done: true`, also for a
 * pending `next()`: a `for await` loop simply ends); the signal aborting rejects with an
 * AbortError; `timeoutMs` bounds each wait for a change (BatonError 'BATON_TIMEOUT').
 */
export declare class LeaderObserver implements AsyncIterableIterator<Leader | null> {
  private constructor()
  readonly key: string
  next(): Promise<IteratorResult<Leader | null, undefined>>
  return(value?: unknown): Promise<IteratorResult<Leader | null, undefined>>
  [Symbol.asyncIterator](): this
}

export interface ElectionOptions {
  /** Campaign with this session instead of the client's default one. */
  session?: Session
  /**
   * What the leader key is written with. By default Go's `api.Lock` flag, so Go services take
   * part; `0` to campaign alongside clients that follow Consul's leader-election guide (a plain
   * `?acquire=`: curl, py-consul, most scripts). Reading the leader works on either format.
   */
  flags?: number | bigint
}

/** A participant in the leader election on one key (a Lock underneath). */
export declare class Election extends Holdable {
  private constructor()
  readonly key: string
  /** Resolves with the election once elected; 'BATON_TIMEOUT' / AbortError as for locks. */
  campaign(value: Bytes, options?: WaitOptions): Promise<this>
  /** Steps down (no lock-delay); resolves false if not leader (`lostReason` says why). */
  resign(): Promise<boolean>
  /** Replaces the leader's value, keeping the LockIndex. 'BATON_CONFLICT' if not leader. */
  proclaim(value: Bytes): Promise<void>
  isLeader(): boolean
  leader(): Promise<Leader | null>
  observe(options?: WaitOptions): LeaderObserver
  readonly sequencer: Sequencer | null
  /**
   * Resolves with why leadership ended (at once when not leading). `lostSignal` is aborted by the
   * time it resolves; the 'lost' event comes through its own queue and may follow.
   */
  waitLost(options?: WaitOptions): Promise<LostReason>
  /** Resigns: `await using e = await election.campaign(v)`. */
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * One side (reader or writer) of the read-write lock on a prefix (`client.readLock(prefix)`,
 * `client.writeLock(prefix)`): readers share it, a writer holds it alone, and contenders are
 * served in arrival order, so a waiting writer is not starved by readers arriving after it. Each
 * acquire makes its own contender key under the prefix, bound to the client's default session.
 */
export declare class RwLock extends Holdable {
  private constructor()
  /** The prefix (without a trailing '/'). */
  readonly prefix: string
  /** Which side this handle takes. */
  readonly mode: 'read' | 'write'
  /** The contender key of the current holding, or null when not held. */
  readonly key: string | null
  /**
   * Resolves with the lock once held. Rejects with 'BATON_TIMEOUT' after `timeoutMs` (the
   * contender key is deleted: nothing stays queued), an AbortError when `signal` aborts (nothing
   * held), 'BATON_CONFLICT' when a key under the prefix is not a read-write lock contender. The
   * wait holds no thread.
   */
  acquire(options?: WaitOptions): Promise<this>
  /** Resolves false instead of rejecting at the timeout (default timeoutMs 0: look once). */
  tryAcquire(options?: WaitOptions): Promise<boolean>
  /** Releases (deletes the contender key); resolves false if not held (`lostReason` says why). */
  release(): Promise<boolean>
  isHeld(): boolean
  /**
   * The fencing sequencer of the current holding: the contender key, its session, and as `token`
   * the key's CreateIndex (larger for later holdings of either side); null when not held.
   */
  readonly sequencer: Sequencer | null
  /** Resolves with why the current holding ended (at once when not held). */
  waitLost(options?: WaitOptions): Promise<LostReason>
  /** Releases if held: `await using r = await client.readLock(p).acquire()`. */
  [Symbol.asyncDispose](): Promise<void>
}

export interface MultiLockOptions {
  /** Written to every key on acquire. */
  value?: Bytes
  /** Hold the keys with this session instead of the client's default one. */
  session?: Session
}

/**
 * A lock on several keys at once (`client.multiLock(keys)`): an acquire takes all of them in one
 * transaction or none, and waits while any is held (by another MultiLock, a Lock, or Go's
 * `api.Lock`): it never holds part of the set. Losing any key ends the holding of all.
 */
export declare class MultiLock extends Holdable {
  private constructor()
  /** The keys, sorted, duplicates dropped. */
  readonly keys: string[]
  /** The value written to every key on acquire (a copy). */
  readonly value: Buffer
  /** Resolves with the lock once every key is held; 'BATON_TIMEOUT' / AbortError as for locks. */
  acquire(options?: WaitOptions): Promise<this>
  /** Resolves false instead of rejecting at the timeout (default timeoutMs 0: try once). */
  tryAcquire(options?: WaitOptions): Promise<boolean>
  /** Releases every key; resolves false if nothing was held. */
  release(): Promise<boolean>
  isHeld(): boolean
  /** The sequencer of the first key's holding, or null. */
  readonly sequencer: Sequencer | null
  /** One sequencer per key (in `keys` order) while held; empty otherwise. */
  readonly sequencers: Sequencer[]
  /** Resolves with why the current holding ended (at once when not held). */
  waitLost(options?: WaitOptions): Promise<LostReason>
  [Symbol.asyncDispose](): Promise<void>
}

/** Why a leader task's term ended, as `onStoppedLeading` receives it. */
export interface StoppedLeading {
  /**
   * 'returned' (the task returned; resigned), 'failed' (it threw; resigned), 'lost' (leadership
   * ended under the task), 'stopped' (`run`'s signal aborted; resigned).
   */
  reason: 'returned' | 'failed' | 'lost' | 'stopped'
  /** With 'lost': why leadership ended. */
  lostReason: LostReason | null
  /** With 'failed': what the task threw. */
  error: unknown
}

export interface LeaderTaskOptions {
  /** Campaign again after a term ends (default true); false: `run` resolves after one term. */
  requeue?: boolean
  /**
   * After a term whose task returned or threw: how long (ms, default 500) to let another
   * candidate take over before campaigning again; ends as soon as another leader is seen.
   */
  requeueDelayMs?: number
  /** Called on the JS thread each time this candidate is elected, just before the task starts. */
  onStartedLeading?: () => void
  /** Called on the JS thread each time a term ends, after leadership was given back. */
  onStoppedLeading?: (stopped: StoppedLeading) => void
  /**
   * Called on the JS thread while `run` runs: first with the current leader (null: nobody),
   * then at every change, this candidate's own terms included. None after `run` settles.
   */
  onNewLeader?: (leader: Leader | null) => void
}

/**
 * Runs an async task only while leading the election on a key (`client.leaderTask(key, value)`):
 * campaign, run, resign, campaign again. A callback that throws stops the task: `run` resigns and
 * rejects with its error.
 */
export declare class LeaderTask {
  private constructor()
  /** The election's key. */
  readonly key: string
  /** Whether this candidate leads now (local check). */
  isLeader(): boolean
  /** The fencing sequencer of the current term, or null. */
  readonly sequencer: Sequencer | null
  /** The current leader (one consistent read), or null. */
  leader(): Promise<Leader | null>
  /**
   * Campaigns and calls `task(signal)` each time elected; `signal` aborts (reason: a LostError)
   * the moment leadership ends or `options.signal` aborts. Resolves when `options.signal` aborts
   * (once the task returned and leadership was given back), or with `requeue` off after one
   * term; rejects with the task's own error when it threw and `requeue` is off, with a
   * campaign's non-transient error ('BATON_CLOSED', 'BATON_CONFLICT'), or 'BATON_CONFLICT' when
   * already running. The campaign and every wait hold no thread.
   */
  run(task: (signal: AbortSignal) => Promise<void> | void, options?: { signal?: AbortSignal }): Promise<void>
}

/** One live member of a group as read from Consul. */
export declare class MemberInfo {
  private constructor()
  /** The member's id (the last segment of its key). */
  readonly id: string
  /** The value it joined with (or last set with `updateValue`). */
  readonly value: Buffer
  /** The session its key is acquired with. */
  readonly session: string
  /** CreateIndex of its key: members sorted by it are in joining order. */
  readonly createIndex: bigint
  /** ModifyIndex of its key. */
  readonly modifyIndex: bigint
  toJSON(): { id: string; value: string; session: string; createIndex: string; modifyIndex: string }
}

/** One event of a group watch. */
export type MembershipEvent =
  | { type: 'snapshot'; members: MemberInfo[] }
  | { type: 'joined'; member: MemberInfo }
  | { type: 'left'; id: string }
  | { type: 'updated'; member: MemberInfo }

/** Why a membership ended. */
export type MemberLostReason = 'left' | 'key_changed' | 'session_lost' | 'client_closed'

/**
 * The events of a group (`group.watch()`): first a snapshot, then joins, leaves and updates.
 * `close()`, `break` or closing the client ends it (`done`); its signal aborting rejects with an
 * AbortError; `timeoutMs` bounds each wait ('BATON_TIMEOUT'). A pending `next()` holds no thread.
 */
export declare class MembersWatch implements AsyncIterableIterator<MembershipEvent> {
  private constructor()
  /** The group's prefix. */
  readonly prefix: string
  next(): Promise<IteratorResult<MembershipEvent, undefined>>
  return(value?: unknown): Promise<IteratorResult<MembershipEvent, undefined>>
  /** Ends the iteration (a pending `next()` resolves done). */
  close(): void
  [Symbol.asyncIterator](): this
}

interface MemberEvents {
  /** The membership ended other than by `leave()`. */
  lost: [reason: MemberLostReason]
}

/** This process's membership of a group (`group.join(id, value)`). */
export declare class Member extends EventEmitter {
  private constructor()
  on<K extends keyof MemberEvents>(event: K, listener: (...args: MemberEvents[K]) => void): this
  once<K extends keyof MemberEvents>(event: K, listener: (...args: MemberEvents[K]) => void): this
  off<K extends keyof MemberEvents>(event: K, listener: (...args: MemberEvents[K]) => void): this
  /** The member's id. */
  readonly id: string
  /** The member's key (`<prefix>/<id>`). */
  readonly key: string
  /** The ID of the session the key is acquired with. */
  readonly sessionId: string
  /** Whether still a member: not left, not lost, session valid (local check). */
  isMember(): boolean
  /** Why the membership ended, or null while it lasts. */
  readonly lostReason: MemberLostReason | null
  /** With `lostReason` 'session_lost': why the session was lost; else null. */
  readonly lostSessionReason: SessionLostReason | null
  /** Aborts (reason: a LostError) when the membership ends, for any reason. */
  readonly lostSignal: AbortSignal
  /** Resolves with why the membership ended; 'BATON_TIMEOUT' / AbortError. Holds no thread. */
  waitLost(options?: WaitOptions): Promise<MemberLostReason>
  /** Replaces the member's value; 'BATON_CONFLICT' when no longer a member. */
  updateValue(value: Bytes): Promise<void>
  /** Leaves (the key is deleted); resolves false if no longer a member. */
  leave(): Promise<boolean>
  [Symbol.asyncDispose](): Promise<void>
}

/** The group membership recipe on a prefix (`client.group(prefix)`). */
export declare class Group {
  private constructor()
  /** The prefix (without a trailing '/'). */
  readonly prefix: string
  /**
   * Joins as `id` with `value`, under the client's default session or `options.session`.
   * 'BATON_CONFLICT' when the id is taken by a live session; 'BATON_INVALID_ARGUMENT' for an id
   * that is not one key segment.
   */
  join(id: string, value?: Bytes, options?: { session?: Session }): Promise<Member>
  /** The live members, sorted by id. */
  members(): Promise<MemberInfo[]>
  /** A watch of the members: see MembersWatch. */
  watch(options?: WaitOptions): MembersWatch
}

/**
 * A barrier on one key (`client.barrier(key)`): while the key is there `wait()` waits; once it
 * is removed every waiter goes on. Any process may raise or lower it.
 */
export declare class Barrier {
  private constructor()
  /** The barrier's key. */
  readonly key: string
  /**
   * Raises the barrier; resolves true when this call raised it, false when it was up already.
   * With `session` the key falls when the session ends; without, it stays until released.
   */
  hold(options?: { session?: Session }): Promise<boolean>
  /** Lowers the barrier; resolves whether it was up. */
  release(): Promise<boolean>
  /** Whether the barrier is up (one read). */
  isHeld(): Promise<boolean>
  /**
   * Resolves true once the barrier is down, false when `timeoutMs` passes first; AbortError when
   * `signal` aborts. Holds no thread while it waits.
   */
  wait(options?: WaitOptions): Promise<boolean>
}

/**
 * A double barrier of `count` participants on a prefix (`client.doubleBarrier(prefix, count)`):
 * all enter together once the last arrives, and all go on after leaving once every one has left.
 */
export declare class DoubleBarrier {
  private constructor()
  /** The prefix (without a trailing '/'). */
  readonly prefix: string
  /** The number of participants a round waits for. */
  readonly count: number
  /** Whether this handle has entered and not left yet. */
  isEntered(): boolean
  /**
   * Resolves true once a round that counts this participant opens, false when `timeoutMs`
   * passes first (nothing is left behind); AbortError when `signal` aborts. Holds no thread.
   */
  enter(options?: WaitOptions): Promise<boolean>
  /**
   * Leaves and resolves true once every participant of the round has left, false when
   * `timeoutMs` passes first (this one has left either way); AbortError when `signal` aborts.
   */
  leave(options?: WaitOptions): Promise<boolean>
}

/** An int64 argument: a BigInt, or a number that is a safe integer (else a RangeError). */
export type I64 = bigint | number

/**
 * The values of a counter (`counter.watch()`): the current one first, then each different one.
 * `close()`, `break` or closing the client ends it; a pending `next()` holds no thread.
 */
export declare class CounterWatch implements AsyncIterableIterator<bigint> {
  private constructor()
  /** The counter's key. */
  readonly key: string
  next(): Promise<IteratorResult<bigint, undefined>>
  return(value?: unknown): Promise<IteratorResult<bigint, undefined>>
  /** Ends the iteration (a pending `next()` resolves done). */
  close(): void
  [Symbol.asyncIterator](): this
}

/**
 * A 64-bit signed counter in one KV key (`client.counter(key)`; an absent key is 0). Values are
 * BigInt, as every 64-bit number of this package; arguments are BigInt or safe integers.
 * Concurrent adds from any number of clients all count, exactly once each.
 */
export declare class Counter {
  private constructor()
  /** The key. */
  readonly key: string
  /** The current value (a consistent read). */
  get(): Promise<bigint>
  /** Writes `value` whatever the key holds. */
  set(value: I64): Promise<void>
  /** Adds `delta` atomically; resolves with the new value ('BATON_INVALID_ARGUMENT' on overflow). */
  add(delta: I64): Promise<bigint>
  /** `add(1)`. */
  increment(): Promise<bigint>
  /** `add(-1)`. */
  decrement(): Promise<bigint>
  /** Writes `next` if the value is `expected`, atomically; resolves whether it did. */
  compareAndSet(expected: I64, next: I64): Promise<boolean>
  /** A watch of the value: see CounterWatch. */
  watch(options?: WaitOptions): CounterWatch
}

/**
 * The local agent's check and service endpoints (`client.agent`), for binding sessions to a
 * process's health. Recipe: `checkRegister(id, { ttlMs, status: 'passing' })`, then
 * `createSession({ nodeChecks: ['serfHealth', id], lockDelayMs: 0 })`, then `checkPass(id)` more
 * often than every `ttlMs` while healthy; when the health function fails the check turns
 * critical after `ttlMs` and the session's locks are lost ('lost' events, `lostSignal`).
 * Bad arguments throw TypeError / RangeError (code 'BATON_INVALID_ARGUMENT' from the core);
 * Consul's refusals reject with a BatonError carrying its text.
 */
export declare class Agent {
  private constructor()
  /** Registers (or replaces) a TTL check; it starts critical unless `status` says otherwise. */
  checkRegister(id: string, options: TtlCheckOptions & { status?: CheckStatus }): Promise<void>
  /** Removes a check; sessions bound to it are invalidated. */
  checkDeregister(id: string): Promise<void>
  /** Reports the check passing: its TTL starts again. */
  checkPass(id: string, note?: string): Promise<void>
  /** Reports the check warning (bound sessions stay valid). */
  checkWarn(id: string, note?: string): Promise<void>
  /** Reports the check critical: bound sessions are invalidated. */
  checkFail(id: string, note?: string): Promise<void>
  /** Sets the check's status and output. */
  checkUpdate(id: string, status: CheckStatus, output?: string): Promise<void>
  /** Registers (or replaces) a service. */
  serviceRegister(service: ServiceOptions): Promise<void>
  /** Removes a service and its checks. */
  serviceDeregister(id: string): Promise<void>
}

export declare class Client {
  constructor(options?: ClientOptions)
  readonly address: string
  /** The local agent's check and service endpoints. */
  readonly agent: Agent
  kvGet(key: string): Promise<Buffer | null>
  /** The entry at `key` (value, flags, session, indexes), or null. */
  kvGetEntry(key: string): Promise<KvEntry | null>
  /**
   * Writes `value` at `key`. `flags` sets the key's flags; with `cas` the write happens only if
   * the key's ModifyIndex is `cas` (0: only if absent), and it resolves false otherwise.
   */
  kvPut(key: string, value: Buffer | string, options?: { flags?: U64; cas?: U64 }): Promise<boolean>
  /** Deletes `key`; with `cas` only if its ModifyIndex is `cas` (resolves false otherwise). */
  kvDelete(key: string, options?: { cas?: U64 }): Promise<boolean>
  /**
   * The client's default session, shared by its locks, semaphores and elections given none
   * (created on first use with `defaultSession` options; replaced once lost).
   */
  defaultSession(): Promise<Session>
  /**
   * Creates a session renewed in the background. Without options: TTL 15 s (`ttlMs` 15000),
   * Consul's lock-delay; `{ ttlMs: null }` for a session without TTL (see SessionOptions for
   * what it costs); `{ ttlMs: 0 }` is a RangeError.
   */
  createSession(options?: SessionOptions): Promise<Session>
  /**
   * Manages a session created elsewhere: renewed if it has a TTL, watched for invalidation,
   * never destroyed by `close()` (`session.destroy()` does). 'BATON_INVALID_ARGUMENT' for an ID
   * that is not a UUID, 'BATON_NOT_FOUND' for a session Consul does not know.
   */
  adoptSession(id: string): Promise<Session>
  lock(key: string, options?: LockOptions): Lock
  semaphore(prefix: string, limit: number | bigint, options?: SemaphoreOptions): Semaphore
  election(key: string, options?: ElectionOptions): Election
  /** The reader side of the read-write lock on `prefix` (see RwLock). */
  readLock(prefix: string): RwLock
  /** The writer side of the read-write lock on `prefix` (see RwLock). */
  writeLock(prefix: string): RwLock
  /** A lock on all of `keys` at once (see MultiLock). */
  multiLock(keys: string[], options?: MultiLockOptions): MultiLock
  /** A leader task on the election `key`, campaigning with `value` (see LeaderTask). */
  leaderTask(key: string, value: Bytes, options?: LeaderTaskOptions): LeaderTask
  /** The group membership recipe on `prefix` (see Group). */
  group(prefix: string): Group
  /** A barrier on `key` (see Barrier). */
  barrier(key: string): Barrier
  /** A double barrier of `count` participants on `prefix` (see DoubleBarrier). */
  doubleBarrier(prefix: string, count: number, options?: { session?: Session }): DoubleBarrier
  /** A counter kept in `key` (see Counter). */
  counter(key: string): Counter
  /** The current leader of the election on `key` (one consistent read), or null. */
  leader(key: string): Promise<Leader | null>
  observeLeader(key: string, options?: WaitOptions): LeaderObserver
  /** Whether the sequencer's session still holds its key at its LockIndex. */
  checkSequencer(sequencer: Sequencer): Promise<boolean>
  /**
   * Runs `ops` in one transaction behind a `check-session` of the sequencer's key: a stale
   * holder gets 'BATON_CONFLICT' (message 'stale sequencer ...') and nothing is written.
   */
  guardedTxn(sequencer: Sequencer, ops: TxnOp[]): Promise<KvEntry[]>
  /** Writes `value` at `key` only while `sequencer` is current. */
  guardedPut(sequencer: Sequencer, key: string, value: Bytes, options?: { flags?: U64 }): Promise<void>
  /**
   * A snapshot of this client's metrics, counted since it was made (see ClientMetrics): the
   * core's shape, the same as Python's. Synchronous and cheap: it reads counters, no request.
   */
  metrics(): ClientMetrics
  /**
   * Releases held locks, destroys the client's sessions, joins its threads, waiting up to
   * `timeoutMs` milliseconds (default 5000) for Consul to confirm. Resolves `true` when
   * everything finished within it, `false` when something did not (a release or session
   * destroy Consul did not confirm, a thread still running): the client is closed either way,
   * and a session left behind ends at its TTL. `lostSignal`s abort with reason 'client_closed';
   * no 'lost' events are emitted after close. A second close resolves `true`.
   */
  close(timeoutMs?: number): Promise<boolean>
  [Symbol.asyncDispose](): Promise<void>
}
