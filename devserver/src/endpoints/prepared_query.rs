//! `/v1/query` (`agent/prepared_query_endpoint.go`): prepared queries stored, listed, read,
//! updated and deleted, and executed by ID or name against the catalog: the healthy instances
//! of the service (no critical check other than those in `IgnoreCheckIDs`; with `OnlyPassing`
//! no warning either), narrowed by `Tags` (`!tag` excludes), `NodeMeta` and `ServiceMeta`.
//! A `name_prefix_match` template answers names it prefixes; its `Regexp` interpolation is not
//! implemented. Failover to other datacenters has no other datacenter to go to.

use hyper::Method;
use serde_json::{json, Map, Value};

use crate::endpoints::access::require;
use crate::endpoints::catalog_json;
use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode;
use crate::query::Reply;
use crate::state::{new_uuid, CheckStatus, State};

/// Routes `/v1/query` and `/v1/query/<id>[/execute|/explain]`.
pub(crate) fn handle(ctx: &Ctx, method: &Method, pattern: &str, rest: &str, body: &[u8]) -> Reply {
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    let t = token.as_deref();
    let r = (|| {
        ctx.rpc_check(ctx.query.get("dc"))?;
        match (pattern, method.as_str()) {
            ("/v1/query", "POST") => create(ctx, t, body),
            ("/v1/query", _) => list(ctx, t),
            (_, m) => {
                let (id, action) = match rest.split_once('/') {
                    Some((id, a)) => (id, a),
                    None => (rest, ""),
                };
                match (action, m) {
                    ("", "GET") => read(ctx, t, id),
                    ("", "PUT") => update(ctx, t, id, body),
                    ("", "DELETE") => delete(ctx, t, id),
                    ("execute", "GET") => execute(ctx, id, false),
                    ("explain", "GET") => execute(ctx, id, true),
                    _ => Err(Reply::text(405, format!("method {m} not allowed"))),
                }
            }
        }
    })();
    r.unwrap_or_else(|e| e)
}

fn not_found() -> Reply {
    Reply::text(404, "Query not found")
}

/// `PreparedQuery.Apply` on an ID no query has (update, delete).
fn no_such_query(id: &str) -> Reply {
    Reply::text(
        500,
        format!("Cannot modify non-existent prepared query: '{id}'"),
    )
}

/// The stored form: the defaults of every field, then what the request set.
fn normalize(body: &Map<String, Value>, id: &str) -> Value {
    let mut def = json!({
        "ID": id, "Name": "", "Session": "", "Token": "",
        "Service": {
            "Service": "", "Failover": {"NearestN": 0, "Datacenters": null},
            "OnlyPassing": false, "IgnoreCheckIDs": null, "Near": "", "Tags": null,
            "NodeMeta": null, "ServiceMeta": null, "Connect": false
        },
        "DNS": {"TTL": ""},
        "Template": {"Type": "", "Regexp": "", "RemoveEmptyTags": false},
    });
    for (k, v) in body {
        let key = ["Name", "Session", "Token", "Service", "DNS", "Template"]
            .into_iter()
            .find(|f| f.eq_ignore_ascii_case(k));
        match (key, v) {
            (Some(f @ ("Service" | "DNS" | "Template")), Value::Object(sub)) => {
                let slot = def[f].as_object_mut().expect("object default");
                for (sk, sv) in sub {
                    let name = slot
                        .keys()
                        .find(|x| x.eq_ignore_ascii_case(sk))
                        .cloned()
                        .unwrap_or_else(|| sk.clone());
                    slot.insert(name, sv.clone());
                }
            }
            (Some(f), v) => def[f] = v.clone(),
            (None, _) => {}
        }
    }
    def
}

fn create(ctx: &Ctx, t: Option<&str>, body: &[u8]) -> Result<Reply, Reply> {
    require(ctx, t, "query:write", "")?;
    let obj = decode::object(body, "structs.PreparedQuery")?;
    let id = new_uuid();
    let mut def = normalize(&obj, &id);
    validate(&def)?;
    ctx.shared.write(|st| {
        let idx = st.next_index();
        def["CreateIndex"] = json!(idx);
        def["ModifyIndex"] = json!(idx);
        st.operator.prepared_queries.insert(id.clone(), def);
        st.operator.prepared_queries_index = idx;
    });
    Ok(Reply::json(200, &json!({"ID": id}), ctx.pretty()))
}

fn validate(def: &Value) -> Result<(), Reply> {
    if def["Service"]["Service"].as_str().unwrap_or("").is_empty() {
        // `PreparedQuery.Apply` wraps `parseQuery`'s error; an RPC error is a 500.
        return Err(Reply::text(
            500,
            "Invalid prepared query: Must provide a Service name to query",
        ));
    }
    Ok(())
}

fn update(ctx: &Ctx, t: Option<&str>, id: &str, body: &[u8]) -> Result<Reply, Reply> {
    require(ctx, t, "query:write", "")?;
    let obj = decode::object(body, "structs.PreparedQuery")?;
    let mut def = normalize(&obj, id);
    ctx.shared.write(|st| {
        // `Apply` looks the query up before it parses the new definition.
        let Some(old) = st.operator.prepared_queries.get(id) else {
            return Err(no_such_query(id));
        };
        validate(&def)?;
        def["CreateIndex"] = old["CreateIndex"].clone();
        let idx = st.next_index();
        def["ModifyIndex"] = json!(idx);
        st.operator.prepared_queries.insert(id.to_string(), def);
        st.operator.prepared_queries_index = idx;
        Ok(())
    })?;
    Ok(Reply::text(200, ""))
}

fn delete(ctx: &Ctx, t: Option<&str>, id: &str) -> Result<Reply, Reply> {
    require(ctx, t, "query:write", "")?;
    ctx.shared.write(|st| {
        if st.operator.prepared_queries.remove(id).is_none() {
            return Err(no_such_query(id));
        }
        st.operator.prepared_queries_index = st.next_index();
        Ok(())
    })?;
    Ok(Reply::text(200, ""))
}

fn read(ctx: &Ctx, t: Option<&str>, id: &str) -> Result<Reply, Reply> {
    require(ctx, t, "query:read", "")?;
    let (def, index) = ctx.shared.read(|st| {
        (
            st.operator.prepared_queries.get(id).cloned(),
            st.operator.prepared_queries_index,
        )
    });
    let def = def.ok_or_else(not_found)?;
    Ok(Reply::json(200, &json!([def]), ctx.pretty()).with_meta(index))
}

fn list(ctx: &Ctx, t: Option<&str>) -> Result<Reply, Reply> {
    require(ctx, t, "query:read", "")?;
    let (defs, index) = ctx.shared.read(|st| {
        let defs: Vec<Value> = st.operator.prepared_queries.values().cloned().collect();
        (defs, st.operator.prepared_queries_index)
    });
    Ok(Reply::json(200, &Value::Array(defs), ctx.pretty()).with_meta(index))
}

/// The query an ID or name names: by ID, by exact name, else the template whose name is the
/// longest prefix of it.
fn resolve(st: &State, id_or_name: &str) -> Option<Value> {
    if let Some(d) = st.operator.prepared_queries.get(id_or_name) {
        return Some(d.clone());
    }
    let by_name = |d: &&Value| d["Name"].as_str() == Some(id_or_name);
    if let Some(d) = st.operator.prepared_queries.values().find(by_name) {
        return Some(d.clone());
    }
    st.operator
        .prepared_queries
        .values()
        .filter(|d| d["Template"]["Type"] == "name_prefix_match")
        .filter(|d| id_or_name.starts_with(d["Name"].as_str().unwrap_or("")))
        .max_by_key(|d| d["Name"].as_str().unwrap_or("").len())
        .cloned()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn meta_ok(want: &Value, have: &Map<String, Value>) -> bool {
    want.as_object()
        .is_none_or(|w| w.iter().all(|(k, v)| have.get(k) == Some(v)))
}

fn execute(ctx: &Ctx, id_or_name: &str, explain: bool) -> Result<Reply, Reply> {
    let dc = ctx.shared.cfg.datacenter.clone();
    let (def, nodes, index) = ctx.shared.read(|st| {
        let Some(def) = resolve(st, id_or_name) else {
            return (None, Vec::new(), 0);
        };
        let q = &def["Service"];
        let service = q["Service"].as_str().unwrap_or("").to_string();
        let only_passing = q["OnlyPassing"].as_bool() == Some(true);
        let ignore = strings(&q["IgnoreCheckIDs"]);
        let tags = strings(&q["Tags"]);
        let cat = st.catalog();
        let mut out = Vec::new();
        for s in cat
            .services
            .values()
            .filter(|s| s.service.eq_ignore_ascii_case(&service))
        {
            let Some(n) = st.node(&s.node) else { continue };
            let tag_ok = tags.iter().all(|t| match t.strip_prefix('!') {
                Some(not) => !s.tags.iter().any(|x| x.eq_ignore_ascii_case(not)),
                None => s.tags.iter().any(|x| x.eq_ignore_ascii_case(t)),
            });
            if !tag_ok || !meta_ok(&q["NodeMeta"], &n.meta) || !meta_ok(&q["ServiceMeta"], &s.meta)
            {
                continue;
            }
            let checks: Vec<_> = st
                .node_checks(&s.node)
                .into_iter()
                .filter(|c| c.service_id.is_empty() || c.service_id == s.id)
                .collect();
            let healthy = checks
                .iter()
                .filter(|c| !ignore.contains(&c.check_id))
                .all(|c| {
                    c.status == CheckStatus::Passing
                        || (c.status == CheckStatus::Warning && !only_passing)
                });
            if healthy {
                out.push(json!({
                    "Node": catalog_json::node(n, &dc),
                    "Service": catalog_json::node_service(s),
                    "Checks": checks.into_iter().map(catalog_json::check).collect::<Vec<_>>(),
                }));
            }
        }
        let index = cat
            .nodes_index
            .max(cat.services_index)
            .max(cat.checks_index);
        (Some(def), out, index)
    });
    let def = def.ok_or_else(not_found)?;
    let body = if explain {
        json!({"Query": def})
    } else {
        json!({
            "Service": def["Service"]["Service"], "Nodes": nodes, "DNS": def["DNS"],
            "Datacenter": dc, "Failovers": 0,
        })
    };
    Ok(Reply::json(200, &body, ctx.pretty()).with_meta(index.max(1)))
}
