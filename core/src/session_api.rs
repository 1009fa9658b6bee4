//! The low-level session endpoints (`/v1/session/*`) and their types.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::client::Client;
use crate::error::{Error, ErrorKind, Result};
use crate::godur::format_go_duration;
use crate::http::{encode_component, QueryMeta, QueryOptions, Request};

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
    /// TTL; must be within `[session_ttl_min (10 s), 24 h]`. `None` = no TTL.
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

    /// Sets the TTL.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
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
        if let Some(c) = &self.node_checks {
            m.insert("NodeChecks".into(), json!(c));
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

/// A session as Consul describes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SessionEntry {
    /// The session ID (lowercase UUID).
    #[serde(rename = "ID")]
    pub id: String,
    /// Name.
    #[serde(rename = "Name", default)]
    pub name: String,
    /// Node.
    #[serde(rename = "Node", default)]
    pub node: String,
    /// Lock-delay in nanoseconds as Consul reports it.
    #[serde(rename = "LockDelay", default)]
    pub lock_delay_ns: u64,
    /// `"release"` or `"delete"`.
    #[serde(rename = "Behavior", default)]
    pub behavior: String,
    /// TTL string exactly as stored (`""` when none).
    #[serde(rename = "TTL", default)]
    pub ttl: String,
    /// Node checks.
    #[serde(rename = "NodeChecks", default)]
    pub node_checks: Option<Vec<String>>,
    /// Service checks.
    #[serde(rename = "ServiceChecks", default)]
    pub service_checks: Option<Vec<ServiceCheck>>,
    /// Deprecated combined check list (only present when Consul kept it).
    #[serde(rename = "Checks", default)]
    pub checks: Option<Vec<String>>,
    /// Raft index of creation.
    #[serde(rename = "CreateIndex", default)]
    pub create_index: u64,
    /// Equal to `create_index` (sessions are immutable).
    #[serde(rename = "ModifyIndex", default)]
    pub modify_index: u64,
}

impl SessionEntry {
    /// The lock-delay as a duration.
    pub fn lock_delay(&self) -> Duration {
        Duration::from_nanos(self.lock_delay_ns)
    }

    /// The TTL parsed (None when absent or unparsable).
    pub fn ttl(&self) -> Option<Duration> {
        crate::godur::parse_go_duration(&self.ttl).filter(|d| !d.is_zero())
    }
}

/// The low-level session API; get one from [`Client::sessions`].
///
/// Sessions created here are not renewed or destroyed by the client; use
/// [`Client::create_session`] for managed sessions.
#[derive(Debug, Clone, Copy)]
pub struct SessionApi<'a> {
    pub(crate) client: &'a Client,
}

#[derive(Deserialize)]
struct CreateAnswer {
    #[serde(rename = "ID")]
    id: String,
}

impl SessionApi<'_> {
    /// `PUT /v1/session/create`: creates a session, returns its ID.
    pub fn create(&self, options: &SessionOptions) -> Result<String> {
        let mut req = Request::new("PUT", "/v1/session/create");
        req.json_body(&options.to_json());
        let resp = self.client.call(&req)?;
        let a: CreateAnswer = resp.json(&req.endpoint())?;
        Ok(a.id)
    }

    /// `PUT /v1/session/destroy/<id>`: destroys a session (unknown IDs are fine).
    pub fn destroy(&self, id: &str) -> Result<()> {
        let req = Request::new(
            "PUT",
            format!("/v1/session/destroy/{}", encode_component(id)),
        );
        self.client.call(&req)?;
        Ok(())
    }

    /// `PUT /v1/session/renew/<id>`: renews a session and returns it as Consul
    /// now has it (use its TTL). An unknown session gives an error of kind
    /// [`ErrorKind::SessionInvalidated`].
    pub fn renew(&self, id: &str) -> Result<SessionEntry> {
        let req = Request::new("PUT", format!("/v1/session/renew/{}", encode_component(id)));
        self.renew_req(&req)
    }

    pub(crate) fn renew_req(&self, req: &Request) -> Result<SessionEntry> {
        let resp = self.client.send(req)?;
        renew_answer(req, resp)
    }

    /// `GET /v1/session/info/<id>`: the session, or `None` if it does not exist.
    pub fn info(&self, id: &str) -> Result<Option<SessionEntry>> {
        Ok(self.info_with(id, &QueryOptions::default())?.0)
    }

    /// Like [`SessionApi::info`], with blocking/consistency options.
    pub fn info_with(
        &self,
        id: &str,
        options: &QueryOptions,
    ) -> Result<(Option<SessionEntry>, QueryMeta)> {
        let mut req = Request::new("GET", format!("/v1/session/info/{}", encode_component(id)));
        options.apply(&mut req);
        let resp = self.client.call(&req)?;
        let list: Vec<SessionEntry> = resp.json(&req.endpoint())?;
        Ok((list.into_iter().next(), resp.meta))
    }

    /// `GET /v1/session/list`: every session.
    pub fn list(&self) -> Result<Vec<SessionEntry>> {
        Ok(self.list_with(&QueryOptions::default())?.0)
    }

    /// Like [`SessionApi::list`], with blocking/consistency options.
    pub fn list_with(&self, options: &QueryOptions) -> Result<(Vec<SessionEntry>, QueryMeta)> {
        let mut req = Request::new("GET", "/v1/session/list");
        options.apply(&mut req);
        let resp = self.client.call(&req)?;
        Ok((resp.json(&req.endpoint())?, resp.meta))
    }

    /// `GET /v1/session/node/<node>`: the sessions of one node.
    pub fn node(&self, node: &str) -> Result<Vec<SessionEntry>> {
        let req = Request::new(
            "GET",
            format!("/v1/session/node/{}", encode_component(node)),
        );
        let resp = self.client.call(&req)?;
        resp.json(&req.endpoint())
    }
}

/// Interprets a renew answer: 404 means the session is gone.
pub(crate) fn renew_answer(req: &Request, resp: crate::http::Response) -> Result<SessionEntry> {
    if resp.status == 404 {
        let text = String::from_utf8_lossy(&resp.body).trim().to_string();
        return Err(Error::new(
            ErrorKind::SessionInvalidated,
            format!("session is gone (404 {text})"),
        )
        .with_endpoint(req.endpoint()));
    }
    let resp = crate::http::check(req, resp)?;
    let list: Vec<SessionEntry> = resp.json(&req.endpoint())?;
    list.into_iter().next().ok_or_else(|| {
        Error::new(ErrorKind::BadResponse, "renew answered an empty list")
            .with_endpoint(req.endpoint())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_body_sends_every_option() {
        let o = SessionOptions::new()
            .name("n")
            .node("node1")
            .ttl(Duration::from_secs(10))
            .lock_delay(Duration::ZERO)
            .behavior(Behavior::Delete)
            .node_checks(vec![])
            .service_check("svc:1");
        assert_eq!(
            o.to_json(),
            json!({"Name":"n","Node":"node1","TTL":"10s","LockDelay":"0s","Behavior":"delete",
                   "NodeChecks":[],"ServiceChecks":[{"ID":"svc:1"}]})
        );
        assert_eq!(
            SessionOptions::new().to_json(),
            json!({"Behavior":"release"})
        );
    }

    #[test]
    fn session_entry_decodes() {
        let e: SessionEntry = serde_json::from_str(
            r#"{"ID":"a","Name":"n","Node":"node1","LockDelay":15000000000,"Behavior":"release",
            "TTL":"15s","NodeChecks":["serfHealth"],"ServiceChecks":null,"CreateIndex":19,"ModifyIndex":19}"#,
        )
        .unwrap();
        assert_eq!(e.lock_delay(), Duration::from_secs(15));
        assert_eq!(e.ttl(), Some(Duration::from_secs(15)));
        assert_eq!(e.node_checks, Some(vec!["serfHealth".to_string()]));
    }
}
