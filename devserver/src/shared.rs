//! The state shared by the listener, the connections, the timers and the handle: the
//! config, the store behind its lock, the blocking-query hub, and the fault switches.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{watch, Notify};

use crate::config::Config;
use crate::journal::Journal;
use crate::leaderless::{Leaderless, NoLeader};
use crate::state::{CheckStatus, State, Topic, SERF_CHECK_ID};
use crate::watch::Hub;

/// Requests the server has seen on `/v1/`, by route (e.g. `"PUT /v1/kv"`, `"PUT /v1/txn"`).
/// Benchmarks use it to count the HTTP requests a client operation costs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// All `/v1/` requests.
    pub total: u64,
    /// Requests per `"<METHOD> <route>"`.
    pub by_route: BTreeMap<String, u64>,
    /// Of those, the blocking queries (a GET with `?index=` above 0), per route: a
    /// client's watches poll on their own schedule, so a count of the requests
    /// an operation costs leaves them out.
    pub blocking_by_route: BTreeMap<String, u64>,
    /// Bytes of answer bodies per route: what a client's polls cost on the wire (a wide
    /// prefix poll re-reads every key under it on each change).
    pub body_bytes_by_route: BTreeMap<String, u64>,
    /// `/v1/` requests that have arrived and are not answered yet (waiting out a latency
    /// fault or a pause included), per `"<METHOD> <path>"` (the path as sent, without the
    /// query; only those with requests in flight): how a test knows a client's request is on
    /// its way.
    pub in_flight: BTreeMap<String, u64>,
}

impl RequestCounts {
    /// The requests on `route` (`"<METHOD> <route>"`) that were not blocking queries.
    pub fn non_blocking(&self, route: &str) -> u64 {
        let all = self.by_route.get(route).copied().unwrap_or(0);
        all - self.blocking_by_route.get(route).copied().unwrap_or(0)
    }
}

/// What the per-client connection cap (`limits.http_max_conns_per_client`) counts connections
/// under, as Consul's limiter (`hashicorp/go-connlimit`, `addrKey`) keys them: a TCP client by
/// its IP; a unix-socket client has no IP, and go-connlimit keys it by its whole address
/// (`unix/@`: the peer of a unix socket is unnamed), so every unix-socket connection counts
/// against one shared cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum ClientKey {
    /// A TCP (or TLS) client, by IP.
    Ip(IpAddr),
    /// Any client of the unix socket.
    Unix,
}

/// One open connection as the per-client cap counts it ([`Shared::admit`]), until it drops.
///
/// Taken in the accept loop, before the connection's task is spawned: Go's `http.Server` runs
/// the `ConnState(StateNew)` hook, where go-connlimit counts, in its accept loop. Counting in
/// the task instead let a later connection's task run first and take the last slot.
pub(crate) struct ConnSlot(Arc<Shared>, ClientKey);

impl Drop for ConnSlot {
    fn drop(&mut self) {
        release(&self.0.conns, &self.1);
    }
}

/// A `/v1/` request in flight ([`Shared::in_flight`]).
pub(crate) struct InFlight(Arc<Shared>, String);

impl Drop for InFlight {
    fn drop(&mut self) {
        release(&self.0.in_flight, &self.1);
    }
}

/// What a guard ([`ConnSlot`], [`InFlight`]) gives back when it drops: one off `key`'s count,
/// and the entry gone once none are left, so the map holds only what is open. The guard's
/// taking added one to the entry, so it is there and at least 1 (no underflow).
fn release<K: Ord>(counts: &Mutex<BTreeMap<K, u64>>, key: &K) {
    let mut m = counts.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = m.get_mut(key) {
        if *n > 1 {
            *n -= 1;
        } else {
            m.remove(key);
        }
    }
}

/// State shared by the listener, the connections and the handle.
pub(crate) struct Shared {
    pub cfg: Config,
    state: Mutex<State>,
    pub hub: Hub,
    /// True while the server "stops answering".
    pub paused: watch::Sender<bool>,
    /// Fixed delay added before each `/v1/` request, in nanoseconds.
    pub latency_ns: AtomicU64,
    /// The raft leader's presence, and how a leaderless window answers.
    pub leaderless: Leaderless,
    /// What clients sent, when asked to record it.
    pub journal: Journal,
    /// Bumped on restart: every open connection is dropped.
    pub generation: watch::Sender<u64>,
    /// Wakes the TTL timer task when a session timer may have moved earlier.
    pub timer_kick: Notify,
    /// Wakes the check runner (`checks.rs`) when the catalog changed or the store restarted.
    pub check_kick: Notify,
    counts: Mutex<RequestCounts>,
    /// See [`RequestCounts::in_flight`].
    in_flight: Mutex<BTreeMap<String, u64>>,
    /// Open connections per client ([`Shared::admit`]; [`ConnSlot`] gives one back).
    conns: Mutex<BTreeMap<ClientKey, u64>>,
    /// The agent's NodeID (stable for the server's life).
    pub node_id: String,
    /// The `?cached` requests the agent cache has answered (keyed by path and query): the
    /// first is a `MISS`, those after it a `HIT`.
    pub agent_cache: Mutex<std::collections::HashSet<String>>,
    /// The other agents this one joined or was joined by.
    pub serf: crate::serf::Pools,
    /// Set once a `PUT /v1/agent/leave` has been answered: the server then stops, as a Consul
    /// agent shuts down after leaving.
    pub left: watch::Sender<bool>,
    /// Set when the server has stopped after a leave (its listeners are closed).
    pub stopped_after_leave: std::sync::atomic::AtomicBool,
    /// Run once the server has stopped after a leave (the command line exits then).
    pub on_left: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl Shared {
    pub(crate) fn new(cfg: Config) -> Shared {
        let node_id = cfg.node_id.clone().unwrap_or_else(crate::state::new_uuid);
        let state = State::new(
            &cfg.node_name,
            &node_id,
            &cfg.node_meta,
            cfg.tombstone_ttl,
            cfg.consul_version,
        );
        Shared {
            cfg,
            state: Mutex::new(state),
            hub: Hub::default(),
            paused: watch::channel(false).0,
            latency_ns: AtomicU64::new(0),
            leaderless: Leaderless::default(),
            journal: Journal::default(),
            generation: watch::channel(0).0,
            timer_kick: Notify::new(),
            check_kick: Notify::new(),
            counts: Mutex::new(RequestCounts::default()),
            in_flight: Mutex::new(BTreeMap::new()),
            conns: Mutex::new(BTreeMap::new()),
            node_id,
            agent_cache: Mutex::new(Default::default()),
            serf: Default::default(),
            left: watch::channel(false).0,
            stopped_after_leave: Default::default(),
            on_left: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs a read against the state.
    pub fn read<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&self.lock())
    }

    /// Runs a write against the state, then wakes the blocking queries it affected (after the
    /// lock is released) and the TTL timer task.
    pub fn write<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = self.write_quiet(f);
        self.timer_kick.notify_one();
        r
    }

    /// [`Shared::write`] without waking the TTL timer task (which uses it itself).
    pub(crate) fn write_quiet<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let (r, changed) = {
            let mut st = self.lock();
            let r = f(&mut st);
            (r, st.take_changes())
        };
        if changed.contains(&Topic::Catalog) {
            self.check_kick.notify_one();
        }
        self.hub.notify(changed);
        r
    }

    /// Counts one `/v1/` request; `blocking` when it is a blocking query.
    pub fn count(&self, route: String, blocking: bool) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.total += 1;
        if blocking {
            *c.blocking_by_route.entry(route.clone()).or_default() += 1;
        }
        *c.by_route.entry(route).or_default() += 1;
    }

    /// Counts the body of one `/v1/` answer on `route`.
    pub fn count_body(&self, route: &str, bytes: usize) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        match c.body_bytes_by_route.get_mut(route) {
            Some(n) => *n += bytes as u64,
            None => {
                c.body_bytes_by_route
                    .insert(route.to_string(), bytes as u64);
            }
        }
    }

    pub fn counts(&self) -> RequestCounts {
        let mut c = self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        c.in_flight = self
            .in_flight
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        c
    }

    /// Counts a `/v1/` request (`"<METHOD> <path>"`) in flight until the guard drops
    /// (answered, or its connection gone).
    pub fn in_flight(self: &Arc<Self>, what: String) -> InFlight {
        let mut m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(what.clone()).or_default() += 1;
        InFlight(self.clone(), what)
    }

    pub fn reset_counts(&self) {
        *self.counts.lock().unwrap_or_else(|e| e.into_inner()) = RequestCounts::default();
    }

    /// Counts a connection from `client` against its cap, until the returned slot drops;
    /// `None` when the cap is reached. Called where the connection is accepted, in the order
    /// connections come in, as Consul's limiter counts them (see [`ConnSlot`]).
    pub fn admit(self: &Arc<Self>, client: ClientKey) -> Option<ConnSlot> {
        let mut m = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(client).or_default();
        let cap = self.cfg.max_conns_per_client as u64;
        if cap > 0 && *n >= cap {
            return None;
        }
        *n += 1;
        Some(ConnSlot(self.clone(), client))
    }

    /// Connections open now, from every client.
    pub fn open_connections(&self) -> usize {
        self.conns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .sum::<u64>() as usize
    }

    // ----- fault controls -----

    pub fn set_paused(&self, p: bool) {
        self.paused.send_replace(p);
    }

    pub fn set_latency(&self, d: Duration) {
        self.latency_ns
            .store(d.as_nanos().min(u64::MAX as u128) as u64, Ordering::SeqCst);
    }

    pub fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_ns.load(Ordering::SeqCst))
    }

    pub fn set_leader(&self, present: bool, mode: Option<NoLeader>) {
        self.leaderless.set(present, mode);
    }

    pub fn has_leader(&self) -> bool {
        self.leaderless.has_leader()
    }

    /// Loses all state, as a dev agent restarted without a data dir would, and drops every
    /// open connection; the raft index carries on from where it was (a real cluster that
    /// loses its sessions keeps its index), so no index a client saw is handed out again.
    pub fn restart(&self) {
        {
            let mut st = self.lock();
            // The data goes, the raft index stays: indexes keep increasing across the fault.
            let index = st.current_index();
            *st = State::new_after(
                &self.cfg.node_name,
                &self.node_id,
                &self.cfg.node_meta,
                self.cfg.tombstone_ttl,
                self.cfg.consul_version,
                index,
            );
        }
        self.agent_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        self.generation.send_modify(|g| *g += 1);
        self.hub.notify_all();
        self.timer_kick.notify_one();
        self.check_kick.notify_one();
    }

    pub fn invalidate_session(&self, id: &str) -> bool {
        self.write(|st| st.session_invalidate(id))
    }

    pub fn set_serf_health(&self, status: CheckStatus) {
        let node = self.cfg.node_name.clone();
        self.write(|st| st.register_node(&node, "", &[(SERF_CHECK_ID.to_string(), status)]));
    }

    /// Waits while the server is paused.
    pub async fn wait_unpaused(&self) {
        let mut rx = self.paused.subscribe();
        let _ = rx.wait_for(|p| !*p).await;
    }
}
