'use strict'
// A Consul that does not answer is not contention (issue 31, item 2): a timed acquire, semaphore
// wait or campaign in which no request got an answer rejects with BATON_CONNECTION naming the
// address, not BATON_TIMEOUT "not acquired". And an address that makes no URL is refused when the
// client is made (item 9). No server is needed: nothing listens where these clients point.
const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client, BatonError } = require('..')
const { closedPort } = require('./helpers')

const TIMEOUT_MS = 2000

/** Asserts `promise` rejects with a BatonError of code BATON_CONNECTION naming `address`. */
async function connectionError(promise, address, what) {
  const err = await promise.then(
    (v) => assert.fail(`${what} resolved ${v} against ${address}, where nothing answers`),
    (e) => e,
  )
  assert.ok(err instanceof BatonError, `${what}: ${err}`)
  assert.equal(err.code, 'BATON_CONNECTION', `${what}: ${err.code}: ${err.message}`)
  assert.ok(err.message.includes(address), `${what}: the message does not name ${address}: ${err.message}`)
  return err
}

test('a timed lock acquire (and tryAcquire) on a closed port is BATON_CONNECTION naming the address', async () => {
  const address = `127.0.0.1:${await closedPort()}`
  const c = new Client({ address })
  try {
    const err = await connectionError(c.lock('newcomer/lock').acquire({ timeoutMs: TIMEOUT_MS }), address, 'lock.acquire')
    assert.doesNotMatch(err.message, /not acquired/)
    await connectionError(c.lock('newcomer/lock').tryAcquire({ timeoutMs: TIMEOUT_MS }), address, 'lock.tryAcquire')
  } finally {
    assert.equal(await c.close(), true)
  }
})

test('a timed semaphore acquire on a closed port is BATON_CONNECTION naming the address', async () => {
  const address = `127.0.0.1:${await closedPort()}`
  const c = new Client({ address })
  try {
    await connectionError(c.semaphore('newcomer/sem', 2).acquire({ timeoutMs: TIMEOUT_MS }), address, 'semaphore.acquire')
  } finally {
    assert.equal(await c.close(), true)
  }
})

test('a timed campaign on a closed port is BATON_CONNECTION naming the address', async () => {
  const address = `127.0.0.1:${await closedPort()}`
  const c = new Client({ address })
  try {
    await connectionError(c.election('newcomer/leader').campaign('me', { timeoutMs: TIMEOUT_MS }), address, 'election.campaign')
  } finally {
    assert.equal(await c.close(), true)
  }
})

test('a timed acquire on a host that does not resolve is BATON_CONNECTION naming it', async () => {
  // `.invalid` never resolves (RFC 2606).
  const address = 'baton-newcomer.invalid:8500'
  const c = new Client({ address })
  try {
    await connectionError(c.lock('newcomer/lock').acquire({ timeoutMs: TIMEOUT_MS }), 'baton-newcomer.invalid', 'lock.acquire')
    await connectionError(c.semaphore('newcomer/sem', 2).acquire({ timeoutMs: TIMEOUT_MS }), 'baton-newcomer.invalid', 'semaphore.acquire')
  } finally {
    assert.equal(await c.close(), true)
  }
})

test('an address that makes no URL is refused when the client is made, naming it', () => {
  assert.throws(
    () => new Client({ address: 'not a url::' }),
    (e) => {
      assert.equal(e.code, 'BATON_INVALID_ARGUMENT', `${e.name} ${e.code}: ${e.message}`)
      assert.ok(e.message.includes('not a url::'), e.message)
      return true
    },
  )
})
