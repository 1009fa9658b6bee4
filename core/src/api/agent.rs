//! The agent's check and service endpoints (`/v1/agent/check/*`,
//! `/v1/agent/service/*`): what a process needs to bind its sessions to its
//! own health.
//!
//! The recipe ("Sessions bound to health checks" in the README):
//!
//! 1. register a TTL check ([`Agent::check_register`]) and report it passing
//!    ([`Agent::check_pass`]) — a TTL check starts critical, and Consul
//!    refuses to create a session bound to a check that is not passing;
//! 2. create the session with the check ([`SessionOptions::node_checks`] for a
//!    check of the node, [`SessionOptions::service_check`] for one registered
//!    with a [`TtlCheck::service_id`]), usually with a lock-delay of zero;
//! 3. keep calling [`Agent::check_pass`] more often than the TTL while the
//!    process is healthy;
//! 4. when it stops (unhealthy, hung, dead), the check goes critical at the
//!    end of its TTL, Consul invalidates the session and every lock it holds
//!    is released: the holders' lost callbacks fire and another process can
//!    acquire them.
//!
//! [`SessionOptions::node_checks`]: crate::SessionOptions::node_checks
//! [`SessionOptions::service_check`]: crate::SessionOptions::service_check

use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::api::session_api::{check_segment, path_segment};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::godur::format_go_duration;
use crate::transport::http::Request;

/// The status of a health check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CheckStatus {
    /// Healthy. Sessions may be bound to the check.
    Passing,
    /// Degraded. Sessions stay valid, but a new session cannot be bound to it.
    Warning,
    /// Failing: sessions bound to the check are invalidated.
    Critical,
}

impl CheckStatus {
    /// The wire name (`"passing"`, `"warning"`, `"critical"`).
    pub fn as_str(self) -> &'static str {
        match self {
            CheckStatus::Passing => "passing",
            CheckStatus::Warning => "warning",
            CheckStatus::Critical => "critical",
        }
    }

    /// Parses a wire name (as [`CheckStatus::as_str`] gives them).
    pub fn parse(name: &str) -> Option<CheckStatus> {
        match name {
            "passing" => Some(CheckStatus::Passing),
            "warning" => Some(CheckStatus::Warning),
            "critical" => Some(CheckStatus::Critical),
            _ => None,
        }
    }
}

/// A TTL check for [`Agent::check_register`]: the process reports its health
/// itself ([`Agent::check_pass`] and friends); without a report for `ttl` the
/// check turns critical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TtlCheck {
    /// The check ID (unique on the agent; a session names it).
    pub id: String,
    /// Human-readable name (defaults to the ID).
    pub name: String,
    /// How long a report stays valid. Must be positive.
    pub ttl: Duration,
    /// The service the check belongs to (`None`: a check of the node).
    pub service_id: Option<String>,
    /// Free-form notes.
    pub notes: Option<String>,
    /// Initial status (`None`: Consul's default for TTL checks, critical).
    pub status: Option<CheckStatus>,
    /// Consul deregisters the check's service after it has been critical
    /// this long (at least one minute; Consul's reaper runs every 30 s).
    pub deregister_critical_service_after: Option<Duration>,
}

impl TtlCheck {
    /// A node check `id` with time-to-live `ttl`.
    pub fn new(id: impl Into<String>, ttl: Duration) -> TtlCheck {
        let id = id.into();
        TtlCheck {
            name: id.clone(),
            id,
            ttl,
            service_id: None,
            notes: None,
            status: None,
            deregister_critical_service_after: None,
        }
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Makes it a check of service `service_id` (registered before).
    pub fn service_id(mut self, service_id: impl Into<String>) -> Self {
        self.service_id = Some(service_id.into());
        self
    }

    /// Sets the notes.
    pub fn notes(mut self, notes: impl Into<String>) -> Self {
        self.notes = Some(notes.into());
        self
    }

    /// Sets the initial status.
    pub fn status(mut self, status: CheckStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// The JSON body of `PUT /v1/agent/check/register`.
    pub(crate) fn to_json(&self) -> Result<Value> {
        if self.id.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "check ID must not be empty",
            ));
        }
        check_segment("check ID", &self.id)?;
        if self.ttl.is_zero() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                format!("check {:?}: TTL must be positive", self.id),
            ));
        }
        let mut m = Map::new();
        m.insert("ID".into(), json!(self.id));
        let name = if self.name.is_empty() {
            &self.id
        } else {
            &self.name
        };
        m.insert("Name".into(), json!(name));
        m.insert("TTL".into(), json!(format_go_duration(self.ttl)));
        if let Some(s) = &self.service_id {
            if s.is_empty() {
                return Err(Error::new(
                    ErrorKind::InvalidArgument,
                    format!("check {:?}: service ID must not be empty", self.id),
                ));
            }
            m.insert("ServiceID".into(), json!(s));
        }
        if let Some(n) = &self.notes {
            m.insert("Notes".into(), json!(n));
        }
        if let Some(s) = self.status {
            m.insert("Status".into(), json!(s.as_str()));
        }
        if let Some(d) = self.deregister_critical_service_after {
            m.insert(
                "DeregisterCriticalServiceAfter".into(),
                json!(format_go_duration(d)),
            );
        }
        Ok(Value::Object(m))
    }
}

/// A service for [`Agent::service_register`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceRegistration {
    /// The service name. Must not be empty.
    pub name: String,
    /// The instance ID (`None`: the name, as Consul does).
    pub id: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Address (`None`: the node's).
    pub address: Option<String>,
    /// Port (`None`: not sent, i.e. 0).
    pub port: Option<u16>,
}

impl ServiceRegistration {
    /// A service called `name`.
    pub fn new(name: impl Into<String>) -> ServiceRegistration {
        ServiceRegistration {
            name: name.into(),
            ..ServiceRegistration::default()
        }
    }

    /// Sets the instance ID.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Adds a tag.
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets the address.
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.address = Some(address.into());
        self
    }

    /// Sets the port.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// The JSON body of `PUT /v1/agent/service/register`.
    pub(crate) fn to_json(&self) -> Result<Value> {
        if self.name.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "service name must not be empty",
            ));
        }
        let mut m = Map::new();
        m.insert("Name".into(), json!(self.name));
        if let Some(id) = &self.id {
            path_segment("service ID", id)?;
            m.insert("ID".into(), json!(id));
        }
        if !self.tags.is_empty() {
            m.insert("Tags".into(), json!(self.tags));
        }
        if let Some(a) = &self.address {
            m.insert("Address".into(), json!(a));
        }
        if let Some(p) = self.port {
            m.insert("Port".into(), json!(p));
        }
        Ok(Value::Object(m))
    }
}

/// The agent's check and service endpoints; get one from [`Client::agent`](crate::Client::agent).
///
/// Every call is one request bounded by the client's request timeout. Errors
/// carry Consul's text: an unknown check ID is [`ErrorKind::NotFound`] or
/// [`ErrorKind::Server`] depending on the Consul version (`Unknown check ID`,
/// `CheckID "x" does not have associated TTL`).
#[derive(Debug, Clone, Copy)]
pub struct Agent<'a> {
    pub(crate) conn: &'a crate::transport::conn::Conn,
}

impl Agent<'_> {
    /// `PUT /v1/agent/check/register`: registers (or replaces) a TTL check.
    pub fn check_register(&self, check: &TtlCheck) -> Result<()> {
        let mut req = Request::new("PUT", "/v1/agent/check/register");
        req.json_body(&check.to_json()?);
        self.conn.call(&req)?;
        Ok(())
    }

    /// `PUT /v1/agent/check/deregister/<id>`: removes a check. Sessions bound
    /// to it are invalidated.
    pub fn check_deregister(&self, id: &str) -> Result<()> {
        let req = Request::new(
            "PUT",
            format!(
                "/v1/agent/check/deregister/{}",
                path_segment("check ID", id)?
            ),
        );
        self.conn.call(&req)?;
        Ok(())
    }

    /// `PUT /v1/agent/check/pass/<id>`: reports a TTL check passing (its TTL
    /// starts again), with an optional note as its output.
    pub fn check_pass(&self, id: &str, note: Option<&str>) -> Result<()> {
        self.report("pass", id, note)
    }

    /// `PUT /v1/agent/check/warn/<id>`: reports a TTL check warning. Bound
    /// sessions stay valid.
    pub fn check_warn(&self, id: &str, note: Option<&str>) -> Result<()> {
        self.report("warn", id, note)
    }

    /// `PUT /v1/agent/check/fail/<id>`: reports a TTL check critical; the
    /// sessions bound to it are invalidated.
    pub fn check_fail(&self, id: &str, note: Option<&str>) -> Result<()> {
        self.report("fail", id, note)
    }

    /// `PUT /v1/agent/check/update/<id>`: sets a TTL check's status and output
    /// (`{"Status","Output"}`).
    pub fn check_update(&self, id: &str, status: CheckStatus, output: Option<&str>) -> Result<()> {
        let mut req = Request::new(
            "PUT",
            format!("/v1/agent/check/update/{}", path_segment("check ID", id)?),
        );
        let mut body = json!({ "Status": status.as_str() });
        if let Some(o) = output {
            body["Output"] = json!(o);
        }
        req.json_body(&body);
        self.conn.call(&req)?;
        Ok(())
    }

    /// `PUT /v1/agent/service/register`: registers (or replaces) a service.
    pub fn service_register(&self, service: &ServiceRegistration) -> Result<()> {
        let mut req = Request::new("PUT", "/v1/agent/service/register");
        req.json_body(&service.to_json()?);
        self.conn.call(&req)?;
        Ok(())
    }

    /// `PUT /v1/agent/service/deregister/<id>`: removes a service and its checks.
    pub fn service_deregister(&self, id: &str) -> Result<()> {
        let req = Request::new(
            "PUT",
            format!(
                "/v1/agent/service/deregister/{}",
                path_segment("service ID", id)?
            ),
        );
        self.conn.call(&req)?;
        Ok(())
    }

    fn report(&self, verb: &str, id: &str, note: Option<&str>) -> Result<()> {
        let mut req = Request::new(
            "PUT",
            format!("/v1/agent/check/{verb}/{}", path_segment("check ID", id)?),
        );
        if let Some(n) = note {
            req.param("note", n);
        }
        self.conn.call(&req)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttl_check_body() {
        let c = TtlCheck::new("worker-1", Duration::from_millis(1500))
            .service_id("web")
            .notes("n")
            .status(CheckStatus::Passing);
        assert_eq!(
            c.to_json().unwrap(),
            json!({"ID":"worker-1","Name":"worker-1","TTL":"1500ms","ServiceID":"web",
                   "Notes":"n","Status":"passing"})
        );
        let e = TtlCheck::new("x", Duration::ZERO).to_json().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = TtlCheck::new("", Duration::from_secs(1))
            .to_json()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn service_body() {
        let s = ServiceRegistration::new("web")
            .id("web-1")
            .tag("a")
            .port(80);
        assert_eq!(
            s.to_json().unwrap(),
            json!({"Name":"web","ID":"web-1","Tags":["a"],"Port":80})
        );
        let e = ServiceRegistration::new("").to_json().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    }

    #[test]
    fn statuses_round_trip() {
        for s in [
            CheckStatus::Passing,
            CheckStatus::Warning,
            CheckStatus::Critical,
        ] {
            assert_eq!(CheckStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(CheckStatus::parse("ok"), None);
    }
}
