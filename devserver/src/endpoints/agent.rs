//! `/v1/agent/*`: the local agent's services and checks (registered straight into the
//! catalog, as a dev agent's anti-entropy sync does at once), TTL check updates, maintenance
//! mode, members, `self`, and the Connect CA roots a test harness waits for.
//!
//! Texts and statuses follow `agent/agent_endpoint.go` and `agent/agent.go` (Consul 1.15).

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Method;
use serde_json::{json, Map, Value};

use crate::endpoints::agent_service::check_probe;
use crate::endpoints::catalog_json;
use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode::{self, fld};
use crate::godur::{format_go_duration, parse_go_duration};
use crate::query::Reply;
use crate::serf::Pool;
use crate::state::{Check, CheckStatus, Probe, Service, State};

/// `structs.NodeMaint`: the check node maintenance mode registers.
pub(crate) const NODE_MAINT: &str = "_node_maintenance";
/// `structs.ServiceMaintPrefix`.
pub(crate) const SERVICE_MAINT_PREFIX: &str = "_service_maintenance:";
/// `agent.go` `defaultNodeMaintReason`.
const DEFAULT_NODE_MAINT: &str =
    "Maintenance mode is enabled for this node, but no reason was provided. This is a default message.";
/// `agent.go` `defaultServiceMaintReason`.
const DEFAULT_SERVICE_MAINT: &str =
    "Maintenance mode is enabled for this service, but no reason was provided. This is a default message.";
/// Consul's `check_deregister_interval_min`: the shortest `DeregisterCriticalServiceAfter`.
const CHECK_DEREGISTER_INTERVAL_MIN: Duration = Duration::from_secs(60);
/// First port of `sidecar_min_port`..`sidecar_max_port` (21000-21255).
const SIDECAR_MIN_PORT: i64 = 21000;

/// Routes the `/v1/agent/` family. `pattern` is the matched route, `rest` the path after it.
pub(crate) async fn handle(
    ctx: &Ctx,
    method: &Method,
    pattern: &str,
    rest: &str,
    body: &[u8],
) -> Reply {
    let r = match pattern {
        "/v1/agent/self" => agent_self(ctx),
        "/v1/agent/members" => members(ctx),
        "/v1/agent/services" => services(ctx),
        // Boxed: the request future of every connection, blocking KV reads included, is as big as
        // its biggest branch, and these rarely used ones hold timers and sockets.
        "/v1/agent/service/" => Box::pin(crate::endpoints::agent_service::service(ctx, rest)).await,
        "/v1/agent/service/register" => register_service(ctx, body),
        "/v1/agent/service/deregister/" => deregister_service(ctx, rest),
        "/v1/agent/service/maintenance/" => service_maintenance(ctx, rest),
        "/v1/agent/maintenance" => node_maintenance(ctx),
        "/v1/agent/checks" => checks(ctx),
        "/v1/agent/check/register" => register_check(ctx, body),
        "/v1/agent/check/deregister/" => deregister_check(ctx, rest),
        "/v1/agent/check/pass/" => update_ttl(ctx, rest, CheckStatus::Passing, None),
        "/v1/agent/check/warn/" => update_ttl(ctx, rest, CheckStatus::Warning, None),
        "/v1/agent/check/fail/" => update_ttl(ctx, rest, CheckStatus::Critical, None),
        "/v1/agent/check/update/" => check_update(ctx, rest, body),
        "/v1/agent/connect/ca/roots" => Ok(crate::endpoints::connect::ca_roots(ctx)),
        "/v1/agent/join/" => Box::pin(crate::endpoints::agent_misc::join(ctx, rest)).await,
        "/v1/agent/leave" => Box::pin(crate::endpoints::agent_misc::leave(ctx)).await,
        "/v1/agent/reload" => {
            require(ctx, "agent:write", &node_name(ctx)).and_then(|()| reload(ctx))
        }
        _ => crate::endpoints::agent_misc::handle(ctx, method, pattern, rest, body),
    };
    r.unwrap_or_else(|e| e)
}

fn token(ctx: &Ctx) -> Option<String> {
    crate::query::request_token(&ctx.query, &ctx.headers)
}

fn require(ctx: &Ctx, perm: &str, resource: &str) -> Result<(), Reply> {
    crate::endpoints::access::require(ctx, token(ctx).as_deref(), perm, resource)
}

/// An agent write answers 200 with an empty body.
fn ok() -> Result<Reply, Reply> {
    Ok(Reply::text(200, ""))
}

fn node_name(ctx: &Ctx) -> String {
    ctx.shared.cfg.node_name.clone()
}

/// `Member` of `/v1/agent/self` and each of `/v1/agent/members` (`?wan` names it
/// `<node>.<dc>`, as the WAN pool does).
pub(crate) fn member(ctx: &Ctx, wan: bool) -> Value {
    let pool = if wan { Pool::Wan } else { Pool::Lan };
    crate::serf::member(&ctx.shared.cfg, &ctx.shared.node_id, pool)
}

/// The agent node's metadata as `/v1/agent/self` shows it.
fn node_meta(ctx: &Ctx) -> Value {
    let mut m = Map::new();
    m.insert("consul-network-segment".into(), json!(""));
    for (k, v) in &ctx.shared.cfg.node_meta {
        m.insert(k.clone(), json!(v));
    }
    Value::Object(m)
}

/// `/v1/agent/self`: every top-level value an object or null (the Go client requires it),
/// with `Stats.consul` as a server reports it.
fn agent_self(ctx: &Ctx) -> Result<Reply, Reply> {
    let cfg = &ctx.shared.cfg;
    require(ctx, "agent:read", &cfg.node_name)?;
    let leader = ctx.shared.has_leader();
    let body = json!({
        "Config": {
            "Datacenter": cfg.datacenter,
            "PrimaryDatacenter": cfg.datacenter,
            "NodeName": cfg.node_name,
            "NodeID": ctx.shared.node_id,
            "Revision": "baton-devserver",
            "Server": cfg.server,
            "Version": cfg.consul_version.to_string(),
            "BuildDate": "2023-01-27T00:00:00Z"
        },
        "DebugConfig": {
            "SessionTTLMin": format_go_duration(cfg.session_ttl_min.as_nanos() as i64),
            "KVMaxValueSize": cfg.kv_max_value_size,
            "TxnMaxReqLen": cfg.txn_max_req_len,
            "SerfAdvertiseAddrLAN": format!("tcp://127.0.0.1:{}", cfg.serf_ports.0),
            "SerfAdvertiseAddrWAN": format!("tcp://127.0.0.1:{}", cfg.serf_ports.1)
        },
        "Coord": {"Vec": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "Error": 1.5, "Adjustment": 0.0, "Height": 1e-05},
        "Member": member(ctx, false),
        "Stats": {
            "agent": {"check_monitors": "0", "check_ttls": "0", "checks": "0", "services": "0"},
            "consul": {
                "acl": if cfg.acls_enabled() { "enabled" } else { "disabled" },
                "bootstrap": "false",
                "known_datacenters": "1",
                "leader": if leader { "true" } else { "false" },
                "leader_addr": if leader { "127.0.0.1:8300" } else { "" },
                "server": "true"
            },
            "raft": {"state": if leader { "Leader" } else { "Follower" }},
            "runtime": {"arch": std::env::consts::ARCH, "os": std::env::consts::OS}
        },
        "Meta": node_meta(ctx),
        "xDS": {"SupportedProxies": {"envoy": ["1.25.1"]}, "Port": -1, "Ports": {"Plaintext": -1, "TLS": -1}}
    });
    Ok(Reply::json(200, &body, ctx.pretty()))
}

/// `/v1/agent/members`: this agent and those it joined or was joined by.
fn members(ctx: &Ctx) -> Result<Reply, Reply> {
    // `AgentMembers`: any non-empty `?wan=` asks for the WAN pool, which has no segments.
    let wan = !ctx.query.get("wan").is_empty();
    let segment = ctx.query.get("segment");
    if wan && !segment.is_empty() && segment != "_all" {
        return Err(Reply::text(400, "Cannot provide a segment with wan=true"));
    }
    require(ctx, "node:read", &node_name(ctx))?;
    // `?filter=` (bexpr) over the member list: Consul 1.14.9 / 1.15.5 / 1.16.1 (GH-18223);
    // api 1.15's TestAPI_AgentMembersOpts filters the WAN pool down to one member.
    let filter = if ctx.shared.cfg.consul_version.agent_members_filter() {
        Some(crate::endpoints::filter::Filter::from_query(&ctx.query)?)
    } else {
        None // earlier releases ignore the parameter
    };
    let mut all = vec![member(ctx, wan)];
    all.extend(
        ctx.shared
            .serf
            .others(if wan { Pool::Wan } else { Pool::Lan }),
    );
    if let Some(filter) = filter {
        all.retain(|m| filter.matches(m));
    }
    Ok(Reply::json(200, &Value::Array(all), ctx.pretty()))
}

fn services(ctx: &Ctx) -> Result<Reply, Reply> {
    let node = node_name(ctx);
    // Listings leave out what the token may not read (`filterServices`).
    let access = crate::endpoints::access::resolve(ctx, token(ctx).as_deref())?;
    let dc = ctx.shared.cfg.datacenter.clone();
    let filter = crate::endpoints::filter::Filter::from_query(&ctx.query)?;
    let out: Map<String, Value> = ctx.shared.read(|st| {
        st.node_services(&node)
            .into_iter()
            .filter(|s| s.id != "consul" && access.allows("service:read", &s.service))
            .map(|s| (s.id.clone(), catalog_json::agent_service(s, &dc)))
            .filter(|(_, v)| filter.matches(v))
            .collect()
    });
    Ok(Reply::json(200, &Value::Object(out), ctx.pretty()))
}

/// What a check definition (`structs.CheckType`/`CheckDefinition`) describes.
struct CheckDef {
    id: String,
    name: String,
    status: Option<CheckStatus>,
    notes: String,
    service_id: String,
    ttl: Option<Duration>,
    /// `DeregisterCriticalServiceAfter`, raised to the 1-minute minimum.
    reap_after: Option<Duration>,
    check_type: &'static str,
    interval: String,
    timeout: String,
    definition: Map<String, Value>,
    /// What the agent probes, for an HTTP or TCP check.
    probe: Option<Arc<Probe>>,
}

/// Decodes a check definition and validates it as `CheckType.Validate` does. Errors are the
/// text after `Invalid check: ` (400).
fn check_def(obj: &Map<String, Value>) -> Result<CheckDef, String> {
    let mut def = CheckDef {
        id: decode::string(obj, "CheckID"),
        name: decode::string(obj, "Name"),
        status: None,
        notes: decode::string(obj, "Notes"),
        service_id: decode::string(obj, "ServiceID"),
        ttl: None,
        reap_after: None,
        check_type: "",
        interval: decode::string(obj, "Interval"),
        timeout: decode::string(obj, "Timeout"),
        definition: Map::new(),
        probe: None,
    };
    if def.id.is_empty() {
        def.id = decode::string(obj, "ID");
    }
    let status = decode::string(obj, "Status");
    if !status.is_empty() {
        def.status = Some(CheckStatus::parse(&status).ok_or_else(|| "bad status".to_string())?);
    }
    let dur = |field: &str| -> Result<i64, String> {
        match fld(obj, field) {
            Some(Value::String(s)) if !s.is_empty() => parse_go_duration(s),
            Some(Value::Number(n)) => Ok(n.as_i64().unwrap_or(0)),
            _ => Ok(0),
        }
    };
    let ttl = dur("TTL")?;
    let reap = dur("DeregisterCriticalServiceAfter")?;
    if reap > 0 {
        // agent.go addCheck: below check_deregister_interval_min (1 min) the minimum applies.
        def.reap_after = Some(Duration::from_nanos(reap as u64).max(CHECK_DEREGISTER_INTERVAL_MIN));
    }
    let interval = dur("Interval")?;
    let kinds: [(&str, &'static str); 6] = [
        ("HTTP", "http"),
        ("TCP", "tcp"),
        ("GRPC", "grpc"),
        ("H2PING", "h2ping"),
        ("UDP", "udp"),
        ("DockerContainerID", "docker"),
    ];
    for (field, kind) in kinds {
        let v = decode::string(obj, field);
        if !v.is_empty() {
            def.check_type = kind;
            def.definition.insert(field.into(), json!(v));
            break;
        }
    }
    let args = decode::strings(obj, "Args");
    let args = if args.is_empty() {
        decode::strings(obj, "ScriptArgs")
    } else {
        args
    };
    if def.check_type.is_empty() && !args.is_empty() {
        def.check_type = "script";
        def.definition.insert("ScriptArgs".into(), json!(args));
    }
    let alias = decode::string(obj, "AliasService");
    if def.check_type.is_empty() && !alias.is_empty() {
        def.check_type = "alias";
    }
    if !def.check_type.is_empty() && def.check_type != "alias" {
        if interval <= 0 {
            return Err("Interval must be > 0 for Script, HTTP, H2PING, TCP or UDP checks".into());
        }
        def.definition
            .insert("Interval".into(), json!(def.interval));
        if !def.timeout.is_empty() {
            def.definition
                .insert("Timeout".into(), json!(def.timeout.clone()));
        }
        def.probe = check_probe(obj, def.check_type, interval, dur("Timeout")?);
    } else if def.check_type.is_empty() {
        if ttl <= 0 {
            return Err("TTL must be > 0 for TTL checks".into());
        }
        def.check_type = "ttl";
        def.ttl = Some(Duration::from_nanos(ttl as u64));
        def.interval.clear();
    }
    Ok(def)
}

/// The check a definition registers on the agent's node: critical until told otherwise
/// (`AddService`/`AddCheck` start every check critical unless `Status` says otherwise).
fn build_check(node: &str, def: &CheckDef) -> Check {
    let mut c = Check::new(
        node,
        &def.id,
        &def.name,
        def.status.unwrap_or(CheckStatus::Critical),
    );
    c.notes = def.notes.clone();
    c.service_id = def.service_id.clone();
    c.check_type = def.check_type.to_string();
    c.interval = def.interval.clone();
    c.timeout = def.timeout.clone();
    c.ttl = def.ttl;
    c.ttl_expires = def.ttl.map(|t| Instant::now() + t);
    c.reap_after = def.reap_after;
    c.definition = Value::Object(def.definition.clone());
    c.probe = def.probe.clone();
    c
}

/// `PUT /v1/agent/service/register` (`AgentRegisterService`, `AddService`).
fn register_service(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    let obj = decode::object(body, "structs.ServiceDefinition")?;
    let name = decode::string(&obj, "Name");
    if name.is_empty() {
        return Err(Reply::text(400, "Missing service name"));
    }
    let address = decode::string(&obj, "Address");
    if matches!(address.as_str(), "0.0.0.0" | "::" | "[::]") {
        return Err(Reply::text(400, "Invalid service address"));
    }
    let mut raw_checks: Vec<&Map<String, Value>> = Vec::new();
    if let Some(c) = decode::sub(&obj, "Check") {
        raw_checks.push(c);
    }
    if let Some(Value::Array(list)) = fld(&obj, "Checks") {
        raw_checks.extend(list.iter().filter_map(Value::as_object));
    }
    let mut defs = Vec::new();
    for c in &raw_checks {
        let status = decode::string(c, "Status");
        if !status.is_empty() && CheckStatus::parse(&status).is_none() {
            return Err(Reply::text(
                400,
                "Status for checks must 'passing', 'warning', 'critical'",
            ));
        }
        defs.push(check_def(c).map_err(|e| Reply::text(400, format!("Invalid check: {e}")))?);
    }
    require(ctx, "service:write", &name)?;
    let node = node_name(ctx);
    let mut id = decode::string(&obj, "ID");
    if id.is_empty() {
        id = name.clone();
    }
    let svc = Service {
        node: node.clone(),
        id: id.clone(),
        service: name.clone(),
        tags: decode::strings(&obj, "Tags"),
        address,
        port: decode::int(&obj, "Port"),
        meta: decode::map(&obj, "Meta"),
        tagged_addresses: decode::map(&obj, "TaggedAddresses")
            .into_iter()
            .map(|(k, v)| (k, decode::camel(&v)))
            .collect(),
        weights: fld(&obj, "Weights")
            .filter(|w| w.is_object())
            .map(decode::camel)
            .unwrap_or_else(|| json!({"Passing": 1, "Warning": 1})),
        enable_tag_override: decode::boolean(&obj, "EnableTagOverride"),
        kind: decode::string(&obj, "Kind"),
        proxy: fld(&obj, "Proxy").map(decode::camel).unwrap_or(Value::Null),
        connect: Value::Null,
        locality: fld(&obj, "Locality")
            .map(decode::camel)
            .unwrap_or(Value::Null),
        socket_path: decode::string(&obj, "SocketPath"),
        create_index: 0,
        modify_index: 0,
    };
    let replace = ctx.query.has("replace-existing-checks")
        && matches!(ctx.query.get("replace-existing-checks"), "" | "true");
    let n = defs.len();
    let checks: Vec<Check> = defs
        .iter_mut()
        .enumerate()
        .map(|(i, d)| {
            if d.id.is_empty() {
                d.id = if n > 1 {
                    format!("service:{id}:{}", i + 1)
                } else {
                    format!("service:{id}")
                };
            }
            if d.name.is_empty() {
                d.name = format!("Service '{name}' check");
            }
            d.service_id = id.clone();
            build_check(&node, d)
        })
        .collect();
    let sidecar = decode::sub(&obj, "Connect")
        .and_then(|c| decode::sub(c, "SidecarService"))
        .map(|sc| sidecar_service(&svc, sc));
    ctx.shared.write(|st| {
        let idx = st.next_index();
        if replace {
            let stale: Vec<String> = st
                .node_checks(&node)
                .into_iter()
                .filter(|c| c.service_id == id && !checks.iter().any(|n| n.check_id == c.check_id))
                .map(|c| c.check_id.clone())
                .collect();
            for c in stale {
                st.delete_check_at(idx, &node, &c);
            }
        }
        st.put_service_at(idx, svc.clone());
        for c in checks {
            let _ = put_keeping_status(st, idx, c);
        }
        if let Some((sc, sc_checks)) = sidecar {
            st.put_service_at(idx, sc);
            for c in sc_checks {
                let _ = put_keeping_status(st, idx, c);
            }
        }
    });
    ok()
}

/// Re-registering a check keeps the status it had (the agent's local state does) unless the
/// definition names one.
fn put_keeping_status(st: &mut State, idx: u64, mut c: Check) -> Result<(), String> {
    if let Some(old) = st.check(&c.node, &c.check_id) {
        if c.status == CheckStatus::Critical && c.output.is_empty() {
            c.status = old.status;
            c.output = old.output.clone();
        }
    }
    st.put_check_at(idx, c).map_err(|e| e.0)
}

/// The `<id>-sidecar-proxy` service a `Connect.SidecarService` stanza registers
/// (`sidecarServiceFromNodeService`), with its listening and aliasing checks.
fn sidecar_service(parent: &Service, sc: &Map<String, Value>) -> (Service, Vec<Check>) {
    let id = format!("{}-sidecar-proxy", parent.id);
    let port = match decode::int(sc, "Port") {
        0 => SIDECAR_MIN_PORT,
        p => p,
    };
    let svc = Service {
        node: parent.node.clone(),
        id: id.clone(),
        service: format!("{}-sidecar-proxy", parent.service),
        tags: parent.tags.clone(),
        address: String::new(),
        port,
        meta: parent.meta.clone(),
        tagged_addresses: Map::new(),
        weights: json!({"Passing": 1, "Warning": 1}),
        enable_tag_override: false,
        kind: "connect-proxy".into(),
        proxy: json!({
            "DestinationServiceName": parent.service,
            "DestinationServiceID": parent.id,
            "LocalServiceAddress": "127.0.0.1",
            "LocalServicePort": parent.port,
            "Mode": "",
            "MeshGateway": {},
            "Expose": {}
        }),
        connect: Value::Null,
        locality: parent.locality.clone(),
        socket_path: String::new(),
        create_index: 0,
        modify_index: 0,
    };
    let mut listening = Check::new(
        &parent.node,
        &format!("service:{id}:1"),
        "Connect Sidecar Listening",
        CheckStatus::Passing,
    );
    listening.service_id = id.clone();
    listening.check_type = "tcp".into();
    listening.interval = "10s".into();
    listening.definition = json!({"TCP": format!("127.0.0.1:{port}"), "Interval": "10s"});
    let mut aliasing = Check::new(
        &parent.node,
        &format!("service:{id}:2"),
        &format!("Connect Sidecar Aliasing {}", parent.id),
        CheckStatus::Passing,
    );
    aliasing.service_id = id;
    aliasing.check_type = "alias".into();
    (svc, vec![listening, aliasing])
}

/// `PUT /v1/agent/service/deregister/<id>`: the service, its checks and its sidecar go.
fn deregister_service(ctx: &Ctx, id: &str) -> Result<Reply, Reply> {
    let node = node_name(ctx);
    let Some(svc) = ctx.shared.read(|st| st.service(&node, id).cloned()) else {
        return Err(Reply::text(
            404,
            format!("Unknown service ID {id:?}. Ensure that the service ID is passed, not the service name."),
        ));
    };
    require(ctx, "service:write", &svc.service)?;
    ctx.shared.write(|st| {
        let idx = st.next_index();
        st.delete_service_at(idx, &node, id);
        let sidecar = format!("{id}-sidecar-proxy");
        st.delete_service_at(idx, &node, &sidecar);
    });
    ok()
}

fn enable_param(ctx: &Ctx) -> Result<bool, Reply> {
    if !ctx.query.has("enable") {
        return Err(Reply::text(400, "Missing value for enable"));
    }
    let raw = ctx.query.get("enable");
    decode::parse_bool(raw)
        .ok_or_else(|| Reply::text(400, format!("Invalid value for enable: {raw:?}")))
}

fn maintenance_check(node: &str, id: &str, name: &str, reason: &str, default: &str) -> Check {
    let mut c = Check::new(node, id, name, CheckStatus::Critical);
    c.notes = if reason.is_empty() {
        default.to_string()
    } else {
        reason.to_string()
    };
    c.check_type = "maintenance".into();
    c
}

/// `PUT /v1/agent/service/maintenance/<id>?enable=&reason=`.
fn service_maintenance(ctx: &Ctx, id: &str) -> Result<Reply, Reply> {
    if id.is_empty() {
        return Err(Reply::text(400, "Missing service ID"));
    }
    let enable = enable_param(ctx)?;
    let node = node_name(ctx);
    let Some(svc) = ctx.shared.read(|st| st.service(&node, id).cloned()) else {
        return Err(Reply::text(
            404,
            format!("No service registered with ID {id:?}"),
        ));
    };
    require(ctx, "service:write", &svc.service)?;
    let check_id = format!("{SERVICE_MAINT_PREFIX}{id}");
    let reason = ctx.query.get("reason").to_string();
    ctx.shared.write(|st| {
        let idx = st.next_index();
        if enable {
            if st.check(&node, &check_id).is_none() {
                let mut c = maintenance_check(
                    &node,
                    &check_id,
                    "Service Maintenance Mode",
                    &reason,
                    DEFAULT_SERVICE_MAINT,
                );
                c.service_id = id.to_string();
                let _ = st.put_check_at(idx, c);
            }
        } else {
            st.delete_check_at(idx, &node, &check_id);
        }
    });
    ok()
}

/// `PUT /v1/agent/maintenance?enable=&reason=`.
fn node_maintenance(ctx: &Ctx) -> Result<Reply, Reply> {
    let enable = enable_param(ctx)?;
    let node = node_name(ctx);
    require(ctx, "node:write", &node)?;
    let reason = ctx.query.get("reason").to_string();
    ctx.shared.write(|st| {
        let idx = st.next_index();
        if enable {
            if st.check(&node, NODE_MAINT).is_none() {
                let c = maintenance_check(
                    &node,
                    NODE_MAINT,
                    "Node Maintenance Mode",
                    &reason,
                    DEFAULT_NODE_MAINT,
                );
                let _ = st.put_check_at(idx, c);
            }
        } else {
            st.delete_check_at(idx, &node, NODE_MAINT);
        }
    });
    ok()
}

/// `GET /v1/agent/checks`: the agent's own checks (not `serfHealth`, which the servers
/// manage), by ID.
fn checks(ctx: &Ctx) -> Result<Reply, Reply> {
    let node = node_name(ctx);
    let access = crate::endpoints::access::resolve(ctx, token(ctx).as_deref())?;
    let filter = crate::endpoints::filter::Filter::from_query(&ctx.query)?;
    let out: Map<String, Value> = ctx.shared.read(|st| {
        st.node_checks(&node)
            .into_iter()
            .filter(|c| c.check_id != crate::state::SERF_CHECK_ID)
            // `filterChecks`: a service check needs service:read, a node check node:read.
            .filter(|c| {
                if c.service_name.is_empty() {
                    access.allows("node:read", &node)
                } else {
                    access.allows("service:read", &c.service_name)
                }
            })
            .map(|c| {
                let mut v = catalog_json::check(c);
                v["CreateIndex"] = json!(0);
                v["ModifyIndex"] = json!(0);
                (c.check_id.clone(), v)
            })
            .filter(|(_, v)| filter.matches(v))
            .collect()
    });
    Ok(Reply::json(200, &Value::Object(out), ctx.pretty()))
}

/// `PUT /v1/agent/check/register` (`AgentRegisterCheck`, `AddCheck`).
fn register_check(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    let obj = decode::object(body, "structs.CheckDefinition")?;
    if decode::string(&obj, "Name").is_empty() {
        return Err(Reply::text(400, "Missing check name"));
    }
    let status = decode::string(&obj, "Status");
    if !status.is_empty() && CheckStatus::parse(&status).is_none() {
        return Err(Reply::text(400, "Bad check status"));
    }
    let mut def = check_def(&obj).map_err(|e| Reply::text(400, format!("Invalid check: {e}")))?;
    if def.id.is_empty() {
        def.id = def.name.clone();
    }
    let node = node_name(ctx);
    if !def.service_id.is_empty() {
        let svc = ctx
            .shared
            .read(|st| st.service(&node, &def.service_id).cloned());
        match svc {
            Some(s) => require(ctx, "service:write", &s.service)?,
            None => {
                return Err(Reply::text(
                    404,
                    format!("ServiceID {:?} does not exist", def.service_id),
                ))
            }
        }
    } else {
        require(ctx, "node:write", &node)?;
    }
    let check = build_check(&node, &def);
    ctx.shared
        .write(|st| {
            let idx = st.next_index();
            put_keeping_status(st, idx, check)
        })
        .map_err(|e| Reply::text(500, e))?;
    ok()
}

fn unknown_check(id: &str) -> Reply {
    Reply::text(
        404,
        format!("Unknown check ID {id:?}. Ensure that the check ID is passed, not the check name."),
    )
}

/// `vetCheckUpdateWithAuthorizer`: the check must exist; then `node:write`, or
/// `service:write` for a service check.
fn vet_check_update(ctx: &Ctx, id: &str) -> Result<Check, Reply> {
    let node = node_name(ctx);
    let Some(c) = ctx.shared.read(|st| st.check(&node, id).cloned()) else {
        return Err(unknown_check(id));
    };
    if c.service_name.is_empty() {
        require(ctx, "node:write", &node)?;
    } else {
        require(ctx, "service:write", &c.service_name)?;
    }
    Ok(c)
}

/// `PUT /v1/agent/check/deregister/<id>`.
fn deregister_check(ctx: &Ctx, id: &str) -> Result<Reply, Reply> {
    let c = vet_check_update(ctx, id)?;
    ctx.shared.write(|st| {
        let idx = st.next_index();
        st.delete_check_at(idx, &c.node, id);
    });
    ok()
}

/// `pass|warn|fail/<id>?note=` and `update/<id>`: `updateTTLCheck` sets status and output and
/// re-arms the TTL.
fn update_ttl(
    ctx: &Ctx,
    id: &str,
    status: CheckStatus,
    output: Option<String>,
) -> Result<Reply, Reply> {
    let mut c = vet_check_update(ctx, id)?;
    let Some(ttl) = c.ttl else {
        return Err(Reply::text(
            500,
            format!("CheckID {id:?} does not have associated TTL"),
        ));
    };
    c.status = status;
    c.output = output.unwrap_or_else(|| ctx.query.get("note").to_string());
    c.ttl_expires = Some(Instant::now() + ttl);
    ctx.shared.write(|st| {
        // A heartbeat that changes neither status nor output only re-arms the timer: no
        // catalog write, no index (the agent syncs only what changed).
        let changed = match st.check(&c.node, id) {
            Some(old) => old.status != c.status || old.output != c.output,
            None => true,
        };
        let idx = if changed {
            st.next_index()
        } else {
            st.current_index()
        };
        let _ = st.put_check_at(idx, c);
    });
    ok()
}

/// `PUT /v1/agent/check/update/<id>` with `{"Status": .., "Output": ..}`.
fn check_update(ctx: &Ctx, id: &str, body: &[u8]) -> Result<Reply, Reply> {
    let obj = decode::object(body, "agent.checkUpdate")?;
    let status = decode::string(&obj, "Status");
    let Some(s) = CheckStatus::parse(&status) else {
        return Err(Reply::text(
            400,
            format!("Invalid check status: '{status}'"),
        ));
    };
    update_ttl(ctx, id, s, Some(decode::string(&obj, "Output")))
}

/// `PUT /v1/agent/reload`: reads the `-config-file` files again and registers the services
/// they define (`service` and `services`), as an agent does on reload.
fn reload(ctx: &Ctx) -> Result<Reply, Reply> {
    for path in &ctx.shared.cfg.config_files {
        let v = crate::config::read_config_file(path).map_err(|e| Reply::text(500, e))?;
        let mut defs: Vec<&Value> = Vec::new();
        if let Some(s) = v.get("service").filter(|s| s.is_object()) {
            defs.push(s);
        }
        if let Some(Value::Array(list)) = v.get("services") {
            defs.extend(list.iter().filter(|s| s.is_object()));
        }
        for def in defs {
            let body = serde_json::to_vec(def).unwrap_or_default();
            register_service(ctx, &body).map_err(|e| {
                Reply::text(
                    500,
                    format!(
                        "Failed reloading services: {}",
                        String::from_utf8_lossy(&e.body)
                    ),
                )
            })?;
        }
    }
    Ok(Reply::text(200, ""))
}
