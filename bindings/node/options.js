'use strict'
// The one check every options object of the package goes through (client, session, lock,
// semaphore, election, waits, KV, agent, transaction operations, startDevServer, setLogger): an
// unknown key is a TypeError naming it and the known ones, with a "did you mean" for a near
// miss, never silently ignored (`new Client({ adress })` would otherwise fall back to the
// environment's address).

/** Edit distance of two short strings, a swap of neighbours counting one (for "did you mean"). */
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  }
  return d[a.length][b.length]
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
