//! What every Consul endpoint shares: query-string decoding as Go's `url.Values` does it, the
//! standard option parser (`dc`, token, consistency, `wait`/`index`) with Consul's error texts,
//! the enterprise-parameter rejection of Consul CE, replies, meta headers and the blocking-query
//! loop of §6.5.

use std::time::Duration;

use bytes::Bytes;
use hyper::HeaderMap;
use rand::Rng;

use crate::godur::parse_go_duration;
use crate::shared::Shared;
use crate::state::{State, Topic};

/// Decoded query parameters, in the order they appeared.
#[derive(Clone, Debug, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Parses a raw query string the way Go's `URL.Query()` does (pairs that fail to decode are
    /// dropped, `+` is a space).
    pub fn parse(raw: Option<&str>) -> Query {
        let mut pairs = Vec::new();
        for part in raw.unwrap_or("").split('&') {
            if part.is_empty() {
                continue;
            }
            let (k, v) = part.split_once('=').unwrap_or((part, ""));
            if let (Some(k), Some(v)) = (query_unescape(k), query_unescape(v)) {
                pairs.push((k, v));
            }
        }
        Query { pairs }
    }

    /// Whether the parameter is present at all (`?recurse`, `?recurse=`, `?recurse=x`).
    pub fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }

    /// The first value of `key` (Go's `Values.Get`): `""` when absent.
    pub fn get(&self, key: &str) -> &str {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// Every value of `key`, in order.
    pub fn all(&self, key: &str) -> Vec<String> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Drops every pair whose key is one of `keys`.
    pub fn remove(&mut self, keys: &[&str]) {
        self.pairs.retain(|(k, _)| !keys.contains(&k.as_str()));
    }

    /// Go's `url.Values.Encode`: keys sorted, values in order, query-escaped.
    pub fn encode(&self) -> String {
        let mut sorted: Vec<&(String, String)> = self.pairs.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        sorted
            .iter()
            .map(|(k, v)| format!("{}={}", query_escape(k), query_escape(v)))
            .collect::<Vec<_>>()
            .join("&")
    }
}

fn query_unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn query_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// An HTTP answer before the common headers are added.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Reply {
    /// A plain-text error (Consul writes the error's text as the body).
    pub fn text(status: u16, body: impl Into<String>) -> Reply {
        let body: String = body.into();
        let headers = if body.is_empty() {
            vec![]
        } else {
            vec![("content-type", "text/plain; charset=utf-8".to_string())]
        };
        Reply {
            status,
            headers,
            body: Bytes::from(body),
        }
    }

    /// A JSON success body, compact or indented as `consul agent -dev` prints it.
    pub fn json(status: u16, v: &serde_json::Value, pretty: bool) -> Reply {
        Reply {
            status,
            headers: vec![("content-type", "application/json".to_string())],
            body: Bytes::from(encode_json(v, pretty)),
        }
    }

    /// Adds a header.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Reply {
        self.headers.push((name, value.into()));
        self
    }

    /// Adds the query-meta headers Consul's `setMeta` writes (Go-canonical names are produced
    /// by the title-case writer).
    pub fn with_meta(self, index: u64) -> Reply {
        self.with("x-consul-index", index.max(1).to_string())
            .with("x-consul-knownleader", "true")
            .with("x-consul-lastcontact", "0")
            .with("x-consul-query-backend", "blocking-query")
    }
}

/// JSON text: compact, or 4-space indented with a trailing newline.
pub(crate) fn encode_json(v: &serde_json::Value, pretty: bool) -> Vec<u8> {
    if !pretty {
        return serde_json::to_vec(v).unwrap_or_default();
    }
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    if serde::Serialize::serialize(v, &mut ser).is_ok() {
        buf.push(b'\n');
    }
    buf
}

/// The standard options of a read or write request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Opts {
    /// `index` (0 = not blocking).
    pub index: u64,
    /// `wait` in nanoseconds, when given.
    pub wait_ns: Option<i64>,
    /// `?pretty` or the server's `pretty` setting.
    pub pretty: bool,
    /// The ACL token the request carries (`?token`, `X-Consul-Token`, `Authorization: Bearer`).
    pub token: Option<String>,
    /// `dc`, when given.
    pub dc: String,
    /// The consistency mode asked for: `leader` (default), `stale` or `consistent`.
    pub consistency: &'static str,
}

/// The token of a request, in Consul's priority order.
pub(crate) fn request_token(q: &Query, headers: &HeaderMap) -> Option<String> {
    let t = q.get("token");
    if !t.is_empty() {
        return Some(t.to_string());
    }
    if let Some(v) = headers.get("x-consul-token").and_then(|v| v.to_str().ok()) {
        if !v.is_empty() {
            return Some(v.to_string());
        }
    }
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok())?;
    let mut parts = auth.split_whitespace();
    let scheme = parts.next()?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    parts.next().map(str::to_string)
}

/// Consul CE rejects namespace and partition parameters and headers.
pub(crate) fn reject_enterprise(q: &Query, headers: &HeaderMap) -> Result<(), Reply> {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let ns = "Namespaces are a Consul Enterprise feature";
    let part = "Partitions are a Consul Enterprise feature";
    if !header("x-consul-namespace").is_empty() {
        return Err(Reply::text(
            400,
            format!("Invalid header: \"X-Consul-Namespace\" - {ns}"),
        ));
    }
    if !q.get("ns").is_empty() {
        return Err(Reply::text(
            400,
            format!("Invalid query parameter: \"ns\" - {ns}"),
        ));
    }
    if !header("x-consul-partition").is_empty() {
        return Err(Reply::text(
            400,
            format!("Invalid header: \"X-Consul-Partition\" - {part}"),
        ));
    }
    if !q.get("partition").is_empty() {
        return Err(Reply::text(
            400,
            format!("Invalid query parameter: \"partition\" - {part}"),
        ));
    }
    Ok(())
}

/// Consul's `parse`: dc, token, consistency flags, then `wait` and `index`.
pub(crate) fn parse_opts(
    q: &Query,
    headers: &HeaderMap,
    server_pretty: bool,
) -> Result<Opts, Reply> {
    let mut o = Opts {
        dc: q.get("dc").to_string(),
        token: request_token(q, headers),
        pretty: server_pretty || q.has("pretty"),
        ..Opts::default()
    };
    let mut stale = q.has("stale");
    let max_stale = q.get("max_stale");
    if !max_stale.is_empty() {
        match parse_go_duration(max_stale) {
            Ok(d) if d > 0 => stale = true,
            Ok(_) => {}
            Err(_) => {
                return Err(Reply::text(
                    400,
                    format!(
                        "Invalid max_stale value {}",
                        crate::godur::go_quote(max_stale)
                    ),
                ))
            }
        }
    }
    if stale && q.has("consistent") {
        return Err(Reply::text(
            400,
            "Cannot specify ?stale with ?consistent, conflicting semantics.",
        ));
    }
    o.consistency = if stale {
        "stale"
    } else if q.has("consistent") {
        "consistent"
    } else {
        "leader"
    };
    let wait = q.get("wait");
    if !wait.is_empty() {
        match parse_go_duration(wait) {
            Ok(d) => o.wait_ns = Some(d),
            Err(_) => return Err(Reply::text(400, "Invalid wait time")),
        }
    }
    let index = q.get("index");
    if !index.is_empty() {
        o.index = index
            .parse::<u64>()
            .map_err(|_| Reply::text(400, "Invalid index"))?;
    }
    Ok(o)
}

/// Go's `strconv.ParseUint(s, 10, 64)` with its error text.
pub(crate) fn parse_uint(s: &str) -> Result<u64, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse::<u64>().map_err(|_| {
            format!(
                "strconv.ParseUint: parsing {}: value out of range",
                crate::godur::go_quote(s)
            )
        })
    } else {
        Err(format!(
            "strconv.ParseUint: parsing {}: invalid syntax",
            crate::godur::go_quote(s)
        ))
    }
}

/// Result of one run of a blocking query's body.
pub(crate) struct Run<T> {
    pub index: u64,
    pub value: T,
    /// The query found nothing (a missing single key): later not-found runs raise the
    /// threshold so unrelated writes do not release the waiter.
    pub not_found: bool,
}

/// Consul's `blockingQuery` (§6.5): with `index > 0`, re-run `query` whenever `topic` fires until
/// its index passes the threshold or the wait (default 300 s, max 600 s, plus jitter below
/// wait/16) runs out; then answer with the latest result. Index 0 never blocks; reported
/// indexes are never below 1.
pub(crate) async fn blocking<T>(
    shared: &Shared,
    opts: &Opts,
    topic: Topic,
    mut query: impl FnMut(&State) -> Run<T>,
) -> Run<T> {
    let mut min = opts.index;
    if min == 0 {
        let mut r = shared.read(&mut query);
        r.index = r.index.max(1);
        return r;
    }
    let cfg = &shared.cfg;
    let mut timeout = match opts.wait_ns {
        Some(ns) if ns > 0 => Duration::from_nanos(ns as u64),
        _ => cfg.default_query_time,
    };
    timeout = timeout.min(cfg.max_query_time);
    let jitter_cap = timeout.as_nanos() as u64 / 16;
    if jitter_cap > 0 {
        timeout += Duration::from_nanos(rand::thread_rng().gen_range(0..jitter_cap));
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let notifier = shared.hub.notifier(&topic);
    let mut previous_not_found = false;
    loop {
        let notified = notifier.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let mut r = shared.read(&mut query);
        r.index = r.index.max(1);
        if r.not_found && previous_not_found {
            min = r.index;
        }
        previous_not_found = r.not_found;
        if r.index > min {
            return r;
        }
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep_until(deadline) => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_go_values() {
        let q = Query::parse(Some("release=abc&cas=0&token=a+b"));
        assert_eq!(q.encode(), "cas=0&release=abc&token=a+b");
        assert!(q.has("cas"));
        assert_eq!(q.get("token"), "a b");
    }

    #[test]
    fn parse_uint_errors_match_go() {
        assert_eq!(
            parse_uint("x").unwrap_err(),
            "strconv.ParseUint: parsing \"x\": invalid syntax"
        );
        assert_eq!(
            parse_uint("").unwrap_err(),
            "strconv.ParseUint: parsing \"\": invalid syntax"
        );
        assert!(parse_uint("99999999999999999999")
            .unwrap_err()
            .ends_with("value out of range"));
        assert_eq!(parse_uint("42"), Ok(42));
    }
}
