//! Go's `api.Semaphore` on-KV format: key names (`path.Join`) and the `.lock`
//! document `{"Limit":N,"Holders":{...}}`.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::kv::KvPair;
use crate::foundations::error::{Error, ErrorKind, Result};

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
    ///
    /// Anything else is an error of kind `BadResponse` that starts with Go's
    /// `lock decoding failed` and names `key` and what was wrong (the value is
    /// written by every holder, so it is as untrusted as a server's answer).
    pub(crate) fn decode(key: &str, value: Option<&[u8]>, local_limit: u64) -> Result<LockDoc> {
        let Some(bytes) = value else {
            return Ok(LockDoc {
                limit: local_limit,
                holders: BTreeMap::new(),
            });
        };
        let bad = |why: String| {
            Error::new(
                ErrorKind::BadResponse,
                format!(
                    "lock decoding failed: the semaphore's {} holds {why}",
                    crate::foundations::error::printable(key.as_bytes(), 256)
                ),
            )
        };
        let shown = |v: &Value| crate::foundations::error::printable(v.to_string().as_bytes(), 64);
        let v: Value =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("no JSON document ({e})")))?;
        let Value::Object(map) = v else {
            return Err(bad(format!("{}, not a JSON object", shown(&v))));
        };
        let field = |name: &str| {
            map.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        };
        let limit = match field("Limit") {
            None | Some(Value::Null) => 0,
            Some(Value::Number(n)) => n
                .as_u64()
                .ok_or_else(|| bad(format!("Limit {n}, not a non-negative integer")))?,
            Some(other) => return Err(bad(format!("Limit {}, not a number", shown(other)))),
        };
        let mut holders = BTreeMap::new();
        match field("Holders") {
            None | Some(Value::Null) => {}
            Some(Value::Object(h)) => {
                for (k, v) in h {
                    let b = v.as_bool().ok_or_else(|| {
                        bad(format!(
                            "Holders[{}] = {}, not true or false",
                            crate::foundations::error::printable(k.as_bytes(), 64),
                            shown(v)
                        ))
                    })?;
                    holders.insert(k.clone(), b);
                }
            }
            Some(other) => return Err(bad(format!("Holders {}, not an object", shown(other)))),
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
        LockDoc::decode(&p.key, p.value.as_deref(), limit)
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
        assert_eq!(LockDoc::decode("k", Some(&d.encode()), 9).unwrap(), d);
        let lower = LockDoc::decode(
            "k",
            Some(br#"{"limit":3,"holders":{"a":true,"b":true}}"#),
            9,
        )
        .unwrap();
        assert_eq!(lower, d);
        let empty = LockDoc::decode("k", None, 4).unwrap();
        assert_eq!(empty.limit, 4);
        assert!(empty.holders.is_empty());
        let e = LockDoc::decode("k", Some(b"{not json"), 1).unwrap_err();
        assert!(e.to_string().contains("lock decoding failed"), "{e}");
    }

    /// The `.lock` document is written by every holder, so it is fuzzed like
    /// a server's answer: deterministic seed, bounded cases.
    mod fuzz {
        use super::*;
        use proptest::prelude::*;
        use proptest::test_runner::{Config, RngAlgorithm, RngSeed, TestRunner};

        fn runner(cases: u32) -> TestRunner {
            TestRunner::new(Config {
                cases,
                failure_persistence: None,
                rng_algorithm: RngAlgorithm::ChaCha,
                rng_seed: RngSeed::Fixed(0x0ba7_0019),
                ..Config::default()
            })
        }

        fn refused_clearly(e: &Error) -> std::result::Result<(), TestCaseError> {
            prop_assert_eq!(e.kind(), ErrorKind::BadResponse);
            let text = e.to_string();
            prop_assert!(
                text.starts_with("lock decoding failed: the semaphore's svc/.lock holds "),
                "{}",
                text
            );
            prop_assert!(!text.chars().any(char::is_control), "{:?}", text);
            Ok(())
        }

        #[test]
        fn what_go_writes_reads_back() {
            let doc = (
                any::<u64>(),
                proptest::collection::btree_map(any::<String>(), any::<bool>(), 0..6),
            );
            runner(512)
                .run(&doc, |(limit, holders)| {
                    let d = LockDoc { limit, holders };
                    prop_assert_eq!(LockDoc::decode("svc/.lock", Some(&d.encode()), 1)?, d);
                    Ok(())
                })
                .unwrap();
        }

        #[test]
        fn arbitrary_bytes_never_panic() {
            let bytes = prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..64),
                "[{}\\[\\]\"a-zA-Z:,0-9 .e+-]{0,40}".prop_map(String::into_bytes),
            ];
            runner(1024)
                .run(&bytes, |b| {
                    if let Err(e) = LockDoc::decode("svc/.lock", Some(&b), 1) {
                        refused_clearly(&e)?;
                    }
                    Ok(())
                })
                .unwrap();
        }

        #[test]
        fn wrong_types_name_the_field() {
            let value = prop_oneof![
                any::<u64>().prop_map(|u| u.to_string()),
                (i64::MIN..0).prop_map(|i| i.to_string()),
                (-1e9f64..1e9).prop_map(|f| format!("{f:?}")),
                Just("18446744073709551616".to_string()),
                any::<String>().prop_map(|s| serde_json::to_string(&s).unwrap()),
                any::<bool>().prop_map(|b| b.to_string()),
                Just("null".to_string()),
                Just("[]".to_string()),
                Just("{}".to_string()),
                Just(r#"{"a":true}"#.to_string()),
                Just(r#"{"a":1}"#.to_string()),
            ];
            runner(512)
                .run(&(any::<bool>(), value), |(limit_field, v)| {
                    let text = if limit_field {
                        format!(r#"{{"Limit":{v},"Holders":{{}}}}"#)
                    } else {
                        format!(r#"{{"Limit":2,"Holders":{v}}}"#)
                    };
                    let parsed: serde_json::Value = serde_json::from_str(&v).unwrap();
                    let ok = if limit_field {
                        parsed.is_null() || parsed.as_u64().is_some()
                    } else {
                        parsed.is_null()
                            || parsed
                                .as_object()
                                .is_some_and(|m| m.values().all(|x| x.is_boolean()))
                    };
                    match LockDoc::decode("svc/.lock", Some(text.as_bytes()), 1) {
                        Ok(_) => prop_assert!(ok, "{} accepted", text),
                        Err(e) => {
                            prop_assert!(!ok, "{} refused: {}", text, e);
                            refused_clearly(&e)?;
                            let field = if limit_field { "Limit" } else { "Holders" };
                            prop_assert!(e.to_string().contains(field), "{}", e);
                        }
                    }
                    Ok(())
                })
                .unwrap();
        }
    }
}
