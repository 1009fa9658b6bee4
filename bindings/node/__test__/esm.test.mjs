// The package imports as ESM (by its name, through package.json "exports") and as CommonJS,
// and both give the same classes.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import * as baton from 'consul-baton'
import { Client, Lock, Sequencer, BatonError, AbortError } from 'consul-baton'

const require = createRequire(import.meta.url)

test('ESM named exports are the CommonJS classes', () => {
  const cjs = require('consul-baton')
  for (const name of Object.keys(cjs)) assert.equal(baton[name], cjs[name], name)
  assert.equal(typeof Client, 'function')
  assert.equal(Lock, cjs.Lock)
  assert.equal(Sequencer.parse('3:7:s:k').token, 7n)
  assert.ok(new BatonError('x', 'BATON_TIMEOUT') instanceof Error)
  assert.equal(new AbortError().code, 'ABORT_ERR')
})

test('ESM: bad arguments are reported the same way', () => {
  assert.throws(() => new Client({ address: '127.0.0.1:1' }).lock(42), { name: 'TypeError' })
  assert.throws(() => new Client({ address: '127.0.0.1:1' }).lock(''), { name: 'BatonError', code: 'BATON_INVALID_ARGUMENT' })
})
