//! The recording side of a client's metrics: counters and fixed-bucket histograms
//! of plain atomics, one [`Metrics`] per client (on its transport), which the
//! transport, the runtime and the recipes record into. Always on: recording is a
//! few relaxed atomic adds, no lock, no allocation. Labels are small closed
//! enums indexing fixed arrays. What the numbers mean is documented on the
//! public snapshot (`client::metrics`); the names, types and help texts every
//! language exposes are [`METRICS`].

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// The kind of a metric in an exposition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum MetricType {
    /// A value that goes up and down.
    Gauge,
    /// A value that only goes up (its name ends in `_total`).
    Counter,
    /// Observations counted into fixed buckets, with their count and sum.
    Histogram,
}

/// One exposed metric: its name, type, labels and help text, shared by every language.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct MetricDef {
    /// The Prometheus name (`baton_acquires_total`).
    pub name: &'static str,
    /// Its type.
    pub kind: MetricType,
    /// Its label names, in order.
    pub labels: &'static [&'static str],
    /// The help text.
    pub help: &'static str,
}

const fn def(
    name: &'static str,
    kind: MetricType,
    labels: &'static [&'static str],
    help: &'static str,
) -> MetricDef {
    MetricDef {
        name,
        kind,
        labels,
        help,
    }
}

/// Every metric a client exposes, in exposition order: the one list the Rust
/// `prometheus` feature and the bindings take names and help texts from.
pub const METRICS: &[MetricDef] = &[
    def(
        "baton_held",
        MetricType::Gauge,
        &["recipe"],
        "Holdings held now by this client, by recipe.",
    ),
    def(
        "baton_acquires_total",
        MetricType::Counter,
        &["recipe", "outcome"],
        "Acquire calls (acquire, try, campaign) by recipe and outcome.",
    ),
    def(
        "baton_acquire_wait_seconds",
        MetricType::Histogram,
        &["recipe"],
        "How long acquire calls took, whatever their outcome, by recipe.",
    ),
    def(
        "baton_hold_seconds",
        MetricType::Histogram,
        &["recipe"],
        "How long holdings lasted, from acquired to released or lost, by recipe.",
    ),
    def(
        "baton_losses_total",
        MetricType::Counter,
        &["recipe", "reason"],
        "Holdings lost (ended other than by their release), by recipe and reason.",
    ),
    def(
        "baton_renewals_total",
        MetricType::Counter,
        &["outcome"],
        "Session renewals by the client's renewer, by outcome (ok, failed).",
    ),
    def(
        "baton_renewal_seconds",
        MetricType::Histogram,
        &[],
        "Latency of session renewals.",
    ),
    def(
        "baton_lease_left_seconds",
        MetricType::Gauge,
        &[],
        "The smallest lease time left of the client's live managed sessions.",
    ),
    def(
        "baton_requests_total",
        MetricType::Counter,
        &["family", "outcome"],
        "HTTP requests to Consul by endpoint family and outcome.",
    ),
    def(
        "baton_request_seconds",
        MetricType::Histogram,
        &["family"],
        "Latency of HTTP requests to Consul by endpoint family (blocking queries excluded).",
    ),
    def(
        "baton_retries_total",
        MetricType::Counter,
        &[],
        "Requests the client sent again after a transient failure or a stale connection.",
    ),
    def(
        "baton_leaderless_seconds_total",
        MetricType::Counter,
        &[],
        "Seconds calls spent waiting out a Consul without a leader.",
    ),
    def(
        "baton_owed",
        MetricType::Gauge,
        &["kind"],
        "Work owed to Consul and waiting now (unlocks, slots, sessions to destroy).",
    ),
];

/// The recipes holdings are counted by (label `recipe`).
pub const RECIPES: &[&str] = &["lock", "semaphore", "rwlock", "multilock", "election"];
/// The outcomes of an acquire call (label `outcome` of `baton_acquires_total`).
pub const ACQUIRE_OUTCOMES: &[&str] = &[
    "acquired",
    "not_acquired",
    "timed_out",
    "cancelled",
    "error",
];
/// The reasons a holding is lost (label `reason`): the recipes' own loss names
/// and, for a lost session, the session's [`LostReason`](crate::LostReason) name.
pub const LOSS_REASONS: &[&str] = &[
    "key_changed",
    "removed",
    "invalidated",
    "deadline_exceeded",
    "destroyed",
    "client_closed",
    "other",
];
/// The endpoint families of requests (label `family`).
pub const FAMILIES: &[&str] = &["kv", "session", "txn", "agent", "status", "other"];
/// The outcomes of a request (label `outcome` of `baton_requests_total`).
pub const REQUEST_OUTCOMES: &[&str] = &["2xx", "4xx", "429", "5xx", "no_answer"];
/// The kinds of owed work (label `kind` of `baton_owed`).
pub const OWED_KINDS: &[&str] = &["unlocks", "slots", "sessions"];

/// Upper bounds (seconds) of the acquire-wait and request-latency buckets.
pub const WAIT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0,
];
/// Upper bounds (seconds) of the hold-time buckets (up to an hour).
pub const HOLD_BUCKETS: &[f64] = &[0.01, 0.1, 1.0, 10.0, 60.0, 300.0, 600.0, 1800.0, 3600.0];

/// A recipe (label `recipe`), an index into [`RECIPES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recipe {
    Lock = 0,
    Semaphore = 1,
    RwLock = 2,
    MultiLock = 3,
    Election = 4,
}

impl Recipe {
    /// The recipe named `name` in [`RECIPES`] (a lock for an unknown name).
    pub(crate) fn named(name: &str) -> Recipe {
        match name {
            "semaphore" => Recipe::Semaphore,
            "rwlock" => Recipe::RwLock,
            "multilock" => Recipe::MultiLock,
            "election" => Recipe::Election,
            _ => Recipe::Lock,
        }
    }
}

/// An acquire outcome, an index into [`ACQUIRE_OUTCOMES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireOutcome {
    Acquired = 0,
    NotAcquired = 1,
    TimedOut = 2,
    Cancelled = 3,
    Failed = 4,
}

const NR: usize = 5;
const NAO: usize = 5;
const NLR: usize = 7;
const NF: usize = 6;
const NRO: usize = 5;
const NWB: usize = 12;
const NHB: usize = 9;

/// A histogram of fixed buckets: a count per bucket (the last is `+Inf`), the
/// count and the sum in nanoseconds.
#[derive(Debug)]
pub(crate) struct Histogram<const N: usize> {
    bounds: &'static [f64],
    buckets: [AtomicU64; N],
    inf: AtomicU64,
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl<const N: usize> Histogram<N> {
    fn new(bounds: &'static [f64]) -> Self {
        debug_assert_eq!(bounds.len(), N);
        Histogram {
            bounds,
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            inf: AtomicU64::new(0),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub(crate) fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = self.bounds.iter().position(|b| secs <= *b);
        match slot {
            Some(i) => self.buckets[i].fetch_add(1, Ordering::Relaxed),
            None => self.inf.fetch_add(1, Ordering::Relaxed),
        };
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The bounds, the per-bucket counts (not cumulative; one more than bounds:
    /// the last is `+Inf`), the count and the sum.
    pub(crate) fn read(&self) -> (&'static [f64], Vec<u64>, u64, Duration) {
        let mut counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        counts.push(self.inf.load(Ordering::Relaxed));
        // The count is the buckets' sum, so a snapshot is self-consistent.
        let count = counts.iter().sum();
        let sum = Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed));
        (self.bounds, counts, count, sum)
    }
}

fn counters<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

/// A client's metrics (see the module docs).
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) held: [AtomicI64; NR],
    pub(crate) acquires: [[AtomicU64; NAO]; NR],
    pub(crate) acquire_wait: [Histogram<NWB>; NR],
    pub(crate) hold_time: [Histogram<NHB>; NR],
    pub(crate) losses: [[AtomicU64; NLR]; NR],
    pub(crate) renewals_ok: AtomicU64,
    pub(crate) renewals_failed: AtomicU64,
    pub(crate) renewal_latency: Histogram<NWB>,
    pub(crate) requests: [[AtomicU64; NRO]; NF],
    pub(crate) request_latency: [Histogram<NWB>; NF],
    pub(crate) retries: AtomicU64,
    pub(crate) leaderless_nanos: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            held: std::array::from_fn(|_| AtomicI64::new(0)),
            acquires: std::array::from_fn(|_| counters()),
            acquire_wait: std::array::from_fn(|_| Histogram::new(WAIT_BUCKETS)),
            hold_time: std::array::from_fn(|_| Histogram::new(HOLD_BUCKETS)),
            losses: std::array::from_fn(|_| counters()),
            renewals_ok: AtomicU64::new(0),
            renewals_failed: AtomicU64::new(0),
            renewal_latency: Histogram::new(WAIT_BUCKETS),
            requests: std::array::from_fn(|_| counters()),
            request_latency: std::array::from_fn(|_| Histogram::new(WAIT_BUCKETS)),
            retries: AtomicU64::new(0),
            leaderless_nanos: AtomicU64::new(0),
        }
    }
}

thread_local! {
    /// Set while a thread runs one try of a call that counts itself (an async
    /// acquire's try on a step thread): the try's own judgement does not count.
    static INNER_TRY: Cell<bool> = const { Cell::new(false) };
}

/// Marks the calling thread as running an inner try until dropped.
pub(crate) struct InnerTry(bool);

impl Drop for InnerTry {
    fn drop(&mut self) {
        INNER_TRY.with(|c| c.set(self.0));
    }
}

/// The acquires judged on this thread until the guard drops are tries of a call
/// that counts itself (see [`INNER_TRY`]).
pub(crate) fn inner_try() -> InnerTry {
    InnerTry(INNER_TRY.with(|c| c.replace(true)))
}

/// Whether the calling thread runs an inner try.
pub(crate) fn in_inner_try() -> bool {
    INNER_TRY.with(Cell::get)
}

impl Metrics {
    /// One acquire call of `recipe` ended with `outcome` after `waited`.
    pub(crate) fn acquire(&self, recipe: Recipe, outcome: AcquireOutcome, waited: Duration) {
        let r = recipe as usize;
        self.acquires[r][outcome as usize].fetch_add(1, Ordering::Relaxed);
        self.acquire_wait[r].observe(waited);
    }

    /// A holding of `recipe` started.
    pub(crate) fn hold_started(&self, recipe: Recipe) {
        self.held[recipe as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// A holding of `recipe` that lasted `held` ended: released (`reason` `None`) or lost
    /// for `reason` (a name of [`LOSS_REASONS`]; another counts as `other`).
    pub(crate) fn hold_ended(&self, recipe: Recipe, held: Duration, reason: Option<&str>) {
        let r = recipe as usize;
        self.held[r].fetch_sub(1, Ordering::Relaxed);
        self.hold_time[r].observe(held);
        if let Some(reason) = reason {
            let i = LOSS_REASONS
                .iter()
                .position(|n| *n == reason)
                .unwrap_or(NLR - 1);
            // Release, after the gauge: a snapshot that sees the loss (it reads the losses
            // first, with Acquire) sees the holding gone from `held` too.
            self.losses[r][i].fetch_add(1, Ordering::Release);
        }
    }

    /// A renewal ended (`ok` or not) after `took`.
    pub(crate) fn renewal(&self, ok: bool, took: Duration) {
        // The latency first: a snapshot reads the counters before it, so it never shows
        // more renewals than latency samples.
        self.renewal_latency.observe(took);
        if ok {
            self.renewals_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            self.renewals_failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request of `endpoint` (`GET /v1/kv/a`) concluded: answered with `status`, or
    /// not answered (`None`); `took`, when known and not a blocking query.
    pub(crate) fn request(&self, endpoint: &str, status: Option<u16>, took: Option<Duration>) {
        let f = family(endpoint);
        let o = match status {
            None => 4,
            Some(429) => 2,
            Some(s) if s < 300 => 0,
            Some(s) if s < 500 => 1,
            Some(_) => 3,
        };
        self.requests[f][o].fetch_add(1, Ordering::Relaxed);
        if let Some(took) = took {
            self.request_latency[f].observe(took);
        }
    }

    /// A request is sent again (a retry loop's next try).
    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// `d` spent waiting out a Consul without a leader.
    pub(crate) fn leaderless(&self, d: Duration) {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.leaderless_nanos.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// The family of an endpoint (`PUT /v1/session/renew/x` → session), an index into
/// [`FAMILIES`].
fn family(endpoint: &str) -> usize {
    let path = endpoint.split_once(' ').map_or(endpoint, |(_, p)| p);
    let rest = path.strip_prefix("/v1/").unwrap_or("");
    let first = rest.split(['/', '?']).next().unwrap_or("");
    match first {
        "kv" => 0,
        "session" => 1,
        "txn" => 2,
        "agent" => 3,
        "status" => 4,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_and_outcomes_index_their_tables() {
        assert_eq!(FAMILIES[family("GET /v1/kv/a/b")], "kv");
        assert_eq!(FAMILIES[family("PUT /v1/session/renew/x")], "session");
        assert_eq!(FAMILIES[family("PUT /v1/txn")], "txn");
        assert_eq!(FAMILIES[family("GET /v1/status/leader")], "status");
        assert_eq!(FAMILIES[family("GET /v1/agent/self")], "agent");
        assert_eq!(FAMILIES[family("GET /v1/catalog/nodes")], "other");
        let m = Metrics::default();
        m.request("GET /v1/kv/a", Some(429), Some(Duration::from_millis(2)));
        m.request("GET /v1/kv/a", None, None);
        assert_eq!(m.requests[0][2].load(Ordering::Relaxed), 1);
        assert_eq!(m.requests[0][4].load(Ordering::Relaxed), 1);
        let (_, b, count, _) = m.request_latency[0].read();
        assert_eq!((b[1], count), (1, 1));
    }

    #[test]
    fn histograms_bucket_by_upper_bound() {
        let h = Histogram::<NHB>::new(HOLD_BUCKETS);
        h.observe(Duration::from_millis(10));
        h.observe(Duration::from_secs(7200));
        let (_, b, count, sum) = h.read();
        assert_eq!(b[0], 1);
        assert_eq!(b[NHB], 1);
        assert_eq!(count, 2);
        assert_eq!(sum, Duration::from_millis(7_200_010));
    }
}
