'use strict'
// The package's internal symbols (and the Symbol.asyncDispose polyfill its classes need).

// Node >= 18.18 / 20.4 define Symbol.asyncDispose; older runtimes get the same polyfill
// TypeScript's and Babel's `await using` helpers look for.
if (typeof Symbol.asyncDispose !== 'symbol') {
  Object.defineProperty(Symbol, 'asyncDispose', { value: Symbol.for('nodejs.asyncDispose') })
}

const kNative = Symbol('baton.native')
const kToken = Symbol('baton.constructor')
const kLost = Symbol('baton.lost')
const kClientClosed = Symbol('baton.clientClosed')

module.exports = { kNative, kToken, kLost, kClientClosed }
