//! [`Client::metrics`]: a snapshot of the client's metrics, counted in the core since
//! the client was made (see `foundations::metrics` for the recording side and
//! [`METRICS`](crate::metrics::METRICS) for the exposed names).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{Client, OwedItem};
use crate::foundations::metrics::{
    Histogram, ACQUIRE_OUTCOMES, FAMILIES, LOSS_REASONS, RECIPES, REQUEST_OUTCOMES,
};
use crate::foundations::sync::lock;

/// A histogram as read at snapshot time: observations (in seconds) counted into
/// fixed buckets.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HistogramSnapshot {
    /// The buckets' upper bounds in seconds, ascending (the last bucket, `+Inf`, has none).
    pub bounds: &'static [f64],
    /// The observations per bucket, not cumulative: one more entry than `bounds`, the
    /// last counting those above every bound.
    pub buckets: Vec<u64>,
    /// The number of observations (the sum of `buckets`).
    pub count: u64,
    /// The sum of the observations.
    pub sum: Duration,
}

impl HistogramSnapshot {
    fn of<const N: usize>(h: &Histogram<N>) -> HistogramSnapshot {
        let (bounds, buckets, count, sum) = h.read();
        HistogramSnapshot {
            bounds,
            buckets,
            count,
            sum,
        }
    }

    /// The cumulative count of observations at or below each bound, then the total
    /// (Prometheus' `le` buckets, `+Inf` last).
    pub fn cumulative(&self) -> Vec<u64> {
        self.buckets
            .iter()
            .scan(0u64, |acc, b| {
                *acc += b;
                Some(*acc)
            })
            .collect()
    }
}

/// One count with its labels' values (names from [`crate::metrics`]'s label tables).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LabeledCount {
    /// The first label's value (`recipe` or `family`).
    pub first: &'static str,
    /// The second label's value (`outcome` or `reason`).
    pub second: &'static str,
    /// The count.
    pub count: u64,
}

/// A snapshot of one client's metrics ([`Client::metrics`]): plain data, read without
/// locking the paths that record them. Counters count from the client's creation.
///
/// Recipes are [`RECIPES`](crate::metrics::RECIPES): `lock`, `semaphore`, `rwlock`
/// (read and write sides), `multilock` and `election` (an [`Election`](crate::Election)'s
/// campaigns and terms, and so a [`LeaderTask`](crate::LeaderTask)'s).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MetricsSnapshot {
    /// Holdings held now, by recipe (every recipe listed): acquired and not yet released
    /// or lost. A holding whose session's lease deadline passed counts until the client
    /// notices (a loss signal, or any look at it such as `is_held`).
    pub held: Vec<(&'static str, u64)>,
    /// Acquire calls by recipe and outcome (every pair listed). One call of `acquire`,
    /// `try_acquire`, `campaign` or an async acquire is one acquire, however many
    /// requests and internal tries it made. Outcomes
    /// ([`ACQUIRE_OUTCOMES`](crate::metrics::ACQUIRE_OUTCOMES)): `acquired`;
    /// `not_acquired`, a try-once call (zero timeout) that found it taken; `timed_out`, a
    /// call whose timeout passed first (`Ok(false)`, or an error of kind `Timeout`);
    /// `cancelled`, ended by its cancel token (or, async, by dropping its future); `error`,
    /// any other error.
    pub acquires: Vec<LabeledCount>,
    /// How long acquire calls took, whatever their outcome, by recipe.
    pub acquire_wait: Vec<(&'static str, HistogramSnapshot)>,
    /// How long holdings lasted, from acquired to released or lost, by recipe.
    pub hold_time: Vec<(&'static str, HistogramSnapshot)>,
    /// Holdings lost, by recipe and reason (every pair listed). A release is not a loss.
    /// The reason ([`LOSS_REASONS`](crate::metrics::LOSS_REASONS)) is the loss's own
    /// name (`key_changed`, a semaphore's `removed`, `client_closed`), or for a lost
    /// session the session's [`LostReason`](crate::LostReason) name (`invalidated`,
    /// `deadline_exceeded`, `destroyed`).
    pub losses: Vec<LabeledCount>,
    /// Session renewals by the client's renewer that Consul confirmed.
    pub renewals_ok: u64,
    /// Session renewals that failed (no answer, an error status, the session gone).
    pub renewals_failed: u64,
    /// The latency of renewals, ok and failed.
    pub renewal_latency: HistogramSnapshot,
    /// The smallest lease time left (local, conservative deadline minus now) of the
    /// client's live managed sessions with a TTL; `None` when there is none.
    pub lease_left: Option<Duration>,
    /// HTTP requests to Consul by endpoint family and outcome (every pair listed).
    /// Families ([`FAMILIES`](crate::metrics::FAMILIES)): `kv`, `session`, `txn`,
    /// `agent`, `status`, `other`. Outcomes: `2xx`, `4xx` (but 429), `429`, `5xx`,
    /// `no_answer` (refused, reset, no answer in time). A request its caller cancelled
    /// or the client's close interrupted is not counted.
    pub requests: Vec<LabeledCount>,
    /// The latency of requests by family: requests the engine timed (not blocking
    /// queries, whose latency is their wait, nor the key hub's long polls or the event
    /// loops' warm requests), so its count may be below `requests`'.
    pub request_latency: Vec<(&'static str, HistogramSnapshot)>,
    /// Requests sent again: a call's retry after a transient failure (no leader, 429,
    /// 503, refused) and the engine's one retry on a fresh connection after a stale one.
    pub retries: u64,
    /// Time calls spent waiting out a Consul without a leader (`No cluster leader`) before
    /// trying again, summed over calls (two calls waiting one second add two).
    pub leaderless: Duration,
    /// Unlocks of single-key locks (and elections) owed to Consul and not yet confirmed:
    /// after a release that failed, a loss past the lease deadline, a dropped holding.
    pub owed_unlocks: u64,
    /// Every other release owed to Consul and not yet confirmed: semaphore slots to give
    /// back, multi-key and read-write lock releases, barrier and group leaves.
    pub owed_slots: u64,
    /// Sessions declared lost that the client still tracks, waiting to be destroyed.
    pub owed_sessions: u64,
}

impl MetricsSnapshot {
    /// Holdings of `recipe` held now (0 for an unknown name).
    pub fn held(&self, recipe: &str) -> u64 {
        self.held
            .iter()
            .find(|(r, _)| *r == recipe)
            .map_or(0, |(_, n)| *n)
    }

    /// Acquire calls of `recipe` that ended with `outcome`.
    pub fn acquires(&self, recipe: &str, outcome: &str) -> u64 {
        find(&self.acquires, recipe, outcome)
    }

    /// Holdings of `recipe` lost for `reason`.
    pub fn losses(&self, recipe: &str, reason: &str) -> u64 {
        find(&self.losses, recipe, reason)
    }

    /// Requests of `family` that ended with `outcome`.
    pub fn requests(&self, family: &str, outcome: &str) -> u64 {
        find(&self.requests, family, outcome)
    }
}

impl MetricsSnapshot {
    /// The snapshot as one JSON object, the shape the Python and Node bindings return
    /// from their `metrics()`: each metric of [`METRICS`](crate::metrics::METRICS) under
    /// its name less `baton_` and `_total` (`baton_acquires_total` → `acquires`), labels
    /// as nested objects in label order (`acquires.lock.timed_out`), durations in seconds,
    /// and each histogram as `{bounds, buckets, count, sum}` (`buckets` per bucket, not
    /// cumulative, one more than `bounds`: the last is `+Inf`).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{json, Map, Value};
        fn hist(h: &HistogramSnapshot) -> Value {
            json!({
                "bounds": h.bounds,
                "buckets": h.buckets,
                "count": h.count,
                "sum": h.sum.as_secs_f64(),
            })
        }
        fn by<T>(rows: &[(&'static str, T)], f: impl Fn(&T) -> Value) -> Value {
            Value::Object(rows.iter().map(|(k, v)| (k.to_string(), f(v))).collect())
        }
        fn nested(rows: &[LabeledCount]) -> Value {
            let mut out = Map::new();
            for r in rows {
                let inner = out
                    .entry(r.first.to_string())
                    .or_insert_with(|| Value::Object(Map::new()));
                if let Value::Object(m) = inner {
                    m.insert(r.second.to_string(), json!(r.count));
                }
            }
            Value::Object(out)
        }
        json!({
            "held": by(&self.held, |n| json!(n)),
            "acquires": nested(&self.acquires),
            "acquire_wait_seconds": by(&self.acquire_wait, hist),
            "hold_seconds": by(&self.hold_time, hist),
            "losses": nested(&self.losses),
            "renewals": {"ok": self.renewals_ok, "failed": self.renewals_failed},
            "renewal_seconds": hist(&self.renewal_latency),
            "lease_left_seconds": self.lease_left.map(|d| d.as_secs_f64()),
            "requests": nested(&self.requests),
            "request_seconds": by(&self.request_latency, hist),
            "retries": self.retries,
            "leaderless_seconds": self.leaderless.as_secs_f64(),
            "owed": {
                "unlocks": self.owed_unlocks,
                "slots": self.owed_slots,
                "sessions": self.owed_sessions,
            },
        })
    }
}

fn find(rows: &[LabeledCount], first: &str, second: &str) -> u64 {
    rows.iter()
        .find(|r| r.first == first && r.second == second)
        .map_or(0, |r| r.count)
}

fn labeled<const N: usize>(
    firsts: &[&'static str],
    seconds: &[&'static str],
    rows: &[[std::sync::atomic::AtomicU64; N]],
) -> Vec<LabeledCount> {
    let mut out = Vec::with_capacity(firsts.len() * seconds.len());
    for (f, row) in firsts.iter().zip(rows) {
        for (s, c) in seconds.iter().zip(row) {
            out.push(LabeledCount {
                first: f,
                second: s,
                count: c.load(Ordering::Relaxed),
            });
        }
    }
    out
}

impl Client {
    /// A snapshot of this client's metrics (see [`MetricsSnapshot`] for what each counts).
    /// Cheap: atomics read, and a look at the client's sessions and owed work.
    pub fn metrics(&self) -> MetricsSnapshot {
        let core = self.core();
        let m = &core.conn.transport.metrics;
        let now = Instant::now();
        let sessions = lock(&core.sessions);
        let lease_left = sessions
            .values()
            .filter(|s| !s.is_lost())
            .filter_map(|s| s.valid_until())
            .map(|u| u.saturating_duration_since(now))
            .min();
        let owed_sessions = sessions.values().filter(|s| s.is_lost()).count() as u64;
        drop(sessions);
        let (mut owed_unlocks, mut owed_slots) = (0, 0);
        for item in lock(&core.owed).values() {
            match item {
                OwedItem::Unlock(_) => owed_unlocks += 1,
                OwedItem::Work { .. } => owed_slots += 1,
            }
        }
        // The losses before the gauge, then an Acquire fence pairing with the Release of
        // their count: a snapshot showing a loss never still counts its holding as held.
        let losses = labeled(RECIPES, LOSS_REASONS, &m.losses);
        std::sync::atomic::fence(Ordering::Acquire);
        MetricsSnapshot {
            held: RECIPES
                .iter()
                .zip(&m.held)
                .map(|(r, n)| (*r, n.load(Ordering::Relaxed).max(0) as u64))
                .collect(),
            acquires: labeled(RECIPES, ACQUIRE_OUTCOMES, &m.acquires),
            acquire_wait: RECIPES
                .iter()
                .zip(&m.acquire_wait)
                .map(|(r, h)| (*r, HistogramSnapshot::of(h)))
                .collect(),
            hold_time: RECIPES
                .iter()
                .zip(&m.hold_time)
                .map(|(r, h)| (*r, HistogramSnapshot::of(h)))
                .collect(),
            losses,
            renewals_ok: m.renewals_ok.load(Ordering::Relaxed),
            renewals_failed: m.renewals_failed.load(Ordering::Relaxed),
            renewal_latency: HistogramSnapshot::of(&m.renewal_latency),
            lease_left,
            requests: labeled(FAMILIES, REQUEST_OUTCOMES, &m.requests),
            request_latency: FAMILIES
                .iter()
                .zip(&m.request_latency)
                .map(|(f, h)| (*f, HistogramSnapshot::of(h)))
                .collect(),
            retries: m.retries.load(Ordering::Relaxed),
            leaderless: Duration::from_nanos(m.leaderless_nanos.load(Ordering::Relaxed)),
            owed_unlocks,
            owed_slots,
            owed_sessions,
        }
    }
}
