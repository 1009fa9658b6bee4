//! Go's `api.Semaphore` on-KV format: key names (`path.Join`) and the `.lock`
//! document `{"Limit":N,"Holders":{...}}`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Error, ErrorKind, Result};
use crate::kv::KvPair;

/// Go's `path.Join(a, b)`: join with `/`, then clean (collapse slashes, resolve
/// `.` and `..`, no trailing slash).
pub(crate) fn path_join(a: &str, b: &str) -> String {
    let joined = format!("{a}/{b}");
    let rooted = joined.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if out.last().is_some_and(|p| *p != "..") {
                    out.pop();
                } else if !rooted {
                    out.push("..");
                }
            }
            p => out.push(p),
        }
    }
    let body = out.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".to_string(),
        (false, false) => body,
    }
}

/// The decoded `.lock` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockDoc {
    pub(crate) limit: u64,
    pub(crate) holders: BTreeMap<String, bool>,
}

impl LockDoc {
    /// Decodes like Go's `json.Unmarshal` into `{Limit int; Holders map[string]bool}`
    /// (field names match case-insensitively); a missing value gives `local_limit`.
    pub(crate) fn decode(value: Option<&[u8]>, local_limit: u64) -> Result<LockDoc> {
        let Some(bytes) = value else {
            return Ok(LockDoc {
                limit: local_limit,
                holders: BTreeMap::new(),
            });
        };
        let bad = |why: String| {
            Error::new(
                ErrorKind::BadResponse,
                format!("lock decoding failed: {why}"),
            )
        };
        let v: Value = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        let Value::Object(map) = v else {
            return Err(bad("not a JSON object".into()));
        };
        let field = |name: &str| {
            map.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        };
        let limit = match field("Limit") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) => n.as_u64().ok_or_else(|| bad(format!("bad Limit {n}")))?,
            Some(other) => return Err(bad(format!("bad Limit {other}"))),
        };
        let mut holders = BTreeMap::new();
        match field("Holders") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                for (k, v) in h {
                    let b = v
                        .as_bool()
                        .ok_or_else(|| bad(format!("bad holder value {v}")))?;
                    holders.insert(k.clone(), b);
                }
            }
            Some(other) => return Err(bad(format!("bad Holders {other}"))),
        }
        Ok(LockDoc { limit, holders })
    }

    /// Encodes as Go does: compact, `Limit` first, holders sorted.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let holders: serde_json::Map<String, Value> = self
            .holders
            .iter()
            .map(|(k, v)| (k.clone(), Value::Bool(*v)))
            .collect();
        let mut out = format!("{{\"Limit\":{},\"Holders\":", self.limit).into_bytes();
        out.extend_from_slice(
            serde_json::to_string(&Value::Object(holders))
                .expect("a map of bools encodes")
                .as_bytes(),
        );
        out.push(b'}');
        out
    }
}

/// Whether a contender entry is held by session `sid`.
pub(super) fn contender_ours(e: Option<&KvPair>, sid: &str) -> bool {
    e.is_some_and(|p| p.session.as_deref() == Some(sid))
}

/// Whether a `.lock` entry lists session `sid` as a holder.
pub(super) fn listed(e: Option<&KvPair>, sid: &str, limit: u64) -> bool {
    e.is_some_and(|p| {
        LockDoc::decode(p.value.as_deref(), limit)
            .map(|d| d.holders.contains_key(sid))
            .unwrap_or(false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_join_cleans_like_go() {
        assert_eq!(path_join("service/x", "abc"), "service/x/abc");
        assert_eq!(path_join("service//x/", ".lock"), "service/x/.lock");
        assert_eq!(path_join("a/./b/../c", "d"), "a/c/d");
        assert_eq!(path_join("/a", "b"), "/a/b");
        assert_eq!(path_join("..", "x"), "../x");
    }

    #[test]
    fn lock_doc_encodes_like_go_and_decodes_leniently() {
        let mut d = LockDoc {
            limit: 3,
            holders: BTreeMap::new(),
        };
        assert_eq!(d.encode(), br#"{"Limit":3,"Holders":{}}"#);
        d.holders.insert("b".into(), true);
        d.holders.insert("a".into(), true);
        assert_eq!(d.encode(), br#"{"Limit":3,"Holders":{"a":true,"b":true}}"#);
        assert_eq!(LockDoc::decode(Some(&d.encode()), 9).unwrap(), d);
        let lower =
            LockDoc::decode(Some(br#"{"limit":3,"holders":{"a":true,"b":true}}"#), 9).unwrap();
        assert_eq!(lower, d);
        let empty = LockDoc::decode(None, 4).unwrap();
        assert_eq!(empty.limit, 4);
        assert!(empty.holders.is_empty());
        let e = LockDoc::decode(Some(b"{not json"), 1).unwrap_err();
        assert!(e.to_string().contains("lock decoding failed"), "{e}");
    }
}
