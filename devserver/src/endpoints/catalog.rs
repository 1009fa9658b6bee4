//! `/v1/catalog/*`: register and deregister (`agent/catalog_endpoint.go`,
//! `agent/consul/catalog_endpoint.go` `Catalog.Register`/`Deregister`) and the blocking
//! reads, each answering with its table's index (`agent/consul/state/catalog.go`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Map, Value};

use crate::endpoints::access::Access;
use crate::endpoints::catalog_json;
use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode::{self, fld};
use crate::endpoints::filter::Filter;
use crate::query::{blocking, parse_opts, Opts, Reply, Run};
use crate::state::{Check, CheckStatus, Node, Topic};

/// Routes the `/v1/catalog/` family.
pub(crate) async fn handle(ctx: &Ctx, pattern: &str, rest: &str, body: &[u8]) -> Reply {
    let r = match pattern {
        "/v1/catalog/register" => register(ctx, body),
        "/v1/catalog/deregister" => deregister(ctx, body),
        "/v1/catalog/datacenters" => datacenters(ctx),
        "/v1/catalog/nodes" => nodes(ctx).await,
        "/v1/catalog/services" => services(ctx).await,
        "/v1/catalog/service/" => service_nodes(ctx, rest, false).await,
        "/v1/catalog/connect/" => service_nodes(ctx, rest, true).await,
        "/v1/catalog/node/" => node(ctx, rest, false).await,
        "/v1/catalog/node-services/" => node(ctx, rest, true).await,
        "/v1/catalog/gateway-services/" => gateway_services(ctx, rest).await,
        _ => Err(Reply::text(
            404,
            "Invalid URL path: not a recognized HTTP API endpoint\n",
        )),
    };
    r.unwrap_or_else(|e| e)
}

/// Options of a catalog or health read: the standard ones, then the RPC checks.
pub(crate) fn read_opts(ctx: &Ctx) -> Result<(Opts, Access), Reply> {
    let opts = parse_opts(&ctx.query, &ctx.headers, ctx.shared.cfg.pretty_json())?;
    crate::query::reject_enterprise(&ctx.query, &ctx.headers)?;
    // An unknown token is refused; a known one sees what it may read (`filterACL`).
    let access = crate::endpoints::access::resolve(ctx, opts.token.as_deref())?;
    ctx.rpc_check(&opts.dc)?;
    Ok((opts, access))
}

/// `filterACL` for checks: a service check needs `service:read`, a node check `node:read`.
pub(crate) fn check_readable(access: &Access, c: &crate::state::Check) -> bool {
    if c.service_name.is_empty() {
        access.allows("node:read", &c.node)
    } else {
        access.allows("service:read", &c.service_name)
    }
}

/// A read's answer: JSON, the index, and the consistency catalog and health reads report.
pub(crate) fn answer(v: &Value, opts: &Opts, index: u64) -> Reply {
    Reply::json(200, v, opts.pretty)
        .with_meta(index)
        .with("x-consul-effective-consistency", opts.consistency)
}

/// `?cached` (the agent cache, `agent/cache`): the first such read of a path and query is a
/// `MISS`, later ones a `HIT` of age 0 — the dev server answers from its state every time,
/// so a hit is never stale. Without `?cached` the reply is unchanged.
pub(crate) fn agent_cached(ctx: &Ctx, what: &str, reply: Reply) -> Reply {
    if !ctx.query.has("cached") || reply.status != 200 {
        return reply;
    }
    let mut q = ctx.query.clone();
    q.remove(&["index", "wait", "cached"]);
    let key = format!("{what}?{}", q.encode());
    let hit = !ctx
        .shared
        .agent_cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key);
    if hit {
        reply.with("x-cache", "HIT").with("age", "0")
    } else {
        reply.with("x-cache", "MISS")
    }
}

fn token(ctx: &Ctx) -> Option<String> {
    crate::query::request_token(&ctx.query, &ctx.headers)
}

fn write_checks(ctx: &Ctx) -> Result<(), Reply> {
    crate::query::reject_enterprise(&ctx.query, &ctx.headers)?;
    ctx.rpc_check(ctx.query.get("dc"))
}

/// A write's `Datacenter` field routes it like `?dc=` does.
fn body_dc(ctx: &Ctx, obj: &Map<String, Value>) -> Result<(), Reply> {
    let dc = decode::string(obj, "Datacenter");
    if !dc.is_empty() && dc != ctx.shared.cfg.datacenter {
        return Err(Reply::text(500, "No path to datacenter"));
    }
    Ok(())
}

/// `PUT /v1/catalog/register`.
fn register(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    let obj = decode::object(body, "structs.RegisterRequest")?;
    write_checks(ctx)?;
    body_dc(ctx, &obj)?;
    let node_name = decode::string(&obj, "Node");
    let address = decode::string(&obj, "Address");
    let skip_node_update = decode::boolean(&obj, "SkipNodeUpdate");
    if node_name.is_empty() {
        return Err(Reply::text(500, "Must provide node"));
    }
    if address.is_empty() && !skip_node_update {
        return Err(Reply::text(
            500,
            "Must provide address if SkipNodeUpdate is not set",
        ));
    }
    let node_id = decode::string(&obj, "ID");
    if !node_id.is_empty() && !crate::endpoints::decode::is_uuid(&node_id) {
        // hashicorp/go-uuid ParseUUID's two errors.
        let why = if node_id.len() != 36 {
            "uuid string is wrong length"
        } else {
            "uuid is improperly formatted"
        };
        return Err(Reply::text(500, format!("Bad node ID: {why}")));
    }
    crate::endpoints::access::require(ctx, token(ctx).as_deref(), "node:write", &node_name)?;
    let mut node = Node::new(&node_name, &address);
    node.id = node_id;
    node.tagged_addresses = decode::map(&obj, "TaggedAddresses");
    node.meta = decode::map(&obj, "NodeMeta");
    let service = match decode::sub(&obj, "Service") {
        None => None,
        Some(s) => {
            let name = decode::string(s, "Service");
            let mut id = decode::string(s, "ID");
            if id.is_empty() {
                id = name.clone();
            }
            // servicePreApply.
            if name.is_empty() {
                return Err(Reply::text(
                    500,
                    "Must provide service name (Service.Service) when service ID is provided",
                ));
            }
            let addr = decode::string(s, "Address");
            if matches!(addr.as_str(), "0.0.0.0" | "::" | "[::]") {
                return Err(Reply::text(500, "Invalid service address"));
            }
            crate::endpoints::access::require(ctx, token(ctx).as_deref(), "service:write", &name)?;
            let mut svc = catalog_json::service_from(&node_name, s);
            svc.id = id;
            Some(svc)
        }
    };
    let mut raw: Vec<&Map<String, Value>> = Vec::new();
    if let Some(c) = decode::sub(&obj, "Check") {
        raw.push(c);
    }
    if let Some(Value::Array(list)) = fld(&obj, "Checks") {
        raw.extend(list.iter().filter_map(Value::as_object));
    }
    let mut checks = Vec::new();
    for c in raw {
        let mut id = decode::string(c, "CheckID");
        let name = decode::string(c, "Name");
        if id.is_empty() {
            id = name.clone();
        }
        if id.is_empty() {
            return Err(Reply::text(500, "Missing check ID"));
        }
        let status_text = decode::string(c, "Status");
        // ensureCheckTxn: a check registered without a status starts critical.
        let status = if status_text.is_empty() {
            CheckStatus::Critical
        } else {
            CheckStatus::parse(&status_text).ok_or_else(|| {
                Reply::text(500, format!("Invalid check status: \"{status_text}\""))
            })?
        };
        // vetRegisterWithACL: a check names this request's node, and a service check names
        // this request's service or one the node already has.
        let check_node = decode::string(c, "Node");
        if !check_node.is_empty() && !check_node.eq_ignore_ascii_case(&node_name) {
            return Err(Reply::text(
                500,
                format!("Node '{check_node}' for check '{id}' doesn't match register request node '{node_name}'"),
            ));
        }
        let sid = decode::string(c, "ServiceID");
        let in_request = service.as_ref().is_some_and(|s| s.id == sid);
        if !sid.is_empty()
            && !in_request
            && ctx.shared.read(|st| st.service(&node_name, &sid).is_none())
        {
            return Err(Reply::text(
                500,
                format!("Unknown service ID '{sid}' for check ID '{id}'"),
            ));
        }
        let mut chk = Check::new(&node_name, &id, &name, status);
        chk.notes = decode::string(c, "Notes");
        chk.output = decode::string(c, "Output");
        chk.service_id = decode::string(c, "ServiceID");
        chk.check_type = decode::string(c, "Type");
        if let Some(d) = decode::sub(c, "Definition") {
            chk.definition = stored_definition(&decode::camel(&Value::Object(d.clone())));
        }
        if chk.check_type.is_empty() {
            chk.check_type = type_of_definition(&chk.definition).into();
        }
        checks.push(chk);
    }
    ctx.shared
        .write(|st| {
            let idx = st.next_index();
            let exists = st.node(&node_name).cloned();
            match exists {
                Some(old) if skip_node_update => {
                    let _ = old;
                }
                Some(old) => {
                    if node.id.is_empty() {
                        node.id = old.id.clone();
                    }
                    st.put_node_at(idx, node);
                }
                None => {
                    st.put_node_at(idx, node);
                }
            }
            if let Some(s) = service {
                st.put_service_at(idx, s);
            }
            for c in checks {
                st.put_check_at(idx, c).map_err(|e| e.0)?;
            }
            Ok::<(), String>(())
        })
        .map_err(|e| Reply::text(500, e))?;
    Ok(Reply::json(200, &json!(true), ctx.pretty()))
}

/// A registered check's `Definition` as `structs.HealthCheckDefinition` stores and encodes it:
/// every field `omitempty` (the api package sends them all, empty), durations (nanoseconds
/// or strings) rendered as Go's `time.Duration` strings, as its `MarshalJSON` does.
fn stored_definition(d: &Value) -> Value {
    let Some(obj) = d.as_object() else {
        return d.clone();
    };
    let mut out = serde_json::Map::new();
    for (k, v) in obj {
        let empty = match v {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::String(s) => s.is_empty(),
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
        };
        if empty {
            continue;
        }
        let is_duration = matches!(
            k.as_str(),
            "Interval" | "Timeout" | "DeregisterCriticalServiceAfter"
        );
        let ns = match v {
            Value::String(s) => crate::godur::parse_go_duration(s).ok(),
            _ => v.as_i64(),
        };
        let v = match ns {
            Some(ns) if is_duration => Value::String(crate::godur::format_go_duration(ns)),
            _ => v.clone(),
        };
        out.insert(k.clone(), v);
    }
    Value::Object(out)
}

/// The `Type` of a check registered without one, from the probe its definition names (the api
/// package's `TestAPI_ClientTxn` reads `tcp` back for a TCP definition).
fn type_of_definition(d: &Value) -> &'static str {
    let set = |k: &str| {
        d.get(k)
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty())
    };
    [
        ("HTTP", "http"),
        ("TCP", "tcp"),
        ("UDP", "udp"),
        ("GRPC", "grpc"),
        ("H2PING", "h2ping"),
    ]
    .into_iter()
    .find(|(k, _)| set(k))
    .map_or("", |(_, t)| t)
}

/// `PUT /v1/catalog/deregister`: `{"Node"}` removes the node (its services, checks and
/// sessions); with `ServiceID` only that service (and its checks); with `CheckID` only that
/// check. An unknown node or item is no error.
fn deregister(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    let obj = decode::object(body, "structs.DeregisterRequest")?;
    write_checks(ctx)?;
    body_dc(ctx, &obj)?;
    let node = decode::string(&obj, "Node");
    if node.is_empty() {
        return Err(Reply::text(500, "Must provide node"));
    }
    crate::endpoints::access::require(ctx, token(ctx).as_deref(), "node:write", &node)?;
    let service = decode::string(&obj, "ServiceID");
    let check = decode::string(&obj, "CheckID");
    ctx.shared.write(|st| {
        let idx = st.next_index();
        if !service.is_empty() {
            st.delete_service_at(idx, &node, &service);
        }
        if !check.is_empty() {
            st.delete_check_at(idx, &node, &check);
        }
        if service.is_empty() && check.is_empty() {
            st.delete_node_at(idx, &node);
        }
    });
    Ok(Reply::json(200, &json!(true), ctx.pretty()))
}

fn datacenters(ctx: &Ctx) -> Result<Reply, Reply> {
    Ok(Reply::json(
        200,
        &json!([ctx.shared.cfg.datacenter]),
        ctx.pretty(),
    ))
}

/// `?node-meta=key:value` pairs (all must match).
pub(crate) fn node_meta_ok(ctx: &Ctx, meta: &Map<String, Value>) -> bool {
    ctx.query
        .all("node-meta")
        .iter()
        .all(|kv| match kv.split_once(':') {
            Some((k, v)) => meta.get(k).and_then(Value::as_str) == Some(v),
            None => meta.contains_key(kv.as_str()),
        })
}

async fn nodes(ctx: &Ctx) -> Result<Reply, Reply> {
    let (opts, access) = read_opts(ctx)?;
    let filter = Filter::from_query(&ctx.query)?;
    let dc = ctx.shared.cfg.datacenter.clone();
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| {
        let list: Vec<Value> = st
            .catalog()
            .nodes
            .values()
            .filter(|n| node_meta_ok(ctx, &n.meta) && access.allows("node:read", &n.name))
            .map(|n| catalog_json::node(n, &dc))
            .filter(|v| filter.matches(v))
            .collect();
        Run {
            index: st.catalog().nodes_index,
            value: list,
            not_found: false,
        }
    })
    .await;
    Ok(answer(&Value::Array(run.value), &opts, run.index))
}

async fn services(ctx: &Ctx) -> Result<Reply, Reply> {
    let (opts, access) = read_opts(ctx)?;
    let filter = Filter::from_query(&ctx.query)?;
    let dc = ctx.shared.cfg.datacenter.clone();
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| {
        let cat = st.catalog();
        let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for s in cat.services.values() {
            let Some(n) = st.node(&s.node) else { continue };
            if !node_meta_ok(ctx, &n.meta) || !access.allows("service:read", &s.service) {
                continue;
            }
            if filter.is_some() && !filter.matches(&catalog_json::service_node(n, s, &dc)) {
                continue;
            }
            out.entry(s.service.clone())
                .or_default()
                .extend(s.tags.iter().cloned());
        }
        Run {
            index: cat.services_index,
            value: out,
            not_found: false,
        }
    })
    .await;
    let v: Map<String, Value> = run
        .value
        .into_iter()
        .map(|(k, tags)| (k, json!(tags.into_iter().collect::<Vec<_>>())))
        .collect();
    Ok(answer(&Value::Object(v), &opts, run.index))
}

async fn service_nodes(ctx: &Ctx, name: &str, connect: bool) -> Result<Reply, Reply> {
    if name.is_empty() {
        return Err(Reply::text(400, "Missing service name"));
    }
    let (opts, access) = read_opts(ctx)?;
    let filter = Filter::from_query(&ctx.query)?;
    let dc = ctx.shared.cfg.datacenter.clone();
    let tags = ctx.query.all("tag");
    let peer = ctx.query.get("peer").to_string();
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| {
        let cat = st.catalog();
        let list: Vec<Value> = cat
            .services
            .values()
            .filter(|_| peer.is_empty())
            .filter(|s| {
                if connect {
                    s.kind == "connect-proxy"
                        && s.proxy
                            .get("DestinationServiceName")
                            .and_then(Value::as_str)
                            == Some(name)
                } else {
                    s.service == name
                }
            })
            .filter(|s| tags.iter().all(|t| s.tags.contains(t)))
            .filter_map(|s| st.node(&s.node).map(|n| (n, s)))
            .filter(|(n, s)| {
                node_meta_ok(ctx, &n.meta)
                    && access.allows("node:read", &n.name)
                    && access.allows("service:read", &s.service)
            })
            .map(|(n, s)| catalog_json::service_node(n, s, &dc))
            .filter(|v| filter.matches(v))
            .collect();
        Run {
            index: cat.services_index,
            value: list,
            not_found: false,
        }
    })
    .await;
    let what = if connect { "connect" } else { "service" };
    Ok(agent_cached(
        ctx,
        &format!("catalog/{what}/{name}"),
        answer(&Value::Array(run.value), &opts, run.index),
    ))
}

/// `/v1/catalog/node/<n>` (services by ID) and, with `list`, `/v1/catalog/node-services/<n>`
/// (`NodeServiceList`: services as a list; an unknown node is `{"Node": null, "Services": []}`).
async fn node(ctx: &Ctx, name: &str, list: bool) -> Result<Reply, Reply> {
    if name.is_empty() {
        return Err(Reply::text(400, "Missing node name"));
    }
    let (opts, access) = read_opts(ctx)?;
    let filter = Filter::from_query(&ctx.query)?;
    let dc = ctx.shared.cfg.datacenter.clone();
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| {
        let cat = st.catalog();
        let value = st
            .node(name)
            .filter(|n| access.allows("node:read", &n.name))
            .map(|n| {
                let services = st
                    .node_services(name)
                    .into_iter()
                    .filter(|s| access.allows("service:read", &s.service))
                    .map(|s| (s.id.clone(), catalog_json::node_service(s)))
                    .filter(|(_, v)| filter.matches(v));
                let services = if list {
                    Value::Array(services.map(|(_, v)| v).collect())
                } else {
                    Value::Object(services.collect())
                };
                json!({"Node": catalog_json::node(n, &dc), "Services": services})
            });
        let missing = if list {
            json!({"Node": null, "Services": []})
        } else {
            Value::Null
        };
        Run {
            index: cat.nodes_index.max(cat.services_index),
            value: value.unwrap_or(missing),
            not_found: false,
        }
    })
    .await;
    Ok(answer(&run.value, &opts, run.index))
}

/// `/v1/catalog/gateway-services/<gateway>`: the services a gateway's config entry links.
async fn gateway_services(ctx: &Ctx, gateway: &str) -> Result<Reply, Reply> {
    if gateway.is_empty() {
        return Err(Reply::text(400, "Missing gateway name"));
    }
    let (opts, _) = read_opts(ctx)?;
    let run = blocking(&ctx.shared, &opts, Topic::Catalog, |st| Run {
        index: st.catalog().services_index,
        value: crate::endpoints::config_entries::gateway_services(st, gateway),
        not_found: false,
    })
    .await;
    Ok(answer(&Value::Array(run.value), &opts, run.index))
}
