//! KV semantics (consul-semantics.md §3.5, §5, §6.1) over raw HTTP.

mod raw;

use std::time::Duration;

use raw::*;
use serde_json::json;

const LOCK_FLAGS: &str = "3304740253564472344";

#[test]
fn index_starts_above_one_and_never_reports_zero() {
    let s = start();
    let a = s.addr();
    let r = get(a, "/v1/kv/missing");
    assert_eq!(r.status, 404);
    assert_eq!(r.index(), 1, "an empty KV table reports 1, never 0");
    assert!(
        s.current_index() > 1,
        "bootstrap writes put the global index above 1"
    );
    put(a, "/v1/kv/k", b"v");
    assert!(get(a, "/v1/kv/k").index() > 1);
}

#[test]
fn kv_get_missing_key_is_404_with_empty_body_and_meta_headers() {
    let s = start();
    let r = get(s.addr(), "/v1/kv/nope");
    assert_eq!(r.status, 404);
    assert!(r.body.is_empty());
    assert!(r.has_exact_header("X-Consul-Index"));
    assert_eq!(r.header("X-Consul-Knownleader"), Some("true"));
}

#[test]
fn kv_entry_json_has_consul_field_order_base64_value_and_omits_empty_session() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/svc/leader?flags=42", b"hello");
    let r = get(a, "/v1/kv/svc/leader");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let idx = r.index();
    let v = r.json();
    assert_eq!(
        v,
        json!([{"LockIndex": 0, "Key": "svc/leader", "Flags": 42, "Value": "aGVsbG8=",
                "CreateIndex": idx, "ModifyIndex": idx}])
    );
    // serde_json keeps document order here (`preserve_order`), and map equality ignores it.
    let fields: Vec<&str> = v[0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        fields,
        [
            "LockIndex",
            "Key",
            "Flags",
            "Value",
            "CreateIndex",
            "ModifyIndex"
        ]
    );
    put(a, "/v1/kv/empty", b"");
    assert!(
        entry(a, "empty").unwrap()["Value"].is_null(),
        "an empty value is null, not \"\""
    );
}

#[test]
fn single_key_index_is_its_modify_index_and_missing_key_uses_table_index() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/a", b"1");
    let ia = get(a, "/v1/kv/a").index();
    put(a, "/v1/kv/b", b"2");
    let ib = get(a, "/v1/kv/b").index();
    assert!(ib > ia);
    assert_eq!(
        get(a, "/v1/kv/a").index(),
        ia,
        "present key: its own ModifyIndex"
    );
    assert_eq!(
        get(a, "/v1/kv/zzz").index(),
        ib,
        "missing key: max(kvs, tombstones)"
    );
    delete(a, "/v1/kv/b");
    let after = get(a, "/v1/kv/zzz").index();
    assert!(after > ib, "a delete moves the tombstone index");
}

#[test]
fn recurse_lists_prefix_sorted_and_index_is_max_under_prefix() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/p/b", b"2");
    put(a, "/v1/kv/p/a", b"1");
    put(a, "/v1/kv/px", b"string prefix, not path prefix");
    put(a, "/v1/kv/q/other", b"later");
    let r = get(a, "/v1/kv/p?recurse");
    assert_eq!(r.status, 200);
    let keys: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["Key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys, ["p/a", "p/b", "px"]);
    let px = entry(a, "px").unwrap()["ModifyIndex"].as_u64().unwrap();
    assert_eq!(
        r.index(),
        px,
        "max ModifyIndex under the prefix, not the table index"
    );
    assert_eq!(get(a, "/v1/kv/nothing?recurse").status, 404);
    assert_eq!(get(a, "/v1/kv/?recurse").status, 200);
}

#[test]
fn recurse_on_empty_store_is_404_even_for_root() {
    let s = start();
    assert_eq!(get(s.addr(), "/v1/kv/?recurse").status, 404);
}

#[test]
fn keys_with_separator_fold_and_deduplicate() {
    let s = start();
    let a = s.addr();
    for k in ["a/x", "a/y/z", "a/y/w", "b"] {
        put(a, &format!("/v1/kv/{k}"), b"");
    }
    let r = get(a, "/v1/kv/a/?keys&separator=/");
    assert_eq!(r.json(), serde_json::json!(["a/x", "a/y/"]));
    let r = get(a, "/v1/kv/a/?keys&seperator=/");
    assert_eq!(
        r.json(),
        serde_json::json!(["a/x", "a/y/"]),
        "the historic misspelling works too"
    );
    assert_eq!(
        get(a, "/v1/kv/none/?keys").status,
        404,
        "no keys under a non-empty prefix"
    );
}

#[test]
fn keys_on_empty_store_with_empty_prefix_is_200_empty_array() {
    let s = start();
    let r = get(s.addr(), "/v1/kv/?keys");
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), serde_json::json!([]));
}

#[test]
fn raw_get_returns_value_bytes_with_consul_headers() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/r", b"\x00bin\xff");
    let r = get(a, "/v1/kv/r?raw");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"\x00bin\xff");
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(r.header("Content-Security-Policy"), Some("sandbox"));
    assert!(r.header("X-Consul-Index").is_some());
    assert_eq!(get(a, "/v1/kv/nope?raw").status, 404);
}

#[test]
fn plain_put_always_returns_true_and_cas_zero_is_create_only() {
    let s = start();
    let a = s.addr();
    assert_eq!(put(a, "/v1/kv/c?cas=0", b"1").json(), json!(true));
    assert_eq!(put(a, "/v1/kv/c?cas=0", b"2").json(), json!(false));
    let mi = entry(a, "c").unwrap()["ModifyIndex"].as_u64().unwrap();
    assert_eq!(
        put(a, &format!("/v1/kv/c?cas={}", mi + 100), b"3").json(),
        json!(false)
    );
    assert_eq!(
        put(a, &format!("/v1/kv/c?cas={mi}"), b"4").json(),
        json!(true)
    );
    assert_eq!(
        put(a, "/v1/kv/nocas?cas=5", b"x").json(),
        json!(false),
        "cas>0 on a missing key fails"
    );
    assert_eq!(put(a, "/v1/kv/c", b"5").json(), json!(true));
}

#[test]
fn identical_put_keeps_modify_index_and_wakes_no_watcher() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/same", b"v");
    let e1 = entry(a, "same").unwrap();
    let mi = e1["ModifyIndex"].as_u64().unwrap();
    let watcher = spawn_req(
        a,
        "GET",
        format!("/v1/kv/same?index={mi}&wait=700ms"),
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(put(a, "/v1/kv/same", b"v").json(), json!(true));
    let r = watcher.join().unwrap().unwrap();
    assert_eq!(
        r.index(),
        mi,
        "the watcher ran to its timeout: the no-op write woke nobody"
    );
    assert_eq!(entry(a, "same").unwrap()["ModifyIndex"], e1["ModifyIndex"]);
}

#[test]
fn acquire_creates_missing_key_with_lock_index_1() {
    let s = start();
    let a = s.addr();
    let sid = session(a, "{}");
    assert_eq!(
        put(
            a,
            &format!("/v1/kv/lk?acquire={sid}&flags={LOCK_FLAGS}"),
            b"me"
        )
        .json(),
        json!(true)
    );
    let e = entry(a, "lk").unwrap();
    assert_eq!(e["LockIndex"], 1);
    assert_eq!(e["Session"], sid.as_str());
    assert_eq!(
        e["Flags"].as_u64().unwrap().to_string(),
        LOCK_FLAGS,
        "u64 flags above 2^53 survive"
    );
    assert_eq!(e["CreateIndex"], e["ModifyIndex"]);
}

#[test]
fn reacquire_by_holder_keeps_lock_index_and_is_noop_when_identical() {
    let s = start();
    let a = s.addr();
    let sid = session(a, "{}");
    put(a, &format!("/v1/kv/lk?acquire={sid}"), b"v");
    let e1 = entry(a, "lk").unwrap();
    assert_eq!(
        put(a, &format!("/v1/kv/lk?acquire={sid}"), b"v").json(),
        json!(true)
    );
    assert_eq!(
        entry(a, "lk").unwrap(),
        e1,
        "identical re-acquire changes nothing"
    );
    put(a, &format!("/v1/kv/lk?acquire={sid}"), b"v2");
    let e2 = entry(a, "lk").unwrap();
    assert_eq!(e2["LockIndex"], 1);
    assert!(e2["ModifyIndex"].as_u64() > e1["ModifyIndex"].as_u64());
}

#[test]
fn acquire_of_key_held_by_another_session_is_false_and_lock_index_counts_new_holders() {
    let s = start();
    let a = s.addr();
    let s1 = session(a, r#"{"LockDelay":"0s"}"#);
    let s2 = session(a, r#"{"LockDelay":"0s"}"#);
    put(a, &format!("/v1/kv/lk?acquire={s1}"), b"");
    assert_eq!(
        put(a, &format!("/v1/kv/lk?acquire={s2}"), b"").json(),
        json!(false)
    );
    put(a, &format!("/v1/kv/lk?release={s1}"), b"");
    assert_eq!(
        put(a, &format!("/v1/kv/lk?acquire={s2}"), b"").json(),
        json!(true)
    );
    assert_eq!(entry(a, "lk").unwrap()["LockIndex"], 2);
}

#[test]
fn release_overwrites_value_and_flags_and_keeps_lock_index() {
    let s = start();
    let a = s.addr();
    let sid = session(a, "{}");
    put(
        a,
        &format!("/v1/kv/lk?acquire={sid}&flags={LOCK_FLAGS}"),
        b"value",
    );
    assert_eq!(
        put(a, &format!("/v1/kv/lk?release={sid}"), b"").json(),
        json!(true)
    );
    let e = entry(a, "lk").unwrap();
    assert!(
        e["Value"].is_null(),
        "release with an empty body wipes the value"
    );
    assert_eq!(e["Flags"], 0, "and resets the flags");
    assert_eq!(e["LockIndex"], 1);
    assert!(e.get("Session").is_none());
}

#[test]
fn release_by_non_holder_or_of_missing_key_is_false() {
    let s = start();
    let a = s.addr();
    let s1 = session(a, "{}");
    let s2 = session(a, "{}");
    put(a, &format!("/v1/kv/lk?acquire={s1}"), b"");
    assert_eq!(
        put(a, &format!("/v1/kv/lk?release={s2}"), b"").json(),
        json!(false)
    );
    assert_eq!(
        put(a, &format!("/v1/kv/missing?release={s1}"), b"").json(),
        json!(false)
    );
    assert_eq!(entry(a, "lk").unwrap()["Session"], s1.as_str());
}

#[test]
fn plain_put_on_locked_key_keeps_holder() {
    let s = start();
    let a = s.addr();
    let sid = session(a, "{}");
    put(a, &format!("/v1/kv/lk?acquire={sid}"), b"a");
    assert_eq!(put(a, "/v1/kv/lk", b"b").json(), json!(true));
    let e = entry(a, "lk").unwrap();
    assert_eq!(e["Session"], sid.as_str());
    assert_eq!(e["Value"], "Yg==");
}

#[test]
fn delete_on_locked_key_removes_it_without_lock_delay() {
    let s = start();
    let a = s.addr();
    let s1 = session(a, r#"{"LockDelay":"30s"}"#);
    let s2 = session(a, "{}");
    put(a, &format!("/v1/kv/lk?acquire={s1}"), b"");
    assert_eq!(delete(a, "/v1/kv/lk").json(), json!(true));
    assert!(entry(a, "lk").is_none());
    assert_eq!(
        put(a, &format!("/v1/kv/lk?acquire={s2}"), b"").json(),
        json!(true),
        "no lock-delay after delete"
    );
}

#[test]
fn delete_cas_on_missing_key_is_true_and_stale_index_is_false() {
    let s = start();
    let a = s.addr();
    assert_eq!(delete(a, "/v1/kv/missing?cas=7").json(), json!(true));
    put(a, "/v1/kv/d", b"x");
    let mi = entry(a, "d").unwrap()["ModifyIndex"].as_u64().unwrap();
    assert_eq!(
        delete(a, &format!("/v1/kv/d?cas={}", mi + 1)).json(),
        json!(false)
    );
    assert!(entry(a, "d").is_some());
    assert_eq!(delete(a, &format!("/v1/kv/d?cas={mi}")).json(), json!(true));
    assert!(entry(a, "d").is_none());
}

#[test]
fn delete_recurse_removes_subtree_and_empty_key_removes_everything() {
    let s = start();
    let a = s.addr();
    for k in ["t/1", "t/2", "u/1"] {
        put(a, &format!("/v1/kv/{k}"), b"");
    }
    assert_eq!(delete(a, "/v1/kv/t?recurse").json(), json!(true));
    assert_eq!(get(a, "/v1/kv/t?recurse").status, 404);
    assert!(entry(a, "u/1").is_some());
    assert_eq!(delete(a, "/v1/kv/?recurse").json(), json!(true));
    assert_eq!(get(a, "/v1/kv/?recurse").status, 404);
}

#[test]
fn failed_cas_acquire_and_release_consume_an_index_without_changing_the_key() {
    let s = start();
    let a = s.addr();
    let s1 = session(a, "{}");
    let s2 = session(a, "{}");
    put(a, &format!("/v1/kv/k?acquire={s1}"), b"");
    let before = s.current_index();
    let e = entry(a, "k").unwrap();
    put(a, "/v1/kv/k?cas=1", b"x"); // stale CAS
    put(a, &format!("/v1/kv/k?acquire={s2}"), b""); // held by s1
    put(a, &format!("/v1/kv/k?release={s2}"), b""); // not the holder
    assert_eq!(
        s.current_index(),
        before + 3,
        "each raft-equivalent write takes an index"
    );
    assert_eq!(entry(a, "k").unwrap(), e, "but the key did not change");
}

#[test]
fn session_id_case_matters_for_holder_check() {
    let s = start();
    let a = s.addr();
    let sid = session(a, "{}");
    let upper = sid.to_uppercase();
    // Lookup is case-insensitive, the holder comparison is not.
    assert_eq!(
        put(a, &format!("/v1/kv/k?acquire={upper}"), b"").json(),
        json!(true)
    );
    assert_eq!(
        put(a, &format!("/v1/kv/k?release={sid}"), b"").json(),
        json!(false)
    );
    assert_eq!(
        put(a, &format!("/v1/kv/k?release={upper}"), b"").json(),
        json!(true)
    );
}
