//! Metrics (issue 47): `Client.metrics()`, a snapshot of the core's counters as a `dict` of
//! exactly the core's `MetricsSnapshot::to_json()` shape, and `_metric_defs()`, the core's
//! one table of metric names, types, labels and help texts, which
//! `consul_baton.prometheus` exposes (never retyped here or there).

use pyo3::prelude::*;

use crate::Client;

/// The name of a metric type as `consul_baton.prometheus` takes it.
fn type_name(kind: baton::metrics::MetricType) -> &'static str {
    match kind {
        baton::metrics::MetricType::Gauge => "gauge",
        baton::metrics::MetricType::Counter => "counter",
        baton::metrics::MetricType::Histogram => "histogram",
        _ => "unknown",
    }
}

#[pymethods]
impl Client {
    /// A snapshot of this client's metrics, counted in the core since the client was made,
    /// as a `dict`: each metric under its Prometheus name less `baton_` and `_total`, labels
    /// as nested dicts in label order (`m["acquires"]["lock"]["timed_out"]`), durations in
    /// seconds, histograms as `{"bounds", "buckets", "count", "sum"}` (`buckets` per bucket,
    /// not cumulative, one more than `bounds`: the last is `+Inf`); `lease_left_seconds` is
    /// `None` when no live session has a TTL. Cheap: atomics read, no request.
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let c = self.inner.clone();
        // Detached: the snapshot takes the client's session and owed-work locks briefly.
        let text = py.detach(move || c.metrics().to_json().to_string());
        py.import("json")?.call_method1("loads", (text,))
    }
}

/// The metrics every client exposes, in exposition order, as `(name, type, labels, help)`
/// tuples: the Prometheus name (`"baton_acquires_total"`), `"gauge"`, `"counter"` or
/// `"histogram"`, the label names in order, the help text (the core's `baton::metrics::METRICS`).
#[pyfunction]
pub(crate) fn _metric_defs() -> Vec<(&'static str, &'static str, Vec<&'static str>, &'static str)> {
    baton::metrics::METRICS
        .iter()
        .map(|d| (d.name, type_name(d.kind), d.labels.to_vec(), d.help))
        .collect()
}
