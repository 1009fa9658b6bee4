//! `PUT /v1/txn`: KV operations, and node, service and check operations
//! ([`crate::endpoints::txn_catalog`]), applied atomically. Decoding is strict (unknown fields are
//! errors, names match case-insensitively as in Go), limits are checked as Consul checks them,
//! a txn with no write verb takes the read-only path, and any failing op makes the whole txn a
//! 409 listing every failing op with nothing applied. Older Consul releases decoded leniently
//! and through float64, allowed fewer ops and lacked `get-or-empty` (see [`ConsulVersion`]).

use base64::Engine;
use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::endpoints::access::{self as acl, Access};
use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode::{field, json_kind};
use crate::endpoints::kv::entry_json;
use crate::endpoints::txn_catalog::{CatalogOp, Table};
use crate::godur::go_quote;
use crate::query::{parse_opts, Reply};
use crate::state::{Entry, State};
use crate::version::{go_uint64_of_float64, ConsulVersion};

const TXN_DOCS: &str = "https://www.consul.io/docs/agent/config/config-files#txn_max_req_len";

/// One decoded KV operation.
#[derive(Debug, Clone)]
struct KvOp {
    verb: String,
    key: String,
    value: Vec<u8>,
    flags: u64,
    index: u64,
    session: String,
}

/// One decoded operation of a txn.
#[derive(Debug, Clone)]
enum Op {
    Kv(KvOp),
    Catalog(CatalogOp),
}

impl Op {
    fn is_write(&self) -> bool {
        match self {
            Op::Kv(k) => is_write(&k.verb),
            Op::Catalog(c) => c.is_write(),
        }
    }
}

/// The size limit of a txn body: the larger of `txn_max_req_len` and `kv_max_value_size`.
fn max_len(ctx: &Ctx) -> u64 {
    ctx.shared
        .cfg
        .txn_max_req_len
        .max(ctx.shared.cfg.kv_max_value_size)
}

/// Refuses a body whose declared length is over the limit, before reading it.
pub(crate) fn precheck(ctx: &Ctx) -> Option<Reply> {
    let max = max_len(ctx);
    let n = ctx.content_length.filter(|n| *n > max)?;
    Some(Reply::text(
        413,
        format!("Request body({n} bytes) too large, max size: {max} bytes. See {TXN_DOCS}."),
    ))
}

fn unknown_field(name: &str) -> String {
    format!("json: unknown field {}", go_quote(name))
}

fn type_err(v: &Value, path: &str, go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {path} of type {go_type}",
        json_kind(v)
    )
}

/// Decodes one `KV` object of an op.
fn decode_kv(obj: &Map<String, Value>, v: ConsulVersion) -> Result<KvOp, String> {
    const FIELDS: &[&str] = &[
        "Verb",
        "Key",
        "Value",
        "Flags",
        "Index",
        "Session",
        "Namespace",
    ];
    if v.txn_rejects_unknown_fields() {
        for k in obj.keys() {
            let known = FIELDS.iter().any(|f| f.eq_ignore_ascii_case(k))
                || ("Partition".eq_ignore_ascii_case(k) && v.txn_kv_knows_partition());
            if !known {
                return Err(unknown_field(k));
            }
        }
    }
    let string = |name: &str| -> Result<String, String> {
        match field(obj, name) {
            None | Some(Value::Null) => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(v) => Err(type_err(v, &format!("KVTxnOp.KV.{name}"), "string")),
        }
    };
    let uint = |name: &str| -> Result<u64, String> {
        match field(obj, name) {
            None | Some(Value::Null) => Ok(0),
            // Before 1.6.2 every number went through a float64 (mapstructure from interface{}).
            Some(Value::Number(n)) if v.txn_numbers_through_float64() => match n.as_f64() {
                Some(f) if f >= 0.0 => Ok(go_uint64_of_float64(f)),
                _ => Err(format!("json: cannot unmarshal number {n} into Go struct field KVTxnOp.KV.{name} of type uint64")),
            },
            Some(Value::Number(n)) => n.as_u64().ok_or_else(|| {
                format!("json: cannot unmarshal number {n} into Go struct field KVTxnOp.KV.{name} of type uint64")
            }),
            Some(v) => Err(type_err(v, &format!("KVTxnOp.KV.{name}"), "uint64")),
        }
    };
    let value = match field(obj, "Value") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| match e {
                base64::DecodeError::InvalidByte(i, _)
                | base64::DecodeError::InvalidLastSymbol(i, _) => {
                    format!("illegal base64 data at input byte {i}")
                }
                _ => format!("illegal base64 data at input byte {}", s.len()),
            })?,
        Some(v) => return Err(type_err(v, "KVTxnOp.KV.Value", "[]uint8")),
    };
    // Namespace/Partition are accepted by the decoder (Consul CE ignores empty ones).
    Ok(KvOp {
        verb: string("Verb")?,
        key: string("Key")?,
        value,
        flags: uint("Flags")?,
        index: uint("Index")?,
        session: string("Session")?,
    })
}

/// Decodes the body into its KV ops and the number of ops it listed. Errors are the text
/// after `Failed to parse body: `.
fn decode(body: &[u8], version: ConsulVersion) -> Result<(Vec<Op>, usize), String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| {
        if e.is_eof() {
            "unexpected EOF".to_string()
        } else {
            format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            )
        }
    })?;
    let Value::Array(items) = v else {
        return Err(format!(
            "json: cannot unmarshal {} into Go value of type api.TxnOps",
            json_kind(&v)
        ));
    };
    let mut ops = Vec::with_capacity(items.len());
    for item in &items {
        let obj = match item {
            Value::Object(o) => o,
            Value::Null => continue,
            v => {
                return Err(format!(
                    "json: cannot unmarshal {} into Go value of type api.TxnOp",
                    json_kind(v)
                ))
            }
        };
        for k in obj.keys() {
            let known = ["KV", "Node", "Service", "Check"]
                .iter()
                .any(|f| f.eq_ignore_ascii_case(k));
            if !known && version.txn_rejects_unknown_fields() {
                return Err(unknown_field(k));
            }
        }
        // The first operation set wins, as in Consul's conversion (`KV`, `Node`, `Service`,
        // `Check`).
        let mut op = match field(obj, "KV") {
            None | Some(Value::Null) => None,
            Some(Value::Object(kv)) => Some(Op::Kv(decode_kv(kv, version)?)),
            Some(v) => return Err(type_err(v, "TxnOp.KV", "api.KVTxnOp")),
        };
        for table in [Table::Node, Table::Service, Table::Check] {
            if op.is_some() {
                break;
            }
            match field(obj, table.name()) {
                None | Some(Value::Null) => {}
                Some(Value::Object(o)) => op = Some(Op::Catalog(CatalogOp::decode(table, o)?)),
                Some(v) => {
                    let name = table.name();
                    return Err(type_err(
                        v,
                        &format!("TxnOp.{name}"),
                        &format!("api.{name}TxnOp"),
                    ));
                }
            }
        }
        ops.push(op);
    }
    // An op with no operation set does nothing, as in Consul's conversion.
    let count = ops.len();
    Ok((ops.into_iter().flatten().collect(), count))
}

/// Consul's `isWrite`.
fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "set" | "delete" | "delete-cas" | "delete-tree" | "cas" | "lock" | "unlock"
    )
}

/// Handles `PUT /v1/txn`.
pub(crate) fn handle(ctx: &Ctx, body: Bytes) -> Reply {
    handle_inner(ctx, &body).unwrap_or_else(|e| e)
}

fn handle_inner(ctx: &Ctx, body: &[u8]) -> Result<Reply, Reply> {
    let max = max_len(ctx);
    if body.len() as u64 > max {
        return Err(Reply::text(
            413,
            format!("Request body too large, max size: {max} bytes. See {TXN_DOCS}."),
        ));
    }
    let version = ctx.shared.cfg.consul_version;
    let (ops, count) = decode(body, version)
        .map_err(|e| Reply::text(400, format!("Failed to parse body: {e}")))?;
    let max_ops = version.txn_max_ops();
    if count > max_ops {
        return Err(Reply::text(
            413,
            format!("Transaction contains too many operations ({count} > {max_ops})"),
        ));
    }
    let max_value = ctx.shared.cfg.kv_max_value_size;
    for op in ops.iter().filter_map(|o| match o {
        Op::Kv(k) => Some(k),
        Op::Catalog(_) => None,
    }) {
        if op.value.len() as u64 > max_value {
            return Err(Reply::text(
                413,
                format!(
                    "Value for key {} is too large ({} > {max_value} bytes)",
                    go_quote(&op.key),
                    op.value.len()
                ),
            ));
        }
    }
    let writes = ops.iter().any(Op::is_write);
    let catalog_writes = ops
        .iter()
        .any(|o| matches!(o, Op::Catalog(c) if c.is_write()));
    let dc_name = ctx.shared.cfg.datacenter.clone();
    let pretty = ctx.pretty();
    let (token, dc) = if writes {
        (
            crate::query::request_token(&ctx.query, &ctx.headers),
            ctx.query.get("dc").to_string(),
        )
    } else {
        let o = parse_opts(&ctx.query, &ctx.headers, ctx.shared.cfg.pretty_json())?;
        (o.token, o.dc)
    };
    ctx.rpc_check(&dc)?;
    let access = acl::resolve(ctx, token.as_deref())?;
    let (results, errors) = ctx.shared.write(|st| {
        let errors = precheck_ops(st, &ops, &access, writes, version);
        if !errors.is_empty() {
            return (Vec::new(), errors);
        }
        if !writes {
            return run_ops(st, &ops, 0, &access, version, &dc_name);
        }
        let idx = st.next_index();
        if catalog_writes {
            st.begin_with_catalog();
        } else {
            st.begin();
        }
        let (results, errors) = run_ops(st, &ops, idx, &access, version, &dc_name);
        if errors.is_empty() {
            st.commit();
        } else {
            st.rollback();
        }
        (results, errors)
    });
    let conflict = !errors.is_empty();
    let mut body = Map::new();
    body.insert(
        "Results".into(),
        // Consul's dispatcher starts from an empty (non-nil) list: `[]` on success.
        if conflict {
            Value::Null
        } else {
            Value::Array(results)
        },
    );
    body.insert(
        "Errors".into(),
        if conflict {
            Value::Array(
                errors
                    .iter()
                    .map(|(i, w)| json!({"OpIndex": i, "What": w}))
                    .collect(),
            )
        } else {
            Value::Null
        },
    );
    if !writes {
        for (k, v) in [
            ("Index", json!(0)),
            ("LastContact", json!(0)),
            ("KnownLeader", json!(true)),
            ("ConsistencyLevel", json!("")),
            ("NotModified", json!(false)),
            ("Backend", json!(0)),
            ("ResultsFilteredByACLs", json!(false)),
        ] {
            body.insert(k.into(), v);
        }
    }
    let mut reply = Reply::json(
        if conflict { 409 } else { 200 },
        &Value::Object(body),
        pretty,
    );
    if !writes {
        reply = reply
            .with("x-consul-lastcontact", "0")
            .with("x-consul-knownleader", "true");
    }
    Ok(reply)
}

/// The leader's checks before anything is applied: keys present, ACLs, and (for writes) the
/// lock-delay of `lock` ops.
fn precheck_ops(
    st: &mut State,
    ops: &[Op],
    access: &Access,
    writes: bool,
    version: ConsulVersion,
) -> Vec<(usize, String)> {
    let mut errors = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let Op::Kv(op) = op else { continue };
        if op.key.is_empty() && op.verb != "delete-tree" {
            errors.push((i, "Must provide key".to_string()));
            continue;
        }
        // An unknown verb (`get-or-empty` before 1.14.0 too) needs key write permission.
        let needs = match op.verb.as_str() {
            "get" | "get-tree" => None,
            "get-or-empty" if version.txn_get_or_empty() => None,
            "check-session" | "check-index" => Some("key:read"),
            _ => Some("key:write"),
        };
        if needs.is_some_and(|p| !access.allows(p, &op.key)) {
            errors.push((i, "Permission denied".to_string()));
            continue;
        }
        if writes && op.verb == "lock" && st.lock_delayed(&op.key) {
            errors.push((
                i,
                format!("failed to lock key {} due to lock delay", go_quote(&op.key)),
            ));
        }
    }
    errors
}

/// Runs the ops in order against the state (inside a journal for writes). Returns the results
/// and the failing ops.
fn run_ops(
    st: &mut State,
    ops: &[Op],
    idx: u64,
    access: &Access,
    version: ConsulVersion,
    dc: &str,
) -> (Vec<Value>, Vec<(usize, String)>) {
    let mut results = Vec::new();
    let mut errors = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let op = match op {
            Op::Kv(k) => k,
            Op::Catalog(c) => {
                match c.run(st, idx, access, dc) {
                    Ok(rows) => results.extend(rows),
                    Err(what) => errors.push((i, what)),
                }
                continue;
            }
        };
        let key = op.key.as_str();
        let q = go_quote(key);
        let req = Entry::new(key, op.value.clone(), op.flags);
        let out: Result<Vec<(Entry, bool)>, String> = match op.verb.as_str() {
            "set" => Ok(vec![(st.kv_set_at(idx, req), false)]),
            "cas" => st
                .kv_cas_at(idx, req, op.index)
                .map(|e| vec![(e, false)])
                .ok_or(format!("failed to set key {q}, index is stale")),
            "lock" => match st.kv_lock_at(idx, req, &op.session) {
                Ok(Some(e)) => Ok(vec![(e, false)]),
                Ok(None) => Err(format!("failed to lock key {q}, lock is already held")),
                Err(e) => Err(e),
            },
            "unlock" => match st.kv_unlock_at(idx, req, &op.session) {
                Ok(Some(e)) => Ok(vec![(e, false)]),
                Ok(None) => Err(format!(
                    "failed to unlock key {q}, lock isn't held, or is held by another session"
                )),
                Err(e) => Err(e),
            },
            "get" => st
                .kv_get(key)
                .1
                .map(|e| vec![(e, true)])
                .ok_or(format!("key {q} doesn't exist")),
            "get-or-empty" if version.txn_get_or_empty() => Ok(vec![(
                st.kv_get(key).1.unwrap_or_else(|| {
                    let mut e = Entry::new(key, Vec::new(), op.flags);
                    e.session = op.session.clone();
                    e.modify_index = op.index;
                    e
                }),
                true,
            )]),
            "get-tree" => Ok(st.kv_list(key).1.into_iter().map(|e| (e, true)).collect()),
            "check-session" => match st.kv_get(key).1 {
                None => Err(format!("failed to check session, key {q} doesn't exist")),
                Some(e) if e.session != op.session => Err(format!(
                    "failed session check for key {q}, current session {} != {}",
                    go_quote(&e.session),
                    go_quote(&op.session)
                )),
                Some(e) => Ok(vec![(e, false)]),
            },
            "check-index" => match st.kv_get(key).1 {
                None => Err(format!("failed to check index, key {q} doesn't exist")),
                Some(e) if e.modify_index != op.index => Err(format!(
                    "failed index check for key {q}, current modify index {} != {}",
                    e.modify_index, op.index
                )),
                Some(e) => Ok(vec![(e, false)]),
            },
            "check-not-exists" => match st.kv_get(key).1 {
                Some(_) => Err(format!("key {q} exists")),
                None => Ok(vec![]),
            },
            "delete" => {
                st.kv_delete_at(idx, key);
                Ok(vec![])
            }
            "delete-cas" => {
                if st.kv_delete_cas_at(idx, key, op.index) {
                    Ok(vec![])
                } else {
                    Err(format!("failed to delete key {q}, index is stale"))
                }
            }
            "delete-tree" => {
                st.kv_delete_tree_at(idx, key);
                Ok(vec![])
            }
            other => Err(format!("unknown KV verb {}", go_quote(other))),
        };
        match out {
            Ok(mut entries) => {
                // 1.6.x and 1.7.x answered a write that changed nothing with the txn's index
                // (a real write always stores ModifyIndex = idx, so an older one was a no-op).
                if version.txn_reports_new_index_for_noop_write()
                    && matches!(op.verb.as_str(), "set" | "cas" | "lock" | "unlock")
                {
                    for (e, _) in &mut entries {
                        e.modify_index = e.modify_index.max(idx);
                    }
                }
                for (e, with_value) in entries {
                    // Reads are filtered by ACL on the way out, as Consul does.
                    if with_value && !access.allows("key:read", &e.key) {
                        continue;
                    }
                    results.push(json!({ "KV": entry_json(&e, with_value) }));
                }
            }
            Err(what) => errors.push((i, what)),
        }
    }
    (results, errors)
}
