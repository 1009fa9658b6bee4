//! `/v1/operator/raft/*`, `/v1/operator/autopilot/*` and `/v1/operator/usage` as a single
//! server that is its own raft leader answers them (`agent/operator_endpoint.go`): one voter,
//! the leader; autopilot's configuration stored and compare-and-set by `ModifyIndex`; the
//! usage counts computed from the catalog.

use hyper::Method;
use serde_json::{json, Map, Value};

use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode;
use crate::query::Reply;

/// The server's raft address, as `/v1/status/leader` reports it.
const RAFT_ADDR: &str = "127.0.0.1:8300";

/// Routes an operator request.
pub(crate) fn handle(ctx: &Ctx, method: &Method, pattern: &str, body: &[u8]) -> Reply {
    let r = match pattern {
        "/v1/operator/raft/configuration" => raft_configuration(ctx),
        "/v1/operator/raft/peer" => raft_remove_peer(ctx),
        "/v1/operator/raft/transfer-leader" => raft_transfer_leader(ctx),
        "/v1/operator/autopilot/configuration" if *method == Method::PUT => {
            autopilot_set(ctx, body)
        }
        "/v1/operator/autopilot/configuration" => autopilot_get(ctx),
        "/v1/operator/autopilot/health" => autopilot_health(ctx),
        "/v1/operator/autopilot/state" => autopilot_state(ctx),
        "/v1/operator/usage" => usage(ctx),
        _ => Err(Reply::text(
            404,
            "Invalid URL path: not a recognized HTTP API endpoint\n",
        )),
    };
    r.unwrap_or_else(|e| e)
}

fn allowed(ctx: &Ctx, perm: &str) -> Result<(), Reply> {
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    crate::endpoints::access::require(ctx, token.as_deref(), perm, "")?;
    ctx.rpc_check(ctx.query.get("dc"))
}

fn raft_configuration(ctx: &Ctx) -> Result<Reply, Reply> {
    allowed(ctx, "operator:read")?;
    let body = json!({
        "Servers": [{
            "ID": ctx.shared.node_id,
            "Node": ctx.shared.cfg.node_name,
            "Address": RAFT_ADDR,
            "Leader": true,
            "ProtocolVersion": "3",
            "Voter": true,
        }],
        // The raft configuration's own index: a dev agent's never changes from 0.
        "Index": 0,
    });
    Ok(Reply::json(200, &body, ctx.pretty()))
}

/// `DELETE /v1/operator/raft/peer?address=` or `?id=`: this server is the only peer, and
/// removing it is refused; any other peer is not in the configuration.
fn raft_remove_peer(ctx: &Ctx) -> Result<Reply, Reply> {
    allowed(ctx, "operator:write")?;
    let (what, value) = if ctx.query.has("id") {
        ("id", ctx.query.get("id"))
    } else {
        ("address", ctx.query.get("address"))
    };
    if value.is_empty() {
        return Err(Reply::text(400, "Must specify either ?id with the server's ID or ?address with IP:port of peer to remove"));
    }
    let own = if what == "id" {
        value == ctx.shared.node_id
    } else {
        value == RAFT_ADDR
    };
    if own {
        return Err(Reply::text(
            500,
            "baton-devserver cannot remove its only raft server",
        ));
    }
    Err(Reply::text(
        500,
        format!("{what} \"{value}\" was not found in the Raft configuration"),
    ))
}

/// `POST /v1/operator/raft/transfer-leader[?id=]`: there is no other server to hand the
/// leadership to.
fn raft_transfer_leader(ctx: &Ctx) -> Result<Reply, Reply> {
    allowed(ctx, "operator:write")?;
    let id = ctx.query.get("id");
    if !id.is_empty() && id != ctx.shared.node_id {
        return Err(Reply::text(
            500,
            format!("id \"{id}\" was not found in the Raft configuration"),
        ));
    }
    Err(Reply::text(500, "cannot find peer"))
}

/// The defaults of a 1.15 server (`autopilot` config block defaults).
fn autopilot_defaults(index: u64) -> Value {
    json!({
        "CleanupDeadServers": true,
        "LastContactThreshold": "200ms",
        "MaxTrailingLogs": 250,
        "MinQuorum": 0,
        "ServerStabilizationTime": "10s",
        "RedundancyZoneTag": "",
        "DisableUpgradeMigration": false,
        "UpgradeVersionTag": "",
        "CreateIndex": index,
        "ModifyIndex": index,
    })
}

fn autopilot_get(ctx: &Ctx) -> Result<Reply, Reply> {
    allowed(ctx, "operator:read")?;
    let v = ctx.shared.read(|st| {
        st.operator
            .autopilot
            .clone()
            .unwrap_or_else(|| autopilot_defaults(crate::state::BOOT_INDEX))
    });
    Ok(Reply::json(200, &v, ctx.pretty()))
}

/// `PUT /v1/operator/autopilot/configuration[?cas=<index>]`: answers `true` when stored,
/// `false` when `cas` is not the current `ModifyIndex`.
fn autopilot_set(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    allowed(ctx, "operator:write")?;
    let obj = decode::object(body, "api.AutopilotConfiguration")?;
    let cas = if ctx.query.has("cas") {
        Some(
            ctx.query
                .get("cas")
                .parse::<u64>()
                .map_err(|e| Reply::text(400, format!("Error parsing cas value: {e}")))?,
        )
    } else {
        None
    };
    let stored = ctx.shared.write(|st| {
        let current = st
            .operator
            .autopilot
            .clone()
            .unwrap_or_else(|| autopilot_defaults(crate::state::BOOT_INDEX));
        if let Some(cas) = cas {
            if current["ModifyIndex"].as_u64() != Some(cas) {
                return false;
            }
        }
        let idx = st.next_index();
        let mut next: Map<String, Value> = Map::new();
        for (k, default) in autopilot_defaults(idx).as_object().unwrap() {
            let v = match k.as_str() {
                "CreateIndex" => current["CreateIndex"].clone(),
                "ModifyIndex" => json!(idx),
                _ => decode::fld(&obj, k)
                    .cloned()
                    .unwrap_or_else(|| zero_like(default)),
            };
            next.insert(k.clone(), v);
        }
        st.operator.autopilot = Some(Value::Object(next));
        true
    });
    Ok(Reply::json(200, &json!(stored), ctx.pretty()))
}

/// Go's zero value for a field the body left out (the whole struct is replaced).
fn zero_like(v: &Value) -> Value {
    match v {
        Value::Bool(_) => json!(false),
        Value::Number(_) => json!(0),
        Value::String(s) if s.ends_with('s') => json!("0s"),
        _ => json!(""),
    }
}

fn autopilot_health(ctx: &Ctx) -> Result<Reply, Reply> {
    allowed(ctx, "operator:read")?;
    let index = ctx.shared.read(|st| st.last_index());
    let body = json!({
        "Healthy": true,
        "FailureTolerance": 0,
        "Servers": [{
            "ID": ctx.shared.node_id,
            "Name": ctx.shared.cfg.node_name,
            "Address": RAFT_ADDR,
            "SerfStatus": "alive",
            "Version": ctx.shared.cfg.consul_version.to_string(),
            "Leader": true,
            "LastContact": "0s",
            "LastTerm": 2,
            "LastIndex": index,
            "Healthy": true,
            "Voter": true,
            "StableSince": crate::godur::rfc3339(std::time::SystemTime::now()),
        }],
    });
    Ok(Reply::json(200, &body, ctx.pretty()))
}

/// `/v1/operator/autopilot/state` (`api.AutopilotState`): this server, healthy, the leader and
/// only voter, keyed by its node ID.
fn autopilot_state(ctx: &Ctx) -> Result<Reply, Reply> {
    allowed(ctx, "operator:read")?;
    let index = ctx.shared.read(|st| st.last_index());
    let id = ctx.shared.node_id.clone();
    let mut meta = serde_json::Map::new();
    meta.insert("consul-network-segment".into(), json!(""));
    for (k, v) in &ctx.shared.cfg.node_meta {
        meta.insert(k.clone(), json!(v));
    }
    let server = json!({
        "ID": id,
        "Name": ctx.shared.cfg.node_name,
        "Address": RAFT_ADDR,
        "NodeStatus": "alive",
        "Version": ctx.shared.cfg.consul_version.to_string(),
        "LastContact": "0s",
        "LastTerm": 2,
        "LastIndex": index,
        "Healthy": true,
        "StableSince": crate::godur::rfc3339(std::time::SystemTime::now()),
        "ReadReplica": false,
        "Status": "leader",
        "Meta": meta,
        "NodeType": "voter",
    });
    let mut servers = serde_json::Map::new();
    servers.insert(id.clone(), server);
    let body = json!({
        "Healthy": true,
        "FailureTolerance": 0,
        "OptimisticFailureTolerance": 0,
        "Servers": servers,
        "Leader": id,
        "Voters": [id],
    });
    Ok(Reply::json(200, &body, ctx.pretty()))
}

/// `/v1/operator/usage`: services (names), instances, Connect instances by kind, and the
/// billable ones (neither the `consul` service nor a Connect proxy or gateway).
fn usage(ctx: &Ctx) -> Result<Reply, Reply> {
    allowed(ctx, "operator:read")?;
    let dc = ctx.shared.cfg.datacenter.clone();
    let (body, index) = ctx.shared.read(|st| {
        let cat = st.catalog();
        let mut kinds: Map<String, Value> = [
            "api-gateway",
            "connect-native",
            "connect-proxy",
            "ingress-gateway",
            "mesh-gateway",
            "terminating-gateway",
        ]
        .iter()
        .map(|k| (k.to_string(), json!(0)))
        .collect();
        let mut names = std::collections::BTreeSet::new();
        let (mut instances, mut billable) = (0u64, 0u64);
        for s in cat.services.values() {
            names.insert(s.service.clone());
            instances += 1;
            let native = s.connect.get("Native").and_then(Value::as_bool) == Some(true);
            let kind = if native {
                "connect-native"
            } else {
                s.kind.as_str()
            };
            if let Some(n) = kinds.get_mut(kind) {
                *n = json!(n.as_u64().unwrap_or(0) + 1);
            }
            if s.service != "consul" && (s.kind.is_empty() || native) {
                billable += 1;
            }
        }
        // `structs.Usage` embeds its `QueryMeta`, so the body carries it too.
        let index = cat.services_index.max(cat.nodes_index);
        let body = json!({"Usage": {dc: {
            "Services": names.len(),
            "ServiceInstances": instances,
            "ConnectServiceInstances": kinds,
            "BillableServiceInstances": billable,
            "Nodes": cat.nodes.len(),
        }}, "Index": index, "LastContact": 0, "KnownLeader": true, "ConsistencyLevel": "",
            "NotModified": false, "Backend": 0, "ResultsFilteredByACLs": false});
        (body, index)
    });
    Ok(Reply::json(200, &body, ctx.pretty()).with_meta(index))
}
