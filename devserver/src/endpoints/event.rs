//! `/v1/event/*` (`agent/event_endpoint.go`) and `/v1/coordinate/*`
//! (`agent/coordinate_endpoint.go`).

use base64::Engine;
use serde_json::{json, Value};

use crate::endpoints::catalog::{answer, read_opts};
use crate::endpoints::ctx::Ctx;
use crate::query::{blocking, Reply, Run};
use crate::state::Topic;

/// Routes `/v1/event/` and `/v1/coordinate/`.
pub(crate) async fn handle(ctx: &Ctx, pattern: &str, rest: &str, body: &[u8]) -> Reply {
    let r = match pattern {
        "/v1/event/fire/" => fire(ctx, rest, body),
        "/v1/event/list" => list(ctx).await,
        "/v1/coordinate/datacenters" => datacenters(ctx),
        "/v1/coordinate/nodes" => nodes(ctx, None).await,
        "/v1/coordinate/node/" => nodes(ctx, Some(rest)).await,
        _ => update(ctx, body),
    };
    r.unwrap_or_else(|e| e)
}

/// `uuidToUint64`: the index `/v1/event/list` reports is derived from the last event's ID.
fn event_index(id: &str) -> u64 {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    let hi = u64::from_str_radix(hex.get(..16).unwrap_or("0"), 16).unwrap_or(0);
    let lo = u64::from_str_radix(hex.get(16..).unwrap_or("0"), 16).unwrap_or(0);
    hi ^ lo
}

fn fire(ctx: &Ctx, name: &str, body: &[u8]) -> Result<Reply, Reply> {
    if ctx.foreign_dc() {
        return Err(Reply::text(500, "No path to datacenter"));
    }
    if name.is_empty() {
        return Err(Reply::text(400, "Missing name"));
    }
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    crate::endpoints::access::require(ctx, token.as_deref(), "event:write", name)?;
    let payload =
        (!body.is_empty()).then(|| base64::engine::general_purpose::STANDARD.encode(body));
    let ev = json!({
        "ID": crate::state::new_uuid(),
        "Name": name,
        "Payload": payload,
        "NodeFilter": ctx.query.get("node"),
        "ServiceFilter": ctx.query.get("service"),
        "TagFilter": ctx.query.get("tag"),
        "Version": 1,
        "LTime": 0
    });
    let out = ev.clone();
    ctx.shared.write(|st| {
        let mut ev = ev;
        ev["LTime"] = json!(st.events().events.len() as u64 + 1);
        st.add_event(ev);
    });
    Ok(Reply::json(200, &out, ctx.pretty()))
}

async fn list(ctx: &Ctx) -> Result<Reply, Reply> {
    let opts = crate::query::parse_opts(&ctx.query, &ctx.headers, ctx.shared.cfg.pretty_json())?;
    let name = ctx.query.get("name").to_string();
    let run = blocking(&ctx.shared, &opts, Topic::Events, |st| {
        let list: Vec<Value> = st
            .events()
            .events
            .iter()
            .filter(|e| name.is_empty() || e["Name"] == name.as_str())
            .cloned()
            .collect();
        let index = list
            .last()
            .and_then(|e| e["ID"].as_str())
            .map(event_index)
            .unwrap_or(0);
        Run {
            index,
            value: list,
            not_found: false,
        }
    })
    .await;
    Ok(Reply::json(200, &Value::Array(run.value), opts.pretty).with_meta(run.index))
}

fn origin() -> Value {
    json!({"Vec": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], "Error": 1.5, "Adjustment": 0.0, "Height": 1e-05})
}

fn datacenters(ctx: &Ctx) -> Result<Reply, Reply> {
    let cfg = &ctx.shared.cfg;
    let v = json!([{
        "Datacenter": cfg.datacenter,
        "AreaID": "wan",
        "Coordinates": [{"Node": format!("{}.{}", cfg.node_name, cfg.datacenter), "Coord": origin()}]
    }]);
    Ok(Reply::json(200, &v, ctx.pretty()))
}

async fn nodes(ctx: &Ctx, node: Option<&str>) -> Result<Reply, Reply> {
    if node == Some("") {
        return Err(Reply::text(400, "Missing node name"));
    }
    let (opts, access) = read_opts(ctx)?;
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| {
        let ev = st.events();
        let list: Vec<Value> = ev
            .coords
            .iter()
            .filter(|(n, _)| node.is_none() || node == Some(n.as_str()))
            .filter(|(n, _)| access.allows("node:read", n))
            .map(|(_, v)| v.clone())
            .collect();
        Run {
            index: ev.coords_index,
            value: list,
            not_found: false,
        }
    })
    .await;
    if node.is_some() && run.value.is_empty() {
        return Ok(Reply::text(404, "").with_meta(run.index));
    }
    Ok(answer(&Value::Array(run.value), &opts, run.index))
}

/// `PUT /v1/coordinate/update` with `{"Node", "Segment", "Coord"}`.
fn update(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    let obj = crate::endpoints::decode::object(body, "structs.CoordinateUpdateRequest")?;
    ctx.rpc_check(ctx.query.get("dc"))?;
    let node = crate::endpoints::decode::string(&obj, "Node");
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    crate::endpoints::access::require(ctx, token.as_deref(), "node:write", &node)?;
    let coord = crate::endpoints::decode::fld(&obj, "Coord")
        .cloned()
        .unwrap_or(Value::Null);
    if !coord.is_object() {
        return Err(Reply::text(500, "invalid coordinate"));
    }
    let entry = json!({"Node": node, "Segment": crate::endpoints::decode::string(&obj, "Segment"), "Coord": coord});
    ctx.shared.write(|st| st.set_coordinate(&node, entry));
    Ok(Reply::text(200, ""))
}
