//! The catalog tables: nodes, services and health checks, each with its own table index for
//! blocking queries, as Consul's state store keeps them (`agent/consul/state/catalog.go`).
//!
//! Every write here is one raft-equivalent write. A check that turns critical, a check that
//! is deleted (alone, with its service or with its node) and a deleted node invalidate the
//! sessions bound to them in the same write (`ensureCheckTxn`, `deleteCheckTxn`,
//! `deleteNodeTxn` delete the sessions found through the session-checks index).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{Probe, Session, State, Topic};

/// The node check every session is bound to by default.
pub(crate) const SERF_CHECK_ID: &str = "serfHealth";

/// Health of a registered check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum CheckStatus {
    Passing,
    Warning,
    Critical,
}

impl CheckStatus {
    /// `passing`, `warning` or `critical` (Consul's `structs.ValidStatus`).
    pub fn parse(s: &str) -> Option<CheckStatus> {
        match s {
            "passing" => Some(CheckStatus::Passing),
            "warning" => Some(CheckStatus::Warning),
            "critical" => Some(CheckStatus::Critical),
            _ => None,
        }
    }

    /// The wire form.
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Passing => "passing",
            CheckStatus::Warning => "warning",
            CheckStatus::Critical => "critical",
        }
    }
}

/// A catalog node.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub name: String,
    pub id: String,
    pub address: String,
    /// `TaggedAddresses`, e.g. `lan`, `wan`.
    pub tagged_addresses: Map<String, Value>,
    pub meta: Map<String, Value>,
    pub create_index: u64,
    pub modify_index: u64,
}

impl Node {
    /// A node with only a name and an address.
    pub fn new(name: &str, address: &str) -> Node {
        Node {
            name: name.to_string(),
            id: String::new(),
            address: address.to_string(),
            tagged_addresses: Map::new(),
            meta: Map::new(),
            create_index: 0,
            modify_index: 0,
        }
    }
}

/// A service instance registered on a node (`structs.NodeService`). Fields a client only
/// stores and reads back are kept as JSON.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Service {
    pub node: String,
    pub id: String,
    pub service: String,
    pub tags: Vec<String>,
    pub address: String,
    pub port: i64,
    pub meta: Map<String, Value>,
    /// `TaggedAddresses` (`{"lan": {"Address": .., "Port": ..}}`).
    pub tagged_addresses: Map<String, Value>,
    pub weights: Value,
    pub enable_tag_override: bool,
    /// `Kind` (`""` for a typical service, `connect-proxy`, ...).
    pub kind: String,
    /// `Proxy`, `Connect`, `Locality`: stored and echoed.
    pub proxy: Value,
    pub connect: Value,
    pub locality: Value,
    /// `SocketPath`: a Unix socket the service listens on instead of an address and port.
    pub socket_path: String,
    pub create_index: u64,
    pub modify_index: u64,
}

/// A health check (`structs.HealthCheck`), node-level when `service_id` is empty.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Check {
    pub node: String,
    pub check_id: String,
    pub name: String,
    pub status: CheckStatus,
    pub notes: String,
    pub output: String,
    pub service_id: String,
    pub service_name: String,
    pub service_tags: Vec<String>,
    /// `Type`: `ttl`, `script`, `http`, `tcp`, `maintenance`, `alias`, ... or `""`.
    pub check_type: String,
    pub interval: String,
    pub timeout: String,
    /// The TTL of a TTL check (the agent arms a timer with it).
    pub ttl: Option<Duration>,
    /// When a TTL check turns critical unless it is updated first.
    pub ttl_expires: Option<Instant>,
    /// `DeregisterCriticalServiceAfter` (at least Consul's `check_deregister_interval_min`):
    /// the agent's reaper removes the check's service once it has been critical this long.
    pub reap_after: Option<Duration>,
    /// Since when the check has been critical (kept across writes that leave it critical).
    pub critical_since: Option<Instant>,
    /// The HTTP definition fields Consul echoes under `Definition`.
    pub definition: Value,
    /// What the agent probes, for an HTTP or TCP check it registered (the server's check
    /// runner probes it); `None` for every other check.
    pub probe: Option<Arc<Probe>>,
    pub create_index: u64,
    pub modify_index: u64,
}

impl Check {
    /// A check with the given identity and status and nothing else.
    pub fn new(node: &str, check_id: &str, name: &str, status: CheckStatus) -> Check {
        Check {
            node: node.to_string(),
            check_id: check_id.to_string(),
            name: name.to_string(),
            status,
            notes: String::new(),
            output: String::new(),
            service_id: String::new(),
            service_name: String::new(),
            service_tags: Vec::new(),
            check_type: String::new(),
            interval: String::new(),
            timeout: String::new(),
            ttl: None,
            ttl_expires: None,
            reap_after: None,
            critical_since: None,
            definition: Value::Object(Map::new()),
            probe: None,
            create_index: 0,
            modify_index: 0,
        }
    }

    /// Equal on everything a client can see (Consul's `HealthCheck.IsSame`): a rewrite that
    /// changes none of it is no write at all.
    fn is_same(&self, o: &Check) -> bool {
        self.node == o.node
            && self.check_id == o.check_id
            && self.name == o.name
            && self.status == o.status
            && self.notes == o.notes
            && self.output == o.output
            && self.service_id == o.service_id
            && self.service_name == o.service_name
            && self.service_tags == o.service_tags
            && self.check_type == o.check_type
            && self.interval == o.interval
            && self.timeout == o.timeout
            && self.definition == o.definition
            && self.probe == o.probe
    }
}

/// Key of the services and checks tables: lowercase node name, then the ID.
type Key = (String, String);

fn key(node: &str, id: &str) -> Key {
    (node.to_ascii_lowercase(), id.to_string())
}

/// The catalog tables and their indexes.
#[derive(Clone, Default)]
pub(crate) struct Catalog {
    /// Nodes by lowercase name.
    pub nodes: BTreeMap<String, Node>,
    pub services: BTreeMap<Key, Service>,
    pub checks: BTreeMap<Key, Check>,
    pub nodes_index: u64,
    pub services_index: u64,
    pub checks_index: u64,
}

/// Why a catalog write was refused (Consul's texts, all 500).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CatalogError(pub String);

impl State {
    /// The catalog tables (read-only).
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// A node by name (case-insensitive).
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.catalog.nodes.get(&name.to_ascii_lowercase())
    }

    /// One check of a node.
    pub fn check(&self, node: &str, check_id: &str) -> Option<&Check> {
        self.catalog.checks.get(&key(node, check_id))
    }

    /// One service of a node.
    pub fn service(&self, node: &str, service_id: &str) -> Option<&Service> {
        self.catalog.services.get(&key(node, service_id))
    }

    /// The services of a node, by ID.
    pub fn node_services(&self, node: &str) -> Vec<&Service> {
        let n = node.to_ascii_lowercase();
        self.catalog
            .services
            .range((n.clone(), String::new())..)
            .take_while(|((k, _), _)| *k == n)
            .map(|(_, s)| s)
            .collect()
    }

    /// The checks of a node, by ID.
    pub fn node_checks(&self, node: &str) -> Vec<&Check> {
        let n = node.to_ascii_lowercase();
        self.catalog
            .checks
            .range((n.clone(), String::new())..)
            .take_while(|((k, _), _)| *k == n)
            .map(|(_, c)| c)
            .collect()
    }

    fn catalog_changed(&mut self) {
        self.changes.push(Topic::Catalog);
    }

    /// Creates or updates a node (`ensureNodeTxn`): an unchanged node is not rewritten.
    /// Returns the node's canonical name.
    pub(crate) fn put_node_at(&mut self, idx: u64, mut node: Node) -> String {
        let lname = node.name.to_ascii_lowercase();
        match self.catalog.nodes.get(&lname) {
            Some(old) => {
                node.name = old.name.clone();
                node.create_index = old.create_index;
                node.modify_index = old.modify_index;
                if node.id.is_empty() {
                    node.id = old.id.clone();
                }
                if *old == node {
                    return node.name;
                }
                node.modify_index = idx;
            }
            None => {
                node.create_index = idx;
                node.modify_index = idx;
            }
        }
        let name = node.name.clone();
        self.catalog.nodes.insert(lname, node);
        self.catalog.nodes_index = idx;
        self.catalog_changed();
        name
    }

    /// Creates or updates a service on an existing node (`ensureServiceTxn`).
    pub(crate) fn put_service_at(&mut self, idx: u64, mut svc: Service) {
        let k = key(&svc.node, &svc.id);
        if let Some(old) = self.catalog.services.get(&k) {
            svc.create_index = old.create_index;
            svc.modify_index = old.modify_index;
            if *old == svc {
                return;
            }
        } else {
            svc.create_index = idx;
        }
        svc.modify_index = idx;
        // A service check carries the service's name and tags.
        for c in self.catalog.checks.values_mut() {
            if c.node.eq_ignore_ascii_case(&svc.node) && c.service_id == svc.id {
                c.service_name = svc.service.clone();
                c.service_tags = svc.tags.clone();
            }
        }
        self.catalog.services.insert(k, svc);
        self.catalog.services_index = idx;
        self.catalog_changed();
    }

    /// Creates or updates a check (`ensureCheckTxn`): its node must exist, and so must its
    /// service when it names one; a critical check invalidates the sessions bound to it.
    pub(crate) fn put_check_at(&mut self, idx: u64, mut chk: Check) -> Result<(), CatalogError> {
        let Some(node) = self.node(&chk.node) else {
            return Err(CatalogError("Missing node registration".into()));
        };
        chk.node = node.name.clone();
        if !chk.service_id.is_empty() {
            let Some(svc) = self.service(&chk.node, &chk.service_id) else {
                return Err(CatalogError(format!(
                    "Missing service registration: {}",
                    chk.service_id
                )));
            };
            chk.service_name = svc.service.clone();
            chk.service_tags = svc.tags.clone();
        }
        let k = key(&chk.node, &chk.check_id);
        chk.critical_since = match (chk.status, self.catalog.checks.get(&k)) {
            (CheckStatus::Critical, Some(old)) if old.status == CheckStatus::Critical => {
                old.critical_since.or(chk.critical_since)
            }
            (CheckStatus::Critical, _) => Some(Instant::now()),
            _ => None,
        };
        if let Some(old) = self.catalog.checks.get(&k) {
            chk.create_index = old.create_index;
            chk.modify_index = old.modify_index;
            if old.is_same(&chk) {
                // Only the agent-side timer moved.
                self.catalog.checks.insert(k, chk);
                return Ok(());
            }
        } else {
            chk.create_index = idx;
        }
        chk.modify_index = idx;
        let critical = chk.status == CheckStatus::Critical;
        let (node, id) = (chk.node.clone(), chk.check_id.clone());
        self.catalog.checks.insert(k, chk);
        self.catalog.checks_index = idx;
        self.catalog_changed();
        if critical {
            self.invalidate_bound(idx, &node, &id);
        }
        Ok(())
    }

    /// Deletes a check (`deleteCheckTxn`), invalidating the sessions bound to it. False when
    /// there is no such check.
    pub(crate) fn delete_check_at(&mut self, idx: u64, node: &str, check_id: &str) -> bool {
        let Some(old) = self.catalog.checks.remove(&key(node, check_id)) else {
            return false;
        };
        self.catalog.checks_index = idx;
        self.catalog_changed();
        self.invalidate_bound(idx, &old.node, check_id);
        true
    }

    /// Deletes a service and its checks (`deleteServiceTxn`). False when there is none.
    pub(crate) fn delete_service_at(&mut self, idx: u64, node: &str, service_id: &str) -> bool {
        if self
            .catalog
            .services
            .remove(&key(node, service_id))
            .is_none()
        {
            return false;
        }
        self.catalog.services_index = idx;
        self.catalog_changed();
        let ids: Vec<String> = self
            .node_checks(node)
            .into_iter()
            .filter(|c| c.service_id == service_id)
            .map(|c| c.check_id.clone())
            .collect();
        for id in ids {
            self.delete_check_at(idx, node, &id);
        }
        true
    }

    /// Deletes a node with its services, checks and sessions (`deleteNodeTxn`). False when
    /// there is no such node.
    pub(crate) fn delete_node_at(&mut self, idx: u64, node: &str) -> bool {
        let Some(old) = self.catalog.nodes.remove(&node.to_ascii_lowercase()) else {
            return false;
        };
        self.catalog.nodes_index = idx;
        self.catalog_changed();
        let services: Vec<String> = self
            .node_services(node)
            .into_iter()
            .map(|s| s.id.clone())
            .collect();
        for s in services {
            self.delete_service_at(idx, node, &s);
        }
        let checks: Vec<String> = self
            .node_checks(node)
            .into_iter()
            .map(|c| c.check_id.clone())
            .collect();
        for c in checks {
            self.delete_check_at(idx, node, &c);
        }
        self.invalidate_where(idx, |s| s.node.eq_ignore_ascii_case(&old.name));
        true
    }

    /// What a fresh server's catalog holds after its first anti-entropy sync, in one write:
    /// its node (with `TaggedAddresses` and the network-segment meta), the `consul` service
    /// and a passing `serfHealth` (`agent/consul/leader.go` `reconcileMember`).
    pub(crate) fn boot_catalog(
        &mut self,
        node_name: &str,
        node_id: &str,
        node_meta: &[(String, String)],
    ) {
        let idx = self.next_index();
        let mut node = Node::new(node_name, "127.0.0.1");
        node.id = node_id.to_string();
        for t in ["lan", "lan_ipv4", "wan", "wan_ipv4"] {
            node.tagged_addresses
                .insert(t.into(), Value::String("127.0.0.1".into()));
        }
        node.meta.insert(
            "consul-network-segment".into(),
            Value::String(String::new()),
        );
        // `structs.MetaConsulVersion`, which the leader's member reconcile writes since 1.16.1
        // (GH-17754; the api package's TestAPI_ClientTxn reads it back).
        if self.version >= crate::ConsulVersion::new(1, 16, 1) {
            node.meta.insert(
                "consul-version".into(),
                Value::String(self.version.to_string()),
            );
        }
        for (k, v) in node_meta {
            node.meta.insert(k.clone(), Value::String(v.clone()));
        }
        let name = self.put_node_at(idx, node);
        let mut meta = Map::new();
        for (k, v) in [
            ("non_voter", "false"),
            ("raft_version", "3"),
            ("read_replica", "false"),
            ("serf_protocol_current", "2"),
            ("serf_protocol_max", "5"),
            ("serf_protocol_min", "1"),
            ("version", "1.15.0"),
        ] {
            meta.insert(k.into(), Value::String(v.into()));
        }
        self.put_service_at(
            idx,
            Service {
                node: name.clone(),
                id: "consul".into(),
                service: "consul".into(),
                tags: Vec::new(),
                address: String::new(),
                port: 8300,
                meta,
                tagged_addresses: Map::new(),
                weights: serde_json::json!({"Passing": 1, "Warning": 1}),
                enable_tag_override: false,
                kind: String::new(),
                proxy: Value::Null,
                connect: Value::Null,
                locality: Value::Null,
                socket_path: String::new(),
                create_index: 0,
                modify_index: 0,
            },
        );
        let mut serf = Check::new(
            &name,
            SERF_CHECK_ID,
            "Serf Health Status",
            CheckStatus::Passing,
        );
        serf.output = "Agent alive and reachable".into();
        let _ = self.put_check_at(idx, serf);
    }

    /// Registers (or updates) a node and sets some of its checks' statuses, in one write.
    /// A check that becomes critical invalidates the sessions bound to it.
    pub fn register_node(&mut self, name: &str, address: &str, checks: &[(String, CheckStatus)]) {
        let idx = self.next_index();
        let mut node = self
            .node(name)
            .cloned()
            .unwrap_or_else(|| Node::new(name, address));
        if !address.is_empty() {
            node.address = address.to_string();
        }
        let name = self.put_node_at(idx, node);
        for (id, status) in checks {
            let mut chk = self
                .check(&name, id)
                .cloned()
                .unwrap_or_else(|| Check::new(&name, id, id, *status));
            chk.status = *status;
            let _ = self.put_check_at(idx, chk);
        }
    }

    /// Marks every TTL check whose TTL ran out critical (the agent's `CheckTTL` timer), with
    /// Consul's output `TTL expired` (plus the last output, when there was one). Returns how
    /// many.
    pub fn expire_checks(&mut self, now: Instant) -> usize {
        let due: Vec<Check> = self
            .catalog
            .checks
            .values()
            .filter(|c| c.ttl_expires.is_some_and(|at| at <= now))
            .cloned()
            .collect();
        let n = due.len();
        for mut c in due {
            c.ttl_expires = None;
            c.status = CheckStatus::Critical;
            c.output = if c.output.is_empty() {
                "TTL expired".to_string()
            } else if c.output.starts_with("TTL expired") {
                c.output.clone()
            } else {
                format!(
                    "TTL expired (last output before timeout follows): {}",
                    c.output
                )
            };
            let idx = self.next_index();
            let _ = self.put_check_at(idx, c);
        }
        n
    }

    /// The checks the agent probes (HTTP and TCP), by `(node, check ID)`.
    pub fn probed_checks(&self) -> Vec<((String, String), Arc<Probe>)> {
        self.catalog
            .checks
            .values()
            .filter_map(|c| Some(((c.node.clone(), c.check_id.clone()), c.probe.clone()?)))
            .collect()
    }

    /// Moves whenever a check is written or deleted, or the store restarts (the checks
    /// table's index; indexes never go back): the check runner re-reads
    /// [`State::probed_checks`] when it does.
    pub fn checks_generation(&self) -> u64 {
        self.catalog.checks_index
    }

    /// Records an HTTP or TCP probe's result, as the agent syncs a check's new state to the
    /// catalog: a status change is written (a critical one invalidates the sessions bound
    /// to the check, the same write TTL checks make), a change of output alone only when
    /// `output_due`. True when something was written.
    pub fn set_check_result(
        &mut self,
        node: &str,
        check_id: &str,
        status: CheckStatus,
        output: &str,
        output_due: bool,
    ) -> bool {
        let Some(old) = self.check(node, check_id) else {
            return false;
        };
        if old.status == status && (old.output == output || !output_due) {
            return false;
        }
        let mut c = old.clone();
        c.status = status;
        c.output = output.to_string();
        let idx = self.next_index();
        self.put_check_at(idx, c).is_ok()
    }

    /// The earliest TTL-check or reaper deadline, if any.
    pub fn next_check_deadline(&self) -> Option<Instant> {
        let reap = |c: &Check| Some(c.critical_since? + c.reap_after?);
        self.catalog
            .checks
            .values()
            .flat_map(|c| [c.ttl_expires, reap(c)])
            .flatten()
            .min()
    }

    /// The agent's reaper (agent.go `reapServicesInternal`): removes each service with a check
    /// that has been critical for longer than its `DeregisterCriticalServiceAfter`, with its
    /// checks (and the sessions bound to them). Returns how many.
    pub fn reap_services(&mut self, now: Instant) -> usize {
        let mut due: Vec<(String, String)> = self
            .catalog
            .checks
            .values()
            .filter(|c| !c.service_id.is_empty())
            .filter(|c| {
                matches!((c.critical_since, c.reap_after), (Some(at), Some(after)) if at + after <= now)
            })
            .map(|c| (c.node.clone(), c.service_id.clone()))
            .collect();
        due.dedup();
        let mut n = 0;
        for (node, service) in due {
            let idx = self.next_index();
            if self.delete_service_at(idx, &node, &service) {
                n += 1;
            }
        }
        n
    }

    /// Invalidates the sessions bound to check `check_id` of `node`.
    fn invalidate_bound(&mut self, idx: u64, node: &str, check_id: &str) {
        self.invalidate_where(idx, |s| {
            s.node.eq_ignore_ascii_case(node) && s.all_check_ids().any(|c| c == check_id)
        });
    }

    pub(super) fn invalidate_where(&mut self, idx: u64, pred: impl Fn(&Session) -> bool) {
        let victims: Vec<Session> = self
            .sessions_sorted()
            .into_iter()
            .filter(|s| pred(s))
            .collect();
        for s in victims {
            self.invalidate_at(idx, s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{sess, st};
    use super::super::{ApplyError, Behavior, NewSession};
    use super::*;
    use std::time::Duration;

    #[test]
    fn critical_check_invalidates_bound_sessions() {
        let mut s = st();
        let id = sess(&mut s, Behavior::Release, 0);
        s.register_node("n1", "", &[(SERF_CHECK_ID.into(), CheckStatus::Critical)]);
        assert!(s.session(&id).is_none());
        let err = s.session_create(NewSession {
            name: String::new(),
            node: "n1".into(),
            lock_delay_ns: 0,
            behavior: Behavior::Release,
            ttl: String::new(),
            ttl_dur: None,
            node_checks: vec![SERF_CHECK_ID.into()],
            service_checks: None,
            checks: None,
        });
        assert_eq!(
            err,
            Err(ApplyError::Text(
                "apply failed: Check 'serfHealth' is in critical state".into()
            ))
        );
    }

    fn web(s: &mut State) {
        let i = s.next_index();
        s.put_service_at(
            i,
            Service {
                node: "n1".into(),
                id: "web".into(),
                service: "web".into(),
                tags: vec![],
                address: String::new(),
                port: 0,
                meta: Map::new(),
                tagged_addresses: Map::new(),
                weights: Value::Null,
                enable_tag_override: false,
                kind: String::new(),
                proxy: Value::Null,
                connect: Value::Null,
                locality: Value::Null,
                socket_path: String::new(),
                create_index: 0,
                modify_index: 0,
            },
        );
    }

    /// agent.go `reapServicesInternal`: a service goes once one of its checks has been
    /// critical for longer than its DeregisterCriticalServiceAfter, not before.
    #[test]
    fn reaper_removes_a_service_critical_past_its_deadline() {
        let mut s = st();
        web(&mut s);
        let mut c = Check::new("n1", "web-ttl", "web-ttl", CheckStatus::Critical);
        c.service_id = "web".into();
        c.reap_after = Some(Duration::from_secs(60));
        let i = s.next_index();
        s.put_check_at(i, c).unwrap();
        let since = s.check("n1", "web-ttl").unwrap().critical_since.unwrap();
        assert_eq!(
            s.next_check_deadline(),
            Some(since + Duration::from_secs(60))
        );
        assert_eq!(s.reap_services(since + Duration::from_secs(59)), 0);
        assert!(s.service("n1", "web").is_some());
        assert_eq!(s.reap_services(since + Duration::from_secs(61)), 1);
        assert!(s.service("n1", "web").is_none());
        assert!(s.check("n1", "web-ttl").is_none());
    }

    #[test]
    fn deleting_a_service_deletes_its_checks_and_bound_sessions() {
        let mut s = st();
        web(&mut s);
        let i = s.next_index();
        let mut c = Check::new("n1", "web-ttl", "web-ttl", CheckStatus::Passing);
        c.service_id = "web".into();
        s.put_check_at(i, c).unwrap();
        let id = sess(&mut s, Behavior::Release, 0);
        s.sessions
            .session_mut(&id)
            .unwrap()
            .node_checks
            .push("web-ttl".into());
        let j = s.next_index();
        assert!(s.delete_service_at(j, "n1", "web"));
        assert!(s.check("n1", "web-ttl").is_none());
        assert!(s.session(&id).is_none());
        assert_eq!(s.catalog.checks_index, j);
    }
}
