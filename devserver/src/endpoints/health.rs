//! `/v1/health/*` (`agent/health_endpoint.go`, `agent/consul/health_endpoint.go`): checks by
//! node, service and state, and service instances with their node and checks. Check listings
//! answer with the checks table index; service entries with the highest of the nodes, services
//! and checks indexes, as `checkServiceNodesTxn` does.

use serde_json::{json, Value};

use crate::endpoints::catalog::{answer, check_readable, node_meta_ok, read_opts};
use crate::endpoints::catalog_json;
use crate::endpoints::ctx::Ctx;
use crate::endpoints::filter::Filter;
use crate::query::{blocking, Reply, Run};
use crate::state::{CheckStatus, State, Topic};

/// Routes the `/v1/health/` family.
pub(crate) async fn handle(ctx: &Ctx, pattern: &str, rest: &str) -> Reply {
    let r = match pattern {
        "/v1/health/node/" => node_checks(ctx, rest).await,
        "/v1/health/checks/" => service_checks(ctx, rest).await,
        "/v1/health/state/" => state_checks(ctx, rest).await,
        "/v1/health/service/" => service_entries(ctx, rest, false).await,
        _ => service_entries(ctx, rest, true).await,
    };
    r.unwrap_or_else(|e| e)
}

async fn checks_where(
    ctx: &Ctx,
    pred: impl Fn(&State, &crate::state::Check) -> bool,
) -> Result<Reply, Reply> {
    let (opts, access) = read_opts(ctx)?;
    let filter = Filter::from_query(&ctx.query)?;
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| {
        let list: Vec<Value> = st
            .catalog()
            .checks
            .values()
            .filter(|c| pred(st, c) && check_readable(&access, c))
            .map(catalog_json::check)
            .filter(|v| filter.matches(v))
            .collect();
        Run {
            index: st.catalog().checks_index,
            value: list,
            not_found: false,
        }
    })
    .await;
    Ok(answer(&Value::Array(run.value), &opts, run.index))
}

async fn node_checks(ctx: &Ctx, node: &str) -> Result<Reply, Reply> {
    if node.is_empty() {
        return Err(Reply::text(400, "Missing node name"));
    }
    checks_where(ctx, |_, c| c.node.eq_ignore_ascii_case(node)).await
}

async fn service_checks(ctx: &Ctx, service: &str) -> Result<Reply, Reply> {
    if service.is_empty() {
        return Err(Reply::text(400, "Missing service name"));
    }
    checks_where(ctx, |st, c| {
        c.service_name == service && st.node(&c.node).is_some_and(|n| node_meta_ok(ctx, &n.meta))
    })
    .await
}

async fn state_checks(ctx: &Ctx, state: &str) -> Result<Reply, Reply> {
    if state.is_empty() {
        return Err(Reply::text(400, "Missing check state"));
    }
    // Consul does not validate the state: one no check is in matches nothing.
    checks_where(ctx, |st, c| {
        (state == "any" || c.status.as_str() == state)
            && st.node(&c.node).is_some_and(|n| node_meta_ok(ctx, &n.meta))
    })
    .await
}

/// `/v1/health/service/<s>` (`?passing`, `?tag=`, `?node-meta=`, `?filter=`) and
/// `/v1/health/connect/<s>` (its Connect proxies).
async fn service_entries(ctx: &Ctx, name: &str, connect: bool) -> Result<Reply, Reply> {
    if name.is_empty() {
        return Err(Reply::text(400, "Missing service name"));
    }
    let (opts, access) = read_opts(ctx)?;
    let filter = Filter::from_query(&ctx.query)?;
    // `getBoolQueryParam`: `?passing` alone is true, anything but a Go bool a 400.
    let passing = match ctx.query.get("passing") {
        _ if !ctx.query.has("passing") => false,
        "" => true,
        v => crate::endpoints::decode::parse_bool(v)
            .ok_or_else(|| Reply::text(400, "Invalid value for ?passing"))?,
    };
    let tags = ctx.query.all("tag");
    let peer = ctx.query.get("peer").to_string();
    let dc = ctx.shared.cfg.datacenter.clone();
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| {
        let cat = st.catalog();
        let mut list = Vec::new();
        for s in cat.services.values() {
            let wanted = if connect {
                s.kind == "connect-proxy"
                    && s.proxy
                        .get("DestinationServiceName")
                        .and_then(Value::as_str)
                        == Some(name)
            } else {
                s.service == name
            };
            if !peer.is_empty() || !wanted || !tags.iter().all(|t| s.tags.contains(t)) {
                continue;
            }
            let Some(n) = st.node(&s.node) else { continue };
            if !node_meta_ok(ctx, &n.meta)
                || !access.allows("node:read", &n.name)
                || !access.allows("service:read", &s.service)
            {
                continue;
            }
            let checks: Vec<&crate::state::Check> = st
                .node_checks(&s.node)
                .into_iter()
                .filter(|c| c.service_id.is_empty() || c.service_id == s.id)
                .collect();
            if passing && checks.iter().any(|c| c.status != CheckStatus::Passing) {
                continue;
            }
            let entry = json!({
                "Node": catalog_json::node(n, &dc),
                "Service": catalog_json::node_service(s),
                "Checks": checks.into_iter().map(catalog_json::check).collect::<Vec<_>>(),
            });
            if filter.matches(&entry) {
                list.push(entry);
            }
        }
        Run {
            index: cat
                .nodes_index
                .max(cat.services_index)
                .max(cat.checks_index),
            value: list,
            not_found: false,
        }
    })
    .await;
    Ok(crate::endpoints::catalog::agent_cached(
        ctx,
        &format!(
            "health/{}/{name}",
            if connect { "connect" } else { "service" }
        ),
        answer(&Value::Array(run.value), &opts, run.index),
    ))
}
