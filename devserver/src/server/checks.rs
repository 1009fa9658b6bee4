//! The check runner: probes the agent's HTTP and TCP checks on their schedule, and writes
//! their results into the catalog through the same write TTL checks use, so a check that
//! turns critical invalidates the sessions bound to it and starts its service's
//! `DeregisterCriticalServiceAfter` clock (the TTL timer task reaps it).
//!
//! One task on the server's runtime ([`run`]) keeps the schedule: an earliest-deadline loop
//! over every probed check, no thread or task per check. Each probe (`state/probe.rs`) runs
//! as a short task of its own, bounded by the check's timeout, so a slow service never holds
//! up another check; a check is never probed twice at once. The task and its probes end with
//! the runtime when the server stops (its thread is joined).
//!
//! As an agent does: the first probe comes after a random stagger within one interval, the
//! next one an interval after the previous one ended. A status change is written at once; a
//! change of output alone at most every 5 minutes (the agent's `check_update_interval`), so a
//! body that changes on every probe does not wake every catalog watcher. Without a cluster
//! leader, results are not written (the next probe after a leader returns is).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::shared::Shared;
use crate::state::{CheckStatus, Probe};

/// The agent's `check_update_interval`: how long a change of output alone may wait.
const OUTPUT_SYNC: Duration = Duration::from_secs(5 * 60);

/// A check the runner knows: `(node, check ID)`.
type Key = (String, String);

/// One scheduled check.
struct Scheduled {
    probe: Arc<Probe>,
    /// When to probe next (meaningless while `running`).
    next: Instant,
    running: bool,
    /// When the check's output was last written.
    synced: Option<Instant>,
}

/// A probe's result.
struct Done {
    key: Key,
    probe: Arc<Probe>,
    status: CheckStatus,
    output: String,
}

/// The check runner: probes every HTTP and TCP check the agent registered, on its schedule,
/// until the runtime stops. Woken by [`Shared::check_kick`] when the catalog changes.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut schedule: HashMap<Key, Scheduled> = HashMap::new();
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Done>();
    let ca_file: Option<Arc<std::path::Path>> = shared
        .cfg
        .tls
        .as_ref()
        .and_then(|t| t.ca_file.as_deref())
        .map(Arc::from);
    let mut synced_catalog: Option<u64> = None;
    loop {
        let kicked = shared.check_kick.notified();
        tokio::pin!(kicked);
        kicked.as_mut().enable();
        // Follow registrations, re-registrations and deregistrations.
        let index = shared.read(|st| st.checks_generation());
        if synced_catalog != Some(index) {
            synced_catalog = Some(index);
            let probes = shared.read(|st| st.probed_checks());
            let now = Instant::now();
            schedule.retain(|k, _| probes.iter().any(|(pk, _)| pk == k));
            for (key, probe) in probes {
                match schedule.get_mut(&key) {
                    Some(s) if *s.probe == *probe => {}
                    Some(s) => {
                        s.next = now + stagger(probe.interval);
                        s.probe = probe;
                    }
                    None => {
                        let next = now + stagger(probe.interval);
                        schedule.insert(
                            key,
                            Scheduled {
                                probe,
                                next,
                                running: false,
                                synced: None,
                            },
                        );
                    }
                }
            }
        }
        // Start the probes that are due.
        let now = Instant::now();
        for (key, s) in schedule.iter_mut() {
            if s.running || s.next > now {
                continue;
            }
            s.running = true;
            let (key, probe, tx, ca) = (
                key.clone(),
                s.probe.clone(),
                done_tx.clone(),
                ca_file.clone(),
            );
            tokio::spawn(async move {
                let (status, output) = probe.run(ca.as_deref()).await;
                let _ = tx.send(Done {
                    key,
                    probe,
                    status,
                    output,
                });
            });
        }
        let next = schedule
            .values()
            .filter(|s| !s.running)
            .map(|s| s.next)
            .min();
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = kicked => {}
            _ = sleep => {}
            done = done_rx.recv() => {
                let Some(done) = done else { return };
                record(&shared, &mut schedule, done);
            }
        }
    }
}

/// Writes a probe's result to the catalog (when its check is still the one probed) and
/// schedules the next probe an interval from now.
fn record(shared: &Shared, schedule: &mut HashMap<Key, Scheduled>, done: Done) {
    let Some(s) = schedule.get_mut(&done.key) else {
        return; // deregistered meanwhile
    };
    // Not running any more either way: a result left `running` set would never be probed again.
    s.running = false;
    if !Arc::ptr_eq(&s.probe, &done.probe) && *s.probe != *done.probe {
        return; // re-registered with another definition meanwhile: probed afresh at `next`
    }
    let now = Instant::now();
    s.next = now + s.probe.interval;
    // Without a leader nothing reaches the catalog; the next probe after one returns does.
    if !shared.has_leader() {
        return;
    }
    let output_due = s.synced.is_none_or(|at| now >= at + OUTPUT_SYNC);
    let (node, id) = &done.key;
    let wrote =
        shared.write(|st| st.set_check_result(node, id, done.status, &done.output, output_due));
    if wrote {
        s.synced = Some(now);
    }
}

/// Consul's `lib.RandomStagger`: a random wait in `[0, d)`.
fn stagger(d: Duration) -> Duration {
    let nanos = d.as_nanos().min(u64::MAX as u128) as u64;
    if nanos == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(rand::random::<u64>() % nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_probe_comes_within_one_interval() {
        for _ in 0..100 {
            assert!(stagger(Duration::from_secs(1)) < Duration::from_secs(1));
        }
        assert_eq!(stagger(Duration::ZERO), Duration::ZERO);
    }
}
