'use strict'
// A shared cache key guarded by a read-write lock: readers read it together, a writer rebuilds
// it alone, and a waiting writer is not starved by readers arriving after it.
//
// READERS reader clients each read the cache ROUNDS times under the read lock; one writer client
// rebuilds it (version n+1, written as two keys, `version` and `payload`) WRITES times under the
// write lock. A reader must never see the two keys disagree (a half-rebuilt cache): the writer
// writes them one after the other, and only the lock keeps readers out in between. Readers
// overlapping each other is counted (that is the point of a read lock). Exits 0 on success.
//
//   node examples/node/rwlock_cache.js     (CONSUL_HTTP_ADDR, or a dev server it starts)
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require('../../bindings/node')
const { target, runPrefix } = require('./target')

const READERS = 3
const ROUNDS = 5
const WRITES = 3

async function main() {
  const t = await target()
  const base = runPrefix('rwlock-cache')
  const prefix = `${base}/lock`
  const clients = Array.from({ length: READERS + 1 }, () => new Client(t.address ? { address: t.address } : undefined))
  let readersIn = 0
  let mostReadersIn = 0
  let torn = 0
  let reads = 0
  try {
    const [writerClient, ...readerClients] = clients
    await writerClient.kvPut(`${base}/version`, '0')
    await writerClient.kvPut(`${base}/payload`, 'payload of version 0')

    const writer = (async () => {
      const lock = writerClient.writeLock(prefix)
      for (let v = 1; v <= WRITES; v++) {
        await lock.acquire({ timeoutMs: 60000 })
        try {
          // Two writes with a pause between: a reader let in here would see them disagree.
          await writerClient.kvPut(`${base}/version`, String(v))
          await sleep(30)
          await writerClient.kvPut(`${base}/payload`, `payload of version ${v}`)
          console.log(`writer: rebuilt the cache to version ${v} (fencing token ${lock.sequencer.token})`)
        } finally {
          await lock.release()
        }
        await sleep(20)
      }
    })()

    const readers = readerClients.map(async (c, i) => {
      const lock = c.readLock(prefix)
      for (let r = 0; r < ROUNDS; r++) {
        await lock.acquire({ timeoutMs: 60000 })
        readersIn += 1
        mostReadersIn = Math.max(mostReadersIn, readersIn)
        try {
          const version = String(await c.kvGet(`${base}/version`))
          await sleep(15)
          const payload = String(await c.kvGet(`${base}/payload`))
          reads += 1
          if (payload !== `payload of version ${version}`) {
            torn += 1
            console.log(`reader ${i + 1}: TORN read: version ${version}, ${payload}`)
          }
        } finally {
          readersIn -= 1
          await lock.release()
        }
      }
    })

    await Promise.all([writer, ...readers])
    await writerClient.kvDelete(`${base}/version`)
    await writerClient.kvDelete(`${base}/payload`)
  } finally {
    for (const c of clients) await c.close()
    await t.stop()
  }
  console.log(`done: ${reads} reads by ${READERS} readers, ${WRITES} rebuilds; at most ${mostReadersIn} readers at once, ${torn} torn reads`)
  if (torn !== 0 || reads !== READERS * ROUNDS) process.exitCode = 1
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
