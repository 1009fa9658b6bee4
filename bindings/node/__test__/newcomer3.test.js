'use strict'
// What a newcomer still hit (issue 43, item 6), the Node part: `new Client({ address:
// 'http://host:8500/v1' })` made kvGet answer null for a key that exists, and a lock's 404
// named only `/v1/session/create`. Such an address is refused at construction; a reverse
// proxy's prefix stays allowed, and errors name the full URL requested.
const { test, beforeEach } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('..')
const { useServer, freshKey } = require('./helpers')

const fx = useServer()
let addr
beforeEach(() => {
  addr = fx.addr
})

test('an address ending in the API path is refused at construction, saying why', () => {
  for (const path of ['/v1', '/v1/', '/v1/kv']) {
    assert.throws(() => new Client({ address: `http://${addr}${path}` }), (e) => {
      assert.equal(e.code, 'BATON_INVALID_ARGUMENT', String(e))
      assert.match(e.message, /carries the API path/)
      assert.ok(e.message.includes(`"http://${addr}"`), e.message)
      return true
    })
  }
})

test('a proxy prefix is allowed and errors name the full URL requested', async () => {
  const client = new Client({ address: `http://${addr}/consul` })
  try {
    const key = freshKey('node-newcomer3')
    await assert.rejects(client.kvPut(key, 'v'), (e) => {
      assert.equal(e.status, 404, String(e))
      assert.equal(e.endpoint, `PUT /v1/kv/${key}`)
      assert.equal(e.url, `http://${addr}/consul/v1/kv/${key}`)
      assert.ok(e.message.startsWith(`PUT http://${addr}/consul/v1/kv/`), e.message)
      return true
    })
    await assert.rejects(client.lock(freshKey('node-newcomer3')).acquire({ timeoutMs: 5000 }), (e) => {
      assert.ok(e.message.includes(`http://${addr}/consul/v1/session/create`), e.message)
      return true
    })
  } finally {
    await client.close()
  }
})
