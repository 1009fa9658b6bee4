//! `/v1/kv/<key>`: GET (single, `recurse`, `keys`, `raw`, blocking), PUT (plain, `cas`,
//! `acquire`, `release`, `flags`) and DELETE (plain, `cas`, `recurse`), in the order Consul's
//! handler checks things, with its status codes and texts.

use base64::Engine;
use bytes::Bytes;
use hyper::Method;
use serde_json::{json, Map, Value};

use crate::endpoints::access as acl;
use crate::endpoints::ctx::Ctx;
use crate::query::{blocking, parse_opts, parse_uint, reject_enterprise, Opts, Reply, Run};
use crate::state::{Entry, Topic};

/// A KV entry as Consul's JSON has it; `Value` only when `with_value`.
pub(crate) fn entry_json(e: &Entry, with_value: bool) -> Value {
    let mut m = Map::new();
    m.insert("LockIndex".into(), json!(e.lock_index));
    m.insert("Key".into(), json!(e.key));
    m.insert("Flags".into(), json!(e.flags));
    let value = if with_value && !e.value.is_empty() {
        json!(base64::engine::general_purpose::STANDARD.encode(&e.value))
    } else {
        Value::Null
    };
    m.insert("Value".into(), value);
    if !e.session.is_empty() {
        m.insert("Session".into(), json!(e.session));
    }
    m.insert("CreateIndex".into(), json!(e.create_index));
    m.insert("ModifyIndex".into(), json!(e.modify_index));
    Value::Object(m)
}

/// Consul's `conflictingFlags`: more than one of `flags` present → 400 with the re-encoded query.
fn conflicting(ctx: &Ctx, flags: &[&str]) -> Result<(), Reply> {
    if flags.iter().filter(|f| ctx.query.has(f)).count() > 1 {
        return Err(Reply::text(
            400,
            format!("Conflicting flags: {}", ctx.query.encode()),
        ));
    }
    Ok(())
}

fn missing_key(key: &str) -> Result<(), Reply> {
    if key.is_empty() {
        return Err(Reply::text(400, "Missing key name"));
    }
    Ok(())
}

fn common(ctx: &Ctx) -> Result<Opts, Reply> {
    reject_enterprise(&ctx.query, &ctx.headers)?;
    parse_opts(&ctx.query, &ctx.headers, ctx.shared.cfg.pretty_json())
}

/// What a PUT will do, decided before the body is read.
enum PutOp {
    Set,
    Cas(u64),
    Lock(String),
    Unlock(String),
}

struct PutReq {
    opts: Opts,
    flags: u64,
    op: PutOp,
}

/// Every check Consul makes before it reads a PUT body, in its order.
fn validate_put(ctx: &Ctx, key: &str) -> Result<PutReq, Reply> {
    let opts = common(ctx)?;
    missing_key(key)?;
    conflicting(ctx, &["cas", "acquire", "release"])?;
    let q = &ctx.query;
    let flags = if q.has("flags") {
        parse_uint(q.get("flags")).map_err(|e| Reply::text(500, e))?
    } else {
        0
    };
    let mut op = PutOp::Set;
    if q.has("cas") {
        op = PutOp::Cas(parse_uint(q.get("cas")).map_err(|e| Reply::text(500, e))?);
    }
    if q.has("acquire") {
        op = PutOp::Lock(q.get("acquire").to_string());
    }
    if q.has("release") {
        op = PutOp::Unlock(q.get("release").to_string());
    }
    let max = ctx.shared.cfg.kv_max_value_size;
    if let Some(n) = ctx.content_length.filter(|n| *n > max) {
        return Err(Reply::text(
            413,
            format!(
                "Request body({n} bytes) too large, max size: {max} bytes. See https://www.consul.io/docs/agent/config/config-files#kv_max_value_size."
            ),
        ));
    }
    Ok(PutReq { opts, flags, op })
}

/// The checks that let a PUT be refused without reading its body.
pub(crate) fn precheck_put(ctx: &Ctx, key: &str) -> Option<Reply> {
    validate_put(ctx, key).err()
}

/// Handles one `/v1/kv/` request; `key` is the decoded path after `/v1/kv/`.
pub(crate) async fn handle(ctx: &Ctx, method: &Method, key: &str, body: Bytes) -> Reply {
    let r = match *method {
        Method::GET => get(ctx, key).await,
        Method::PUT => put(ctx, key, body),
        _ => delete(ctx, key),
    };
    r.unwrap_or_else(|e| e)
}

/// `X-Consul-Results-Filtered-By-ACLs: true` when ACLs dropped entries from a listing and the
/// request carried a token (agent/http.go `setResultsFilteredByACLs`).
pub(crate) fn filtered_header(r: Reply, filtered: bool, opts: &crate::query::Opts) -> Reply {
    if filtered && opts.token.as_deref().is_some_and(|t| !t.is_empty()) {
        r.with("x-consul-results-filtered-by-acls", "true")
    } else {
        r
    }
}

async fn get(ctx: &Ctx, key: &str) -> Result<Reply, Reply> {
    let opts = common(ctx)?;
    let q = &ctx.query;
    let pretty = opts.pretty;
    if q.has("keys") {
        let sep = if q.has("separator") {
            q.get("separator")
        } else {
            q.get("seperator")
        };
        let access = acl::resolve(ctx, opts.token.as_deref())?;
        ctx.rpc_check(&opts.dc)?;
        let run = blocking(&ctx.shared, &opts, Topic::KvTable, |st| {
            let (index, keys) = st.kv_keys(key, sep);
            // Consul filters what the token may not read instead of denying.
            let all = keys.len();
            let keys: Vec<_> = keys
                .into_iter()
                .filter(|k| access.allows("key:read", k))
                .collect();
            Run {
                index,
                value: (all != keys.len(), keys),
                not_found: false,
            }
        })
        .await;
        let (filtered, keys) = run.value;
        let r = if keys.is_empty() && !key.is_empty() {
            Reply::text(404, "").with_meta(run.index)
        } else {
            Reply::json(200, &json!(keys), pretty).with_meta(run.index)
        };
        return Ok(filtered_header(r, filtered, &opts));
    }
    if q.has("recurse") {
        let access = acl::resolve(ctx, opts.token.as_deref())?;
        ctx.rpc_check(&opts.dc)?;
        let run = blocking(&ctx.shared, &opts, Topic::KvTable, |st| {
            let (index, entries) = st.kv_list(key);
            let all = entries.len();
            let entries: Vec<_> = entries
                .into_iter()
                .filter(|e| access.allows("key:read", &e.key))
                .collect();
            Run {
                index,
                value: (all != entries.len(), entries),
                not_found: false,
            }
        })
        .await;
        let (filtered, entries) = run.value;
        let r = if entries.is_empty() {
            Reply::text(404, "").with_meta(run.index)
        } else {
            let list: Vec<Value> = entries.iter().map(|e| entry_json(e, true)).collect();
            Reply::json(200, &Value::Array(list), pretty).with_meta(run.index)
        };
        return Ok(filtered_header(r, filtered, &opts));
    }
    missing_key(key)?;
    acl::require(ctx, opts.token.as_deref(), "key:read", key)?;
    ctx.rpc_check(&opts.dc)?;
    let run = blocking(&ctx.shared, &opts, Topic::Key(key.to_string()), |st| {
        let (index, entry) = st.kv_get(key);
        Run {
            index,
            not_found: entry.is_none(),
            value: entry,
        }
    })
    .await;
    let Some(entry) = run.value else {
        return Ok(Reply::text(404, "").with_meta(run.index));
    };
    if q.has("raw") {
        return Ok(Reply {
            status: 200,
            headers: vec![
                ("content-type", "text/plain".to_string()),
                ("x-content-type-options", "nosniff".to_string()),
                ("content-security-policy", "sandbox".to_string()),
            ],
            body: Bytes::from(entry.value),
        }
        .with_meta(run.index));
    }
    Ok(Reply::json(200, &json!([entry_json(&entry, true)]), pretty).with_meta(run.index))
}

fn put(ctx: &Ctx, key: &str, body: Bytes) -> Result<Reply, Reply> {
    let req = validate_put(ctx, key)?;
    ctx.rpc_check(&req.opts.dc)?;
    acl::require(ctx, req.opts.token.as_deref(), "key:write", key)?;
    let entry = Entry::new(key, body.to_vec(), req.flags);
    let applied: Result<bool, String> = ctx.shared.write(|st| match &req.op {
        PutOp::Set => {
            let i = st.next_index();
            st.kv_set_at(i, entry);
            Ok(true)
        }
        PutOp::Cas(cas) => {
            let i = st.next_index();
            Ok(st.kv_cas_at(i, entry, *cas).is_some())
        }
        PutOp::Lock(sid) => {
            // The leader's lock-delay pre-check: no raft write, no index.
            if st.lock_delayed(key) {
                return Ok(false);
            }
            let i = st.next_index();
            st.kv_lock_at(i, entry, sid).map(|r| r.is_some())
        }
        PutOp::Unlock(sid) => {
            let i = st.next_index();
            st.kv_unlock_at(i, entry, sid).map(|r| r.is_some())
        }
    });
    match applied {
        Ok(ok) => Ok(Reply::json(200, &json!(ok), req.opts.pretty)),
        Err(e) => Err(Reply::text(500, format!("raft apply failed: {e}"))),
    }
}

fn delete(ctx: &Ctx, key: &str) -> Result<Reply, Reply> {
    let opts = common(ctx)?;
    conflicting(ctx, &["recurse", "cas"])?;
    let recurse = ctx.query.has("recurse");
    if !recurse {
        missing_key(key)?;
    }
    let cas = if ctx.query.has("cas") {
        Some(parse_uint(ctx.query.get("cas")).map_err(|e| Reply::text(500, e))?)
    } else {
        None
    };
    ctx.rpc_check(&opts.dc)?;
    acl::require(ctx, opts.token.as_deref(), "key:write", key)?;
    let ok = ctx.shared.write(|st| {
        let i = st.next_index();
        match cas {
            Some(c) => st.kv_delete_cas_at(i, key, c),
            None if recurse => {
                st.kv_delete_tree_at(i, key);
                true
            }
            None => {
                st.kv_delete_at(i, key);
                true
            }
        }
    });
    Ok(Reply::json(200, &json!(ok), opts.pretty))
}
