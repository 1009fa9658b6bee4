//! `/v1/session/*`.

use serde_json::{json, Map, Value};

use crate::endpoints::access as acl;
use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode::{field, json_kind};
use crate::godur::{format_go_duration, parse_go_duration};
use crate::query::{blocking, parse_opts, reject_enterprise, Reply, Run};
use crate::state::{
    Behavior, NewSession, ServiceCheck, Session, Topic, SERF_CHECK_ID, SESSION_TTL_MAX,
};
use crate::version::ConsulVersion;

/// Consul converts lock-delays below this many nanoseconds into seconds (`15` means 15 s).
const LOCK_DELAY_MIN_THRESHOLD: i64 = 1000;

/// A session as Consul's JSON has it (CE field order). Before 1.7.0 the only check list was
/// `Checks`, between `Node` and `LockDelay` (`structs.Session` of 1.0 to 1.6).
pub(crate) fn session_json(s: &Session, version: ConsulVersion) -> Value {
    let mut m = Map::new();
    if version.legacy_session_checks() {
        m.insert("ID".into(), json!(s.id));
        m.insert("Name".into(), json!(s.name));
        m.insert("Node".into(), json!(s.node));
        m.insert("Checks".into(), json!(s.checks));
        m.insert("LockDelay".into(), json!(s.lock_delay_ns));
        m.insert("Behavior".into(), json!(s.behavior.as_str()));
        m.insert("TTL".into(), json!(s.ttl));
        m.insert("CreateIndex".into(), json!(s.create_index));
        m.insert("ModifyIndex".into(), json!(s.create_index));
        return Value::Object(m);
    }
    m.insert("ID".into(), json!(s.id));
    m.insert("Name".into(), json!(s.name));
    m.insert("Node".into(), json!(s.node));
    m.insert("LockDelay".into(), json!(s.lock_delay_ns));
    m.insert("Behavior".into(), json!(s.behavior.as_str()));
    m.insert("TTL".into(), json!(s.ttl));
    m.insert("NodeChecks".into(), json!(s.node_checks));
    let svc = s.service_checks.as_ref().map(|v| {
        v.iter()
            .map(|c| json!({"ID": c.id, "Namespace": c.namespace}))
            .collect::<Vec<_>>()
    });
    m.insert("ServiceChecks".into(), json!(svc));
    if let Some(c) = s.checks.as_ref().filter(|c| !c.is_empty()) {
        m.insert("Checks".into(), json!(c));
    }
    m.insert("CreateIndex".into(), json!(s.create_index));
    m.insert("ModifyIndex".into(), json!(s.create_index));
    Value::Object(m)
}

/// Routes the `/v1/session/` family. `pattern` is the matched route, `rest` the path after it.
pub(crate) async fn handle(ctx: &Ctx, pattern: &str, rest: &str, body: &[u8]) -> Reply {
    let r = match pattern {
        "/v1/session/create" => create(ctx, body),
        "/v1/session/destroy/" => destroy(ctx, rest),
        "/v1/session/renew/" => renew(ctx, rest),
        "/v1/session/info/" => read(ctx, Listing::Info(rest)).await,
        "/v1/session/node/" => read(ctx, Listing::Node(rest)).await,
        _ => read(ctx, Listing::All).await,
    };
    r.unwrap_or_else(|e| e)
}

fn type_error(v: &Value, field: &str, go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field Session.{field} of type {go_type}",
        json_kind(v)
    )
}

fn decode_string(obj: &Map<String, Value>, name: &str, out: &mut String) -> Result<(), String> {
    match field(obj, name) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(s)) => {
            *out = s.clone();
            Ok(())
        }
        Some(v) => Err(type_error(v, name, "string")),
    }
}

fn decode_strings(obj: &Map<String, Value>, name: &str) -> Result<Option<Vec<String>>, String> {
    match field(obj, name) {
        None => Ok(None),
        Some(Value::Null) => Ok(Some(Vec::new())),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => Ok(s.clone()),
                Value::Null => Ok(String::new()),
                v => Err(type_error(v, name, "string")),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => Err(type_error(v, name, "[]string")),
    }
}

/// The decoded create body, with Consul's defaults applied and before the check fix-up.
struct CreateBody {
    name: String,
    node: String,
    lock_delay_ns: i64,
    behavior: String,
    ttl: String,
    node_checks: Vec<String>,
    service_checks: Option<Vec<ServiceCheck>>,
    checks: Vec<String>,
    /// Before 1.7.0, the only check list: `Checks` (default `["serfHealth"]`; `None` for a
    /// `null` in the body).
    legacy_checks: Option<Vec<String>>,
}

/// Decodes a session-create body as `structs.Session.UnmarshalJSON` does on top of the
/// handler's defaults. Errors are the text after `Request decode failed: `. With `legacy`
/// (before 1.7.0) it decodes as `FixupChecks` plus mapstructure did: `NodeChecks` and
/// `ServiceChecks` are unknown fields, ignored, and a `Checks` key (any letter case) replaces
/// the default list.
fn decode_create(body: &[u8], node: &str, legacy: bool) -> Result<CreateBody, String> {
    let mut b = CreateBody {
        name: String::new(),
        node: node.to_string(),
        lock_delay_ns: 15_000_000_000,
        behavior: "release".into(),
        ttl: String::new(),
        node_checks: vec![SERF_CHECK_ID.into()],
        service_checks: None,
        checks: vec![SERF_CHECK_ID.into()],
        legacy_checks: Some(vec![SERF_CHECK_ID.into()]),
    };
    if body.is_empty() {
        return Ok(b);
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| go_syntax_error(&e))?;
    let Value::Object(obj) = v else {
        return Err(format!(
            "json: cannot unmarshal {} into Go value of type structs.Session",
            json_kind(&v)
        ));
    };
    decode_string(&obj, "Name", &mut b.name)?;
    decode_string(&obj, "Node", &mut b.node)?;
    decode_string(&obj, "Behavior", &mut b.behavior)?;
    decode_string(&obj, "TTL", &mut b.ttl)?;
    if legacy {
        match field(&obj, "Checks") {
            None => {}
            Some(Value::Null) => b.legacy_checks = None,
            Some(_) => b.legacy_checks = decode_strings(&obj, "Checks")?,
        }
        decode_lock_delay(&obj, &mut b)?;
        return Ok(b);
    }
    if let Some(v) = decode_strings(&obj, "NodeChecks")? {
        b.node_checks = v;
    }
    if let Some(v) = decode_strings(&obj, "Checks")? {
        b.checks = v;
    }
    match field(&obj, "ServiceChecks") {
        None => {}
        Some(Value::Null) => b.service_checks = None,
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                let Value::Object(o) = item else {
                    return Err(type_error(item, "ServiceChecks", "structs.ServiceCheck"));
                };
                let mut c = ServiceCheck {
                    id: String::new(),
                    namespace: String::new(),
                };
                decode_string(o, "ID", &mut c.id)?;
                decode_string(o, "Namespace", &mut c.namespace)?;
                out.push(c);
            }
            b.service_checks = Some(out);
        }
        Some(v) => return Err(type_error(v, "ServiceChecks", "[]structs.ServiceCheck")),
    }
    decode_lock_delay(&obj, &mut b)?;
    Ok(b)
}

/// `LockDelay`: a Go duration string or nanoseconds; below 1000 it counts seconds.
fn decode_lock_delay(obj: &Map<String, Value>, b: &mut CreateBody) -> Result<(), String> {
    if let Some(v) = field(obj, "LockDelay") {
        if !v.is_null() {
            let mut ns: i64 = match v {
                Value::String(s) => parse_go_duration(s)?,
                Value::Number(n) => n.as_f64().map(|f| f as i64).unwrap_or(0),
                _ => 0,
            };
            if ns < LOCK_DELAY_MIN_THRESHOLD {
                ns = ns.saturating_mul(1_000_000_000);
            }
            b.lock_delay_ns = ns;
        }
    }
    Ok(())
}

/// A Go-flavoured text for a JSON syntax error.
fn go_syntax_error(e: &serde_json::Error) -> String {
    if e.is_eof() {
        "unexpected EOF".to_string()
    } else {
        format!(
            "invalid character in JSON at line {} column {}: {e}",
            e.line(),
            e.column()
        )
    }
}

fn create(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    let dc = ctx.query.get("dc").to_string();
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    reject_enterprise(&ctx.query, &ctx.headers)?;
    let pretty = ctx.pretty();
    let legacy = ctx.shared.cfg.consul_version.legacy_session_checks();
    let decoded = if ctx.content_length.unwrap_or(body.len() as u64) > 0 {
        decode_create(body, &ctx.shared.cfg.node_name, legacy)
    } else {
        decode_create(b"", &ctx.shared.cfg.node_name, legacy)
    };
    let b = decoded.map_err(|e| Reply::text(400, format!("Request decode failed: {e}")))?;
    let (node_checks, service_checks, checks) = if legacy {
        (Vec::new(), None, b.legacy_checks)
    } else {
        // Consul's fixupEmptySessionChecks: an empty `Checks` empties NodeChecks too; a
        // default `Checks` (just serfHealth) or an empty NodeChecks drops `Checks`; otherwise
        // both apply.
        let mut node_checks = b.node_checks;
        let is_default = b.checks.len() == 1 && b.checks[0] == SERF_CHECK_ID;
        if b.checks.is_empty() {
            node_checks = Vec::new();
        }
        let checks =
            (!b.checks.is_empty() && !is_default && !node_checks.is_empty()).then_some(b.checks);
        (node_checks, b.service_checks, checks)
    };
    ctx.rpc_check(&dc)?;
    if b.node.is_empty() {
        return Err(Reply::text(500, "Must provide Node"));
    }
    acl::require(ctx, token.as_deref(), "session:write", &b.node)?;
    let behavior = match b.behavior.as_str() {
        "" | "release" => Behavior::Release,
        "delete" => Behavior::Delete,
        other => {
            return Err(Reply::text(
                500,
                format!("Invalid Behavior setting '{other}'"),
            ))
        }
    };
    let mut ttl_dur = None;
    if !b.ttl.is_empty() {
        let ns = parse_go_duration(&b.ttl)
            .map_err(|e| Reply::text(500, format!("Session TTL '{}' invalid: {e}", b.ttl)))?;
        let min = ctx.shared.cfg.session_ttl_min.as_nanos() as i64;
        let max = SESSION_TTL_MAX.as_nanos() as i64;
        if ns != 0 && (ns < min || ns > max) {
            return Err(Reply::text(
                500,
                format!(
                    "Invalid Session TTL '{ns}', must be between [{}={}]",
                    format_go_duration(min),
                    format_go_duration(max)
                ),
            ));
        }
        if ns > 0 {
            ttl_dur = Some(std::time::Duration::from_nanos(ns as u64));
        }
    }
    let req = NewSession {
        name: b.name,
        node: b.node,
        lock_delay_ns: b.lock_delay_ns,
        behavior,
        ttl: b.ttl,
        ttl_dur,
        node_checks,
        service_checks,
        checks,
    };
    match ctx.shared.write(|st| st.session_create(req)) {
        Ok(id) => Ok(Reply::json(200, &json!({ "ID": id }), pretty)),
        Err(crate::state::ApplyError::Text(t)) => Err(Reply::text(500, t)),
    }
}

fn destroy(ctx: &Ctx, id: &str) -> Result<Reply, Reply> {
    let dc = ctx.query.get("dc").to_string();
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    reject_enterprise(&ctx.query, &ctx.headers)?;
    if id.is_empty() {
        return Err(Reply::text(400, "Missing session"));
    }
    ctx.rpc_check(&dc)?;
    if let Some(node) = ctx.shared.read(|st| st.session(id).map(|s| s.node.clone())) {
        acl::require(ctx, token.as_deref(), "session:write", &node)?;
        ctx.shared.write(|st| st.session_invalidate(id));
    }
    Ok(Reply::json(200, &json!(true), ctx.pretty()))
}

fn renew(ctx: &Ctx, id: &str) -> Result<Reply, Reply> {
    let opts = parse_opts(&ctx.query, &ctx.headers, ctx.shared.cfg.pretty_json())?;
    reject_enterprise(&ctx.query, &ctx.headers)?;
    if id.is_empty() {
        return Err(Reply::text(400, "Missing session"));
    }
    ctx.rpc_check(&opts.dc)?;
    if let Some(node) = ctx.shared.read(|st| st.session(id).map(|s| s.node.clone())) {
        acl::require(ctx, opts.token.as_deref(), "session:write", &node)?;
    }
    match ctx.shared.write(|st| st.session_renew(id)) {
        Some(s) => {
            let v = session_json(&s, ctx.shared.cfg.consul_version);
            Ok(Reply::json(200, &json!([v]), opts.pretty))
        }
        None => Err(Reply::text(404, format!("Session id '{id}' not found"))),
    }
}

enum Listing<'a> {
    Info(&'a str),
    Node(&'a str),
    All,
}

async fn read(ctx: &Ctx, which: Listing<'_>) -> Result<Reply, Reply> {
    let opts = parse_opts(&ctx.query, &ctx.headers, ctx.shared.cfg.pretty_json())?;
    reject_enterprise(&ctx.query, &ctx.headers)?;
    match which {
        Listing::Info("") => return Err(Reply::text(400, "Missing session")),
        Listing::Node("") => return Err(Reply::text(400, "Missing node name")),
        _ => {}
    }
    let access = acl::resolve(ctx, opts.token.as_deref())?;
    ctx.rpc_check(&opts.dc)?;
    let run = blocking(&ctx.shared, &opts, Topic::Sessions, |st| {
        let list = match which {
            Listing::Info(id) => st.session(id).cloned().into_iter().collect(),
            Listing::Node(n) => st.sessions_on_node(n),
            Listing::All => st.sessions_sorted(),
        };
        // Sessions the token may not read are left out (`filterACL`: session:read on the
        // session's node).
        let all = list.len();
        let list: Vec<Session> = list
            .into_iter()
            .filter(|s| access.allows("session:read", &s.node))
            .collect();
        Run {
            index: st.sessions_index(),
            value: (all != list.len(), list),
            not_found: false,
        }
    })
    .await;
    let version = ctx.shared.cfg.consul_version;
    let (filtered, list) = run.value;
    let body: Vec<Value> = list.iter().map(|s| session_json(s, version)).collect();
    let r = Reply::json(200, &Value::Array(body), opts.pretty).with_meta(run.index);
    Ok(crate::endpoints::kv::filtered_header(r, filtered, &opts))
}
