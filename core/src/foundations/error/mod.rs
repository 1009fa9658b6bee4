//! The one error type of the crate, and its stable kinds and codes.

mod acl;
mod kind;
mod status;
mod text;

use std::fmt;

use acl::{acl_hint, denial_hint, go_quote, Denier};
pub use kind::ErrorKind;
use status::classify_status;
pub(crate) use status::transient_status;
use text::{bounded, MESSAGE_MAX, SERVER_TEXT_MAX};
pub(crate) use text::{printable, SHOWN_TEXT_MAX};

/// One failed operation of a transaction, as Consul reports it in a 409.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnOpError {
    /// Index of the failing operation in the request.
    pub op_index: usize,
    /// Consul's description, e.g. `failed to lock key "k", lock is already held`,
    /// exactly as sent (for matching; the error's message shows it escaped and
    /// bounded, see [`Error::message`]). It may hold anything a server put there:
    /// escape it before printing it on its own.
    pub what: String,
}

/// The error type of every fallible baton call.
///
/// It never contains an ACL token: messages name the endpoint (method and path,
/// without query string) and Consul's answer.
pub struct Error {
    kind: ErrorKind,
    message: String,
    status: Option<u16>,
    // Boxed strings: the error stays small enough to return by value (clippy's
    // `result_large_err` bound) with every field it names.
    endpoint: Option<Box<str>>,
    url: Option<Box<str>>,
    server_text: Option<Box<str>>,
    txn_errors: Vec<TxnOpError>,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    transient: bool,
}

impl Error {
    /// A new error of `kind` with a human-readable message.
    ///
    /// The message is made printable on one line (control characters such as
    /// ESC, NUL or CR escaped as `\u{1b}`, `\u{0}`, `\r`) and bounded to 2048
    /// bytes plus a `… (N bytes)` marker, so a message that quotes something a
    /// server sent can never carry terminal escapes or megabytes of text.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error {
            kind,
            message: bounded(message.into(), MESSAGE_MAX),
            status: None,
            endpoint: None,
            url: None,
            server_text: None,
            txn_errors: Vec::new(),
            source: None,
            transient: false,
        }
    }

    /// Marks the error as one that goes away by itself (see [`Error::is_transient`]).
    pub(crate) fn transient(mut self) -> Error {
        self.transient = true;
        self
    }

    /// Marks the error as one that does not go away by itself.
    pub(crate) fn permanent(mut self) -> Error {
        self.transient = false;
        self
    }

    pub(crate) fn with_source(
        mut self,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    /// The same error, `hint` appended to its message after `" — "`.
    pub(crate) fn suffixed(mut self, hint: &str) -> Error {
        self.message = bounded(format!("{} \u{2014} {hint}", self.message), MESSAGE_MAX);
        self
    }

    /// The same error, `advice` first and its own message after it in
    /// parentheses (for advice a reader needs before the library's detail).
    pub(crate) fn led_by(mut self, advice: &str) -> Error {
        self.message = bounded(format!("{advice} ({})", self.message), MESSAGE_MAX);
        self
    }

    /// The same error, its message preceded by `context` and `": "`.
    pub(crate) fn prefixed(mut self, context: &str) -> Error {
        self.message = bounded(format!("{context}: {}", self.message), MESSAGE_MAX);
        self
    }

    /// The same error naming the full URL its request went to (base, prefix and path, no
    /// query): shown instead of the endpoint's bare path, so that a wrong address prefix
    /// (`http://host:8500/v1`) is visible in the message. Kept if already set.
    pub(crate) fn with_url(mut self, url: impl FnOnce() -> String) -> Error {
        if self.url.is_none() && self.endpoint.is_some() {
            self.url = Some(bounded(url(), MESSAGE_MAX).into());
        }
        self
    }

    pub(crate) fn with_endpoint(mut self, endpoint: impl Into<String>) -> Error {
        self.endpoint = Some(bounded(endpoint.into(), MESSAGE_MAX).into());
        self
    }

    /// An error built from a non-success HTTP answer.
    ///
    /// The kind is chosen from the whole raw body (Consul's texts such as
    /// `invalid session` are matched there); what the error keeps and shows is
    /// the printable, bounded form of it.
    pub(crate) fn from_status(endpoint: String, status: u16, body: &[u8]) -> Error {
        let raw = body.trim_ascii();
        let text = String::from_utf8_lossy(raw);
        let kind = classify_status(status, &text);
        let transient = kind == ErrorKind::Server && transient_status(status, &text);
        let message = if (300..400).contains(&status) {
            // Go's ServeMux answers a path that is not clean (`//`, `/./`, `/../`) with a
            // redirect, as does a proxy in front of the agent.
            format!(
                "Consul answered {status}, a redirect, which baton does not follow: check the \
                 address and its path prefix, and the key for `//`, `./` or `../` ({})",
                printable(raw, SHOWN_TEXT_MAX)
            )
        } else if raw.is_empty() {
            format!("Consul answered {status}")
        } else {
            format!(
                "Consul answered {status}: {}",
                printable(raw, SHOWN_TEXT_MAX)
            )
        };
        let message = match (kind, acl_hint(&endpoint, &text)) {
            (ErrorKind::PermissionDenied, Some(hint)) => format!("{message} \u{2014} {hint}"),
            _ => message,
        };
        Error {
            kind,
            message: bounded(message, MESSAGE_MAX),
            status: Some(status),
            endpoint: Some(endpoint.into()),
            url: None,
            server_text: Some(printable(raw, SERVER_TEXT_MAX).into()),
            txn_errors: Vec::new(),
            source: None,
            transient,
        }
    }

    /// A failed transaction. `errors` keep Consul's `What` texts as sent (callers
    /// match on them); the message shows at most [`TXN_ERRORS_SHOWN`] of them,
    /// each printable and bounded.
    pub(crate) fn txn_conflict(endpoint: String, errors: Vec<TxnOpError>) -> Error {
        let mut list: Vec<String> = errors
            .iter()
            .take(TXN_ERRORS_SHOWN)
            .map(|e| {
                format!(
                    "op {}: {}",
                    e.op_index,
                    printable(e.what.as_bytes(), SHOWN_TEXT_MAX)
                )
            })
            .collect();
        if errors.len() > TXN_ERRORS_SHOWN {
            list.push(format!("and {} more", errors.len() - TXN_ERRORS_SHOWN));
        }
        let kind = if errors.iter().any(|e| e.what.contains("Permission denied")) {
            ErrorKind::PermissionDenied
        } else {
            ErrorKind::Conflict
        };
        Error {
            kind,
            message: bounded(
                format!("transaction failed: {}", list.join("; ")),
                MESSAGE_MAX,
            ),
            status: Some(409),
            endpoint: Some(endpoint.into()),
            url: None,
            server_text: None,
            txn_errors: errors,
            source: None,
            transient: false,
        }
    }

    /// A failed transaction whose request body was `ops` (Consul's txn JSON): an ACL denial
    /// of an op also names the permission that op needs and on which key.
    pub(crate) fn txn_conflict_of(endpoint: String, errors: Vec<TxnOpError>, ops: &[u8]) -> Error {
        let denied = errors
            .iter()
            .find(|e| e.what.contains("Permission denied"))
            .map(|e| e.op_index);
        let err = Error::txn_conflict(endpoint, errors);
        let Some(i) = denied else {
            return err;
        };
        let ops: serde_json::Value = serde_json::from_slice(ops).unwrap_or_default();
        let kv = &ops[i]["KV"];
        let (Some(verb), Some(key)) = (kv["Verb"].as_str(), kv["Key"].as_str()) else {
            return err;
        };
        // Consul's `kvsPreApply`: reads are filtered rather than refused, the index and
        // session checks need read, everything else (check-not-exists too) needs write.
        let access = match verb {
            "get" | "get-tree" | "get-or-empty" | "check-index" | "check-session" => "read",
            _ => "write",
        };
        let perm = format!("key:{access}");
        let hint = denial_hint(Denier::Unknown, &perm, key);
        err.suffixed(&format!("op {i} ({verb} {}): {hint}", go_quote(key)))
    }

    /// The stable kind of this error.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The stable code string of this error's kind, e.g. `"BATON_TIMEOUT"`.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The HTTP status Consul answered with, if the error came from an answer.
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The endpoint the failing request went to, e.g. `PUT /v1/session/renew/<id>`.
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// The full URL the failing request went to, without its query string, e.g.
    /// `http://127.0.0.1:8500/consul/v1/session/create` (`None` for an error that
    /// no request made).
    pub fn url(&self) -> Option<&str> {
        self.url.as_deref()
    }

    /// Consul's own error text (the trimmed plain-text body), if any.
    ///
    /// It is in printable form: invalid UTF-8 replaced, control characters
    /// escaped (`\u{1b}`, `\n`), and cut after 4096 bytes with a `… (N bytes)`
    /// marker. Consul's own texts are short and printable, so they
    /// arrive unchanged.
    pub fn server_text(&self) -> Option<&str> {
        self.server_text.as_deref()
    }

    /// For a failed transaction (409): every failing operation Consul listed.
    pub fn txn_errors(&self) -> &[TxnOpError] {
        &self.txn_errors
    }

    /// Whether the failure goes away by itself, so that a call with time left
    /// should try again rather than fail: the server could not be reached or
    /// did not answer in time (connection refused or reset, a request
    /// timeout), or Consul answered that it cannot serve the request *now* —
    /// 429 and 502/503/504, and the 500s a cluster gives while it has no raft
    /// leader or cannot reach one (`No cluster leader`, `Raft leader not found in
    /// server lookup mapping`, `rpc error getting client: …`, `Not ready to serve
    /// consistent reads`, `RPC rate limit exceeded`, a leadership change during a
    /// write, …).
    ///
    /// Refusals are never transient: 400, 403, 404, 409, a TLS or
    /// configuration problem, an answer that cannot be understood, and a 500
    /// whose text says the request itself is wrong (`Invalid Session TTL`,
    /// `Missing check`, `invalid session`, …). baton's own acquires, campaigns,
    /// observers and renewals use exactly this rule.
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// The message without the endpoint prefix: one printable line of at most
    /// about 2 KiB (text from a server is escaped, and quoted only up to 512
    /// bytes).
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// How many failing transaction operations a message lists (all of them stay in
/// [`Error::txn_errors`]).
const TXN_ERRORS_SHOWN: usize = 8;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.endpoint, &self.url) {
            (Some(ep), Some(url)) => {
                let method = ep.split_once(' ').map_or(&**ep, |(m, _)| m);
                write!(f, "{method} {url}: {}", self.message)
            }
            (Some(ep), None) => write!(f, "{ep}: {}", self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("kind", &self.kind)
            .field("message", &self.message)
            .field("status", &self.status)
            .field("endpoint", &self.endpoint)
            .field("url", &self.url)
            .field("transient", &self.transient);
        if !self.txn_errors.is_empty() {
            // Shown like the message: escaped, bounded, the first few only.
            let shown: Vec<(usize, String)> = self
                .txn_errors
                .iter()
                .take(TXN_ERRORS_SHOWN)
                .map(|e| (e.op_index, printable(e.what.as_bytes(), SHOWN_TEXT_MAX)))
                .collect();
            d.field("txn_errors", &shown);
            if self.txn_errors.len() > TXN_ERRORS_SHOWN {
                d.field("txn_errors_total", &self.txn_errors.len());
            }
        }
        if let Some(s) = &self.source {
            d.field("source", &printable(s.to_string().as_bytes(), MESSAGE_MAX));
        }
        d.finish()
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|b| b.as_ref() as &(dyn std::error::Error + 'static))
    }
}

/// The result type of baton calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::text::needs_escape;
    use super::*;

    #[test]
    fn codes_are_unique_and_prefixed() {
        let mut seen = std::collections::HashSet::new();
        for k in ErrorKind::ALL {
            assert!(k.code().starts_with("BATON_"));
            assert!(seen.insert(k.code()));
        }
    }

    #[test]
    fn acl_denials_name_the_permission_the_resource_and_what_to_set() {
        let hint = |ep: &str, text: &str| acl_hint(ep, text).unwrap_or_default();
        // Consul 1.12 and later, a token that lacks a permission.
        let h = hint(
            "PUT /v1/kv/jobs/x",
            "Permission denied: token with AccessorID 'a-b' lacks permission 'key:write' on \"jobs/x\"",
        );
        assert_eq!(
            h,
            "the ACL token lacks key:write on \"jobs/x\": add `key_prefix \"jobs/x\" { policy = \
             \"write\" }` to one of its policies, or set CONSUL_HTTP_TOKEN to a token that has it"
        );
        // The anonymous token, on a session.
        let h = hint(
            "PUT /v1/session/create",
            "Permission denied: anonymous token lacks permission 'session:write' on \"node1\". \
             The anonymous token is used implicitly when a request does not specify a token.",
        );
        assert!(h.starts_with("no ACL token was sent, and the anonymous token lacks session:write on the node \"node1\": set CONSUL_HTTP_TOKEN"), "{h}");
        assert!(
            h.contains("`session_prefix \"node1\" { policy = \"write\" }`"),
            "{h}"
        );
        // A bare text: the endpoint tells.
        let h = hint("PUT /v1/session/renew/x", "Permission denied");
        assert!(
            h.starts_with("the ACL token lacks session:write (the anonymous"),
            "{h}"
        );
        let h = hint("GET /v1/kv/a/b", "rpc error making call: Permission denied");
        assert!(h.contains("key:read on \"a/b\""), "{h}");
        assert!(hint("GET /v1/kv/a", "ACL not found").contains("does not know this ACL token"));
        assert_eq!(acl_hint("GET /v1/kv/a", "No cluster leader"), None);
        // A txn denial names the op's key and the access its verb needs.
        let ops = br#"[{"KV":{"Verb":"get","Key":"r"}},{"KV":{"Verb":"lock","Key":"jobs/x","Session":"s"}}]"#;
        let e = Error::txn_conflict_of(
            "PUT /v1/txn".into(),
            vec![TxnOpError {
                op_index: 1,
                what: "Permission denied".into(),
            }],
            ops,
        );
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert!(
            e.to_string()
                .contains("op 1 (lock \"jobs/x\"): the ACL token lacks key:write on \"jobs/x\""),
            "{e}"
        );
    }

    #[test]
    fn statuses_map_to_kinds() {
        let e = Error::from_status("PUT /v1/kv/a".into(), 403, b"Permission denied: x");
        assert_eq!(e.kind(), ErrorKind::PermissionDenied);
        assert_eq!(
            e.to_string(),
            "PUT /v1/kv/a: Consul answered 403: Permission denied: x \u{2014} the ACL token lacks \
             key:write on \"a\" (the anonymous token when CONSUL_HTTP_TOKEN is not set): give it \
             a policy with `key_prefix \"a\" { policy = \"write\" }`"
        );
        assert_eq!(e.server_text(), Some("Permission denied: x"));
        let e = Error::from_status(
            "PUT /v1/kv/a".into(),
            500,
            b"raft apply failed: invalid session \"x\"",
        );
        assert_eq!(e.kind(), ErrorKind::SessionInvalidated);
        let e = Error::from_status("GET /v1/kv/a".into(), 500, b"No cluster leader\n");
        assert_eq!(e.kind(), ErrorKind::Server);
        assert_eq!(e.server_text(), Some("No cluster leader"));
        assert_eq!(e.status(), Some(500));
        let e = Error::from_status(
            "PUT /v1/session/create".into(),
            500,
            b"Invalid Session TTL '5000000000', must be between [10s=24h0m0s]",
        );
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let e = Error::from_status("PUT /v1/session/renew/x".into(), 404, b"");
        assert_eq!(e.kind(), ErrorKind::NotFound);
    }
    /// No character that could move the cursor, recolour, or break the line.
    fn one_printable_line(s: &str) -> bool {
        !s.chars().any(needs_escape)
    }

    #[test]
    fn printable_escapes_controls_visibly() {
        let raw = "a\u{1b}[31mred\u{0}\r\n\tb\u{7f}\u{9b}c\u{202e}d\u{2028}e \"q\" \u{fc}";
        let p = printable(raw.as_bytes(), 512);
        assert_eq!(
            p,
            "a\\u{1b}[31mred\\u{0}\\r\\n\\tb\\u{7f}\\u{9b}c\\u{202e}d\\u{2028}e \"q\" \u{fc}"
        );
        assert!(one_printable_line(&p));
        // Consul's texts pass unchanged.
        let consul =
            "Permission denied: token with AccessorID 'x' lacks permission 'key:write' on \"k\"";
        assert_eq!(printable(consul.as_bytes(), 512), consul);
        assert_eq!(printable(b"", 512), "");
    }

    #[test]
    fn printable_replaces_invalid_utf8() {
        assert_eq!(
            printable(b"ok\xff\xfe!\xe2\x82", 512),
            "ok\u{fffd}\u{fffd}!\u{fffd}"
        );
    }

    #[test]
    fn printable_cuts_long_text_with_a_marker() {
        let big = vec![b'x'; 10 * 1024 * 1024];
        let p = printable(&big, 512);
        assert_eq!(p, format!("{}\u{2026} (10485760 bytes)", "x".repeat(512)));
        // Escapes are never cut in half, and the bound holds after escaping.
        let escs = "\u{1b}".repeat(600);
        let p = printable(escs.as_bytes(), 512);
        let shown = p.split('\u{2026}').next().unwrap();
        assert!(shown.len() <= 512);
        assert_eq!(shown.len() % "\\u{1b}".len(), 0);
        assert!(p.ends_with("(600 bytes)"));
        // Multi-byte characters are not split either.
        let p = printable("\u{fc}".repeat(300).as_bytes(), 5);
        assert_eq!(p, "\u{fc}\u{fc}\u{2026} (600 bytes)");
        // Text that fits exactly is not marked.
        assert_eq!(printable(&big[..512], 512), "x".repeat(512));
    }

    #[test]
    fn status_errors_match_on_the_raw_body_and_show_a_bounded_line() {
        // The machine-relevant text lies beyond what is shown.
        let mut body = b"\x1b[2J\x1b[31m".to_vec();
        body.extend(std::iter::repeat_n(b'y', 5000));
        body.extend_from_slice(b" rpc error: invalid session \"abc\"\0\n");
        let e = Error::from_status("PUT /v1/kv/a".into(), 500, &body);
        assert_eq!(e.kind(), ErrorKind::SessionInvalidated);
        assert!(e
            .message()
            .starts_with("Consul answered 500: \\u{1b}[2J\\u{1b}[31myyy"));
        assert!(e
            .message()
            .ends_with(&format!("({} bytes)", body.len() - 1)));
        assert!(e.message().len() < 600);
        assert!(one_printable_line(&e.to_string()));
        let st = e.server_text().unwrap();
        assert!(one_printable_line(st) && st.len() < 4200, "{st}");
        let dbg = format!("{e:?}");
        assert!(one_printable_line(&dbg) && dbg.len() < 5000);

        let huge = vec![b'z'; 10 * 1024 * 1024];
        let e = Error::from_status("GET /v1/kv/a".into(), 503, &huge);
        assert_eq!(e.kind(), ErrorKind::Server);
        assert!(e.to_string().len() < 600);
        assert!(e.to_string().ends_with("\u{2026} (10485760 bytes)"));
        assert!(e.server_text().unwrap().len() < 4200);

        // Every text the kinds depend on still classifies.
        for (status, text, kind) in [
            (500, "Permission denied: x", ErrorKind::PermissionDenied),
            (500, "ACL not found", ErrorKind::PermissionDenied),
            (500, "missing session", ErrorKind::InvalidArgument),
            (
                500,
                "Invalid Behavior setting 'x'",
                ErrorKind::InvalidArgument,
            ),
            (500, "No cluster leader", ErrorKind::Server),
            (500, "Raft leader not found", ErrorKind::Server),
        ] {
            let mut body = b"\n\t ".to_vec();
            body.extend_from_slice(text.as_bytes());
            body.extend_from_slice(b"\r\n");
            let e = Error::from_status("GET /x".into(), status, &body);
            assert_eq!(e.kind(), kind, "{text}");
            assert_eq!(e.server_text(), Some(text));
        }
    }

    #[test]
    fn transient_failures_are_told_from_refusals() {
        for (status, text) in [
            (500, "No cluster leader"),
            (500, "Raft leader not found in server lookup mapping"),
            (500, "rpc error making call: No cluster leader"),
            (
                500,
                "rpc error getting client: failed to get conn: dial tcp 10.0.0.3:8300: connect: connection refused",
            ),
            (500, "rpc error making call: EOF"),
            (500, "Not ready to serve consistent reads"),
            (500, "No known Consul servers"),
            (500, "leadership lost while committing log"),
            (429, "RPC rate limit exceeded"),
            (429, ""),
            (503, "Rate limit reached, try again later"),
            (502, "Bad Gateway"),
            (504, ""),
        ] {
            let e = Error::from_status("PUT /v1/txn".into(), status, text.as_bytes());
            assert!(e.is_transient(), "{status} {text}");
            assert_eq!(e.kind(), ErrorKind::Server, "{status} {text}");
        }
        for (status, text) in [
            (
                500,
                "Invalid Session TTL '5000000000', must be between [10s=24h0m0s]",
            ),
            (500, "apply failed: Missing check 'c' registration"),
            (500, "rpc error making call: Permission denied"),
            (500, "rpc error making call: invalid session \"x\""),
            (500, "No path to datacenter"),
            (500, "something Consul never says"),
            (403, "ACL not found"),
            (400, "Missing session"),
            (404, ""),
            (409, ""),
        ] {
            let e = Error::from_status("PUT /v1/txn".into(), status, text.as_bytes());
            assert!(!e.is_transient(), "{status} {text}");
        }
        assert!(!Error::new(ErrorKind::Connection, "cannot start a thread").is_transient());
        assert!(Error::new(ErrorKind::Connection, "reset")
            .transient()
            .is_transient());
        let conflict = Error::txn_conflict(
            "PUT /v1/txn".into(),
            vec![TxnOpError {
                op_index: 0,
                what: "No cluster leader".into(),
            }],
        );
        assert!(!conflict.is_transient());
    }

    #[test]
    fn txn_conflicts_keep_raw_texts_and_show_escaped_ones() {
        let what = format!(
            "failed to lock key \"{}\u{1b}[0m\", lock delay",
            "k".repeat(3000)
        );
        let errors: Vec<TxnOpError> = (0..20)
            .map(|i| TxnOpError {
                op_index: i,
                what: what.clone(),
            })
            .collect();
        let e = Error::txn_conflict("PUT /v1/txn".into(), errors);
        assert_eq!(e.kind(), ErrorKind::Conflict);
        // Callers match on the raw texts, past the shown part.
        assert_eq!(e.txn_errors().len(), 20);
        assert!(e.txn_errors()[0].what.ends_with("lock delay"));
        assert!(one_printable_line(e.message()));
        assert!(
            e.message().len() <= MESSAGE_MAX + 32,
            "{}",
            e.message().len()
        );
        assert!(e
            .message()
            .starts_with("transaction failed: op 0: failed to lock key"));
        let dbg = format!("{e:?}");
        assert!(one_printable_line(&dbg));
        assert!(dbg.len() < 8000, "{}", dbg.len());
        assert!(dbg.contains("txn_errors_total: 20"));

        let few = Error::txn_conflict(
            "PUT /v1/txn".into(),
            vec![TxnOpError {
                op_index: 1,
                what: "Permission denied\u{7}".into(),
            }],
        );
        assert_eq!(few.kind(), ErrorKind::PermissionDenied);
        assert_eq!(
            few.message(),
            "transaction failed: op 1: Permission denied\\u{7}"
        );
    }

    #[test]
    fn every_message_is_one_bounded_line() {
        let e = Error::new(ErrorKind::BadResponse, "got \u{1b}]0;title\u{7}\nnext");
        assert_eq!(e.message(), "got \\u{1b}]0;title\\u{7}\\nnext");
        let e = Error::new(ErrorKind::BadResponse, "v".repeat(100_000));
        assert!(e.message().len() <= MESSAGE_MAX + 32);
        assert!(e.message().ends_with("(100000 bytes)"));
        let plain = "session is gone (404 Session id 'x' not found)";
        assert_eq!(Error::new(ErrorKind::NotFound, plain).message(), plain);
    }
}
