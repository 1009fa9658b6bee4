'use strict'
// A counter shared by several clients: concurrent adds all count, compare-and-set decides a
// race, and a watch sees the value change.
//
// WORKERS clients each add 1 to the counter ADDS times, all at once; a watcher (another client)
// follows the value until it reaches the total. Then two clients race a compare-and-set from the
// same value: exactly one wins. Exits 0 when the total is exact and one compare-and-set won.
//
//   node examples/node/counter.js     (CONSUL_HTTP_ADDR, or a dev server it starts)
const { Client } = require('../../bindings/node')
const { target, runPrefix } = require('./target')

const WORKERS = 4
const ADDS = 25

async function main() {
  const t = await target()
  const key = `${runPrefix('counter')}/hits`
  const options = t.address ? { address: t.address } : undefined
  const clients = Array.from({ length: WORKERS + 1 }, () => new Client(options))
  let ok = false
  try {
    const [watcherClient, ...workers] = clients
    const counter = watcherClient.counter(key)
    await counter.set(0)
    const total = BigInt(WORKERS * ADDS)

    // Values are BigInt (64-bit, as every 64-bit number of the package).
    const watch = counter.watch({ timeoutMs: 30000 })
    const seen = []
    const watching = (async () => {
      for await (const value of watch) {
        seen.push(value)
        if (value === total) break
      }
    })()

    await Promise.all(
      workers.map(async (c) => {
        const mine = c.counter(key)
        for (let i = 0; i < ADDS; i++) await mine.increment()
      }),
    )
    await watching
    const value = await counter.get()
    console.log(`${WORKERS} clients x ${ADDS} increments: counter = ${value}; the watch saw ${seen.length} values, last ${seen.at(-1)}`)

    // Two clients race to move the counter from `value` to their own number: one wins.
    const [a, b] = workers.map((c) => c.counter(key))
    const won = await Promise.all([a.compareAndSet(value, 1000), b.compareAndSet(value, 2000)])
    const after = await counter.get()
    console.log(`compare-and-set race: ${JSON.stringify(won)}, counter = ${after}`)

    await watcherClient.kvDelete(key)
    ok = value === total && won.filter(Boolean).length === 1 && (after === 1000n || after === 2000n)
  } finally {
    for (const c of clients) await c.close()
    await t.stop()
  }
  if (!ok) process.exitCode = 1
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
