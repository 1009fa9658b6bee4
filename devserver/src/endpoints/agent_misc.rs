//! The rest of `/v1/agent/` (metrics, monitor, host, version, join/leave, ACL agent
//! tokens, local service health), and `/v1/status/peers`. Texts follow
//! `agent/agent_endpoint.go`.

use hyper::Method;
use serde_json::{json, Value};

use crate::endpoints::catalog_json;
use crate::endpoints::ctx::Ctx;
use crate::query::Reply;
use crate::serf::Pool;
use crate::state::CheckStatus;

/// Log levels `consul monitor` accepts (`logging.ValidateLogLevel`).
const LOG_LEVELS: &[&str] = &["trace", "debug", "info", "warn", "err", "error"];
/// `token_type`s of `PUT /v1/agent/token/<type>` (`AgentToken`).
const TOKEN_TYPES: &[&str] = &[
    "default",
    "acl_token",
    "agent",
    "acl_agent_token",
    "agent_recovery",
    "agent_master",
    "acl_agent_master_token",
    "replication",
    "acl_replication_token",
    "config_file_service_registration",
    "dns",
];

/// Routes the remaining agent endpoints.
pub(crate) fn handle(
    ctx: &Ctx,
    _method: &Method,
    pattern: &str,
    rest: &str,
    body: &[u8],
) -> Result<Reply, Reply> {
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    let t = token.as_deref();
    let node = ctx.shared.cfg.node_name.clone();
    match pattern {
        "/v1/agent/metrics" => {
            crate::endpoints::access::require(ctx, t, "agent:read", &node)?;
            if ctx.query.get("format") == "prometheus" {
                // Without prometheus_retention_time Consul answers 200 with no metrics.
                return Ok(Reply::text(200, "").with(
                    "x-consul-reason",
                    "Prometheus is not enabled since its retention time is not positive",
                ));
            }
            let now = crate::godur::rfc3339(std::time::SystemTime::now());
            let ts = format!("{} +0000 UTC", now.replace('T', " ").trim_end_matches('Z'));
            Ok(Reply::json(
                200,
                &json!({"Timestamp": ts, "Gauges": runtime_gauges(), "Points": [], "Counters": [], "Samples": []}),
                ctx.pretty(),
            ))
        }
        "/v1/agent/monitor" => {
            crate::endpoints::access::require(ctx, t, "agent:read", &node)?;
            let level = ctx.query.get("loglevel");
            let level = if level.is_empty() { "info" } else { level };
            if !LOG_LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
                return Err(Reply::text(400, format!("Unknown log level: {level}")));
            }
            Ok(monitor(ctx, &level.to_ascii_lowercase()))
        }
        "/v1/agent/host" => {
            crate::endpoints::access::require(ctx, t, "operator:read", "")?;
            Ok(Reply::json(
                200,
                &json!({"Memory": {}, "CPU": [], "Host": {"os": std::env::consts::OS}, "Disk": {}, "CollectionTime": 0, "Errors": null}),
                ctx.pretty(),
            ))
        }
        "/v1/agent/version" => Ok(Reply::json(
            200,
            &json!({"SHA": "", "BuildDate": "2023-01-27T00:00:00Z", "HumanVersion": ctx.shared.cfg.consul_version.to_string(), "FIPS": ""}),
            ctx.pretty(),
        )),
        "/v1/agent/force-leave/" => {
            crate::endpoints::access::require(ctx, t, "operator:write", "")?;
            // `ForceLeave`: a member this agent knows, itself or one it joined.
            let known = [Pool::Lan, Pool::Wan]
                .into_iter()
                .flat_map(|p| ctx.shared.serf.others(p))
                .any(|m| m["Name"] == rest);
            if rest == node || known {
                return Ok(Reply::text(200, ""));
            }
            Err(Reply::text(
                500,
                format!("agent: No node found with name '{rest}'"),
            ))
        }
        "/v1/agent/token/" => agent_token(ctx, t, rest, body),
        "/v1/agent/health/service/id/" => health_by_id(ctx, rest),
        "/v1/agent/health/service/name/" => health_by_name(ctx, rest),
        _ => Err(Reply::text(
            404,
            "Invalid URL path: not a recognized HTTP API endpoint\n",
        )),
    }
}

/// `PUT /v1/agent/token/<type>`: 401 with ACLs off; a known type with `acl:write` is accepted
/// (and not used: the dev server has one management token).
fn agent_token(ctx: &Ctx, t: Option<&str>, kind: &str, body: &[u8]) -> Result<Reply, Reply> {
    if !ctx.acls_enabled() {
        return Err(Reply::text(401, "ACL support disabled"));
    }
    crate::endpoints::access::require(ctx, t, "agent:write", &ctx.shared.cfg.node_name)?;
    crate::endpoints::decode::object(body, "api.AgentToken")?;
    if !TOKEN_TYPES.contains(&kind) {
        return Err(Reply::text(404, format!("Token {kind:?} is unknown")));
    }
    Ok(Reply::text(200, ""))
}

/// The aggregated status of some checks and its HTTP code (`agentHealthService`): passing 200,
/// warning 429, critical 503.
fn aggregate(statuses: &[CheckStatus]) -> (u16, &'static str) {
    match statuses.iter().max() {
        Some(CheckStatus::Critical) => (503, "critical"),
        Some(CheckStatus::Warning) => (429, "warning"),
        _ => (200, "passing"),
    }
}

fn service_health(ctx: &Ctx, id: &str) -> Option<(u16, &'static str, Value)> {
    let node = ctx.shared.cfg.node_name.clone();
    let dc = ctx.shared.cfg.datacenter.clone();
    ctx.shared.read(|st| {
        let svc = st.service(&node, id)?;
        let checks: Vec<_> = st
            .node_checks(&node)
            .into_iter()
            .filter(|c| c.service_id == id)
            .collect();
        let (code, status) = aggregate(&checks.iter().map(|c| c.status).collect::<Vec<_>>());
        let v = json!({
            "AggregatedStatus": status,
            "Service": catalog_json::agent_service(svc, &dc),
            "Checks": checks.into_iter().map(catalog_json::check).collect::<Vec<_>>(),
        });
        Some((code, status, v))
    })
}

fn text_wanted(ctx: &Ctx) -> bool {
    let accept = ctx
        .headers
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    accept.starts_with("text/plain") || ctx.query.get("format") == "text"
}

fn health_by_id(ctx: &Ctx, id: &str) -> Result<Reply, Reply> {
    if id.is_empty() {
        return Err(Reply::text(400, "Missing serviceID"));
    }
    match service_health(ctx, id) {
        Some((code, status, _)) if text_wanted(ctx) => Ok(Reply::text(code, status)),
        Some((code, _, v)) => Ok(Reply::json(code, &v, ctx.pretty())),
        None => {
            let reason = format!("ServiceId {id} not found");
            if text_wanted(ctx) {
                return Err(Reply::text(404, reason));
            }
            Err(Reply::json(
                404,
                &json!({"AggregatedStatus": "critical", "Service": null, "Checks": null}),
                ctx.pretty(),
            ))
        }
    }
}

fn health_by_name(ctx: &Ctx, name: &str) -> Result<Reply, Reply> {
    if name.is_empty() {
        return Err(Reply::text(400, "Missing service Name"));
    }
    let node = ctx.shared.cfg.node_name.clone();
    let ids: Vec<String> = ctx.shared.read(|st| {
        st.node_services(&node)
            .into_iter()
            .filter(|s| s.service == name)
            .map(|s| s.id.clone())
            .collect()
    });
    let mut code = 404;
    let mut status = format!("ServiceName {name} Not Found");
    let mut out = Vec::new();
    for id in ids {
        if let Some((c, s, v)) = service_health(ctx, &id) {
            if code == 404 || c > code {
                code = c;
                status = s.to_string();
            }
            out.push(v);
        }
    }
    if text_wanted(ctx) {
        return Ok(Reply::text(code, status));
    }
    Ok(Reply::json(code, &Value::Array(out), ctx.pretty()))
}

/// `/v1/status/peers`: the raft peers, this one server.
pub(crate) fn status_peers(ctx: &Ctx) -> Reply {
    if ctx.foreign_dc() {
        return Reply::text(500, "No path to datacenter");
    }
    Reply::json(200, &json!(["127.0.0.1:8300"]), ctx.pretty())
}

/// `PUT /v1/agent/join/<addr>`: joining this agent's own serf address (LAN, or WAN with
/// `?wan`) succeeds, as it does on a single agent; another dev server's serf address joins the
/// two ([`crate::serf`]); anything else fails as a join to an agent that is not there does.
pub(crate) async fn join(ctx: &Ctx, addr: &str) -> Result<Reply, Reply> {
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    let cfg = &ctx.shared.cfg;
    crate::endpoints::access::require(ctx, token.as_deref(), "agent:write", &cfg.node_name)?;
    // `AgentJoin`: any non-empty `?wan=` joins the WAN pool.
    let wan = !ctx.query.get("wan").is_empty();
    let (lan_port, wan_port) = cfg.serf_ports;
    let (port, pool) = if wan {
        (wan_port, Pool::Wan)
    } else {
        (lan_port, Pool::Lan)
    };
    let own = [format!("127.0.0.1:{port}"), format!("localhost:{port}")];
    if own.iter().any(|a| a == addr) {
        return Ok(Reply::text(200, ""));
    }
    let me = crate::serf::member(cfg, &ctx.shared.node_id, pool);
    match crate::serf::join(&ctx.shared.serf, pool, addr, &me).await {
        Ok(()) => Ok(Reply::text(200, "")),
        Err(e) => Err(Reply::text(
            500,
            format!("1 error occurred:\n\t* Failed to join {addr}: {e}\n\n"),
        )),
    }
}

/// `PUT /v1/agent/leave`: the agents this one joined are told it left (they list it with
/// status 3); once the answer is out the server stops, as a Consul agent shuts down after
/// leaving (`http.rs` closes the connection after the answer and signals the stop).
pub(crate) async fn leave(ctx: &Ctx) -> Result<Reply, Reply> {
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    let cfg = &ctx.shared.cfg;
    crate::endpoints::access::require(ctx, token.as_deref(), "agent:write", &cfg.node_name)?;
    let lan = crate::serf::member(cfg, &ctx.shared.node_id, Pool::Lan);
    let wan = crate::serf::member(cfg, &ctx.shared.node_id, Pool::Wan);
    crate::serf::leave(
        &ctx.shared.serf,
        lan["Name"].as_str().unwrap_or_default(),
        wan["Name"].as_str().unwrap_or_default(),
    )
    .await;
    Ok(Reply::text(200, ""))
}

/// The runtime gauges `/v1/agent/metrics` reports (`consul.runtime.*`, as go-metrics names a
/// Go process's; here the dev server process's resident memory where the OS tells it).
fn runtime_gauges() -> Vec<Value> {
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<f64>().ok())
        })
        .map(|pages| pages * 4096.0)
        .unwrap_or(0.0);
    ["alloc_bytes", "sys_bytes", "heap_objects", "num_goroutines"]
        .iter()
        .map(|name| {
            let value = match *name {
                "alloc_bytes" | "sys_bytes" => rss,
                _ => 0.0,
            };
            json!({"Name": format!("consul.runtime.{name}"), "Value": value, "Labels": {}})
        })
        .collect()
}

/// `GET /v1/agent/monitor`: the dev server keeps no log stream, so the answer is one line saying
/// so, at INFO (none when `loglevel` asks for less), plain or as `?logjson` asks, and the
/// stream ends.
fn monitor(ctx: &Ctx, level: &str) -> Reply {
    if !matches!(level, "trace" | "debug" | "info") {
        return Reply::text(200, "");
    }
    let now = crate::godur::rfc3339(std::time::SystemTime::now());
    let msg = "monitor: baton-devserver keeps no log stream; this is its only line";
    let line = if ctx.query.has("logjson") {
        json!({"@level": "info", "@message": msg, "@module": "agent", "@timestamp": now})
            .to_string()
    } else {
        format!("{now} [INFO]  agent: {msg}")
    };
    Reply::text(200, format!("{line}\n"))
}
