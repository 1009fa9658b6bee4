//! `baton_client_metrics`: a snapshot of a client's metrics as a plain struct versioned
//! by its size, the names of its labels and metrics (from the core's one table), and
//! `baton_client_metrics_text`, the Prometheus text exposition (issue 47).

use std::ffi::{c_char, CString};
use std::fmt::Write as _;
use std::sync::OnceLock;

use baton::metrics::{
    HistogramSnapshot, LabeledCount, MetricType, MetricsSnapshot, ACQUIRE_OUTCOMES, FAMILIES,
    HOLD_BUCKETS, LOSS_REASONS, METRICS, OWED_KINDS, RECIPES, REQUEST_OUTCOMES, WAIT_BUCKETS,
};

use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::util::{boundary, boundary_value, copy_str_out, handle, null, write_opt};

/// The number of recipes (`baton_metrics.held` and the other per-recipe arrays).
pub const BATON_RECIPE_COUNT: usize = 5;
/// Recipe index: single-key locks (`baton_lock`). Label `recipe="lock"`.
pub const BATON_RECIPE_LOCK: usize = 0;
/// Recipe index: semaphores (`baton_semaphore`). Label `recipe="semaphore"`.
pub const BATON_RECIPE_SEMAPHORE: usize = 1;
/// Recipe index: read-write locks, both sides (`baton_rwlock`). Label `recipe="rwlock"`.
pub const BATON_RECIPE_RWLOCK: usize = 2;
/// Recipe index: multi-key locks (`baton_multilock`). Label `recipe="multilock"`.
pub const BATON_RECIPE_MULTILOCK: usize = 3;
/// Recipe index: elections' campaigns and terms (`baton_election`, and so
/// `baton_leader_task`). Label `recipe="election"`.
pub const BATON_RECIPE_ELECTION: usize = 4;

/// The number of acquire outcomes (`baton_metrics.acquires`' inner index).
pub const BATON_ACQUIRE_OUTCOME_COUNT: usize = 5;
/// Acquire outcome index: the call acquired. Label `outcome="acquired"`.
pub const BATON_ACQUIRE_ACQUIRED: usize = 0;
/// Acquire outcome index: a try-once call (timeout 0) found it taken. Label
/// `outcome="not_acquired"`.
pub const BATON_ACQUIRE_NOT_ACQUIRED: usize = 1;
/// Acquire outcome index: the call's timeout passed first (`BATON_TIMEOUT`). Label
/// `outcome="timed_out"`.
pub const BATON_ACQUIRE_TIMED_OUT: usize = 2;
/// Acquire outcome index: ended by its `baton_cancel` (`BATON_CANCELLED`). Label
/// `outcome="cancelled"`.
pub const BATON_ACQUIRE_CANCELLED: usize = 3;
/// Acquire outcome index: any other error. Label `outcome="error"`.
pub const BATON_ACQUIRE_ERROR: usize = 4;

/// The number of loss reasons (`baton_metrics.losses`' inner index).
pub const BATON_LOSS_REASON_COUNT: usize = 7;
/// Loss reason index: the key was changed or deleted by someone else. Label
/// `reason="key_changed"`.
pub const BATON_LOSS_KEY_CHANGED: usize = 0;
/// Loss reason index: a semaphore's slot was removed. Label `reason="removed"`.
pub const BATON_LOSS_REMOVED: usize = 1;
/// Loss reason index: the session was invalidated at Consul. Label `reason="invalidated"`.
pub const BATON_LOSS_INVALIDATED: usize = 2;
/// Loss reason index: the session's local lease deadline passed before a renewal.
/// Label `reason="deadline_exceeded"`.
pub const BATON_LOSS_DEADLINE_EXCEEDED: usize = 3;
/// Loss reason index: the session was destroyed by its owner. Label `reason="destroyed"`.
pub const BATON_LOSS_DESTROYED: usize = 4;
/// Loss reason index: the client was closed while it held. Label `reason="client_closed"`.
pub const BATON_LOSS_CLIENT_CLOSED: usize = 5;
/// Loss reason index: any other reason. Label `reason="other"`.
pub const BATON_LOSS_OTHER: usize = 6;

/// The number of endpoint families (`baton_metrics.requests`' outer index).
pub const BATON_FAMILY_COUNT: usize = 6;
/// Endpoint family index: `/v1/kv`. Label `family="kv"`.
pub const BATON_FAMILY_KV: usize = 0;
/// Endpoint family index: `/v1/session`. Label `family="session"`.
pub const BATON_FAMILY_SESSION: usize = 1;
/// Endpoint family index: `/v1/txn`. Label `family="txn"`.
pub const BATON_FAMILY_TXN: usize = 2;
/// Endpoint family index: `/v1/agent`. Label `family="agent"`.
pub const BATON_FAMILY_AGENT: usize = 3;
/// Endpoint family index: `/v1/status`. Label `family="status"`.
pub const BATON_FAMILY_STATUS: usize = 4;
/// Endpoint family index: any other endpoint. Label `family="other"`.
pub const BATON_FAMILY_OTHER: usize = 5;

/// The number of request outcomes (`baton_metrics.requests`' inner index).
pub const BATON_REQUEST_OUTCOME_COUNT: usize = 5;
/// Request outcome index: answered 2xx. Label `outcome="2xx"`.
pub const BATON_REQUEST_2XX: usize = 0;
/// Request outcome index: answered 4xx other than 429. Label `outcome="4xx"`.
pub const BATON_REQUEST_4XX: usize = 1;
/// Request outcome index: answered 429 (Consul's rate or connection limit). Label
/// `outcome="429"`.
pub const BATON_REQUEST_429: usize = 2;
/// Request outcome index: answered 5xx. Label `outcome="5xx"`.
pub const BATON_REQUEST_5XX: usize = 3;
/// Request outcome index: no answer (refused, reset, no answer in time). Label
/// `outcome="no_answer"`.
pub const BATON_REQUEST_NO_ANSWER: usize = 4;

/// The number of kinds of owed work (`baton_metrics.owed`).
pub const BATON_OWED_KIND_COUNT: usize = 3;
/// Owed work index: unlocks of single-key locks and elections not yet confirmed.
/// Label `kind="unlocks"`.
pub const BATON_OWED_UNLOCKS: usize = 0;
/// Owed work index: every other release not yet confirmed (semaphore slots,
/// multi-key and read-write lock releases, barrier and group leaves). Label `kind="slots"`.
pub const BATON_OWED_SLOTS: usize = 1;
/// Owed work index: lost sessions still tracked, waiting to be destroyed. Label
/// `kind="sessions"`.
pub const BATON_OWED_SESSIONS: usize = 2;

/// The buckets of a wait histogram (acquire wait, renewal and request latency):
/// one per bound of `baton_metrics_bounds(BATON_BUCKETS_WAIT, ...)`, then `+Inf`.
pub const BATON_WAIT_BUCKET_COUNT: usize = 13;
/// The buckets of a hold histogram (hold time): one per bound of
/// `baton_metrics_bounds(BATON_BUCKETS_HOLD, ...)`, then `+Inf`.
pub const BATON_HOLD_BUCKET_COUNT: usize = 10;

/// Label table for `baton_metrics_label`: recipes (`BATON_RECIPE_*`).
pub const BATON_LABELS_RECIPE: u32 = 0;
/// Label table for `baton_metrics_label`: acquire outcomes (`BATON_ACQUIRE_*`).
pub const BATON_LABELS_ACQUIRE_OUTCOME: u32 = 1;
/// Label table for `baton_metrics_label`: loss reasons (`BATON_LOSS_*`).
pub const BATON_LABELS_LOSS_REASON: u32 = 2;
/// Label table for `baton_metrics_label`: endpoint families (`BATON_FAMILY_*`).
pub const BATON_LABELS_FAMILY: u32 = 3;
/// Label table for `baton_metrics_label`: request outcomes (`BATON_REQUEST_*`).
pub const BATON_LABELS_REQUEST_OUTCOME: u32 = 4;
/// Label table for `baton_metrics_label`: kinds of owed work (`BATON_OWED_*`).
pub const BATON_LABELS_OWED_KIND: u32 = 5;

/// Bucket set for `baton_metrics_bounds`: the wait buckets (`baton_wait_histogram`).
pub const BATON_BUCKETS_WAIT: u32 = 0;
/// Bucket set for `baton_metrics_bounds`: the hold buckets (`baton_hold_histogram`).
pub const BATON_BUCKETS_HOLD: u32 = 1;

/// The smallest `size` `baton_client_metrics` accepts: `sizeof(baton_metrics)` of the
/// first version of the struct (every field is 8 bytes, so it is the same on every
/// platform). Later versions only add fields at the end.
pub const BATON_METRICS_SIZE_V1: usize = 2752;

// The tables above mirror the core's; a core table that grows fails the build here.
const _: () = assert!(RECIPES.len() == BATON_RECIPE_COUNT);
const _: () = assert!(ACQUIRE_OUTCOMES.len() == BATON_ACQUIRE_OUTCOME_COUNT);
const _: () = assert!(LOSS_REASONS.len() == BATON_LOSS_REASON_COUNT);
const _: () = assert!(FAMILIES.len() == BATON_FAMILY_COUNT);
const _: () = assert!(REQUEST_OUTCOMES.len() == BATON_REQUEST_OUTCOME_COUNT);
const _: () = assert!(OWED_KINDS.len() == BATON_OWED_KIND_COUNT);
const _: () = assert!(WAIT_BUCKETS.len() + 1 == BATON_WAIT_BUCKET_COUNT);
const _: () = assert!(HOLD_BUCKETS.len() + 1 == BATON_HOLD_BUCKET_COUNT);
const _: () = assert!(std::mem::size_of::<baton_metrics>() >= BATON_METRICS_SIZE_V1);

/// A histogram of durations in the wait buckets (bounds:
/// `baton_metrics_bounds(BATON_BUCKETS_WAIT, ...)`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct baton_wait_histogram {
    /// The number of observations (the sum of `buckets`).
    pub count: u64,
    /// The sum of the observations in seconds.
    pub sum: f64,
    /// Observations per bucket, NOT cumulative: `buckets[i]` counts those above bound
    /// `i - 1` and at or below bound `i`; the last (`+Inf`) those above every bound.
    pub buckets: [u64; BATON_WAIT_BUCKET_COUNT],
}

/// A histogram of durations in the hold buckets (bounds:
/// `baton_metrics_bounds(BATON_BUCKETS_HOLD, ...)`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct baton_hold_histogram {
    /// The number of observations (the sum of `buckets`).
    pub count: u64,
    /// The sum of the observations in seconds.
    pub sum: f64,
    /// Observations per bucket, NOT cumulative: `buckets[i]` counts those above bound
    /// `i - 1` and at or below bound `i`; the last (`+Inf`) those above every bound.
    pub buckets: [u64; BATON_HOLD_BUCKET_COUNT],
}

/// A snapshot of one client's metrics (`baton_client_metrics`), counted since the
/// client was made. Versioned by its size: pass `sizeof(baton_metrics)`; later
/// versions of the library only add fields at the end. Arrays are indexed by the
/// `BATON_RECIPE_*`, `BATON_ACQUIRE_*`, `BATON_LOSS_*`, `BATON_FAMILY_*`,
/// `BATON_REQUEST_*` and `BATON_OWED_*` indices; `baton_metrics_label` names them
/// as the Prometheus labels do. Each field is the metric of `baton_metric_name`
/// noted on it (the same meanings in Rust, Python and Node).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_metrics {
    /// The number of bytes of this struct the library filled: the smaller of the
    /// `size` passed and the library's own `sizeof(baton_metrics)`. A field that
    /// ends past it was not written (a library older than the header).
    pub size: u64,
    /// `baton_held`: holdings held now, by recipe (acquired, not yet released or lost).
    pub held: [u64; BATON_RECIPE_COUNT],
    /// `baton_acquires_total`: acquire calls by recipe and outcome. One call of
    /// acquire, try or campaign is one acquire, however many requests it made.
    pub acquires: [[u64; BATON_ACQUIRE_OUTCOME_COUNT]; BATON_RECIPE_COUNT],
    /// `baton_acquire_wait_seconds`: how long acquire calls took, whatever their
    /// outcome, by recipe.
    pub acquire_wait: [baton_wait_histogram; BATON_RECIPE_COUNT],
    /// `baton_hold_seconds`: how long holdings lasted, from acquired to released or
    /// lost, by recipe.
    pub hold: [baton_hold_histogram; BATON_RECIPE_COUNT],
    /// `baton_losses_total`: holdings lost (not released), by recipe and reason.
    pub losses: [[u64; BATON_LOSS_REASON_COUNT]; BATON_RECIPE_COUNT],
    /// `baton_renewals_total{outcome="ok"}`: session renewals Consul confirmed.
    pub renewals_ok: u64,
    /// `baton_renewals_total{outcome="failed"}`: session renewals that failed.
    pub renewals_failed: u64,
    /// `baton_renewal_seconds`: the latency of renewals, ok and failed.
    pub renewal: baton_wait_histogram,
    /// `baton_lease_left_seconds`: the smallest lease time left (local, conservative
    /// deadline minus now) of the client's live managed sessions with a TTL, in
    /// seconds; -1 when there is none (the metric is then absent from an exposition).
    pub lease_left_seconds: f64,
    /// `baton_requests_total`: HTTP requests to Consul by endpoint family and outcome.
    /// A request its caller cancelled or the client's close interrupted is not counted.
    pub requests: [[u64; BATON_REQUEST_OUTCOME_COUNT]; BATON_FAMILY_COUNT],
    /// `baton_request_seconds`: the latency of timed requests by family (not
    /// blocking queries), so its count may be below `requests`'.
    pub request: [baton_wait_histogram; BATON_FAMILY_COUNT],
    /// `baton_retries_total`: requests sent again after a transient failure or on a
    /// fresh connection after a stale one.
    pub retries: u64,
    /// `baton_leaderless_seconds_total`: seconds calls spent waiting out a Consul
    /// without a leader, summed over calls.
    pub leaderless_seconds: f64,
    /// `baton_owed`: work owed to Consul and waiting now, by kind (`BATON_OWED_*`).
    pub owed: [u64; BATON_OWED_KIND_COUNT],
}

/// Per-bucket counts of `h` copied into `out` (the C struct's fixed array; the tables' lengths
/// are checked at build time).
fn buckets<const N: usize>(h: &HistogramSnapshot) -> [u64; N] {
    let mut out = [0; N];
    for (o, b) in out.iter_mut().zip(&h.buckets) {
        *o = *b;
    }
    out
}

fn wait_hist(h: &HistogramSnapshot) -> baton_wait_histogram {
    baton_wait_histogram {
        count: h.count,
        sum: h.sum.as_secs_f64(),
        buckets: buckets(h),
    }
}

fn hold_hist(h: &HistogramSnapshot) -> baton_hold_histogram {
    baton_hold_histogram {
        count: h.count,
        sum: h.sum.as_secs_f64(),
        buckets: buckets(h),
    }
}

/// The index of `name` in `table` (names come from the same tables, so always found).
fn index(table: &[&str], name: &str) -> Option<usize> {
    table.iter().position(|n| *n == name)
}

fn fill_counts<const N: usize, const M: usize>(
    out: &mut [[u64; N]; M],
    firsts: &[&str],
    seconds: &[&str],
    rows: &[LabeledCount],
) {
    for r in rows {
        if let (Some(i), Some(j)) = (index(firsts, r.first), index(seconds, r.second)) {
            out[i][j] = r.count;
        }
    }
}

/// The C struct of a core snapshot.
fn to_c(s: &MetricsSnapshot) -> baton_metrics {
    let mut m = baton_metrics {
        size: std::mem::size_of::<baton_metrics>() as u64,
        held: [0; BATON_RECIPE_COUNT],
        acquires: [[0; BATON_ACQUIRE_OUTCOME_COUNT]; BATON_RECIPE_COUNT],
        acquire_wait: [baton_wait_histogram::default(); BATON_RECIPE_COUNT],
        hold: [baton_hold_histogram::default(); BATON_RECIPE_COUNT],
        losses: [[0; BATON_LOSS_REASON_COUNT]; BATON_RECIPE_COUNT],
        renewals_ok: s.renewals_ok,
        renewals_failed: s.renewals_failed,
        renewal: wait_hist(&s.renewal_latency),
        lease_left_seconds: s.lease_left.map_or(-1.0, |d| d.as_secs_f64()),
        requests: [[0; BATON_REQUEST_OUTCOME_COUNT]; BATON_FAMILY_COUNT],
        request: [baton_wait_histogram::default(); BATON_FAMILY_COUNT],
        retries: s.retries,
        leaderless_seconds: s.leaderless.as_secs_f64(),
        owed: [s.owed_unlocks, s.owed_slots, s.owed_sessions],
    };
    for (r, n) in &s.held {
        if let Some(i) = index(RECIPES, r) {
            m.held[i] = *n;
        }
    }
    for (r, h) in &s.acquire_wait {
        if let Some(i) = index(RECIPES, r) {
            m.acquire_wait[i] = wait_hist(h);
        }
    }
    for (r, h) in &s.hold_time {
        if let Some(i) = index(RECIPES, r) {
            m.hold[i] = hold_hist(h);
        }
    }
    for (f, h) in &s.request_latency {
        if let Some(i) = index(FAMILIES, f) {
            m.request[i] = wait_hist(h);
        }
    }
    fill_counts(&mut m.acquires, RECIPES, ACQUIRE_OUTCOMES, &s.acquires);
    fill_counts(&mut m.losses, RECIPES, LOSS_REASONS, &s.losses);
    fill_counts(&mut m.requests, FAMILIES, REQUEST_OUTCOMES, &s.requests);
    m
}

/// Takes a snapshot of the client's metrics into `*out`, of `size` bytes (pass
/// `sizeof(baton_metrics)`). Cheap: counters read without locking the paths that
/// record them, and a look at the client's sessions and owed work. A `size`
/// larger than the library's struct (a newer header) fills the library's fields
/// and leaves the rest untouched; `out->size` says how many bytes were filled.
/// `BATON_NULL_ARGUMENT` for a NULL `client` or `out`; `BATON_INVALID_ARGUMENT`
/// for a `size` below `BATON_METRICS_SIZE_V1` (nothing is written). Works on a
/// closed client (the counts as they ended).
#[no_mangle]
pub unsafe extern "C" fn baton_client_metrics(
    client: *const baton_client,
    out: *mut baton_metrics,
    size: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        if out.is_null() {
            return Err(null("out"));
        }
        if size < BATON_METRICS_SIZE_V1 {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!(
                    "size {size} is below BATON_METRICS_SIZE_V1 ({BATON_METRICS_SIZE_V1}): \
                     pass sizeof(baton_metrics)"
                ),
            ));
        }
        let mut m = to_c(&c.metrics());
        let n = size.min(std::mem::size_of::<baton_metrics>());
        m.size = n as u64;
        // SAFETY: `out` is non-NULL and the caller guarantees `size` writable bytes
        // there; n <= size and n <= size_of::<baton_metrics>(), the bytes of `m`
        // (a local, so the two do not overlap). The struct is plain data (no padding
        // is read from it by C beyond its fields).
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&m as *const baton_metrics).cast::<u8>(),
                out.cast::<u8>(),
                n,
            );
        }
        Ok(())
    })
}

/// NUL-terminated copies of the core's label and metric tables, made once and
/// never freed (the pointers handed out are static).
struct CTables {
    labels: Vec<Vec<CString>>,
    names: Vec<CString>,
    helps: Vec<CString>,
    label_names: Vec<Vec<CString>>,
}

fn c_strings(v: &[&str]) -> Vec<CString> {
    v.iter()
        .map(|s| CString::new(*s).unwrap_or_default())
        .collect()
}

fn tables() -> &'static CTables {
    static T: OnceLock<CTables> = OnceLock::new();
    T.get_or_init(|| CTables {
        labels: [
            RECIPES,
            ACQUIRE_OUTCOMES,
            LOSS_REASONS,
            FAMILIES,
            REQUEST_OUTCOMES,
            OWED_KINDS,
        ]
        .iter()
        .map(|t| c_strings(t))
        .collect(),
        names: METRICS
            .iter()
            .map(|m| CString::new(m.name).unwrap_or_default())
            .collect(),
        helps: METRICS
            .iter()
            .map(|m| CString::new(m.help).unwrap_or_default())
            .collect(),
        label_names: METRICS.iter().map(|m| c_strings(m.labels)).collect(),
    })
}

fn static_ptr(s: Option<&'static CString>) -> *const c_char {
    s.map_or(std::ptr::null(), |s| s.as_ptr())
}

/// The label value of `index` in the label table `kind` (`BATON_LABELS_RECIPE`,
/// ...): e.g. `baton_metrics_label(BATON_LABELS_RECIPE, BATON_RECIPE_LOCK)` is
/// `"lock"`, `baton_metrics_label(BATON_LABELS_REQUEST_OUTCOME, BATON_REQUEST_429)`
/// is `"429"`. A static NUL-terminated string, never freed; NULL for an unknown
/// `kind` or an `index` past the table.
#[no_mangle]
pub extern "C" fn baton_metrics_label(kind: u32, index: usize) -> *const c_char {
    boundary_value(std::ptr::null(), || {
        static_ptr(
            tables()
                .labels
                .get(kind as usize)
                .and_then(|t| t.get(index)),
        )
    })
}

/// The upper bounds in seconds, ascending, of the buckets of `kind`
/// (`BATON_BUCKETS_WAIT` or `BATON_BUCKETS_HOLD`): a static array, never freed,
/// of `*count_out` (if not NULL) numbers, one less than the histogram's buckets
/// (the last bucket, `+Inf`, has no bound). NULL and a count of 0 for an unknown `kind`.
#[no_mangle]
pub unsafe extern "C" fn baton_metrics_bounds(kind: u32, count_out: *mut usize) -> *const f64 {
    boundary_value(std::ptr::null(), || {
        let bounds: &'static [f64] = match kind {
            BATON_BUCKETS_WAIT => WAIT_BUCKETS,
            BATON_BUCKETS_HOLD => HOLD_BUCKETS,
            _ => &[],
        };
        // SAFETY: the caller passes NULL or a writable size_t.
        unsafe { write_opt(count_out, bounds.len()) };
        if bounds.is_empty() {
            std::ptr::null()
        } else {
            bounds.as_ptr()
        }
    })
}

/// The number of metrics a client exposes (indices for `baton_metric_name` and
/// the other `baton_metric_*` functions, in exposition order).
#[no_mangle]
pub extern "C" fn baton_metric_count() -> usize {
    METRICS.len()
}

/// The Prometheus name of metric `index` (`"baton_acquires_total"`; a counter's
/// ends in `_total`): a static NUL-terminated string, never freed; NULL for an
/// index past `baton_metric_count()`.
#[no_mangle]
pub extern "C" fn baton_metric_name(index: usize) -> *const c_char {
    boundary_value(std::ptr::null(), || static_ptr(tables().names.get(index)))
}

/// The help text of metric `index`: a static NUL-terminated string, never freed;
/// NULL for an index past `baton_metric_count()`.
#[no_mangle]
pub extern "C" fn baton_metric_help(index: usize) -> *const c_char {
    boundary_value(std::ptr::null(), || static_ptr(tables().helps.get(index)))
}

/// The Prometheus type of metric `index`: `"counter"`, `"gauge"` or
/// `"histogram"` (as a `# TYPE` line writes it). A static NUL-terminated string,
/// never freed; NULL for an index past `baton_metric_count()`.
#[no_mangle]
pub extern "C" fn baton_metric_type(index: usize) -> *const c_char {
    boundary_value(std::ptr::null(), || {
        match METRICS.get(index).map(|m| m.kind) {
            Some(MetricType::Counter) => c"counter".as_ptr(),
            Some(MetricType::Gauge) => c"gauge".as_ptr(),
            Some(MetricType::Histogram) => c"histogram".as_ptr(),
            _ => std::ptr::null(),
        }
    })
}

/// The number of labels of metric `index` (0 past `baton_metric_count()`).
#[no_mangle]
pub extern "C" fn baton_metric_label_count(index: usize) -> usize {
    METRICS.get(index).map_or(0, |m| m.labels.len())
}

/// The name of label `label` of metric `index`, in order (`"recipe"`, then
/// `"outcome"` for `baton_acquires_total`): a static NUL-terminated string, never
/// freed; NULL past either count.
#[no_mangle]
pub extern "C" fn baton_metric_label_name(index: usize, label: usize) -> *const c_char {
    boundary_value(std::ptr::null(), || {
        static_ptr(tables().label_names.get(index).and_then(|l| l.get(label)))
    })
}

/// The Prometheus text exposition (format 0.0.4, `text/plain; version=0.0.4`) of
/// `s`: every metric of the core's table in order, with `# HELP` and `# TYPE`
/// lines, histograms as cumulative `_bucket{le=...}` series, `_sum` and `_count`;
/// `baton_lease_left_seconds` omitted when no session has a lease.
fn exposition(s: &MetricsSnapshot) -> String {
    fn hist(out: &mut String, name: &str, labels: &str, h: &HistogramSnapshot) {
        let sep = if labels.is_empty() { "" } else { "," };
        for (le, n) in h
            .bounds
            .iter()
            .map(|b| b.to_string())
            .chain(std::iter::once("+Inf".to_string()))
            .zip(h.cumulative())
        {
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}");
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let _ = writeln!(out, "{name}_sum{braces} {}", h.sum.as_secs_f64());
        let _ = writeln!(out, "{name}_count{braces} {}", h.count);
    }
    fn counts(out: &mut String, name: &str, keys: &[&str], rows: &[LabeledCount]) {
        for r in rows {
            let _ = writeln!(
                out,
                "{name}{{{}=\"{}\",{}=\"{}\"}} {}",
                keys[0], r.first, keys[1], r.second, r.count
            );
        }
    }
    let mut out = String::new();
    for def in METRICS {
        let name = def.name;
        if name == "baton_lease_left_seconds" && s.lease_left.is_none() {
            continue;
        }
        let kind = match def.kind {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            _ => "histogram",
        };
        let _ = writeln!(out, "# HELP {name} {}", def.help);
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let key = def.labels.first().copied().unwrap_or("");
        let o = &mut out;
        match name {
            "baton_held" => {
                for (r, n) in &s.held {
                    let _ = writeln!(o, "{name}{{{key}=\"{r}\"}} {n}");
                }
            }
            "baton_acquires_total" | "baton_losses_total" | "baton_requests_total" => {
                let rows = match name {
                    "baton_acquires_total" => &s.acquires,
                    "baton_losses_total" => &s.losses,
                    _ => &s.requests,
                };
                counts(o, name, def.labels, rows);
            }
            "baton_acquire_wait_seconds" | "baton_hold_seconds" | "baton_request_seconds" => {
                let rows = match name {
                    "baton_acquire_wait_seconds" => &s.acquire_wait,
                    "baton_hold_seconds" => &s.hold_time,
                    _ => &s.request_latency,
                };
                for (v, h) in rows {
                    hist(o, name, &format!("{key}=\"{v}\""), h);
                }
            }
            "baton_renewals_total" => {
                for (v, n) in [("ok", s.renewals_ok), ("failed", s.renewals_failed)] {
                    let _ = writeln!(o, "{name}{{{key}=\"{v}\"}} {n}");
                }
            }
            "baton_renewal_seconds" => hist(o, name, "", &s.renewal_latency),
            "baton_lease_left_seconds" => {
                let left = s.lease_left.map_or(0.0, |d| d.as_secs_f64());
                let _ = writeln!(o, "{name} {left}");
            }
            "baton_retries_total" => {
                let _ = writeln!(o, "{name} {}", s.retries);
            }
            "baton_leaderless_seconds_total" => {
                let _ = writeln!(o, "{name} {}", s.leaderless.as_secs_f64());
            }
            "baton_owed" => {
                let values = [s.owed_unlocks, s.owed_slots, s.owed_sessions];
                for (k, n) in OWED_KINDS.iter().zip(values) {
                    let _ = writeln!(o, "{name}{{{key}=\"{k}\"}} {n}");
                }
            }
            _ => {}
        }
    }
    out
}

/// Writes the client's metrics as Prometheus text exposition (format 0.0.4,
/// content type `text/plain; version=0.0.4`), NUL-terminated, into `buf` of `len`
/// bytes, for a C program to serve on its own `/metrics` endpoint: each metric of
/// `baton_metric_name` with its `# HELP` and `# TYPE` lines, every label value
/// listed, histograms with cumulative `_bucket{le="..."}` series (`+Inf` last),
/// `_sum` and `_count`; `baton_lease_left_seconds` omitted while no session has a
/// lease. `*len_out` (if not NULL) gets the length without the NUL, also with
/// `BATON_BUFFER_TOO_SMALL`; `buf = NULL, len = 0` asks only for the length. The
/// counts move between two calls: allow some more (a few hundred bytes).
#[no_mangle]
pub unsafe extern "C" fn baton_client_metrics_text(
    client: *const baton_client,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        let text = exposition(&c.metrics());
        // SAFETY: the caller guarantees `buf`/`len` and `len_out`.
        unsafe { copy_str_out(text.as_bytes(), buf, len, len_out) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    fn s(p: *const c_char) -> &'static str {
        assert!(!p.is_null());
        // SAFETY: the functions return static NUL-terminated strings.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap()
    }

    #[test]
    fn the_indices_name_the_core_s_labels() {
        let cases: &[(u32, usize, &str)] = &[
            (BATON_LABELS_RECIPE, BATON_RECIPE_LOCK, "lock"),
            (BATON_LABELS_RECIPE, BATON_RECIPE_SEMAPHORE, "semaphore"),
            (BATON_LABELS_RECIPE, BATON_RECIPE_RWLOCK, "rwlock"),
            (BATON_LABELS_RECIPE, BATON_RECIPE_MULTILOCK, "multilock"),
            (BATON_LABELS_RECIPE, BATON_RECIPE_ELECTION, "election"),
            (
                BATON_LABELS_ACQUIRE_OUTCOME,
                BATON_ACQUIRE_ACQUIRED,
                "acquired",
            ),
            (
                BATON_LABELS_ACQUIRE_OUTCOME,
                BATON_ACQUIRE_NOT_ACQUIRED,
                "not_acquired",
            ),
            (
                BATON_LABELS_ACQUIRE_OUTCOME,
                BATON_ACQUIRE_TIMED_OUT,
                "timed_out",
            ),
            (
                BATON_LABELS_ACQUIRE_OUTCOME,
                BATON_ACQUIRE_CANCELLED,
                "cancelled",
            ),
            (BATON_LABELS_ACQUIRE_OUTCOME, BATON_ACQUIRE_ERROR, "error"),
            (
                BATON_LABELS_LOSS_REASON,
                BATON_LOSS_KEY_CHANGED,
                "key_changed",
            ),
            (BATON_LABELS_LOSS_REASON, BATON_LOSS_REMOVED, "removed"),
            (
                BATON_LABELS_LOSS_REASON,
                BATON_LOSS_INVALIDATED,
                "invalidated",
            ),
            (
                BATON_LABELS_LOSS_REASON,
                BATON_LOSS_DEADLINE_EXCEEDED,
                "deadline_exceeded",
            ),
            (BATON_LABELS_LOSS_REASON, BATON_LOSS_DESTROYED, "destroyed"),
            (
                BATON_LABELS_LOSS_REASON,
                BATON_LOSS_CLIENT_CLOSED,
                "client_closed",
            ),
            (BATON_LABELS_LOSS_REASON, BATON_LOSS_OTHER, "other"),
            (BATON_LABELS_FAMILY, BATON_FAMILY_KV, "kv"),
            (BATON_LABELS_FAMILY, BATON_FAMILY_SESSION, "session"),
            (BATON_LABELS_FAMILY, BATON_FAMILY_TXN, "txn"),
            (BATON_LABELS_FAMILY, BATON_FAMILY_AGENT, "agent"),
            (BATON_LABELS_FAMILY, BATON_FAMILY_STATUS, "status"),
            (BATON_LABELS_FAMILY, BATON_FAMILY_OTHER, "other"),
            (BATON_LABELS_REQUEST_OUTCOME, BATON_REQUEST_2XX, "2xx"),
            (BATON_LABELS_REQUEST_OUTCOME, BATON_REQUEST_4XX, "4xx"),
            (BATON_LABELS_REQUEST_OUTCOME, BATON_REQUEST_429, "429"),
            (BATON_LABELS_REQUEST_OUTCOME, BATON_REQUEST_5XX, "5xx"),
            (
                BATON_LABELS_REQUEST_OUTCOME,
                BATON_REQUEST_NO_ANSWER,
                "no_answer",
            ),
            (BATON_LABELS_OWED_KIND, BATON_OWED_UNLOCKS, "unlocks"),
            (BATON_LABELS_OWED_KIND, BATON_OWED_SLOTS, "slots"),
            (BATON_LABELS_OWED_KIND, BATON_OWED_SESSIONS, "sessions"),
        ];
        for (kind, i, want) in cases {
            assert_eq!(s(baton_metrics_label(*kind, *i)), *want);
        }
        assert!(baton_metrics_label(BATON_LABELS_RECIPE, BATON_RECIPE_COUNT).is_null());
        assert!(baton_metrics_label(99, 0).is_null());
    }

    #[test]
    fn the_metric_table_is_the_core_s() {
        assert_eq!(baton_metric_count(), METRICS.len());
        for (i, m) in METRICS.iter().enumerate() {
            assert_eq!(s(baton_metric_name(i)), m.name);
            assert_eq!(s(baton_metric_help(i)), m.help);
            assert_eq!(baton_metric_label_count(i), m.labels.len());
            for (j, l) in m.labels.iter().enumerate() {
                assert_eq!(s(baton_metric_label_name(i, j)), *l);
            }
            assert!(baton_metric_label_name(i, m.labels.len()).is_null());
        }
        assert!(baton_metric_name(METRICS.len()).is_null());
        assert!(baton_metric_type(METRICS.len()).is_null());
        let mut n = 0;
        // SAFETY: `n` is writable; the returned array has `n` numbers.
        let b = unsafe { baton_metrics_bounds(BATON_BUCKETS_HOLD, &mut n) };
        // SAFETY: as above.
        assert_eq!(unsafe { std::slice::from_raw_parts(b, n) }, HOLD_BUCKETS);
    }
}
