'use strict'
// The one check every options object of the package goes through (client, session, lock,
// semaphore, election, waits, KV, agent, transaction operations, startDevServer, setLogger): an
// unknown key is a TypeError naming it and the known ones, with a "did you mean" for a near
// miss, never silently ignored (`new Client({ adress })` would otherwise fall back to the
// environment's address).

/** Edit distance of two short strings (for "did you mean"). */
function distance(a, b) {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    prev = row
  }
  return prev[b.length]
}

/** What an unknown option `k` was probably meant to be, as a hint ('' when nothing is close). */
function didYouMean(k, known) {
  // Durations carry their unit in the name: `ttl`, `timeout`, `lockDelay`.
  const ms = known.find((n) => n === `${k}Ms` || n.toLowerCase() === `${k.toLowerCase()}ms`)
  if (ms) return ` (did you mean ${ms}? durations are in milliseconds)`
  let best
  let bestDistance = Infinity
  for (const n of known) {
    const d = n.toLowerCase() === k.toLowerCase() ? 0 : distance(k, n)
    if (d < bestDistance) [best, bestDistance] = [n, d]
  }
  return best !== undefined && bestDistance <= Math.max(1, Math.floor(best.length / 3)) ? ` (did you mean ${best}?)` : ''
}

/**
 * An options object of `what` (for messages: 'Client', 'lock', 'session', ...) may hold only
 * `known` keys: a misspelt option is a TypeError naming it, never ignored (one check for every
 * options object of the package). `undefined` is an empty object.
 */
function optionsOf(what, options, known) {
  if (options === undefined) return {}
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`${what} options must be an object, got ${options === null ? 'null' : Array.isArray(options) ? 'an array' : typeof options}`)
  }
  for (const k of Object.keys(options)) {
    if (!known.includes(k)) {
      throw new TypeError(`unknown ${what} option ${JSON.stringify(k)}${didYouMean(k, known)} (known: ${known.join(', ')})`)
    }
  }
  return options
}

module.exports = { optionsOf }
