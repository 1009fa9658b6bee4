//! The client's metrics in a [`prometheus_client`] registry (feature `prometheus`):
//! [`register`] adds a collector that takes a [`Client::metrics`] snapshot at each
//! scrape and encodes it under the names of [`METRICS`].

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType as PromType;
use prometheus_client::registry::Registry;

use crate::client::{Client, WeakClient};
use crate::foundations::metrics::{MetricType, METRICS, OWED_KINDS};
use crate::metrics::{HistogramSnapshot, LabeledCount, MetricsSnapshot};

/// Registers `client`'s metrics in `registry`: a collector that snapshots the client at
/// each scrape. It holds the client weakly: once the client is dropped, it encodes
/// nothing.
pub fn register(client: &Client, registry: &mut Registry) {
    registry.register_collector(Box::new(BatonCollector {
        client: client.downgrade(),
    }));
}

/// The collector [`register`] adds.
struct BatonCollector {
    client: WeakClient,
}

impl std::fmt::Debug for BatonCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatonCollector").finish_non_exhaustive()
    }
}

type Fmt = Result<(), std::fmt::Error>;

/// The name to give the encoder: a counter's without its `_total`, which it appends.
fn base_name(name: &'static str, kind: MetricType) -> &'static str {
    match kind {
        MetricType::Counter => name.strip_suffix("_total").unwrap_or(name),
        _ => name,
    }
}

fn prom_type(kind: MetricType) -> PromType {
    match kind {
        MetricType::Counter => PromType::Counter,
        MetricType::Gauge => PromType::Gauge,
        MetricType::Histogram => PromType::Histogram,
    }
}

fn histogram(e: &mut MetricEncoder<'_>, h: &HistogramSnapshot) -> Fmt {
    // Per bucket: the encoder makes them cumulative.
    let buckets: Vec<(f64, u64)> = h
        .bounds
        .iter()
        .copied()
        .chain(std::iter::once(f64::INFINITY))
        .zip(h.buckets.iter().copied())
        .collect();
    e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
        h.sum.as_secs_f64(),
        h.count,
        &buckets,
        None,
    )
}

fn counter(
    e: &mut MetricEncoder<'_>,
    v: &impl prometheus_client::encoding::EncodeCounterValue,
) -> Fmt {
    e.encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(v, None)
}

fn counts(e: &mut MetricEncoder<'_>, keys: [&'static str; 2], rows: &[LabeledCount]) -> Fmt {
    for r in rows {
        let labels = [(keys[0], r.first), (keys[1], r.second)];
        ConstCounter::new(r.count).encode(e.encode_family(&labels)?)?;
    }
    Ok(())
}

fn by_label(
    e: &mut MetricEncoder<'_>,
    key: &'static str,
    rows: &[(&'static str, HistogramSnapshot)],
) -> Fmt {
    for (v, h) in rows {
        let labels = [(key, *v)];
        histogram(&mut e.encode_family(&labels)?, h)?;
    }
    Ok(())
}

fn encode_one(name: &'static str, mut e: MetricEncoder<'_>, s: &MetricsSnapshot) -> Fmt {
    let e = &mut e;
    match name {
        "baton_held" => {
            for (r, n) in &s.held {
                let labels = [("recipe", *r)];
                ConstGauge::new(*n as i64).encode(e.encode_family(&labels)?)?;
            }
            Ok(())
        }
        "baton_acquires_total" => counts(e, ["recipe", "outcome"], &s.acquires),
        "baton_acquire_wait_seconds" => by_label(e, "recipe", &s.acquire_wait),
        "baton_hold_seconds" => by_label(e, "recipe", &s.hold_time),
        "baton_losses_total" => counts(e, ["recipe", "reason"], &s.losses),
        "baton_renewals_total" => {
            for (o, n) in [("ok", s.renewals_ok), ("failed", s.renewals_failed)] {
                let labels = [("outcome", o)];
                ConstCounter::new(n).encode(e.encode_family(&labels)?)?;
            }
            Ok(())
        }
        "baton_renewal_seconds" => histogram(e, &s.renewal_latency),
        "baton_lease_left_seconds" => match s.lease_left {
            Some(d) => e.encode_gauge(&d.as_secs_f64()),
            None => Ok(()),
        },
        "baton_requests_total" => counts(e, ["family", "outcome"], &s.requests),
        "baton_request_seconds" => by_label(e, "family", &s.request_latency),
        "baton_retries_total" => counter(e, &s.retries),
        "baton_leaderless_seconds_total" => counter(e, &s.leaderless.as_secs_f64()),
        "baton_owed" => {
            let values = [s.owed_unlocks, s.owed_slots, s.owed_sessions];
            for (k, n) in OWED_KINDS.iter().zip(values) {
                let labels = [("kind", *k)];
                ConstGauge::new(n as i64).encode(e.encode_family(&labels)?)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

impl Collector for BatonCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Fmt {
        let Some(client) = self.client.upgrade() else {
            return Ok(());
        };
        let s = client.metrics();
        for def in METRICS {
            // Absent, not zero, when no session has a lease.
            if def.name == "baton_lease_left_seconds" && s.lease_left.is_none() {
                continue;
            }
            let e = encoder.encode_descriptor(
                base_name(def.name, def.kind),
                def.help,
                None,
                prom_type(def.kind),
            )?;
            encode_one(def.name, e, &s)?;
        }
        Ok(())
    }
}
