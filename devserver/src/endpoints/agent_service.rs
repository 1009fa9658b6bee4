//! `GET /v1/agent/service/<id>` (`AgentService` in `agent/agent_endpoint.go`): one local
//! service as `api.AgentService`, with its `ContentHash` (also in `X-Consul-ContentHash`), and
//! hash-based blocking: with `?hash=` equal to the current hash the answer waits (`?wait=`,
//! default 300 s, at most 600 s, plus jitter below wait/16) until the service changes.
//!
//! The hash is the one Consul computes, `hashstructure.Hash(&api.AgentService, nil)` printed as
//! `%x`: the library's v1 format over the Go struct, with FNV-1 (64 bit). What that walk does,
//! in short: a string hashes to FNV-1 of its bytes; an `int` to FNV-1 of its 8 little-endian
//! bytes, a `bool` to FNV-1 of one byte; a nil pointer to the hash of the `int` 0; a slice folds
//! its elements in order (`h = FNV-1(h ‖ elem)`, each as 8 little-endian bytes); a map XORs
//! `FNV-1(key ‖ value)` over its entries (0 when empty); a struct starts from the hash of its
//! type name and XORs in `FNV-1(name ‖ value)` for every field not tagged `hash:"ignore"`.
//! `api.AgentService` of Consul 1.15 has the fields `Kind ID Service Tags Meta Port Address
//! SocketPath TaggedAddresses Weights EnableTagOverride CreateIndex ModifyIndex ContentHash Proxy
//! Connect PeerName` (its `Namespace`, `Partition` and `Datacenter` are ignored), so the dev
//! server's hash equals Consul's for every service without a `Proxy` (typical services,
//! Connect-native ones). A proxy's `Proxy` block is hashed from its JSON text instead of as
//! Consul's struct: the hash still changes with it, but it is not Consul's value.
//!
//! Also here, for the agent's check registrations: [`check_probe`], what an HTTP or TCP check
//! definition asks the server's check runner to probe.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::endpoints::access;
use crate::endpoints::catalog_json;
use crate::endpoints::ctx::Ctx;
use crate::endpoints::decode;
use crate::godur::parse_go_duration;
use crate::query::Reply;
use crate::state::{Probe, Service, Target, Topic};

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1, 64 bit (Go's `fnv.New64`): multiply, then XOR each byte.
fn fnv1(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(FNV_OFFSET, |h, b| h.wrapping_mul(FNV_PRIME) ^ u64::from(*b))
}

fn string(s: &str) -> u64 {
    fnv1(s.as_bytes())
}

fn int(i: i64) -> u64 {
    fnv1(&i.to_le_bytes())
}

fn uint(u: u64) -> u64 {
    fnv1(&u.to_le_bytes())
}

fn boolean(b: bool) -> u64 {
    fnv1(&[u8::from(b)])
}

/// Two hashes folded in order.
fn ordered(a: u64, b: u64) -> u64 {
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    fnv1(&bytes)
}

fn strings(list: &[String]) -> u64 {
    list.iter().fold(0, |h, s| ordered(h, string(s)))
}

/// A map: the XOR of `ordered(key, value)` over its entries.
fn map<'a>(entries: impl Iterator<Item = (&'a String, u64)>) -> u64 {
    entries.fold(0, |h, (k, v)| h ^ ordered(string(k), v))
}

/// A struct: its type name's hash XORed with `ordered(field name, value)` per field.
fn structure(name: &str, fields: &[(&str, u64)]) -> u64 {
    fields
        .iter()
        .fold(string(name), |h, (f, v)| h ^ ordered(string(f), *v))
}

/// A nil pointer hashes as the `int` 0.
fn nil() -> u64 {
    int(0)
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `api.AgentWeights` as `buildAgentService` fills it: `Passing` 1 unless set above 0.
fn weights(s: &Service) -> (i64, i64) {
    let passing = s.weights["Passing"]
        .as_i64()
        .filter(|p| *p > 0)
        .unwrap_or(1);
    let warning = if s.weights.is_object() {
        s.weights["Warning"].as_i64().unwrap_or(0)
    } else {
        1
    };
    (passing, warning)
}

/// The `ContentHash` Consul gives this service on `GET /v1/agent/service/<id>`.
pub(crate) fn content_hash(s: &Service) -> String {
    let (passing, warning) = weights(s);
    let tagged = map(s.tagged_addresses.iter().map(|(k, v)| {
        let addr = structure(
            "ServiceAddress",
            &[
                ("Address", string(&text(&v["Address"]))),
                ("Port", int(v["Port"].as_i64().unwrap_or(0))),
            ],
        );
        (k, addr)
    }));
    let meta = map(s.meta.iter().map(|(k, v)| (k, string(&text(v)))));
    let is_proxy = s.kind == "connect-proxy" || s.kind.ends_with("-gateway");
    let proxy = if is_proxy && !s.proxy.is_null() {
        string(&s.proxy.to_string())
    } else {
        nil()
    };
    let connect = if s.connect["Native"] == json!(true) {
        structure(
            "AgentServiceConnect",
            &[("Native", boolean(true)), ("SidecarService", nil())],
        )
    } else {
        nil()
    };
    let h = structure(
        "AgentService",
        &[
            ("Kind", string(&s.kind)),
            ("ID", string(&s.id)),
            ("Service", string(&s.service)),
            ("Tags", strings(&s.tags)),
            ("Meta", meta),
            ("Port", int(s.port)),
            ("Address", string(&s.address)),
            ("SocketPath", string(&s.socket_path)),
            ("TaggedAddresses", tagged),
            (
                "Weights",
                structure(
                    "AgentWeights",
                    &[("Passing", int(passing)), ("Warning", int(warning))],
                ),
            ),
            ("EnableTagOverride", boolean(s.enable_tag_override)),
            ("CreateIndex", uint(0)),
            ("ModifyIndex", uint(0)),
            ("ContentHash", string("")),
            ("Proxy", proxy),
            ("Connect", connect),
            ("PeerName", string("")),
        ],
    );
    format!("{h:x}")
}

/// `GET /v1/agent/service/<id>`: the service with its hash; blocks while `?hash=` is current.
pub(crate) async fn service(ctx: &Ctx, id: &str) -> Result<Reply, Reply> {
    let wait = ctx.query.get("wait");
    let wait = if wait.is_empty() {
        None
    } else {
        Some(parse_go_duration(wait).map_err(|_| Reply::text(400, "Invalid wait time"))?)
    };
    let token = crate::query::request_token(&ctx.query, &ctx.headers);
    access::resolve(ctx, token.as_deref())?;
    let want = ctx.query.get("hash").to_string();
    let shared = &ctx.shared;
    let node = shared.cfg.node_name.clone();
    let dc = shared.cfg.datacenter.clone();
    let deadline = (!want.is_empty()).then(|| {
        let mut d = match wait {
            Some(ns) if ns > 0 => std::time::Duration::from_nanos(ns as u64),
            _ => shared.cfg.default_query_time,
        };
        d = d.min(shared.cfg.max_query_time);
        let cap = d.as_nanos() as u64 / 16;
        if cap > 0 {
            d += std::time::Duration::from_nanos(rand::random::<u64>() % cap);
        }
        tokio::time::Instant::now() + d
    });
    let notifier = shared.hub.notifier(&Topic::Catalog);
    loop {
        let notified = notifier.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let found = shared.read(|st| st.service(&node, id).cloned());
        let s = match found {
            Some(s) if s.id != "consul" => s,
            _ => return Err(Reply::text(404, format!("unknown service ID: {id}"))),
        };
        access::require(ctx, token.as_deref(), "service:read", &s.service)?;
        let hash = content_hash(&s);
        let done = match deadline {
            None => true,
            Some(_) if hash != want => true,
            Some(at) => tokio::select! {
                _ = notified => false,
                _ = tokio::time::sleep_until(at) => true,
            },
        };
        if done {
            let mut v = catalog_json::agent_service(&s, &dc);
            v["ContentHash"] = json!(hash);
            return Ok(Reply::json(200, &v, ctx.pretty()).with("x-consul-contenthash", hash));
        }
    }
}

/// What the check runner probes for an HTTP or TCP check (`None` for other kinds): the
/// target with `Method`, `Header` (`{"Name": ["value", ...]}`), `Body`, `TLSSkipVerify` and
/// `DisableRedirects`,
/// every `interval` ns, each probe bounded by `timeout` ns (0: Consul's 10 s).
pub(crate) fn check_probe(
    obj: &Map<String, Value>,
    kind: &str,
    interval: i64,
    timeout: i64,
) -> Option<Arc<Probe>> {
    let target = match kind {
        "http" => {
            let mut headers = Vec::new();
            for (name, values) in decode::map(obj, "Header") {
                match values {
                    Value::Array(list) => headers.extend(
                        list.iter()
                            .filter_map(Value::as_str)
                            .map(|v| (name.clone(), v.to_string())),
                    ),
                    Value::String(v) => headers.push((name.clone(), v)),
                    _ => {}
                }
            }
            let method = decode::string(obj, "Method");
            Target::Http {
                url: decode::string(obj, "HTTP"),
                method: if method.is_empty() {
                    "GET".into()
                } else {
                    method
                },
                headers,
                body: decode::string(obj, "Body"),
                tls_skip_verify: decode::boolean(obj, "TLSSkipVerify"),
                disable_redirects: decode::boolean(obj, "DisableRedirects"),
            }
        }
        "tcp" => Target::Tcp(decode::string(obj, "TCP")),
        _ => return None,
    };
    let ns = |v: i64| Duration::from_nanos(v.max(0) as u64);
    Some(Arc::new(Probe::new(target, ns(interval), ns(timeout))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc() -> Service {
        let reg = json!({"ID": "foo", "Service": "foo", "Tags": ["bar", "baz"], "Port": 8000});
        catalog_json::service_from("n1", reg.as_object().unwrap())
    }

    /// The value `TestAPI_AgentService` (Consul 1.15) expects for this registration.
    #[test]
    fn the_hash_is_consuls_for_a_typical_service() {
        assert_eq!(content_hash(&svc()), "3e352f348d44f7eb");
    }

    #[test]
    fn the_hash_follows_every_field_but_not_the_indexes() {
        let base = content_hash(&svc());
        let mut s = svc();
        s.port = 8001;
        assert_ne!(content_hash(&s), base);
        let mut s = svc();
        s.tags.reverse();
        assert_ne!(content_hash(&s), base, "tags are ordered");
        let mut s = svc();
        s.meta.insert("a".into(), json!("b"));
        assert_ne!(content_hash(&s), base);
        let mut s = svc();
        s.modify_index = 99;
        s.create_index = 98;
        assert_eq!(content_hash(&s), base, "raft indexes are not the agent's");
    }

    #[test]
    fn fnv1_is_gos_fnv_new64() {
        // hash/fnv New64: the offset basis for no input, and "a" = 0xaf63bd4c8601b7be.
        assert_eq!(fnv1(b""), FNV_OFFSET);
        assert_eq!(fnv1(b"a"), 0xaf63_bd4c_8601_b7be);
    }
}
