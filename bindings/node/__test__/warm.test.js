'use strict'
// The warm path (src/warm.rs): a lock's acquire and release whose one request the event loop
// writes and reads itself, and what it leaves when its signal aborts or its time runs out while
// the request is on its way.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { warmInFlight, warmConnStats } = require('../native.js')
const { useServer, request, rawEntry, freshKey, waitFor, consulBefore, realConsul } =
  require('./helpers')

const fx = useServer()
let server
let client
beforeEach(() => {
  server = fx.server
  client = fx.client()
})

/**
 * Before Consul 1.6.2 a lock is written as Go writes it (two requests): no warm acquire. The
 * server says its version (GET /v1/agent/self).
 */
const noWarmAcquire = () => consulBefore(server.addr, '1.6.2')

/** A lock on a new key after one cycle (the key known free, the loop connection open). */
async function afterACycle(name) {
  const key = freshKey(name)
  const lock = client.lock(key)
  await lock.acquire({ timeoutMs: 10000 })
  assert.equal(await lock.release(), true)
  return { key, lock }
}

async function latency(d) {
  const r = await request(server.addr, 'PUT', `/_devserver/latency?d=${d}`)
  assert.equal(r.status, 200, r.body)
}

const free = (key) => async () => !(await rawEntry(server.addr, key))?.Session

/** Nothing held by `lock` any more, here or in Consul (the key given back in the background). */
async function nothingLeft(key, lock) {
  assert.ok(!lock.isHeld())
  await waitFor('the key given back', free(key))
}

test('warm calls are in flight on the loop, and hold and release as thread calls do', {
  skip: realConsul && 'needs the dev server latency fault',
}, async () => {
  const { key, lock } = await afterACycle('warm-cycle')
  // Answers wait on the server, so that a call is still in flight when the test looks (a
  // quick server can answer before the call's first read, and the call ends at once).
  await latency('20ms')
  try {
    await cycles(key, lock)
  } finally {
    await latency('0s')
  }
})

async function cycles(key, lock) {
  const warmAcquire = !(await noWarmAcquire())
  for (let round = 0; round < 3; round++) {
    const acquiring = lock.acquire({ timeoutMs: 10000 })
    assert.equal(warmInFlight(), warmAcquire ? 1 : 0, 'the acquire is a warm call')
    await acquiring
    assert.equal(warmInFlight(), 0)
    assert.ok(lock.isHeld())
    const entry = await rawEntry(server.addr, key)
    assert.equal(entry.Session, lock.sequencer.session)
    const releasing = lock.release()
    assert.equal(warmInFlight(), 1, 'the release is a warm call (on every Consul version)')
    assert.equal(await releasing, true)
    assert.ok(!lock.isHeld())
    assert.equal((await rawEntry(server.addr, key)).Session, undefined)
  }
  // Nothing held: the release says so, as a thread call does.
  assert.equal(await lock.release(), false)
}

test('a warm acquire aborted in flight rejects with an AbortError and leaves nothing held', {
  skip: realConsul && 'needs the dev server latency fault',
}, async () => {
  const { key, lock } = await afterACycle('warm-abort')
  if (await noWarmAcquire()) return
  await latency('300ms')
  try {
    const stop = new AbortController()
    const acquiring = lock.acquire({ timeoutMs: 10000, signal: stop.signal })
    assert.equal(warmInFlight(), 1)
    stop.abort()
    await assert.rejects(acquiring, { name: 'AbortError' })
  } finally {
    await latency('0s')
  }
  await nothingLeft(key, lock)
  // The lock's turn and claim are free again.
  await lock.acquire({ timeoutMs: 10000 })
  assert.equal(await lock.release(), true)
})

test('a warm acquire whose time runs out in flight misses and leaves nothing held', {
  skip: realConsul && 'needs the dev server latency fault',
}, async () => {
  const { key, lock } = await afterACycle('warm-timeout')
  if (await noWarmAcquire()) return
  await latency('300ms')
  try {
    assert.equal(await lock.tryAcquire({ timeoutMs: 50 }), false)
  } finally {
    await latency('0s')
  }
  await nothingLeft(key, lock)
  await lock.acquire({ timeoutMs: 10000 })
  assert.equal(await lock.release(), true)
})

test('warm calls on one connection share one watched connection, let go when the client closes', async () => {
  const { lock } = await afterACycle('watched')
  assert.ok(await lock.acquire({ timeoutMs: 10000 }))
  assert.equal(await lock.release(), true)
  const [watched, made] = warmConnStats()
  assert.equal(watched, 1, 'one connection is watched')
  for (let i = 0; i < 20; i++) {
    assert.ok(await lock.acquire({ timeoutMs: 10000 }))
    assert.equal(await lock.release(), true)
  }
  if (await noWarmAcquire()) {
    // Before Consul 1.6.2 an acquire runs on a thread, which may take the same connection from
    // the pool: the loop lets it go and watches it again for the release, at most once a cycle.
    const [watchedAfter, madeAfter] = warmConnStats()
    assert.equal(watchedAfter, 1)
    assert.ok(madeAfter - made <= 20, `watched again more than once a cycle: ${madeAfter - made}`)
  } else {
    assert.deepEqual(warmConnStats(), [1, made], 'the twenty cycles made no watch of their own')
  }
  // The client closes its connections (the core shuts them down): the loop sees the end of the
  // one it watches and lets it go.
  await client.close()
  await waitFor('the watched connection let go', async () => warmConnStats()[0] === 0)
})

test('a worker thread that made warm calls ends cleanly, its watched connection closed', async () => {
  const { Worker } = require('node:worker_threads')
  const path = require('node:path')
  const code = `
    const { parentPort, workerData } = require('node:worker_threads')
    const { Client } = require(workerData.addon)
    const { warmConnStats } = require(workerData.native)
    ;(async () => {
      const c = new Client({ address: workerData.addr })
      const lock = c.lock(workerData.key)
      for (let i = 0; i < 5; i++) {
        await lock.acquire({ timeoutMs: 10000 })
        await lock.release()
      }
      parentPort.postMessage(warmConnStats())
      // Closed: the core shuts its connections down, and the worker ends whether or not its
      // loop has let the watched one go by then (its clean-up closes what is left).
      await c.close()
      parentPort.postMessage('closed')
    })()
  `
  const worker = new Worker(code, {
    eval: true,
    workerData: {
      addon: path.join(__dirname, '..'),
      native: path.join(__dirname, '..', 'native.js'),
      addr: server.addr,
      key: freshKey('worker'),
    },
  })
  const messages = []
  worker.on('message', (m) => messages.push(m))
  // It ends by itself once its client is closed (nothing of baton's keeps its loop alive), and
  // this process lives on: a worker's loop closing with a handle still open would abort it.
  const exited = new Promise((resolve, reject) => {
    worker.once('exit', resolve)
    worker.once('error', reject)
  })
  assert.equal(await exited, 0, 'the worker ended by itself')
  assert.equal(messages.length, 2, `the worker's messages: ${JSON.stringify(messages)}`)
  assert.equal(messages[0][0], 1, 'the worker watched its connection')
  assert.equal(messages[1], 'closed')
})
