//! Metrics (issue 47): a client's snapshot ([`NativeClient::metrics_json`]) and the table of
//! the metrics every language exposes ([`metric_defs`]). `lib/client.js` parses the snapshot
//! into `client.metrics()`; `lib/prometheus.js` builds the prom-client metrics from the table.

use napi_derive::napi;

use crate::NativeClient;

/// One metric of `baton::metrics::METRICS`: what every language exposes under that name.
#[napi(object)]
pub struct MetricDef {
    /// The Prometheus name (`baton_acquires_total`).
    pub name: String,
    /// Its type: 'gauge', 'counter' or 'histogram'.
    #[napi(js_name = "type", ts_type = "'gauge' | 'counter' | 'histogram'")]
    pub kind: String,
    /// Its label names, in order (the nesting order of the snapshot's objects).
    pub labels: Vec<String>,
    /// The help text.
    pub help: String,
}

/// The metrics a client exposes, in exposition order (`baton::metrics::METRICS`: names, types,
/// label names and help texts are the core's, never retyped here).
#[napi]
pub fn metric_defs() -> Vec<MetricDef> {
    use baton::metrics::{MetricType, METRICS};
    METRICS
        .iter()
        .map(|d| MetricDef {
            name: d.name.to_string(),
            kind: match d.kind {
                MetricType::Gauge => "gauge",
                MetricType::Counter => "counter",
                MetricType::Histogram => "histogram",
                // A kind added to the core: shown untyped until the binding learns it.
                _ => "untyped",
            }
            .to_string(),
            labels: d.labels.iter().map(|l| l.to_string()).collect(),
            help: d.help.to_string(),
        })
        .collect()
}

#[napi]
impl NativeClient {
    /// A snapshot of the client's metrics as JSON text, the shape of the core's
    /// `MetricsSnapshot::to_json` (`lib/client.js` parses it). Synchronous: it reads atomics and
    /// looks at the client's sessions and owed work, no request.
    #[napi]
    pub fn metrics_json(&self) -> String {
        self.inner.metrics().to_json().to_string()
    }
}
