'use strict'
// Leader election with failover, in Node.
//
// Three candidates (separate clients, as if separate processes) campaign for one key; an
// observer prints every leader change with its fencing token. Each leader writes a fenced
// status record, works while `lostSignal` says it still leads, then "crashes": its session is
// destroyed without a resign, so the next candidate takes over after the lock-delay. The crashed
// leader's late write is refused by Consul (stale sequencer). Exits 0 once every candidate led
// once, with growing fencing tokens.
//
//   node examples/node/leader_election.js      (CONSUL_HTTP_ADDR, or a dev server it starts)
const { setTimeout: sleep } = require('node:timers/promises')
const { Client } = require('../../bindings/node')
const { target, runPrefix } = require('./target')

async function candidate(address, key, name) {
  const client = new Client({ address })
  try {
    const session = await client.createSession({ name, ttlMs: 10000, lockDelayMs: 500 })
    const election = client.election(key, { session })
    election.on('lost', (reason) => console.log(`${name}: leadership lost (${reason})`))
    await election.campaign(name, { timeoutMs: 60000 })
    const seq = election.sequencer
    console.log(`${name}: elected, fencing token ${seq.token} (sequencer ${seq})`)
    await client.guardedPut(seq, `${key}-status`, `${name} leads`)
    try {
      for (let step = 1; step <= 3; step++) {
        await sleep(100, undefined, { signal: election.lostSignal })
        console.log(`${name}: working (step ${step})`)
      }
    } catch (e) {
      if (e.name !== 'AbortError') throw e
      console.log(`${name}: lost leadership, stopping work`)
      return
    }
    console.log(`${name}: crashing (session destroyed, no resign)`)
    await session.destroy()
    try {
      await client.guardedPut(seq, `${key}-status`, `${name} still thinks it leads`)
      throw new Error(`${name}: a stale leader's write was accepted`)
    } catch (e) {
      if (e.code !== 'BATON_CONFLICT') throw e
      console.log(`${name}: late write refused: ${e.message}`)
    }
  } finally {
    await client.close()
  }
}

async function main() {
  const t = await target()
  const key = `${runPrefix('leader-election')}/leader`
  const watcher = new Client({ address: t.address })
  const stop = new AbortController()
  const seen = []
  const observed = (async () => {
    try {
      for await (const leader of watcher.observeLeader(key, { signal: stop.signal })) {
        if (leader === null) {
          console.log('observer: no leader')
          continue
        }
        const who = leader.value.toString()
        console.log(`observer: leader is ${who} (LockIndex ${leader.lockIndex}, fencing token ${leader.token})`)
        if (seen.at(-1)?.who !== who) seen.push({ who, token: leader.token })
        if (seen.length === 3) break
      }
    } catch (e) {
      if (e.name !== 'AbortError') throw e
    }
  })()
  const started = Date.now()
  try {
    await Promise.all(['node-a', 'node-b', 'node-c'].map((name) => candidate(t.address, key, name)))
    // Give the observer 10 s to see every leader; the timer is cancelled once it has,
    // so the process does not idle until it fires.
    const giveUp = new AbortController()
    const deadline = sleep(10000, undefined, { signal: giveUp.signal }).then(
      () => stop.abort(),
      () => {}
    )
    await Promise.race([observed, deadline])
    giveUp.abort()
    await observed
  } finally {
    await watcher.close()
    await t.stop()
  }
  const order = seen.map((s) => `${s.who} (token ${s.token})`).join(', ')
  console.log(`done in ${((Date.now() - started) / 1000).toFixed(1)} s: ${seen.length} leaders observed in turn: ${order}`)
  const growing = seen.every((s, i) => i === 0 || s.token > seen[i - 1].token)
  if (seen.length !== 3 || new Set(seen.map((s) => s.who)).size !== 3 || !growing) {
    console.error('expected every candidate to lead once, with growing fencing tokens')
    process.exitCode = 1
  }
}

main().catch((e) => {
  console.error(e)
  process.exitCode = 1
})
