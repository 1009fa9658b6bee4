//! Options for creating a session, and their JSON body: plain data that the
//! client's builder (its default session), the session endpoints and the
//! recipes all take, so it sits below every one of them.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::godur::format_go_duration;

/// The node check every session gets unless told otherwise.
pub(crate) const SERF_HEALTH: &str = "serfHealth";

/// What happens to a session's locked keys when it is invalidated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Behavior {
    /// The keys are unlocked and kept (Consul's default).
    #[default]
    Release,
    /// The keys are deleted.
    Delete,
}

impl Behavior {
    /// The wire name (`"release"` / `"delete"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Behavior::Release => "release",
            Behavior::Delete => "delete",
        }
    }
}

/// A service health check a session is tied to.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServiceCheck {
    /// The check ID.
    #[serde(rename = "ID")]
    pub id: String,
    /// Its namespace (Enterprise; empty on CE).
    #[serde(rename = "Namespace", default)]
    pub namespace: String,
}

/// Options for creating a session. Unset fields take Consul's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionOptions {
    /// Human-readable name.
    pub name: Option<String>,
    /// Node the session belongs to (default: the agent's node).
    pub node: Option<String>,
    /// TTL; must be within `[session_ttl_min (10 s), 24 h]`. `None` = no TTL
    /// (see [`SessionOptions::without_ttl`]); `Some(Duration::ZERO)` is refused
    /// when the session is created, since Consul would read it as "no TTL".
    pub ttl: Option<Duration>,
    /// Lock-delay after invalidation. `None` = Consul's default (15 s).
    /// `Some(Duration::ZERO)` really means no delay (sent as `"0s"`).
    pub lock_delay: Option<Duration>,
    /// Release (default) or delete the session's keys on invalidation.
    pub behavior: Behavior,
    /// Node checks. `None` = Consul's default (`["serfHealth"]`);
    /// `Some(vec![])` = no node checks.
    pub node_checks: Option<Vec<String>>,
    /// Service checks (`[{"ID":..}]`).
    pub service_checks: Vec<ServiceCheck>,
}

impl SessionOptions {
    /// Empty options (all Consul defaults, no TTL).
    pub fn new() -> SessionOptions {
        SessionOptions::default()
    }

    /// The options of a client's shared default session: name "baton", TTL 15 s.
    pub fn default_for_client() -> SessionOptions {
        SessionOptions::new()
            .name("baton")
            .ttl(Duration::from_secs(15))
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the node.
    pub fn node(mut self, node: impl Into<String>) -> Self {
        self.node = Some(node.into());
        self
    }

    /// Sets the TTL. Zero is refused when the session is created (it is not
    /// a way to ask for no TTL: use [`SessionOptions::without_ttl`]).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// A session without a TTL: nothing expires it while its node is alive
    /// and its checks pass, so a crashed process keeps its locks until the
    /// node leaves the cluster or someone destroys the session. Only for
    /// sessions bound to health checks that fail when the process dies.
    pub fn without_ttl(mut self) -> Self {
        self.ttl = None;
        self
    }

    /// Refuses what Consul would silently read otherwise (a zero TTL).
    pub(crate) fn validate(&self) -> Result<()> {
        if self.ttl == Some(Duration::ZERO) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "session TTL must be positive (0 given; Consul would create a session that never \
                 expires): leave the TTL unset (SessionOptions::without_ttl) for a session without one",
            ));
        }
        Ok(())
    }

    /// Sets the lock-delay (zero really means zero).
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = Some(delay);
        self
    }

    /// Sets the behaviour on invalidation.
    pub fn behavior(mut self, behavior: Behavior) -> Self {
        self.behavior = behavior;
        self
    }

    /// Sets the node checks (an empty list means none).
    pub fn node_checks(mut self, checks: Vec<String>) -> Self {
        self.node_checks = Some(checks);
        self
    }

    /// Adds a service check.
    pub fn service_check(mut self, id: impl Into<String>) -> Self {
        self.service_checks.push(ServiceCheck {
            id: id.into(),
            namespace: String::new(),
        });
        self
    }

    /// The JSON body of `PUT /v1/session/create`.
    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        if let Some(n) = &self.name {
            m.insert("Name".into(), json!(n));
        }
        if let Some(n) = &self.node {
            m.insert("Node".into(), json!(n));
        }
        if let Some(ttl) = self.ttl {
            m.insert("TTL".into(), json!(format_go_duration(ttl)));
        }
        if let Some(d) = self.lock_delay {
            m.insert("LockDelay".into(), json!(format_go_duration(d)));
        }
        m.insert("Behavior".into(), json!(self.behavior.as_str()));
        if self.node_checks.is_some() || !self.service_checks.is_empty() {
            // The same checks in both forms, so they take effect on every version:
            // Consul before 1.7.0 knows only `Checks` (node and service check IDs
            // alike) and ignores the newer fields; from 1.7.0 `NodeChecks` and
            // `ServiceChecks` apply, and its fix-up of `Checks` keeps nothing
            // beyond them (`[]` empties NodeChecks too; `["serfHealth"]` or an
            // empty NodeChecks drop `Checks`).
            let node = self
                .node_checks
                .clone()
                .unwrap_or_else(|| vec![SERF_HEALTH.to_string()]);
            let mut all = node.clone();
            for c in &self.service_checks {
                if !all.contains(&c.id) {
                    all.push(c.id.clone());
                }
            }
            m.insert("Checks".into(), json!(all));
            m.insert("NodeChecks".into(), json!(node));
        }
        if !self.service_checks.is_empty() {
            let list: Vec<Value> = self
                .service_checks
                .iter()
                .map(|c| {
                    let mut o = json!({"ID": c.id});
                    if !c.namespace.is_empty() {
                        o["Namespace"] = json!(c.namespace);
                    }
                    o
                })
                .collect();
            m.insert("ServiceChecks".into(), Value::Array(list));
        }
        Value::Object(m)
    }
}
