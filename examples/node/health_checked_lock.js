'use strict'
// A lock that follows the holder's health (a session bound to a TTL check).
//
// The worker registers a TTL check, binds its session to it and keeps the check passing from
// a health function while it holds the lock. When the health function starts failing (here:
// after a few rounds, as if a dependency went away) it stops reporting; the check turns
// critical at the end of its TTL, Consul invalidates the session, the lock is lost (the 'lost'
// event fires) and a standby takes over. Exits non-zero if that does not happen.
//
//   node examples/node/health_checked_lock.js     (CONSUL_HTTP_ADDR, or a dev server it starts)
const { once } = require('node:events')
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require('../../bindings/node')
const { target, runPrefix } = require('./target')

const CHECK_TTL_MS = 2000 // without a pass for this long the check turns critical
const HEALTHY_ROUNDS = 6 // the health function succeeds this many times, then fails

async function main() {
  const { address, stop } = await target()
  const worker = new Client({ address })
  const standby = new Client({ address })
  const key = `${runPrefix('health_checked_lock')}/leader`
  const check = `worker-health-${process.pid}`
  let rounds = 0
  // The application's own health function (here: healthy for HEALTHY_ROUNDS calls).
  const healthy = () => ++rounds <= HEALTHY_ROUNDS
  try {
    // 1. A TTL check, passing from the start (a TTL check starts critical, and Consul refuses
    //    to bind a session to a check that is not passing).
    await worker.agent.checkRegister(check, { ttlMs: CHECK_TTL_MS, name: 'worker health', status: 'passing' })
    // 2. A session bound to it (and to the node's serfHealth, as by default); lockDelayMs: 0
    //    so the standby can take over as soon as the session ends.
    const session = await worker.createSession({
      name: 'health-checked worker',
      ttlMs: 10000,
      lockDelayMs: 0,
      nodeChecks: ['serfHealth', check],
    })
    const lock = worker.lock(key, { value: 'worker', session })
    await lock.acquire({ timeoutMs: 10000 })
    console.log(`worker: holding ${key} with session ${session.id}`)
    const lost = once(lock, 'lost')
    const takeOver = standby.lock(key, { value: 'standby' }).acquire({ timeoutMs: 30000 })

    // 3. Keep the check passing from the health function, more often than its TTL.
    let lastPass = 0
    while (lock.isHeld()) {
      if (!healthy()) {
        console.log(`worker: health function failed (round ${rounds}): no more passes`)
        break
      }
      await worker.agent.checkPass(check, `round ${rounds} ok`)
      lastPass = performance.now()
      console.log(`worker: healthy (round ${rounds}), check passed`)
      await sleep(CHECK_TTL_MS / 3) // the reporting period
    }

    // 4. The check turns critical after its TTL: the session and the lock are gone.
    const [why] = await Promise.race([
      lost,
      sleep(30000).then(() => {
        throw new Error('the lock was not lost after the health function failed')
      }),
    ])
    console.log(`worker: lock lost (${why}) ${((performance.now() - lastPass) / 1000).toFixed(2)}s after the last pass (check TTL ${CHECK_TTL_MS / 1000}s)`)
    const mine = await takeOver
    console.log('standby: took over the lock')
    await mine.release()
  } finally {
    await worker.agent.checkDeregister(check).catch(() => {})
    await standby.close()
    await worker.close()
    await stop()
  }
}

main().then(
  () => process.exit(process.exitCode ?? 0), // 1 when target.stop() found a session left
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
