//! The low-level session endpoints (`/v1/session/*`) and their types.

use std::time::Duration;

use serde::Deserialize;

use crate::foundations::error::{printable, Error, ErrorKind, Result, SHOWN_TEXT_MAX};
pub use crate::foundations::session_options::{Behavior, ServiceCheck, SessionOptions};
use crate::transport::http::{encode_component, QueryMeta, QueryOptions, Request};

/// `GET /v1/session/info/<id>`, interrupted by `close` and not bounded by any call scope:
/// the session monitor's read.
pub(crate) fn info_on(
    conn: &crate::transport::conn::Conn,
    id: &str,
) -> Result<Option<SessionEntry>> {
    info_within(conn, id, None)
}

/// The longest a loss signal waits to learn whether its session still exists (to name the
/// loss): a key hub hook asks, on the hub's thread, before it ends a holding whose key no
/// longer carries the session. A Consul that does not answer in time is taken as "exists",
/// and the holding ends as a key change.
pub(crate) const GONE_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// After a probe went unanswered, how long the next ones are skipped (taken as "exists"):
/// a session invalidated with a thousand keys must not hold the hub thread a thousand times
/// [`GONE_PROBE_TIMEOUT`] when Consul is slow.
const GONE_PROBE_QUIET: Duration = Duration::from_secs(2);

/// Whether Consul answers, within [`GONE_PROBE_TIMEOUT`], that session `id` no longer
/// exists (`false` when it exists, or when Consul does not answer in time, or when a probe
/// went unanswered within [`GONE_PROBE_QUIET`]).
pub(crate) fn gone(conn: &crate::transport::conn::Conn, id: &str) -> bool {
    let now = std::time::Instant::now();
    let quiet = &conn.probes_quiet_until;
    if crate::foundations::sync::lock(quiet).is_some_and(|until| now < until) {
        return false;
    }
    match info_within(conn, id, Some(GONE_PROBE_TIMEOUT)) {
        Ok(entry) => entry.is_none(),
        Err(e) => {
            if e.kind() == ErrorKind::Timeout {
                *crate::foundations::sync::lock(quiet) = Some(now + GONE_PROBE_QUIET);
            }
            false
        }
    }
}

fn info_within(
    conn: &crate::transport::conn::Conn,
    id: &str,
    timeout: Option<Duration>,
) -> Result<Option<SessionEntry>> {
    let mut req = Request::new("GET", format!("/v1/session/info/{}", encode_component(id)));
    req.timeout = timeout;
    let resp = conn.transport.send_on(&req, Some(&conn.closing))?;
    let resp = crate::transport::http::check(&req, resp)?;
    let list: Vec<SessionEntry> = resp.json(&req)?;
    Ok(list.into_iter().next())
}

/// `PUT /v1/session/<verb>/<id>` (`renew`, `destroy`), the ID sent as one
/// path segment: the request users send through [`SessionApi`] and the
/// library's own threads send for the sessions it manages (the renewer,
/// `close`).
pub(crate) fn session_request(verb: &str, id: &str) -> Request {
    Request::new(
        "PUT",
        format!("/v1/session/{verb}/{}", encode_component(id)),
    )
}

/// The one read of `GET /v1/session/list`: `send` sends it — a caller's
/// deadline-bounded send, or the session monitor's poll.
pub(crate) fn read_list(
    options: &QueryOptions,
    send: impl FnOnce(&Request) -> Result<crate::transport::http::Response>,
) -> Result<(Vec<SessionEntry>, QueryMeta)> {
    let mut req = Request::new("GET", "/v1/session/list");
    options.apply(&mut req);
    let resp = crate::transport::http::check(&req, send(&req)?)?;
    Ok((resp.json(&req)?, resp.meta))
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
    /// Every check the session is bound to, on any Consul version: `Checks`
    /// (the only form before 1.7.0), then `NodeChecks` and `ServiceChecks`,
    /// each ID once.
    pub fn bound_checks(&self) -> Vec<String> {
        let mut all: Vec<String> = Vec::new();
        let ids = self
            .checks
            .iter()
            .flatten()
            .chain(self.node_checks.iter().flatten())
            .chain(self.service_checks.iter().flatten().map(|c| &c.id));
        for id in ids {
            if !all.contains(id) {
                all.push(id.clone());
            }
        }
        all
    }

    /// The lock-delay as a duration.
    pub fn lock_delay(&self) -> Duration {
        Duration::from_nanos(self.lock_delay_ns)
    }

    /// The TTL parsed (None when absent or unparsable).
    pub fn ttl(&self) -> Option<Duration> {
        crate::foundations::godur::parse_go_duration(&self.ttl).filter(|d| !d.is_zero())
    }
}

/// The low-level session API; get one from [`Client::sessions`](crate::Client::sessions).
///
/// Sessions created here are not renewed or destroyed by the client; use
/// [`Client::create_session`](crate::Client::create_session) for managed sessions.
#[derive(Debug, Clone, Copy)]
pub struct SessionApi<'a> {
    pub(crate) conn: &'a crate::transport::conn::Conn,
}

#[derive(Deserialize)]
struct CreateAnswer {
    #[serde(rename = "ID")]
    id: String,
}

impl SessionApi<'_> {
    /// `PUT /v1/session/create`: creates a session, returns its ID.
    ///
    /// The ID must have the form Consul gives session IDs (a UUID,
    /// `8-4-4-4-12` hex digits); any other answer is an error of kind
    /// [`ErrorKind::BadResponse`], since the ID goes into URL paths and
    /// transactions afterwards.
    pub fn create(&self, options: &SessionOptions) -> Result<String> {
        options.validate()?;
        let mut req = Request::new("PUT", "/v1/session/create");
        req.json_body(&options.to_json());
        let resp = self.conn.call(&req).map_err(explain_ttl_refusal)?;
        let a: CreateAnswer = resp.json(&req)?;
        if !is_session_id(&a.id) {
            let e = Error::new(
                ErrorKind::BadResponse,
                format!(
                    "Consul answered a session ID that is not a UUID: {}",
                    quoted(&a.id)
                ),
            );
            return Err(resp.located(&req, e));
        }
        Ok(a.id)
    }

    /// `PUT /v1/session/destroy/<id>`: destroys a session (unknown IDs are fine).
    ///
    /// `id` is sent percent-encoded as one path segment; only an empty ID and
    /// the dot segments `.` and `..` (which would name another endpoint) are
    /// refused, with [`ErrorKind::InvalidArgument`].
    pub fn destroy(&self, id: &str) -> Result<()> {
        check_segment("session ID", id)?;
        self.conn.call(&session_request("destroy", id))?;
        Ok(())
    }

    /// `PUT /v1/session/renew/<id>`: renews a session and returns it as Consul
    /// now has it (use its TTL). An unknown session gives an error of kind
    /// [`ErrorKind::SessionInvalidated`]; an answer describing another session
    /// one of kind [`ErrorKind::BadResponse`]. `id` is checked as for
    /// [`SessionApi::destroy`].
    pub fn renew(&self, id: &str) -> Result<SessionEntry> {
        check_segment("session ID", id)?;
        let req = session_request("renew", id);
        renew_answer(&req, self.conn.send(&req)?)
    }

    /// `GET /v1/session/info/<id>`: the session, or `None` if it does not exist.
    pub fn info(&self, id: &str) -> Result<Option<SessionEntry>> {
        Ok(self.info_with(id, &QueryOptions::default())?.0)
    }

    /// Like [`SessionApi::info`], with blocking/consistency options.
    ///
    /// `id` is checked as for [`SessionApi::destroy`]; an answer describing
    /// another session is an error of kind [`ErrorKind::BadResponse`].
    pub fn info_with(
        &self,
        id: &str,
        options: &QueryOptions,
    ) -> Result<(Option<SessionEntry>, QueryMeta)> {
        let mut req = Request::new(
            "GET",
            format!("/v1/session/info/{}", path_segment("session ID", id)?),
        );
        options.apply(&mut req);
        let resp = self.conn.call(&req)?;
        let list: Vec<SessionEntry> = resp.json(&req)?;
        let entry = list.into_iter().next();
        if let Some(e) = &entry {
            check_answer_names(&req, &e.id)?;
        }
        Ok((entry, resp.meta))
    }

    /// `GET /v1/session/list`: every session.
    pub fn list(&self) -> Result<Vec<SessionEntry>> {
        Ok(self.list_with(&QueryOptions::default())?.0)
    }

    /// Like [`SessionApi::list`], with blocking/consistency options.
    pub fn list_with(&self, options: &QueryOptions) -> Result<(Vec<SessionEntry>, QueryMeta)> {
        read_list(options, |r| self.conn.send(r))
    }

    /// `GET /v1/session/node/<node>`: the sessions of one node. The node name is
    /// checked as the ID of [`SessionApi::destroy`].
    pub fn node(&self, node: &str) -> Result<Vec<SessionEntry>> {
        let req = Request::new(
            "GET",
            format!("/v1/session/node/{}", path_segment("node name", node)?),
        );
        let resp = self.conn.call(&req)?;
        resp.json(&req)
    }
}

/// Whether `id` has the form Consul gives session IDs: 36 characters, hex
/// digits in groups of 8-4-4-4-12 joined by `-`.
///
/// This is the check of `ParseUUID` in hashicorp/go-uuid, the package whose
/// `GenerateUUID` makes Consul's session IDs (`Session.Apply` in
/// `agent/consul/session_endpoint.go`) and whose format go-memdb's
/// `UUIDFieldIndex` enforces for sessions in older Consul versions. Like it,
/// hex digits of either case pass (Consul itself produces lowercase).
pub(crate) fn is_session_id(id: &str) -> bool {
    id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

/// A value from a server, quoted for a message: Rust string escapes, at most
/// 64 bytes of it, then `… (N bytes)`.
fn quoted(value: &str) -> String {
    const SHOWN: usize = 64;
    if value.len() <= SHOWN {
        return format!("{value:?}");
    }
    let mut end = SHOWN;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    format!("{:?}\u{2026} ({} bytes)", &value[..end], value.len())
}

/// A session ID or node name given by the caller, encoded as one URL path
/// segment.
///
/// Anything else is left to Consul (which answers "not found" for IDs it does
/// not know), but an empty value would address the collection rather than an
/// item and `.`/`..` would be resolved away by HTTP path normalisation (Go's
/// server redirects them elsewhere), so those three fail here.
pub(crate) fn path_segment(what: &str, value: &str) -> Result<String> {
    check_segment(what, value)?;
    Ok(encode_component(value))
}

/// [`path_segment`]'s check alone, for a value sent by a request built
/// elsewhere (or not sent as a path at all).
pub(crate) fn check_segment(what: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} must not be empty"),
        ));
    }
    if value == "." || value == ".." {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("{what} {value:?} is a dot segment, not a valid {what}"),
        ));
    }
    Ok(())
}

/// Checks that a session answer describes the session of the request path
/// (`.../<encoded id>`); Consul matches IDs without regard to case.
fn check_answer_names(req: &Request, answered: &str) -> Result<()> {
    let asked = req.path.rsplit_once('/').map_or("", |(_, id)| id);
    if encode_component(answered).eq_ignore_ascii_case(asked) {
        Ok(())
    } else {
        Err(Error::new(
            ErrorKind::BadResponse,
            format!(
                "Consul answered about another session: {}",
                quoted(answered)
            ),
        )
        .with_endpoint(req.endpoint()))
    }
}

/// Interprets a renew answer: 404 means the session is gone.
pub(crate) fn renew_answer(
    req: &Request,
    resp: crate::transport::http::Response,
) -> Result<SessionEntry> {
    if resp.status == 404 {
        let text = printable(resp.body.trim_ascii(), SHOWN_TEXT_MAX);
        let e = Error::new(
            ErrorKind::SessionInvalidated,
            format!("session is gone (404 {text})"),
        );
        return Err(resp.located(req, e));
    }
    let resp = crate::transport::http::check(req, resp)?;
    let list: Vec<SessionEntry> = resp.json(req)?;
    let entry = list.into_iter().next().ok_or_else(|| {
        Error::new(ErrorKind::BadResponse, "renew answered an empty list")
            .with_endpoint(req.endpoint())
    })?;
    check_answer_names(req, &entry.id)?;
    Ok(entry)
}

/// Consul refuses a TTL out of range with `Invalid Session TTL '<ns>', must be
/// between [<min>=<max>]` (nanoseconds, and a `=` where a `-` was meant; see
/// `agent/session_endpoint.go`). Says it in the user's units, naming the
/// server's setting; Consul's text stays in [`Error::server_text`].
fn explain_ttl_refusal(e: Error) -> Error {
    let Some(text) = e.server_text() else {
        return e;
    };
    // Through a client agent the server's text follows `rpc error making call: `.
    const PREFIX: &str = "Invalid Session TTL '";
    let Some(rest) = text.find(PREFIX).map(|at| &text[at + PREFIX.len()..]) else {
        return e;
    };
    let Some((ns, range)) = rest.split_once('\'') else {
        return e;
    };
    let Ok(ns) = ns.parse::<u64>() else {
        return e;
    };
    let ttl = crate::foundations::godur::human(Duration::from_nanos(ns));
    let bounds = range
        .split_once('[')
        .and_then(|(_, r)| r.split_once(']'))
        .and_then(|(r, _)| r.split_once('='));
    let explained = match bounds {
        Some((min, max)) => {
            let below = crate::foundations::godur::parse_go_duration(min)
                .is_some_and(|m| Duration::from_nanos(ns) < m);
            if below {
                format!(
                    "session TTL {ttl} is below the server's session_ttl_min of {min} (Consul accepts {min} to {max})"
                )
            } else {
                format!("session TTL {ttl} is above Consul's maximum of {max} (it accepts {min} to {max})")
            }
        }
        None => format!("session TTL {ttl} is out of the range the server accepts"),
    };
    e.prefixed(&explained)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
                   "Checks":["svc:1"],"NodeChecks":[],"ServiceChecks":[{"ID":"svc:1"}]})
        );
        assert_eq!(
            SessionOptions::new().node_checks(vec![]).to_json(),
            json!({"Behavior":"release","Checks":[],"NodeChecks":[]})
        );
        assert_eq!(
            SessionOptions::new().service_check("svc:1").to_json(),
            json!({"Behavior":"release","Checks":["serfHealth","svc:1"],
                   "NodeChecks":["serfHealth"],"ServiceChecks":[{"ID":"svc:1"}]})
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
        assert_eq!(e.bound_checks(), vec!["serfHealth".to_string()]);
        // Consul before 1.7.0 has only `Checks`.
        let e: SessionEntry = serde_json::from_str(
            r#"{"ID":"a","Name":"","Node":"n","Checks":["serfHealth","svc:1"],"LockDelay":0,
            "Behavior":"release","TTL":"","CreateIndex":5,"ModifyIndex":5}"#,
        )
        .unwrap();
        assert_eq!(e.node_checks, None);
        assert_eq!(
            e.bound_checks(),
            vec!["serfHealth".to_string(), "svc:1".to_string()]
        );
    }

    #[test]
    fn session_ids_follow_go_uuid_parse() {
        for ok in [
            "adf4238a-882b-9ddc-4a9d-5b6758e4159e",
            "ADF4238A-882B-9DDC-4A9D-5B6758E4159E",
            "00000000-0000-0000-0000-000000000000",
        ] {
            assert!(is_session_id(ok), "{ok}");
        }
        for bad in [
            "",
            "../../v1/kv/x?y=#z",
            "adf4238a-882b-9ddc-4a9d-5b6758e4159",
            "adf4238a-882b-9ddc-4a9d-5b6758e4159e0",
            "adf4238a0882b-9ddc-4a9d-5b6758e4159e",
            "adf4238a-882b-9ddc-4a9d-5b6758e4159g",
            "adf4238a-882b-9ddc-4a9d+5b6758e4159e",
            " adf4238a-882b-9ddc-4a9d-5b6758e4159",
            "adf4238a-882b-9ddc-4a9d-5b6758e4159\u{e9}",
            "{df4238a-882b-9ddc-4a9d-5b6758e4159}",
        ] {
            assert!(!is_session_id(bad), "{bad}");
        }
    }

    #[test]
    fn server_values_are_quoted_safely() {
        assert_eq!(quoted(""), "\"\"");
        assert_eq!(quoted("a\u{1b}[0m\"b"), "\"a\\u{1b}[0m\\\"b\"");
        let long = "\u{fc}".repeat(100);
        assert_eq!(
            quoted(&long),
            format!("{:?}\u{2026} (200 bytes)", "\u{fc}".repeat(32))
        );
    }

    #[test]
    fn user_ids_become_one_path_segment() {
        assert_eq!(
            path_segment("session ID", "a/b?c#d").unwrap(),
            "a%2Fb%3Fc%23d"
        );
        assert_eq!(path_segment("session ID", "...").unwrap(), "...");
        for bad in ["", ".", ".."] {
            let e = path_segment("session ID", bad).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}");
        }
    }

    #[test]
    fn answers_must_name_the_session_asked_for() {
        let id = "adf4238a-882b-9ddc-4a9d-5b6758e4159e";
        let req = Request::new("PUT", format!("/v1/session/renew/{id}"));
        assert!(check_answer_names(&req, id).is_ok());
        assert!(check_answer_names(&req, &id.to_uppercase()).is_ok());
        let e = check_answer_names(&req, "00000000-0000-0000-0000-000000000000").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadResponse);
        let req = Request::new("GET", "/v1/session/info/a%2Fb");
        assert!(check_answer_names(&req, "a/b").is_ok());
    }
}
