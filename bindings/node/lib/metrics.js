'use strict'
// Metrics (issue 47): METRICS, the table of the metrics every language exposes (the core's, read
// from the addon), and registerMetrics, a client's metrics in a prom-client registry.
//
// prom-client is an optional peer dependency: nothing here loads it unless registerMetrics is
// called without a registry. Its Counter / Gauge / Histogram objects record observations made in
// JavaScript; baton's are counted in the core, so each metric here is a small object of
// prom-client's metric interface (name, help, type, get()) whose get() reads the client's
// snapshot, the values exact as the core counted them (histogram buckets included).

const native = require('./addon.js')
const { Client } = require('./client.js')

function freeze(def) {
  return Object.freeze({ name: def.name, type: def.type, labels: Object.freeze([...def.labels]), help: def.help })
}

/**
 * Every metric a client exposes, in exposition order: `{ name, type, labels, help }` with `type`
 * 'gauge', 'counter' or 'histogram' and `labels` the label names in order (the core's
 * `baton::metrics::METRICS`, the same in every language). `client.metrics()` holds each under its
 * name less `baton_` and `_total`, its labels as nested objects in label order.
 */
const METRICS = Object.freeze(native.metricDefs().map(freeze))

/** The key of metric `name` in a snapshot (`baton_acquires_total` → `acquires`). */
function snapshotKey(name) {
  return name.replace(/^baton_/, '').replace(/_total$/, '')
}

/**
 * The leaves of `value` (a snapshot's entry) nested `names.length` deep, each with its labels:
 * `[{ labels, value }]`. A null leaf (`lease_left_seconds` with no session) gives none.
 */
function leaves(metric, value, names, labels = {}) {
  if (value === null) return []
  if (names.length === 0) return [{ labels, value }]
  if (typeof value !== 'object') throw new Error(`${metric}: the snapshot has no '${names[0]}' level (${JSON.stringify(value)})`)
  const [first, ...rest] = names
  return Object.entries(value).flatMap(([k, v]) => leaves(metric, v, rest, { ...labels, [first]: k }))
}

/** The samples of one histogram `h` ({bounds, buckets, count, sum}) with `labels`, cumulative. */
function histogramSamples(name, labels, h) {
  const out = []
  let cumulative = 0
  h.buckets.forEach((n, i) => {
    cumulative += n
    const le = i < h.bounds.length ? h.bounds[i] : '+Inf'
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le }, value: cumulative })
  })
  out.push({ metricName: `${name}_sum`, labels, value: h.sum })
  out.push({ metricName: `${name}_count`, labels, value: h.count })
  return out
}

/**
 * One metric of METRICS as prom-client's registry reads it: `get()` resolves with its values in
 * the client's current snapshot.
 */
class SnapshotMetric {
  #def
  #snapshot
  constructor(def, snapshot) {
    this.#def = def
    this.#snapshot = snapshot
    this.name = def.name
    this.help = def.help
    this.type = def.type
    this.labelNames = [...def.labels]
    // How prom-client's cluster mode merges the workers' values: the smallest lease left is the
    // smallest of theirs; every other metric adds up.
    this.aggregator = def.name === 'baton_lease_left_seconds' ? 'min' : 'sum'
  }
  /** The values of this metric in the client's snapshot (prom-client's `MetricObjectWithValues`). */
  async get() {
    return this.#read()
  }
  #read() {
    const def = this.#def
    const found = leaves(def.name, this.#snapshot()[snapshotKey(def.name)] ?? null, def.labels)
    const values =
      def.type === 'histogram'
        ? found.flatMap(({ labels, value }) => histogramSamples(def.name, labels, value))
        : found.map(({ labels, value }) => ({ labels, value }))
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator }
  }
  /** `registry.resetMetrics()`: nothing to reset, the counts are the core's. */
  reset() {}
}

/**
 * Registers `client`'s metrics in a prom-client registry (`register`, default prom-client's
 * global `register`): one metric per entry of METRICS, under its name, help text and labels
 * (counters end in `_total`), its values read from one `client.metrics()` snapshot per scrape
 * (`await register.metrics()`), exact as the core counted them. `baton_lease_left_seconds` has
 * no sample while the client has no session with a TTL. Throws, registering none, when
 * a metric of that name is in the registry already: one client per registry (use
 * a registry per client, and `Registry.merge`, to expose several). Returns the registered
 * metric objects (`register.removeSingleMetric(m.name)` for each unregisters them).
 */
function registerMetrics(client, register) {
  if (!(client instanceof Client)) throw new TypeError('client must be a Client')
  if (register === undefined) {
    try {
      register = require('prom-client').register
    } catch (e) {
      throw new Error("registerMetrics: prom-client is not installed (npm install prom-client), or pass a registry", { cause: e })
    }
  }
  if (register === null || typeof register !== 'object' || typeof register.registerMetric !== 'function') {
    throw new TypeError("register must be a prom-client Registry (new Registry(), or prom-client's register)")
  }
  // One snapshot per scrape: a registry reads every metric's get() in one synchronous pass, so
  // the snapshot taken by the first is kept until the pass's microtasks run.
  let taken = null
  const snapshot = () => {
    if (taken === null) {
      taken = client.metrics()
      queueMicrotask(() => {
        taken = null
      })
    }
    return taken
  }
  // All or none: a name taken already fails before any is registered.
  for (const def of METRICS) {
    if (typeof register.getSingleMetric === 'function' && register.getSingleMetric(def.name) !== undefined) {
      throw new Error(`registerMetrics: a metric named ${def.name} is registered already in this registry (one client per registry)`)
    }
  }
  const metrics = METRICS.map((def) => new SnapshotMetric(def, snapshot))
  for (const m of metrics) register.registerMetric(m)
  return metrics
}

module.exports = { METRICS, registerMetrics }
