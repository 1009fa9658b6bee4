//! One request and one answer, and decoding answers as JSON.

use std::time::Duration;

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};

use super::query::*;

/// One request to Consul.
#[derive(Clone)]
pub(crate) struct Request {
    pub(crate) method: &'static str,
    /// Already encoded path under the API root, e.g. `/v1/kv/a%20b`.
    pub(crate) path: String,
    /// For messages: the path with the key part, but never a token.
    pub(crate) query: Vec<(String, String)>,
    pub(crate) body: Option<(Vec<u8>, &'static str)>,
    pub(crate) wait: Option<Duration>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) cancel: Option<CancelToken>,
}

impl Request {
    pub(crate) fn new(method: &'static str, path: impl Into<String>) -> Request {
        Request {
            method,
            path: path.into(),
            query: Vec::new(),
            body: None,
            wait: None,
            timeout: None,
            cancel: None,
        }
    }

    pub(crate) fn param(&mut self, k: &str, v: impl Into<String>) {
        self.query.push((k.to_string(), v.into()));
    }

    /// A boolean parameter, sent as `key=` like the Go client.
    pub(crate) fn flag(&mut self, k: &str) {
        self.param(k, "");
    }

    pub(crate) fn json_body(&mut self, value: &impl serde::Serialize) {
        let mut body = serde_json::to_vec(value).expect("serialising JSON cannot fail");
        body.push(b'\n');
        self.body = Some((body, "application/json"));
    }

    pub(crate) fn raw_body(&mut self, body: Vec<u8>) {
        self.body = Some((body, "application/octet-stream"));
    }

    pub(crate) fn endpoint(&self) -> String {
        format!("{} {}", self.method, self.path)
    }
}

/// An answer of any status.
#[derive(Debug)]
pub(crate) struct Response {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
    pub(crate) meta: QueryMeta,
    /// What was wrong with a query-meta header, if anything (see [`parse_meta`]).
    pub(crate) bad_meta: Option<String>,
    /// The base URL the request went to (scheme, host, port, prefix; `unix:///path` for a
    /// unix socket), set by the transport when it concludes the request, for naming the full
    /// URL in an error about the answer.
    pub(crate) base: Option<std::sync::Arc<str>>,
}

/// Reads the query-meta headers (names compared without regard to case).
///
/// Like the Go client (`parseQueryMeta`), an absent header counts as 0 /
/// false (writes and `/v1/status/leader` send none), but a present
/// `X-Consul-Index` or `X-Consul-LastContact` that is not a decimal uint64 is
/// an error: the index drives blocking queries and fencing tokens, and taking
/// garbage for 0 would silently turn a blocking query into a busy loop. The
/// error text is returned beside the (zeroed) value; [`Transport::send_on`]
/// turns it into a `BadResponse` for the answers that carry meta (2xx and
/// 404). `X-Consul-KnownLeader` is `true` only when it says exactly that, as in Go.
pub(super) fn parse_meta<'h>(
    header: impl Fn(&str) -> Option<&'h [u8]>,
) -> (QueryMeta, Option<String>) {
    let mut bad = None;
    let mut number = |name: &str| -> u64 {
        let Some(v) = header(name) else { return 0 };
        let parsed = std::str::from_utf8(v)
            .ok()
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u64>().ok());
        parsed.unwrap_or_else(|| {
            bad.get_or_insert_with(|| {
                format!(
                    "the {name} header is not a decimal uint64: {}",
                    crate::foundations::error::printable(v, 80)
                )
            });
            0
        })
    };
    let index = number("X-Consul-Index");
    let last_contact_ms = number("X-Consul-LastContact");
    let known_leader = header("X-Consul-KnownLeader").is_some_and(|v| v == b"true");
    (
        QueryMeta {
            index,
            known_leader,
            last_contact_ms,
        },
        bad,
    )
}

impl Response {
    /// The answer decoded as JSON; an error names `req`'s endpoint and full URL.
    pub(crate) fn json<T: serde::de::DeserializeOwned>(&self, req: &Request) -> Result<T> {
        decode_json(&self.body).map_err(|e| self.located(req, e))
    }

    /// `e`, about this answer to `req`, naming the request's endpoint and full URL.
    pub(crate) fn located(&self, req: &Request, e: Error) -> Error {
        let e = e.with_endpoint(req.endpoint());
        match &self.base {
            Some(base) => e.with_url(|| format!("{base}{}", req.path)),
            None => e,
        }
    }
}

/// Decodes a JSON answer, or says what was wrong with it (kind
/// [`ErrorKind::BadResponse`]): the field that failed (`[0].Flags`), serde's
/// reason and position, and for a body that ends early or is empty, that fact
/// and its length, so that a cut-off or non-JSON answer (a proxy's HTML page)
/// is told apart from a wrong value.
///
/// An answer that decodes is decoded once, without the path tracking (which wraps every step
/// of a decode); only one that fails is decoded again, to say where.
pub(crate) fn decode_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T> {
    if let Ok(v) = serde_json::from_slice(body) {
        return Ok(v);
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let decoded = match serde_path_to_error::deserialize(&mut de) {
        // Trailing characters after the value (whitespace is fine) are an error too.
        Ok(v) => de.end().map(|()| v).map_err(|e| (String::new(), e)),
        Err(e) => Err((e.path().to_string(), e.into_inner())),
    };
    decoded.map_err(|(path, inner)| {
        let whole = if body.trim_ascii().is_empty() {
            " (the answer is empty)".to_string()
        } else if inner.is_eof() {
            format!(" (the answer ends early, after {} bytes)", body.len())
        } else if inner.is_syntax()
            && !body.trim_ascii_start().starts_with(b"[")
            && !body.trim_ascii_start().starts_with(b"{")
        {
            // Not JSON at all: show how it starts.
            format!(
                " (the answer starts with {})",
                crate::foundations::error::printable(&body[..body.len().min(64)], 80)
            )
        } else {
            String::new()
        };
        // serde_path_to_error shows the root as "." (and an unknown step as "?").
        let at = if path.is_empty() || path == "." || path == "?" {
            String::new()
        } else {
            format!(" at {path}")
        };
        Error::new(
            ErrorKind::BadResponse,
            format!("could not decode Consul's answer{at}: {inner}{whole}"),
        )
        .with_source(inner)
    })
}

pub(crate) fn check(req: &Request, resp: Response) -> Result<Response> {
    if (200..300).contains(&resp.status) {
        Ok(resp)
    } else {
        let e = Error::from_status(req.endpoint(), resp.status, &resp.body);
        Err(resp.located(req, e))
    }
}

impl QueryOptions {
    /// Puts these options on `req` (consistency, blocking index and wait,
    /// timeout, cancellation).
    pub(crate) fn apply(&self, req: &mut Request) {
        match self.consistency {
            Consistency::Default => {}
            Consistency::Consistent => req.flag("consistent"),
            Consistency::Stale => req.flag("stale"),
        }
        if self.index > 0 {
            req.param("index", self.index.to_string());
            let wait = self.wait.unwrap_or(DEFAULT_WAIT).min(MAX_WAIT);
            req.param("wait", format_wait(wait));
            req.wait = Some(wait);
        }
        req.timeout = self.timeout;
        req.cancel = self.cancel.clone();
    }
}
