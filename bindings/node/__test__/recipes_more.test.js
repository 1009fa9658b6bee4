'use strict'
// Read-write locks, multi-key locks, leader tasks, group membership, barriers and counters:
// against a real baton-devserver process.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { once, setMaxListeners } = require('node:events')
const fs = require('node:fs')
const {
  RwLock, MultiLock, LeaderTask, Group, Member, MemberInfo, Barrier, DoubleBarrier, Counter, Sequencer, Leader,
  BatonError, AbortError, LostError,
} = require('..')
const { useServer, destroySession, rawEntry, deleteKey, request, parseJson, freshKey, waitFor, consulBefore } = require('./helpers')

const fx = useServer()
let addr
beforeEach(() => {
  addr = fx.addr
})

/** A client closed after the test; its default session has no lock-delay. */
function client(extra = {}) {
  return fx.client({ defaultSession: { lockDelayMs: 0 }, ...extra })
}

/** The keys under `prefix/` as Consul lists them (entries with Session, CreateIndex, ...). */
async function entriesUnder(prefix) {
  const r = await request(addr, 'GET', `/v1/kv/${prefix}/?recurse`)
  if (r.status === 404) return []
  assert.equal(r.status, 200, r.body)
  return parseJson(r.body)
}

/** Whether `p` has settled by the time the pending callbacks ran (never waits for it). */
async function settled(p) {
  const marker = Symbol('pending')
  const v = await Promise.race([p.then(() => true, () => true), new Promise((r) => setImmediate(() => r(marker)))])
  return v !== marker
}

// ---- read-write lock --------------------------------------------------------------------------

test('rwlock: readers share the lock, a writer excludes them and gets it once they release', async () => {
  const a = client()
  const b = client()
  const prefix = freshKey('rw')
  const r1 = a.readLock(prefix)
  const r2 = b.readLock(prefix)
  const w = b.writeLock(prefix)
  assert.ok(r1 instanceof RwLock)
  assert.equal(r1.mode, 'read')
  assert.equal(w.mode, 'write')
  assert.equal(r1.prefix, prefix)
  assert.equal(r1.key, null)
  assert.equal(await r1.acquire({ timeoutMs: 10000 }), r1)
  assert.equal(await r2.acquire({ timeoutMs: 10000 }), r2, 'readers hold together')
  assert.ok(r1.isHeld() && r2.isHeld())
  assert.ok(r1.key.startsWith(`${prefix}/`))
  assert.notEqual(r1.key, r2.key)
  assert.equal(await w.tryAcquire(), false, 'a writer waits for the readers')
  await assert.rejects(w.acquire({ timeoutMs: 200 }), (e) => e instanceof BatonError && e.code === 'BATON_TIMEOUT' && /not acquired within 200 ms/.test(e.message))
  const writing = w.acquire({ timeoutMs: 10000 })
  await r1.release()
  assert.equal(await settled(writing), false, 'one reader still holds')
  await r2.release()
  assert.equal(await writing, w)
  assert.equal(w.isHeld(), true)
  // The writer holds alone: a reader (of either client) waits.
  assert.equal(await r1.tryAcquire({ timeoutMs: 100 }), false)
  // Exactly one contender key is left under the prefix: the writer's (timed-out tries left none).
  const keys = (await entriesUnder(prefix)).map((e) => e.Key)
  assert.deepEqual(keys, [w.key])
  assert.equal(await w.release(), true)
  assert.equal(await r1.tryAcquire({ timeoutMs: 5000 }), true)
  await r1.release()
})

test('rwlock: a waiting writer is not starved by readers arriving after it', async () => {
  const a = client()
  const b = client()
  const c = client()
  const prefix = freshKey('rw-starve')
  const r1 = await a.readLock(prefix).acquire({ timeoutMs: 10000 })
  const w = b.writeLock(prefix)
  const writing = w.acquire({ timeoutMs: 20000 })
  // The writer's contender key is queued behind the reader.
  await waitFor('the writer queued', async () => (await entriesUnder(prefix)).length === 2)
  // A reader arriving now waits behind the writer, although only a reader holds.
  const late = c.readLock(prefix)
  assert.equal(await late.tryAcquire({ timeoutMs: 300 }), false, 'a later reader must not overtake the waiting writer')
  const lateWaiting = late.acquire({ timeoutMs: 20000 })
  await r1.release()
  assert.equal(await writing, w)
  assert.equal(await settled(lateWaiting), false, 'the later reader waits for the writer')
  assert.equal(late.isHeld(), false)
  await w.release()
  assert.equal(await lateWaiting, late)
  await late.release()
})

test("rwlock: release, 'lost' on session loss, lostSignal, waitLost and sequencer", async () => {
  const a = client()
  const prefix = freshKey('rw-loss')
  const w = a.writeLock(prefix)
  assert.equal(w.sequencer, null)
  assert.equal(w.lostSignal.aborted, true, 'not held: an aborted signal')
  await w.acquire({ timeoutMs: 10000 })
  const seq = w.sequencer
  assert.ok(seq instanceof Sequencer)
  assert.equal(seq.key, w.key)
  assert.equal(typeof seq.token, 'bigint')
  assert.equal(await a.checkSequencer(seq), true)
  const signal = w.lostSignal
  assert.equal(signal.aborted, false)
  const lost = once(w, 'lost')
  const waiting = w.waitLost({ timeoutMs: 10000 })
  await destroySession(addr, seq.session)
  assert.equal(await waiting, 'session_lost')
  assert.deepEqual(await lost, ['session_lost'])
  assert.equal(signal.aborted, true)
  assert.ok(signal.reason instanceof LostError)
  assert.equal(signal.reason.reason, 'session_lost')
  assert.equal(w.isHeld(), false)
  assert.equal(w.lostReason, 'session_lost')
  assert.equal(await a.checkSequencer(seq), false)
  // Again with the client's new default session; a later holding has a larger token.
  await w.acquire({ timeoutMs: 10000 })
  assert.ok(w.sequencer.token > seq.token)
  assert.equal(await w.release(), true)
  assert.equal(w.lostReason, 'released')
  assert.equal(await w.release(), false)
  assert.deepEqual(await entriesUnder(prefix), [], 'the release deleted the contender key')
})

test('rwlock: an aborted acquire rejects with AbortError and leaves no contender key', async () => {
  const a = client()
  const b = client()
  const prefix = freshKey('rw-abort')
  const w = await a.writeLock(prefix).acquire({ timeoutMs: 10000 })
  const r = b.readLock(prefix)
  const ac = new AbortController()
  const waiting = r.acquire({ signal: ac.signal })
  await waitFor('the reader queued', async () => (await entriesUnder(prefix)).length === 2)
  ac.abort(new Error('enough'))
  await assert.rejects(waiting, (e) => e instanceof AbortError && e.cause.message === 'enough')
  assert.equal(r.isHeld(), false)
  await waitFor('the aborted contender key removed', async () => (await entriesUnder(prefix)).length === 1)
  await w.release()
})

// ---- multi-key lock ---------------------------------------------------------------------------

/**
 * Before Consul 1.6.2 a transaction stores numbers through a float64, so Go's lock flags (above
 * 2^53) cannot be written exactly: the multi-key lock refuses, naming it. Checks that refusal
 * there; resolves whether the server is such a Consul (the test then has nothing else to prove).
 */
async function refusedBefore162(c, keys) {
  if (!(await consulBefore(addr, '1.6.2'))) return false
  await assert.rejects(c.multiLock(keys).acquire({ timeoutMs: 5000 }), (e) => e.code === 'BATON_UNSUPPORTED' && /before 1\.6\.2/.test(e.message))
  return true
}

test('multilock: waits while one key is held by a plain Lock and never holds part of the set', async () => {
  const a = client()
  const b = client()
  const base = freshKey('multi')
  const keys = [`${base}/c`, `${base}/a`, `${base}/b`, `${base}/a`]
  if (await refusedBefore162(a, keys)) return
  const plain = await b.lock(`${base}/b`).acquire({ timeoutMs: 10000 })
  const m = a.multiLock(keys, { value: 'all-three' })
  assert.ok(m instanceof MultiLock)
  assert.deepEqual(m.keys, [`${base}/a`, `${base}/b`, `${base}/c`], 'sorted, duplicates dropped')
  assert.deepEqual(m.value, Buffer.from('all-three'))
  assert.equal(await m.tryAcquire(), false)
  const waiting = m.acquire({ timeoutMs: 20000 })
  // While it waits, neither free key is held by anyone: all or none.
  for (let i = 0; i < 10; i++) {
    for (const k of [`${base}/a`, `${base}/c`]) {
      const e = await rawEntry(addr, k)
      assert.ok(e === null || e.Session === undefined, `${k} held while the multi-key lock waits: ${JSON.stringify(e)}`)
    }
    assert.equal(m.isHeld(), false)
    await new Promise((r) => setTimeout(r, 20))
  }
  await plain.release()
  assert.equal(await waiting, m)
  assert.equal(m.isHeld(), true)
  const seqs = m.sequencers
  assert.equal(seqs.length, 3)
  assert.deepEqual(seqs.map((s) => s.key), m.keys)
  assert.ok(m.sequencer instanceof Sequencer)
  for (const k of m.keys) {
    const e = await rawEntry(addr, k)
    assert.equal(e.Session, seqs[0].session)
    assert.equal(Buffer.from(e.Value, 'base64').toString(), 'all-three')
  }
  // The plain lock now waits for the multi-key lock.
  assert.equal(await plain.tryAcquire({ timeoutMs: 100 }), false)
  assert.equal(await m.release(), true)
  for (const k of m.keys) assert.equal((await rawEntry(addr, k)).Session, undefined)
  assert.equal(await plain.tryAcquire({ timeoutMs: 5000 }), true)
  await plain.release()
})

test("multilock: losing one key ends the holding ('lost', lostSignal, waitLost)", async () => {
  const a = client()
  const base = freshKey('multi-loss')
  if (await refusedBefore162(a, [`${base}/x`, `${base}/y`])) return
  const m = await a.multiLock([`${base}/x`, `${base}/y`]).acquire({ timeoutMs: 10000 })
  const signal = m.lostSignal
  const lost = once(m, 'lost')
  await deleteKey(addr, `${base}/y`)
  assert.deepEqual(await lost, ['key_changed'])
  assert.equal(await m.waitLost({ timeoutMs: 5000 }), 'key_changed')
  assert.equal(signal.aborted, true)
  assert.equal(m.isHeld(), false)
  assert.deepEqual(m.sequencers, [])
  assert.equal(await m.release(), false)
})

// ---- leader task ------------------------------------------------------------------------------

test("leader task: the task's signal aborts when the session is destroyed from another client, the task returns, and it requeues", async () => {
  const c = client()
  const key = freshKey('leader-task')
  const events = []
  const leaders = []
  const task = c.leaderTask(key, 'me', {
    requeueDelayMs: 0,
    onStartedLeading: () => events.push('started'),
    onStoppedLeading: (s) => events.push(`stopped:${s.reason}${s.lostReason ? `:${s.lostReason}` : ''}`),
    onNewLeader: (l) => leaders.push(l),
  })
  assert.ok(task instanceof LeaderTask)
  assert.equal(task.key, key)
  const terms = []
  const stop = new AbortController()
  const running = task.run(async (signal) => {
    const term = { session: task.sequencer.session, signal, leader: task.isLeader() }
    terms.push(term)
    await once(signal, 'abort')
    term.reasonAtAbort = signal.reason
    term.leaderAtAbort = task.isLeader()
  }, { signal: stop.signal })
  await waitFor('the first term', () => terms.length === 1)
  assert.equal(terms[0].leader, true)
  assert.equal(terms[0].signal.aborted, false)
  assert.equal((await c.leader(key)).session, terms[0].session)
  await destroySession(addr, terms[0].session)
  // The task's signal aborts, the task returns, and the candidate campaigns again (requeue) with
  // the client's new default session.
  await waitFor('the second term', () => terms.length === 2)
  assert.ok(terms[0].reasonAtAbort instanceof LostError)
  assert.equal(terms[0].reasonAtAbort.reason, 'session_lost')
  assert.equal(terms[0].leaderAtAbort, false)
  assert.notEqual(terms[1].session, terms[0].session)
  assert.equal(terms[1].signal.aborted, false)
  stop.abort()
  await running
  assert.equal(terms[1].signal.aborted, true)
  assert.equal(task.isLeader(), false)
  assert.equal(await c.leader(key), null, 'leadership given back when run resolved')
  assert.deepEqual(events, ['started', 'stopped:lost:session_lost', 'started', 'stopped:stopped'])
  assert.ok(leaders.length >= 1)
  assert.ok(leaders.some((l) => l instanceof Leader && l.value.toString() === 'me' && l.session === terms[1].session), 'onNewLeader saw the second term')
  const seen = leaders.length
  await new Promise((r) => setTimeout(r, 100))
  assert.equal(leaders.length, seen, 'no onNewLeader after run resolved')
})

test('leader task: requeue off runs one term; a throwing task rejects run with its own error, resigned', async () => {
  const c = client()
  const key = freshKey('leader-once')
  const stopped = []
  const once1 = c.leaderTask(key, 'one', { requeue: false, onStoppedLeading: (s) => stopped.push(s) })
  let runs = 0
  await once1.run(async (signal) => {
    runs += 1
    assert.equal(signal.aborted, false)
    assert.equal((await c.leader(key)).value.toString(), 'one')
  })
  assert.equal(runs, 1)
  assert.equal(stopped[0].reason, 'returned')
  assert.equal(await c.leader(key), null)
  const boom = new Error('task failed')
  const failing = c.leaderTask(key, 'two', { requeue: false, onStoppedLeading: (s) => stopped.push(s) })
  await assert.rejects(failing.run(async () => {
    throw boom
  }), (e) => e === boom)
  assert.equal(stopped[1].reason, 'failed')
  assert.equal(stopped[1].error, boom)
  assert.equal(await c.leader(key), null, 'resigned after the failure')
  // A second run while one runs is refused; an aborted signal stops a campaign at once.
  const other = client()
  const held = await other.election(key).campaign('other', { timeoutMs: 10000 })
  const waiting = c.leaderTask(key, 'three')
  const ac = new AbortController()
  let ran = false
  const running = waiting.run(async () => {
    ran = true
  }, { signal: ac.signal })
  await assert.rejects(waiting.run(async () => {}), { code: 'BATON_CONFLICT' })
  ac.abort()
  await running
  assert.equal(ran, false)
  await held.resign()
})

// ---- group membership -------------------------------------------------------------------------

test('group: join, members, watch events (snapshot, joined, updated, left), leave', async () => {
  const a = client()
  const b = client()
  const prefix = freshKey('group')
  const g = a.group(prefix)
  assert.ok(g instanceof Group)
  assert.equal(g.prefix, prefix)
  const watch = b.group(prefix).watch({ timeoutMs: 10000 })
  const first = await watch.next()
  assert.deepEqual(first.value, { type: 'snapshot', members: [] })
  const ma = await g.join('alpha', 'addr-a')
  assert.ok(ma instanceof Member)
  assert.equal(ma.id, 'alpha')
  assert.equal(ma.key, `${prefix}/alpha`)
  assert.equal(ma.isMember(), true)
  assert.equal(ma.lostReason, null)
  assert.equal(ma.lostSignal.aborted, false)
  let ev = (await watch.next()).value
  assert.equal(ev.type, 'joined')
  assert.ok(ev.member instanceof MemberInfo)
  assert.equal(ev.member.id, 'alpha')
  assert.equal(ev.member.value.toString(), 'addr-a')
  assert.equal(ev.member.session, ma.sessionId)
  const mb = await b.group(prefix).join('beta', Buffer.from('addr-b'))
  ev = (await watch.next()).value
  assert.deepEqual([ev.type, ev.member.id], ['joined', 'beta'])
  const list = await g.members()
  assert.deepEqual(list.map((m) => [m.id, m.value.toString()]), [['alpha', 'addr-a'], ['beta', 'addr-b']])
  assert.equal(typeof list[0].createIndex, 'bigint')
  // The id is taken while its member lives.
  await assert.rejects(b.group(prefix).join('alpha', 'x'), { code: 'BATON_CONFLICT' })
  await ma.updateValue('addr-a2')
  ev = (await watch.next()).value
  assert.deepEqual([ev.type, ev.member.id, ev.member.value.toString()], ['updated', 'alpha', 'addr-a2'])
  assert.equal(await mb.leave(), true)
  ev = (await watch.next()).value
  assert.deepEqual(ev, { type: 'left', id: 'beta' })
  assert.equal(mb.isMember(), false)
  assert.equal(mb.lostReason, 'left')
  assert.equal(mb.lostSignal.aborted, true)
  assert.equal(await mb.waitLost(), 'left')
  assert.equal(await mb.leave(), false)
  // A pending next() ends (done) on close().
  const pending = watch.next()
  watch.close()
  assert.deepEqual(await pending, { done: true, value: undefined })
  assert.deepEqual((await g.members()).map((m) => m.id), ['alpha'])
  await ma.leave()
})

test("group: a member whose session is destroyed from outside is lost ('lost', lostSignal, waitLost)", async () => {
  const a = client()
  const prefix = freshKey('group-loss')
  const m = await a.group(prefix).join('solo', 'v')
  const signal = m.lostSignal
  const lost = once(m, 'lost')
  const waiting = m.waitLost({ timeoutMs: 10000 })
  await assert.rejects(m.waitLost({ timeoutMs: 50 }), { code: 'BATON_TIMEOUT' })
  await destroySession(addr, m.sessionId)
  assert.equal(await waiting, 'session_lost')
  assert.deepEqual(await lost, ['session_lost'])
  assert.equal(signal.aborted, true)
  assert.equal(signal.reason.reason, 'session_lost')
  assert.equal(m.isMember(), false)
  await assert.rejects(m.updateValue('x'), { code: 'BATON_CONFLICT' })
  assert.deepEqual(await a.group(prefix).members(), [])
})

// ---- barriers ---------------------------------------------------------------------------------

test('barrier: wait resolves once released, false at the timeout, AbortError when aborted', async () => {
  const a = client()
  const b = client()
  const key = freshKey('barrier')
  const gate = a.barrier(key)
  assert.ok(gate instanceof Barrier)
  assert.equal(gate.key, key)
  assert.equal(await gate.isHeld(), false)
  assert.equal(await b.barrier(key).wait({ timeoutMs: 1000 }), true, 'not up: at once')
  assert.equal(await gate.hold(), true)
  assert.equal(await gate.hold(), false, 'already up')
  assert.equal(await gate.isHeld(), true)
  const other = b.barrier(key)
  assert.equal(await other.wait({ timeoutMs: 200 }), false, 'timed out while up')
  const ac = new AbortController()
  const aborted = other.wait({ signal: ac.signal })
  setTimeout(() => ac.abort('stop waiting'), 50)
  await assert.rejects(aborted, (e) => e instanceof AbortError && e.cause === 'stop waiting')
  const waiters = [other.wait({ timeoutMs: 20000 }), b.barrier(key).wait(), a.barrier(key).wait({ timeoutMs: 20000 })]
  assert.equal(await settled(Promise.race(waiters)), false)
  assert.equal(await other.release(), true, 'any process may lower it')
  assert.deepEqual(await Promise.all(waiters), [true, true, true])
  assert.equal(await gate.isHeld(), false)
  assert.equal(await gate.release(), false)
})

test('double barrier of 2: enter waits for the second participant, leave waits for both', async () => {
  const a = client()
  const b = client()
  const prefix = freshKey('double')
  const p1 = a.doubleBarrier(prefix, 2)
  const p2 = b.doubleBarrier(prefix, 2)
  assert.ok(p1 instanceof DoubleBarrier)
  assert.equal(p1.count, 2)
  assert.equal(p1.prefix, prefix)
  const entering = p1.enter({ timeoutMs: 20000 })
  assert.equal(await settled(entering), false)
  await new Promise((r) => setTimeout(r, 100))
  assert.equal(await settled(entering), false, 'one participant of two: still waiting')
  assert.equal(p1.isEntered(), false)
  assert.deepEqual(await Promise.all([entering, p2.enter({ timeoutMs: 20000 })]), [true, true])
  assert.ok(p1.isEntered() && p2.isEntered())
  const leaving = p1.leave({ timeoutMs: 20000 })
  await new Promise((r) => setTimeout(r, 100))
  assert.equal(await settled(leaving), false, 'the other participant has not left yet')
  assert.deepEqual(await Promise.all([leaving, p2.leave({ timeoutMs: 20000 })]), [true, true])
  // A lone participant times out (and leaves nothing behind), or is aborted.
  const lone = a.doubleBarrier(freshKey('double-lone'), 2)
  assert.equal(await lone.enter({ timeoutMs: 200 }), false)
  assert.equal(lone.isEntered(), false)
  await assert.rejects(lone.enter({ signal: AbortSignal.timeout(100) }), { name: 'AbortError' })
})

// ---- counter ----------------------------------------------------------------------------------

test('counter: get, set, add, compareAndSet; adds and compare-and-sets racing across two clients all count', async () => {
  const a = client()
  const b = client()
  const key = freshKey('counter')
  const ca = a.counter(key)
  const cb = b.counter(key)
  assert.ok(ca instanceof Counter)
  assert.equal(ca.key, key)
  assert.equal(await ca.get(), 0n, 'an absent key is 0')
  assert.equal(await ca.increment(), 1n)
  assert.equal(await cb.decrement(), 0n)
  await ca.set(10)
  assert.equal(await cb.get(), 10n)
  // 2 clients x 40 concurrent adds: every one counts exactly once.
  const adds = []
  for (let i = 0; i < 40; i++) adds.push(ca.add(1), cb.add(2n))
  const results = await Promise.all(adds)
  assert.equal(await ca.get(), 10n + 40n * 3n)
  assert.equal(new Set(results.map(String)).size, results.length, 'each add saw its own new value')
  // Two racing compare-and-sets from the same expected value: exactly one wins.
  const now = await ca.get()
  const cas = await Promise.all([ca.compareAndSet(now, 1000), cb.compareAndSet(now, 2000n)])
  assert.deepEqual(cas.filter(Boolean).length, 1)
  assert.equal(await ca.get(), cas[0] ? 1000n : 2000n)
  assert.equal(await cb.compareAndSet(7, 8), false)
  // 64-bit values are BigInt; numbers must be safe integers.
  await ca.set(2n ** 62n)
  assert.equal(await cb.add(-1), 2n ** 62n - 1n)
  await assert.rejects(async () => ca.add(2 ** 60), RangeError)
  await assert.rejects(async () => ca.set(1.5), RangeError)
  await assert.rejects(async () => ca.set(2n ** 63n), RangeError)
  await assert.rejects(async () => ca.add('1'), TypeError)
  await ca.set(2n ** 63n - 1n)
  await assert.rejects(ca.add(1), { code: 'BATON_INVALID_ARGUMENT' })
  assert.equal(await ca.get(), 2n ** 63n - 1n, 'an overflowing add writes nothing')
})

test('counter: watch yields the current value, then each change made by another client', async () => {
  const a = client()
  const b = client()
  const key = freshKey('counter-watch')
  await a.counter(key).set(5)
  const watch = b.counter(key).watch({ timeoutMs: 10000 })
  assert.deepEqual(await watch.next(), { done: false, value: 5n })
  const next = watch.next()
  await a.counter(key).add(3)
  assert.deepEqual(await next, { done: false, value: 8n })
  const seen = []
  const collecting = (async () => {
    for await (const v of watch) {
      seen.push(v)
      if (v === 20n) break
    }
  })()
  await a.counter(key).set(20)
  await collecting
  assert.equal(seen.at(-1), 20n)
  assert.deepEqual(await watch.next(), { done: true, value: undefined }, 'break ended it')
  // Timeout and abort.
  const w2 = b.counter(key).watch({ timeoutMs: 100 })
  await w2.next()
  await assert.rejects(w2.next(), { code: 'BATON_TIMEOUT' })
  w2.close()
  const ac = new AbortController()
  const w3 = b.counter(key).watch({ signal: ac.signal })
  await w3.next()
  const pending = w3.next()
  ac.abort()
  await assert.rejects(pending, { name: 'AbortError' })
})

// ---- options, threads -------------------------------------------------------------------------

test('the new recipes refuse a misspelt option, naming it', async () => {
  const c = client()
  const bogus = { bogus: 1 }
  const key = freshKey('opts')
  const calls = [
    ['multiLock', () => c.multiLock([key], bogus)],
    ['acquire', () => c.readLock(key).acquire(bogus)],
    ['tryAcquire', () => c.writeLock(key).tryAcquire(bogus)],
    ['waitLost', () => c.writeLock(key).waitLost(bogus)],
    ['leaderTask', () => c.leaderTask(key, 'v', bogus)],
    ['run', () => c.leaderTask(key, 'v').run(async () => {}, bogus)],
    ['join', () => c.group(key).join('x', 'v', bogus)],
    ['watch', () => c.group(key).watch(bogus)],
    ['hold', () => c.barrier(key).hold(bogus)],
    ['wait', () => c.barrier(key).wait(bogus)],
    ['doubleBarrier', () => c.doubleBarrier(key, 2, bogus)],
    ['enter', () => c.doubleBarrier(key, 2).enter(bogus)],
    ['leave', () => c.doubleBarrier(key, 2).leave(bogus)],
    ['watch', () => c.counter(key).watch(bogus)],
  ]
  for (const [what, call] of calls) {
    await assert.rejects(async () => call(), { name: 'TypeError', message: new RegExp(`^unknown ${what} option "bogus" \\(known: `) }, what)
  }
  assert.throws(() => c.leaderTask(key, 'v', { requeueDelay: 5 }), { message: /did you mean requeueDelayMs\?/ })
  await assert.rejects(async () => c.barrier(key).wait({ timeout: 5 }), { message: /did you mean timeoutMs\?/ })
  assert.throws(() => c.doubleBarrier(key, 0), RangeError)
  assert.throws(() => c.multiLock(key), TypeError)
  assert.throws(() => c.leaderTask(key, 'v', { onNewLeader: 1 }), TypeError)
  assert.deepEqual(await entriesUnder(key), [], 'nothing was written by a refused call')
})

test('1,000 pending barrier waits and 1,000 pending read-lock acquires add no OS threads', { skip: !fs.existsSync('/proc/self/task') && 'counts threads in /proc' }, async () => {
  const threads = () => fs.readdirSync('/proc/self/task').length
  const a = client()
  const b = client()
  const key = freshKey('threads-barrier')
  const prefix = freshKey('threads-rw')
  const gate = a.barrier(key)
  await gate.hold()
  const writer = await a.writeLock(prefix).acquire({ timeoutMs: 10000 })
  // Warm the waiting client up (its hub, step and timer threads) before counting.
  assert.equal(await b.barrier(key).wait({ timeoutMs: 0 }), false)
  assert.equal(await b.readLock(prefix).tryAcquire(), false)
  const before = threads()
  const ac = new AbortController()
  setMaxListeners(2000, ac.signal)
  const waits = Array.from({ length: 1000 }, () => b.barrier(key).wait({ timeoutMs: 60000 }))
  const acquires = Array.from({ length: 1000 }, () => b.readLock(prefix).acquire({ signal: ac.signal }).catch((e) => e))
  // Every read acquire has queued its contender key: all 2,000 calls are waiting.
  await waitFor('1,000 readers queued', async () => (await entriesUnder(prefix)).length === 1001, 60000)
  const during = threads()
  assert.ok(during - before < 40, `${before} threads before, ${during} with 2,000 waits pending`)
  assert.equal(await gate.release(), true)
  assert.deepEqual(new Set(await Promise.all(waits)), new Set([true]))
  ac.abort()
  for (const r of await Promise.all(acquires)) assert.equal(r?.name, 'AbortError')
  await writer.release()
  await waitFor('the aborted readers removed their keys', async () => (await entriesUnder(prefix)).length === 0, 60000)
})
