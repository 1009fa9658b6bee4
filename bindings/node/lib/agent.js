'use strict'
// The local agent: checks and services.

const { optionsOf } = require('../options.js')
const { kToken } = require('./symbols.js')
const { settle } = require('./errors.js')
const { checkMillis, checkStringList, checkNote } = require('./checks.js')

const CHECK_STATUSES = ['passing', 'warning', 'critical']

function checkId(name, v) {
  if (typeof v !== 'string') throw new TypeError(`${name} must be a string, got ${typeof v}`)
  if (v === '') throw new TypeError(`${name} must not be empty`)
}

function checkStatus(v) {
  if (!CHECK_STATUSES.includes(v)) {
    throw new TypeError(`status must be 'passing', 'warning' or 'critical', got ${JSON.stringify(v)}`)
  }
}

/**
 * The local agent's check and service endpoints (`client.agent`): what a process needs to bind
 * its sessions to its own health. Each call is one request bounded by the client's
 * `requestTimeoutMs`.
 */
class Agent {
  #native
  constructor(token, n) {
    if (token !== kToken) throw new TypeError('use client.agent')
    this.#native = n
  }
  /** Registers (or replaces) a TTL check: critical when `ttlMs` passes without a report. */
  checkRegister(id, options) {
    checkId('id', id)
    const o = optionsOf('check', options, ['ttlMs', 'name', 'serviceId', 'notes', 'status'])
    if (o.ttlMs === undefined) throw new TypeError('ttlMs is required')
    checkMillis('ttlMs', o.ttlMs, { positive: true })
    if (o.ttlMs === Infinity) throw new RangeError('ttlMs must be finite')
    if (o.status !== undefined) checkStatus(o.status)
    for (const k of ['name', 'serviceId', 'notes']) checkNote(k, o[k])
    return settle(() => this.#native.checkRegister(id, o))
  }
  /** Removes a check; sessions bound to it are invalidated. */
  checkDeregister(id) {
    checkId('id', id)
    return settle(() => this.#native.checkDeregister(id))
  }
  /** Reports the check passing: its TTL starts again. */
  checkPass(id, note) {
    return this.#report('pass', id, note)
  }
  /** Reports the check warning (bound sessions stay valid). */
  checkWarn(id, note) {
    return this.#report('warn', id, note)
  }
  /** Reports the check critical: bound sessions are invalidated. */
  checkFail(id, note) {
    return this.#report('fail', id, note)
  }
  /** Sets the check's status ('passing', 'warning', 'critical') and output. */
  checkUpdate(id, status, output) {
    checkId('id', id)
    checkStatus(status)
    checkNote('output', output)
    return settle(() => this.#native.checkUpdate(id, status, output ?? undefined))
  }
  /** Registers (or replaces) a service: `{ name, id?, tags?, address?, port? }`. */
  serviceRegister(service) {
    const o = optionsOf('service', service, ['name', 'id', 'tags', 'address', 'port'])
    checkId('name', o.name)
    checkNote('id', o.id)
    checkNote('address', o.address)
    checkStringList('tags', o.tags)
    if (o.port !== undefined && (!Number.isInteger(o.port) || o.port < 0 || o.port > 65535)) {
      throw new RangeError(`port must be an integer between 0 and 65535, got ${o.port}`)
    }
    return settle(() => this.#native.serviceRegister(o))
  }
  /** Removes a service and its checks. */
  serviceDeregister(id) {
    checkId('id', id)
    return settle(() => this.#native.serviceDeregister(id))
  }
  #report(verb, id, note) {
    checkId('id', id)
    checkNote('note', note)
    return settle(() => this.#native.checkReport(verb, id, note ?? undefined))
  }
}

module.exports = { Agent }
