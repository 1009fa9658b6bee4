//! `/v1/txn` (consul-semantics.md §3.6).

mod raw;

use raw::*;
use serde_json::json;

fn txn(a: std::net::SocketAddr, ops: serde_json::Value) -> Resp {
    put(a, "/v1/txn", ops.to_string().as_bytes())
}

#[test]
fn txn_write_success_returns_results_without_values_and_errors_null() {
    let s = start();
    let a = s.addr();
    let r = txn(
        a,
        json!([
            {"KV": {"Verb": "set", "Key": "t/a", "Value": "aGk=", "Flags": 3}, "Node": null, "Service": null, "Check": null},
            {"KV": {"Verb": "delete", "Key": "t/none"}},
        ]),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    assert!(body["Errors"].is_null());
    let results = body["Results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "delete yields no result entry");
    assert!(
        results[0]["KV"]["Value"].is_null(),
        "write results carry no value"
    );
    assert_eq!(results[0]["KV"]["Flags"], 3);
    assert!(
        r.header("X-Consul-Index").is_none(),
        "a write txn sets no meta headers"
    );
    assert_eq!(entry(a, "t/a").unwrap()["Value"], "aGk=");
}

#[test]
fn txn_read_only_returns_values_and_query_meta() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/r/1", b"one");
    put(a, "/v1/kv/r/2", b"two");
    let r = txn(
        a,
        json!([
            {"KV": {"Verb": "get", "Key": "r/1"}},
            {"KV": {"Verb": "get-tree", "Key": "r/"}},
            {"KV": {"Verb": "check-not-exists", "Key": "r/3"}},
        ]),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let body = r.json();
    let results = body["Results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["KV"]["Value"], "b25l");
    assert_eq!(results[2]["KV"]["Value"], "dHdv");
    assert_eq!(body["KnownLeader"], true);
    assert!(body.get("Index").is_some());
    assert_eq!(r.header("X-Consul-Knownleader"), Some("true"));
    assert!(r.header("X-Consul-Lastcontact").is_some());
    assert!(r.header("X-Consul-Index").is_none());
}

#[test]
fn txn_failure_is_409_listing_every_failing_op_and_applies_nothing() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/x", b"1");
    let before = s.current_index();
    let r = txn(
        a,
        json!([
            {"KV": {"Verb": "set", "Key": "new", "Value": "eA=="}},
            {"KV": {"Verb": "cas", "Key": "x", "Index": 1}},
            {"KV": {"Verb": "get", "Key": "missing"}},
            {"KV": {"Verb": "bogus", "Key": "x"}},
        ]),
    );
    assert_eq!(r.status, 409);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let body = r.json();
    assert!(body["Results"].is_null());
    assert_eq!(
        body["Errors"],
        json!([
            {"OpIndex": 1, "What": "failed to set key \"x\", index is stale"},
            {"OpIndex": 2, "What": "key \"missing\" doesn't exist"},
            {"OpIndex": 3, "What": "unknown KV verb \"bogus\""},
        ])
    );
    assert!(entry(a, "new").is_none(), "atomic: the set was rolled back");
    assert_eq!(
        s.current_index(),
        before + 1,
        "the failed write txn still took a raft index"
    );
}

#[test]
fn txn_lock_unlock_and_check_verbs_use_consul_texts() {
    let s = start();
    let a = s.addr();
    let s1 = session(a, r#"{"LockDelay":"0s"}"#);
    let s2 = session(a, r#"{"LockDelay":"0s"}"#);
    let r = txn(
        a,
        json!([{"KV": {"Verb": "lock", "Key": "l", "Value": "djE=", "Session": s1}}]),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let lk = r.json()["Results"][0]["KV"].clone();
    assert_eq!(lk["LockIndex"], 1);
    assert_eq!(lk["Session"], s1.as_str());
    let what = |ops: serde_json::Value| {
        txn(a, ops).json()["Errors"][0]["What"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        what(json!([{"KV": {"Verb": "lock", "Key": "l", "Session": s2}}])),
        "failed to lock key \"l\", lock is already held"
    );
    assert_eq!(
        what(json!([{"KV": {"Verb": "unlock", "Key": "l", "Session": s2}}])),
        "failed to unlock key \"l\", lock isn't held, or is held by another session"
    );
    assert_eq!(
        what(json!([{"KV": {"Verb": "check-session", "Key": "l", "Session": s2}}])),
        format!("failed session check for key \"l\", current session \"{s1}\" != \"{s2}\"")
    );
    assert_eq!(
        what(json!([{"KV": {"Verb": "check-session", "Key": "nope", "Session": s2}}])),
        "failed to check session, key \"nope\" doesn't exist"
    );
    let mi = lk["ModifyIndex"].as_u64().unwrap();
    assert_eq!(
        what(json!([{"KV": {"Verb": "check-index", "Key": "l", "Index": mi + 1}}])),
        format!(
            "failed index check for key \"l\", current modify index {mi} != {}",
            mi + 1
        )
    );
    assert_eq!(
        what(json!([{"KV": {"Verb": "check-index", "Key": "nope", "Index": 1}}])),
        "failed to check index, key \"nope\" doesn't exist"
    );
    assert_eq!(
        what(json!([{"KV": {"Verb": "check-not-exists", "Key": "l"}}])),
        "key \"l\" exists"
    );
    assert_eq!(
        what(json!([{"KV": {"Verb": "delete-cas", "Key": "l", "Index": mi + 1}}])),
        "failed to delete key \"l\", index is stale"
    );
    assert_eq!(
        what(json!([{"KV": {"Verb": "lock", "Key": "l", "Session": "nope"}}])),
        "invalid session \"nope\""
    );
    // A guarded write: check-session in front of a set.
    let ok = txn(
        a,
        json!([
            {"KV": {"Verb": "check-session", "Key": "l", "Session": s1}},
            {"KV": {"Verb": "set", "Key": "guarded", "Value": "eA=="}},
        ]),
    );
    assert_eq!(ok.status, 200);
    let r = txn(
        a,
        json!([{"KV": {"Verb": "unlock", "Key": "l", "Session": s1, "Value": "djI="}}]),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        entry(a, "l").unwrap()["Value"],
        "djI=",
        "unlock overwrites the value"
    );
}

#[test]
fn txn_lock_during_lock_delay_is_409_without_index() {
    let s = start();
    let a = s.addr();
    let holder = session(a, r#"{"LockDelay":"10s"}"#);
    let other = session(a, "{}");
    put(a, &format!("/v1/kv/l?acquire={holder}"), b"");
    put(a, &format!("/v1/session/destroy/{holder}"), b"");
    let before = s.current_index();
    let r = txn(
        a,
        json!([{"KV": {"Verb": "lock", "Key": "l", "Session": other}}]),
    );
    assert_eq!(r.status, 409);
    assert_eq!(
        r.json()["Errors"][0]["What"],
        "failed to lock key \"l\" due to lock delay"
    );
    assert_eq!(
        s.current_index(),
        before,
        "pre-check rejection: no raft write"
    );
}

#[test]
fn txn_get_or_empty_returns_request_entry_for_missing_key() {
    let s = start();
    let a = s.addr();
    let r = txn(a, json!([{"KV": {"Verb": "get-or-empty", "Key": "ghost"}}]));
    assert_eq!(r.status, 200);
    let kv = &r.json()["Results"][0]["KV"];
    assert_eq!(kv["Key"], "ghost");
    assert!(kv["Value"].is_null());
}

#[test]
fn txn_malformed_or_unknown_field_is_400_failed_to_parse_body() {
    let s = start();
    let a = s.addr();
    for body in [
        &b"not json"[..],
        br#"[{"KV":{"Verb":"get","Key":"k","Bogus":1}}]"#,
        br#"[{"Nope":{}}]"#,
        br#"{"KV":{}}"#,
        br#"[{"KV":{"Verb":"set","Key":"k","Value":"!!"}}]"#,
    ] {
        let r = put(a, "/v1/txn", body);
        assert_eq!(r.status, 400, "{}", String::from_utf8_lossy(body));
        assert!(
            r.text().starts_with("Failed to parse body: "),
            "{}",
            r.text()
        );
    }
    let r = put(
        a,
        "/v1/txn",
        br#"[{"KV":{"Verb":"get","Key":"k","Bogus":1}}]"#,
    );
    assert_eq!(
        r.text(),
        "Failed to parse body: json: unknown field \"Bogus\""
    );
    let r = put(a, "/v1/txn", br#"[{"kv":{"verb":"set","key":"ci"}}]"#);
    assert_eq!(
        r.status, 200,
        "field names match case-insensitively, as in Go"
    );
}

#[test]
fn txn_over_128_ops_or_too_large_is_413() {
    let s = start();
    let a = s.addr();
    let ops: Vec<_> = (0..129)
        .map(|i| json!({"KV": {"Verb": "get", "Key": format!("k{i}")}}))
        .collect();
    let r = txn(a, json!(ops));
    assert_eq!(
        (r.status, r.text().as_str()),
        (413, "Transaction contains too many operations (129 > 128)")
    );
    let r = req(a, "PUT", "/v1/txn", &[("Content-Length", "600000")], b"");
    assert_eq!(r.status, 413);
    assert_eq!(
        r.text(),
        "Request body(600000 bytes) too large, max size: 524288 bytes. See https://www.consul.io/docs/agent/config/config-files#txn_max_req_len."
    );
    let big = base64_of_len(524_289);
    let r = txn(
        a,
        json!([{"KV": {"Verb": "set", "Key": "big", "Value": big}}]),
    );
    assert_eq!(r.status, 413);
}

fn base64_of_len(n: usize) -> String {
    // "AAAA" decodes to 3 zero bytes; pad the tail by hand.
    let mut s = "AAAA".repeat(n / 3);
    match n % 3 {
        1 => s.push_str("AA=="),
        2 => s.push_str("AAA="),
        _ => {}
    }
    s
}
