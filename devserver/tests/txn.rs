//! `/v1/txn` conformance: verbs and their exact error strings, atomicity, result shapes, the
//! read-only path, limits and decoding (consul-semantics.md §3.6, §4 txn rows, §13 "Other
//! endpoints").

mod common;

use common::*;

fn kv_op(verb: &str, key: &str) -> Value {
    json!({"KV": {"Verb": verb, "Key": key}})
}

fn kv_op_with(verb: &str, key: &str, extra: Value) -> Value {
    let mut op = json!({"Verb": verb, "Key": key});
    for (k, v) in extra.as_object().unwrap() {
        op[k] = v.clone();
    }
    json!({ "KV": op })
}

/// Asserts a 409 whose `Errors` are exactly these (OpIndex, What) pairs.
#[track_caller]
fn assert_409(r: &Response, expected: &[(u64, &str)]) {
    assert_eq!(r.status, 409, "{}", r.text());
    let v = r.json();
    assert!(v["Results"].is_null(), "{v}");
    let errs: Vec<(u64, String)> = v["Errors"]
        .as_array()
        .expect("Errors array")
        .iter()
        .map(|e| {
            assert_eq!(keys_of(e), ["OpIndex", "What"]);
            (
                e["OpIndex"].as_u64().unwrap(),
                e["What"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(u64, String)> = expected.iter().map(|(i, w)| (*i, w.to_string())).collect();
    assert_eq!(errs, expected);
}

fn results(r: &Response) -> Vec<Value> {
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["Results"]
        .as_array()
        .expect("Results array")
        .iter()
        .map(|x| x["KV"].clone())
        .collect()
}

#[test]
fn txn_write_returns_results_in_op_order_with_value_only_for_get_verbs() {
    let s = start();
    let r = txn(
        &s,
        &json!([
            kv_op_with("set", "a", json!({"Value": b64(b"1"), "Flags": 5})),
            kv_op_with("set", "b", json!({"Value": b64(b"2")})),
            kv_op("get", "a"),
        ]),
    );
    let v = r.json();
    assert_eq!(keys_of(&v), ["Results", "Errors"]);
    assert!(v["Errors"].is_null());
    let res = results(&r);
    assert_eq!(res.len(), 3);
    assert_eq!(res[0]["Key"], "a");
    assert!(res[0]["Value"].is_null(), "set result has Value null");
    assert_eq!(res[0]["Flags"], 5);
    assert_eq!(res[1]["Key"], "b");
    assert_eq!(res[2]["Key"], "a");
    assert_eq!(res[2]["Value"], b64(b"1"));
    assert_eq!(
        keys_of(&res[2]),
        [
            "LockIndex",
            "Key",
            "Flags",
            "Value",
            "CreateIndex",
            "ModifyIndex"
        ]
    );
    assert_eq!(
        res[0]["ModifyIndex"], res[1]["ModifyIndex"],
        "one raft entry"
    );
    assert_eq!(
        modify_index(&s, "b"),
        res[1]["ModifyIndex"].as_u64().unwrap()
    );
}

#[test]
fn txn_write_sets_no_meta_headers() {
    let s = start();
    let r = txn(&s, &json!([kv_op_with("set", "a", json!({"Value": null}))]));
    assert_eq!(r.status, 200);
    for h in [
        "X-Consul-Index",
        "X-Consul-Knownleader",
        "X-Consul-Lastcontact",
    ] {
        assert!(r.header(h).is_none(), "{h} on a write txn");
    }
}

#[test]
fn txn_read_only_sets_only_lastcontact_and_knownleader_and_flattens_meta_in_body() {
    let s = start();
    kv_set(&s, "a", b"1");
    let r = txn(&s, &json!([kv_op("get", "a")]));
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.canonical("X-Consul-Knownleader"), "true");
    assert_eq!(r.canonical("X-Consul-Lastcontact"), "0");
    assert!(r.header("X-Consul-Index").is_none());
    let v = r.json();
    for k in [
        "Results",
        "Errors",
        "Index",
        "LastContact",
        "KnownLeader",
        "ConsistencyLevel",
        "NotModified",
        "Backend",
        "ResultsFilteredByACLs",
    ] {
        assert!(v.get(k).is_some(), "read-only txn body lacks {k}: {v}");
    }
    assert_eq!(v["KnownLeader"], true);
    assert_eq!(v["LastContact"], 0);
    assert_eq!(v["Results"][0]["KV"]["Value"], b64(b"1"));
}

#[test]
fn txn_failing_ops_give_409_listing_all_errors_and_nothing_is_applied() {
    let s = start();
    kv_set(&s, "exists", b"x");
    let before = snapshot(&s);
    let r = txn(
        &s,
        &json!([
            kv_op_with("set", "new", json!({"Value": b64(b"v")})),
            kv_op("check-not-exists", "exists"),
            kv_op("delete", "exists"),
            kv_op("get", "nope"),
        ]),
    );
    assert_409(
        &r,
        &[
            (1, "key \"exists\" exists"),
            (3, "key \"nope\" doesn't exist"),
        ],
    );
    assert_eq!(snapshot(&s), before, "a failed txn applies nothing");
}

#[test]
fn txn_cas_zero_is_create_only_and_stale_index_fails() {
    let s = start();
    let r = txn(
        &s,
        &json!([kv_op_with(
            "cas",
            "c",
            json!({"Index": 0, "Value": b64(b"1")})
        )]),
    );
    assert_eq!(results(&r).len(), 1);
    let m = modify_index(&s, "c");
    assert_409(
        &txn(
            &s,
            &json!([kv_op_with(
                "cas",
                "c",
                json!({"Index": 0, "Value": b64(b"2")})
            )]),
        ),
        &[(0, "failed to set key \"c\", index is stale")],
    );
    assert_409(
        &txn(
            &s,
            &json!([kv_op_with(
                "cas",
                "c",
                json!({"Index": m + 9, "Value": b64(b"2")})
            )]),
        ),
        &[(0, "failed to set key \"c\", index is stale")],
    );
    let ok = txn(
        &s,
        &json!([kv_op_with(
            "cas",
            "c",
            json!({"Index": m, "Value": b64(b"3")})
        )]),
    );
    assert_eq!(results(&ok).len(), 1);
    assert_eq!(entry_value(&kv_entry(&s, "c").unwrap()), b"3");
}

#[test]
fn txn_set_keeps_an_existing_lock_holder() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    acquire(&s, "l", &sid, b"v").assert(200, "true");
    let r = txn(
        &s,
        &json!([kv_op_with("set", "l", json!({"Value": b64(b"w")}))]),
    );
    assert_eq!(results(&r)[0]["Session"], sid.as_str());
    let e = kv_entry(&s, "l").unwrap();
    assert_eq!(e["Session"], sid.as_str());
    assert_eq!(entry_value(&e), b"w");
}

#[test]
fn txn_lock_creates_key_and_held_lock_fails_with_text() {
    let s = start();
    let a = session_create(&s, &json!({}));
    let b = session_create(&s, &json!({}));
    let r = txn(
        &s,
        &json!([kv_op_with(
            "lock",
            "l",
            json!({"Session": a, "Value": b64(b"a")})
        )]),
    );
    let res = results(&r);
    assert_eq!(res[0]["Session"], a.as_str());
    assert_eq!(res[0]["LockIndex"], 1);
    assert!(res[0]["Value"].is_null());
    assert_409(
        &txn(&s, &json!([kv_op_with("lock", "l", json!({"Session": b}))])),
        &[(0, "failed to lock key \"l\", lock is already held")],
    );
}

#[test]
fn txn_lock_with_unknown_session_fails_with_invalid_session() {
    let s = start();
    let ghost = "11111111-2222-3333-4444-555555555555";
    assert_409(
        &txn(
            &s,
            &json!([kv_op_with("lock", "l", json!({"Session": ghost}))]),
        ),
        &[(0, &format!("invalid session \"{ghost}\""))],
    );
}

#[test]
fn txn_lock_during_lock_delay_fails_due_to_lock_delay() {
    let s = start();
    let holder = session_with_delay(&s, "30s");
    acquire(&s, "ld", &holder, b"v").assert(200, "true");
    put(&s, &format!("/v1/session/destroy/{holder}"), b"").assert(200, "true");
    let other = session_with_delay(&s, "0s");
    assert_409(
        &txn(
            &s,
            &json!([kv_op_with("lock", "ld", json!({"Session": other}))]),
        ),
        &[(0, "failed to lock key \"ld\" due to lock delay")],
    );
}

#[test]
fn txn_unlock_by_non_holder_fails_and_by_holder_releases() {
    let s = start();
    let a = session_create(&s, &json!({}));
    let b = session_create(&s, &json!({}));
    acquire(&s, "l", &a, b"v").assert(200, "true");
    let msg = "failed to unlock key \"l\", lock isn't held, or is held by another session";
    assert_409(
        &txn(
            &s,
            &json!([kv_op_with("unlock", "l", json!({"Session": b}))]),
        ),
        &[(0, msg)],
    );
    let r = txn(
        &s,
        &json!([kv_op_with("unlock", "l", json!({"Session": a}))]),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(kv_entry(&s, "l").unwrap().get("Session").is_none());
}

#[test]
fn txn_get_of_missing_key_fails() {
    let s = start();
    assert_409(
        &txn(&s, &json!([kv_op("get", "missing")])),
        &[(0, "key \"missing\" doesn't exist")],
    );
}

#[test]
fn txn_get_or_empty_returns_request_entry_with_null_value_for_missing_key() {
    let s = start();
    let r = txn(&s, &json!([kv_op("get-or-empty", "missing")]));
    let res = results(&r);
    assert_eq!(res.len(), 1);
    assert_eq!(res[0]["Key"], "missing");
    assert!(res[0]["Value"].is_null());
    kv_set(&s, "there", b"v");
    let res = results(&txn(&s, &json!([kv_op("get-or-empty", "there")])));
    assert_eq!(res[0]["Value"], b64(b"v"));
}

#[test]
fn txn_get_tree_returns_all_entries_under_prefix_with_values() {
    let s = start();
    for k in ["t/1", "t/2", "u"] {
        kv_set(&s, k, k.as_bytes());
    }
    let res = results(&txn(&s, &json!([kv_op("get-tree", "t/")])));
    let keys: Vec<&str> = res.iter().map(|e| e["Key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["t/1", "t/2"]);
    assert_eq!(res[0]["Value"], b64(b"t/1"));
}

#[test]
fn txn_check_session_matches_holder_and_empty_matches_unlocked() {
    let s = start();
    let a = session_create(&s, &json!({}));
    acquire(&s, "l", &a, b"v").assert(200, "true");
    kv_set(&s, "free", b"v");
    let ok = txn(
        &s,
        &json!([
            kv_op_with("check-session", "l", json!({"Session": a})),
            kv_op_with("check-session", "free", json!({"Session": ""})),
        ]),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_409(
        &txn(
            &s,
            &json!([
                kv_op_with("check-session", "free", json!({"Session": a})),
                kv_op_with("check-session", "nope", json!({"Session": a})),
            ]),
        ),
        &[
            (
                0,
                &format!("failed session check for key \"free\", current session \"\" != \"{a}\""),
            ),
            (1, "failed to check session, key \"nope\" doesn't exist"),
        ],
    );
}

#[test]
fn txn_check_index_requires_existing_key_with_that_modify_index() {
    let s = start();
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let ok = txn(
        &s,
        &json!([kv_op_with("check-index", "k", json!({"Index": m}))]),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_409(
        &txn(
            &s,
            &json!([
                kv_op_with("check-index", "k", json!({"Index": m - 1})),
                kv_op_with("check-index", "nope", json!({"Index": 1})),
            ]),
        ),
        &[
            (
                0,
                &format!(
                    "failed index check for key \"k\", current modify index {m} != {}",
                    m - 1
                ),
            ),
            (1, "failed to check index, key \"nope\" doesn't exist"),
        ],
    );
}

#[test]
fn txn_delete_cas_succeeds_on_missing_or_matching_and_fails_when_stale() {
    let s = start();
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    assert_409(
        &txn(
            &s,
            &json!([kv_op_with("delete-cas", "k", json!({"Index": m + 1}))]),
        ),
        &[(0, "failed to delete key \"k\", index is stale")],
    );
    let ok = txn(
        &s,
        &json!([
            kv_op_with("delete-cas", "k", json!({"Index": m})),
            kv_op_with("delete-cas", "never", json!({"Index": 3})),
        ]),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert!(kv_entry(&s, "k").is_none());
}

#[test]
fn txn_ops_that_yield_no_entry_contribute_no_result() {
    let s = start();
    for k in ["a", "b", "tree/1", "tree/2"] {
        kv_set(&s, k, b"v");
    }
    let mb = modify_index(&s, "b");
    let r = txn(
        &s,
        &json!([
            kv_op("delete", "a"),
            kv_op("delete", "missing"),
            kv_op_with("delete-cas", "b", json!({"Index": mb})),
            kv_op("delete-tree", "tree/"),
            kv_op("check-not-exists", "a"),
            kv_op_with("set", "z", json!({"Value": null})),
        ]),
    );
    let res = results(&r);
    assert_eq!(res.len(), 1, "only the set yields an entry: {res:?}");
    assert_eq!(res[0]["Key"], "z");
    assert_eq!(get(&s, "/v1/kv/?keys").json(), json!(["z"]));
}

#[test]
fn txn_noop_set_reports_the_preserved_modify_index() {
    let s = start();
    kv_set(&s, "k", b"same");
    let m = modify_index(&s, "k");
    let res = results(&txn(
        &s,
        &json!([kv_op_with("set", "k", json!({"Value": b64(b"same")}))]),
    ));
    assert_eq!(res[0]["ModifyIndex"].as_u64(), Some(m));
    assert_eq!(modify_index(&s, "k"), m);
}

#[test]
fn txn_unknown_kv_verb_is_409_with_text() {
    let s = start();
    let before = snapshot(&s);
    assert_409(
        &txn(&s, &json!([kv_op("frobnicate", "k")])),
        &[(0, "unknown KV verb \"frobnicate\"")],
    );
    assert_eq!(snapshot(&s), before);
}

#[test]
fn txn_accepts_go_client_null_members_and_128_ops() {
    let s = start();
    let ops: Vec<Value> = (0..128)
        .map(|i| {
            json!({"KV": {"Verb": "set", "Key": format!("k/{i}"), "Value": null, "Flags": 0,
                          "Index": 0, "Session": ""},
                   "Node": null, "Service": null, "Check": null})
        })
        .collect();
    let r = txn(&s, &Value::Array(ops));
    assert_eq!(results(&r).len(), 128);
}

#[test]
fn txn_with_more_than_128_ops_is_413() {
    let s = start();
    let ops: Vec<Value> = (0..129)
        .map(|i| kv_op("get-or-empty", &format!("k{i}")))
        .collect();
    txn(&s, &Value::Array(ops)).assert(413, "Transaction contains too many operations (129 > 128)");
}

#[test]
fn txn_body_over_content_length_limit_is_413() {
    let s = start();
    let big = vec![b'x'; 400_000];
    let body = serde_json::to_vec(&json!([kv_op_with(
        "set",
        "big",
        json!({"Value": b64(&big)})
    )]))
    .unwrap();
    let n = body.len();
    assert!(n > 524_288);
    let r = Req::put("/v1/txn").body(body).send(&s);
    r.assert_prefix(
        413,
        &format!("Request body({n} bytes) too large, max size: 524288 bytes. See "),
    );
    assert!(r.text().contains("txn_max_req_len"), "{}", r.text());
    assert!(kv_entry(&s, "big").is_none());
}

#[test]
fn txn_chunked_body_over_limit_is_413_without_length() {
    let s = start();
    let big = vec![b'x'; 400_000];
    let body = serde_json::to_vec(&json!([kv_op_with(
        "set",
        "big",
        json!({"Value": b64(&big)})
    )]))
    .unwrap();
    let r = Req::put("/v1/txn").body(body).chunked().send(&s);
    r.assert_prefix(413, "Request body too large, max size: 524288 bytes");
    assert!(kv_entry(&s, "big").is_none());
    assert_eq!(get(&s, "/v1/status/leader").status, 200);
}

#[test]
fn txn_single_value_over_kv_max_value_size_is_413() {
    let s = start_with(|c| c.kv_max_value_size = 100);
    let r = txn(
        &s,
        &json!([kv_op_with("set", "k", json!({"Value": b64(&[7u8; 200])}))]),
    );
    r.assert(413, "Value for key \"k\" is too large (200 > 100 bytes)");
    assert!(kv_entry(&s, "k").is_none());
}

#[test]
fn txn_malformed_json_or_unknown_field_is_400_failed_to_parse_body() {
    let s = start();
    let before = snapshot(&s);
    for body in [
        &b"[{\"KV\": {\"Verb\": \"set\""[..],
        b"not json",
        b"{\"KV\": 1}",
        b"[{\"KV\": {\"Verb\": \"set\", \"Key\": \"k\", \"Bogus\": 1}}]",
        b"[{\"Session\": {\"Verb\": \"set\"}}]",
    ] {
        let r = Req::put("/v1/txn").body(body.to_vec()).send(&s);
        r.assert_prefix(400, "Failed to parse body: ");
    }
    assert_eq!(snapshot(&s), before);
}

#[test]
fn txn_ignores_ns_and_partition_query_params() {
    let s = start();
    let r = Req::put("/v1/txn?ns=foo&partition=bar")
        .json(&json!([kv_op_with("set", "k", json!({"Value": null}))]))
        .send(&s);
    assert_eq!(r.status, 200, "{}", r.text());
}
