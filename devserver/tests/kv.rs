//! KV endpoint conformance: reads, writes, CAS, acquire/release, deletes, the entry JSON shape
//! and the index model (consul-semantics.md §3.5, §5, §6.1, §13 "IDs and indexes" and
//! "Entries and writes").

mod common;

use common::*;

// ---- entry shape and encoding ----------------------------------------------------------

#[test]
fn kv_entry_json_has_go_field_order_without_session_when_unlocked() {
    let s = start();
    kv_set(&s, "svc/x", b"hello");
    let r = get(&s, "/v1/kv/svc/x");
    assert_eq!(r.status, 200);
    let v = r.json();
    let e = &v.as_array().unwrap()[0];
    assert_eq!(
        keys_of(e),
        [
            "LockIndex",
            "Key",
            "Flags",
            "Value",
            "CreateIndex",
            "ModifyIndex"
        ]
    );
    assert_eq!(e["Key"], "svc/x");
    assert_eq!(e["Value"], "aGVsbG8=");
    assert_eq!(e["LockIndex"], 0);
    assert_eq!(e["Flags"], 0);
}

#[test]
fn kv_entry_json_of_locked_key_has_session_between_value_and_create_index() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    acquire(&s, "svc/leader", &sid, b"hello").assert(200, "true");
    let e = kv_entry(&s, "svc/leader").unwrap();
    assert_eq!(
        keys_of(&e),
        [
            "LockIndex",
            "Key",
            "Flags",
            "Value",
            "Session",
            "CreateIndex",
            "ModifyIndex"
        ]
    );
    assert_eq!(e["Session"], sid.as_str());
}

#[test]
fn kv_value_is_standard_padded_base64_and_empty_value_is_null() {
    let s = start();
    kv_set(&s, "bin", &[0xfb, 0xff]);
    assert_eq!(kv_entry(&s, "bin").unwrap()["Value"], "+/8=");
    kv_set(&s, "one", b"a");
    assert_eq!(kv_entry(&s, "one").unwrap()["Value"], "YQ==");
    kv_set(&s, "empty", b"");
    let e = kv_entry(&s, "empty").unwrap();
    assert!(e["Value"].is_null(), "empty value must be null: {e}");
    // Present and null on the wire, not left out.
    let r = get(&s, "/v1/kv/empty");
    assert_eq!(
        r.json()[0].as_object().unwrap().get("Value"),
        Some(&Value::Null),
        "{}",
        r.text()
    );
}

#[test]
fn kv_flags_above_2_pow_53_round_trip_exactly() {
    let s = start();
    put(&s, &format!("/v1/kv/f?flags={SEMAPHORE_FLAG}"), b"x").assert(200, "true");
    // An integer literal with every digit (serde_json reads it into a u64 exactly; a float
    // such as 1.6210313421097357e19 would not be a u64).
    let r = get(&s, "/v1/kv/f");
    assert_eq!(
        r.json()[0]["Flags"].as_u64(),
        Some(SEMAPHORE_FLAG),
        "{}",
        r.text()
    );
    assert_eq!(
        kv_entry(&s, "f").unwrap()["Flags"].as_u64(),
        Some(SEMAPHORE_FLAG)
    );
}

#[test]
fn kv_success_body_is_compact_json_without_trailing_newline() {
    // Consul's layout without `-dev` (whatever BATON_TEST_DEVSERVER_PRETTY says).
    let s = start_with(|c| c.pretty = false);
    let r = put(&s, "/v1/kv/c", b"v");
    assert_eq!(r.body, b"true");
    assert_eq!(r.header("Content-Type"), Some("application/json"));
    let g = get(&s, "/v1/kv/c");
    assert_eq!(g.header("Content-Type"), Some("application/json"));
    assert!(!g.body.ends_with(b"\n"), "{:?}", g.text());
    assert!(!g.text().contains(": "), "compact JSON: {}", g.text());
}

#[test]
fn kv_key_comes_from_the_percent_decoded_path() {
    let s = start();
    kv_set(&s, "a%2Fb%20c", b"v");
    let e = kv_entry(&s, "a/b%20c").unwrap();
    assert_eq!(e["Key"], "a/b c");
    assert!(kv_entry(&s, "a%2Fb%20c").is_some(), "same key either way");
}

// ---- single-key GET ------------------------------------------------------------------

#[test]
fn kv_get_missing_key_is_404_with_empty_body_and_index_headers() {
    let s = start();
    kv_set(&s, "other", b"v");
    let r = get(&s, "/v1/kv/missing");
    assert_eq!(r.status, 404);
    assert!(r.body.is_empty(), "{:?}", r.text());
    assert!(r.index() >= 1);
    assert_eq!(r.canonical("X-Consul-Knownleader"), "true");
    assert_eq!(r.canonical("X-Consul-Lastcontact"), "0");
    assert_eq!(r.canonical("X-Consul-Query-Backend"), "blocking-query");
}

#[test]
fn kv_get_missing_key_on_fresh_server_reports_index_never_zero() {
    let s = start();
    let r = get(&s, "/v1/kv/nothing");
    assert_eq!(r.status, 404);
    assert_ne!(r.index(), 0);
    let k = get(&s, "/v1/kv/?keys");
    assert_ne!(k.index(), 0);
}

#[test]
fn kv_get_present_key_index_is_its_modify_index() {
    let s = start();
    kv_set(&s, "a", b"1");
    kv_set(&s, "b", b"2");
    let r = get(&s, "/v1/kv/a");
    let e = &r.json()[0];
    assert_eq!(r.index(), e["ModifyIndex"].as_u64().unwrap());
    assert!(r.index() < modify_index(&s, "b"));
}

#[test]
fn kv_get_missing_key_index_is_kv_table_index_not_sessions() {
    let s = start();
    kv_set(&s, "a", b"1");
    let kv_idx = modify_index(&s, "a");
    let _sid = session_create(&s, &json!({}));
    assert!(s.current_index() > kv_idx, "session create takes an index");
    let r = get(&s, "/v1/kv/missing");
    assert_eq!(r.status, 404);
    assert_eq!(r.index(), kv_idx, "missing key reports the kvs table index");
}

#[test]
fn kv_get_missing_key_index_includes_tombstones() {
    let s = start();
    kv_set(&s, "a", b"1");
    delete(&s, "/v1/kv/a").assert(200, "true");
    let del_idx = s.current_index();
    let r = get(&s, "/v1/kv/zzz");
    assert_eq!(r.status, 404);
    assert_eq!(r.index(), del_idx, "delete (tombstone) index counts");
    let r = get(&s, "/v1/kv/a");
    assert_eq!((r.status, r.index()), (404, del_idx));
}

#[test]
fn kv_raw_returns_value_bytes_with_text_plain_and_security_headers() {
    let s = start();
    kv_set(&s, "r", &[b'h', b'i', 0xff]);
    let r = get(&s, "/v1/kv/r?raw");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, vec![b'h', b'i', 0xff]);
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(r.header("X-Content-Type-Options"), Some("nosniff"));
    assert_eq!(r.header("Content-Security-Policy"), Some("sandbox"));
    assert_eq!(r.header("Content-Length"), Some("3"));
    assert_eq!(r.index(), modify_index(&s, "r"));
    assert_eq!(r.canonical("X-Consul-Knownleader"), "true");
}

#[test]
fn kv_raw_missing_key_is_404() {
    let s = start();
    let r = get(&s, "/v1/kv/nope?raw");
    assert_eq!(r.status, 404);
    r.index();
}

// ---- recurse and keys -------------------------------------------------------------------

#[test]
fn kv_recurse_is_plain_string_prefix_sorted_bytewise() {
    let s = start();
    for k in ["ab", "a/2", "a/1", "a", "b", "aZ"] {
        kv_set(&s, k, k.as_bytes());
    }
    let r = get(&s, "/v1/kv/a?recurse");
    assert_eq!(r.status, 200);
    let keys: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["Key"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(keys, ["a", "a/1", "a/2", "aZ", "ab"]);
}

#[test]
fn kv_recurse_flag_presence_is_enough() {
    let s = start();
    kv_set(&s, "p/1", b"x");
    kv_set(&s, "p/2", b"y");
    for q in ["?recurse", "?recurse=", "?recurse=true", "?recurse=false"] {
        let r = get(&s, &format!("/v1/kv/p/{q}"));
        assert_eq!(r.status, 200, "{q}");
        assert_eq!(r.json().as_array().unwrap().len(), 2, "{q}");
    }
}

#[test]
fn kv_recurse_with_no_entries_is_404_even_for_root() {
    let s = start();
    let r = get(&s, "/v1/kv/?recurse");
    assert_eq!(r.status, 404);
    r.index();
    kv_set(&s, "x", b"1");
    assert_eq!(get(&s, "/v1/kv/y?recurse").status, 404);
    assert_eq!(get(&s, "/v1/kv/?recurse").status, 200);
}

#[test]
fn kv_recurse_index_is_max_modify_index_under_prefix() {
    let s = start();
    kv_set(&s, "p/1", b"1");
    kv_set(&s, "p/2", b"2");
    kv_set(&s, "q/1", b"3");
    let r = get(&s, "/v1/kv/p/?recurse");
    assert_eq!(r.index(), modify_index(&s, "p/2"));
    let root = get(&s, "/v1/kv/?recurse");
    assert_eq!(
        root.index(),
        modify_index(&s, "q/1"),
        "empty prefix: table index"
    );
}

#[test]
fn kv_recurse_index_includes_tombstones_under_prefix() {
    let s = start();
    kv_set(&s, "p/1", b"1");
    kv_set(&s, "p/2", b"2");
    kv_set(&s, "q/1", b"3");
    delete(&s, "/v1/kv/p/2").assert(200, "true");
    let del_idx = s.current_index();
    kv_set(&s, "q/2", b"4");
    let r = get(&s, "/v1/kv/p/?recurse");
    assert_eq!(r.json().as_array().unwrap().len(), 1);
    assert_eq!(r.index(), del_idx);
    let k = get(&s, "/v1/kv/p/?keys");
    assert_eq!(k.index(), del_idx);
}

#[test]
fn kv_keys_lists_names_and_takes_precedence_over_recurse() {
    let s = start();
    for k in ["a/x", "a/y/z", "a/y/w", "b"] {
        kv_set(&s, k, b"v");
    }
    let r = get(&s, "/v1/kv/a/?keys&recurse");
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!(["a/x", "a/y/w", "a/y/z"]));
}

#[test]
fn kv_keys_separator_cuts_after_first_separator_following_prefix() {
    let s = start();
    for k in ["a/x", "a/y/z", "a/y/w"] {
        kv_set(&s, k, b"v");
    }
    let r = get(&s, "/v1/kv/a/?keys&separator=/");
    assert_eq!(r.json(), json!(["a/x", "a/y/"]));
    let misspelt = get(&s, "/v1/kv/a/?keys&seperator=/");
    assert_eq!(misspelt.json(), json!(["a/x", "a/y/"]));
}

#[test]
fn kv_keys_empty_result_is_404_for_prefix_and_200_empty_array_for_root() {
    let s = start();
    let root = get(&s, "/v1/kv/?keys");
    assert_eq!((root.status, root.json()), (200, json!([])));
    root.index();
    let p = get(&s, "/v1/kv/nope/?keys");
    assert_eq!(p.status, 404);
    p.index();
}

#[test]
fn kv_keys_empty_prefix_index_is_table_index() {
    let s = start();
    kv_set(&s, "a", b"1");
    kv_set(&s, "b", b"1");
    let r = get(&s, "/v1/kv/?keys");
    assert_eq!(r.index(), modify_index(&s, "b"));
}

// ---- plain PUT -------------------------------------------------------------------------

#[test]
fn kv_put_always_returns_true_and_replaces_value_and_flags() {
    let s = start();
    put(&s, "/v1/kv/k?flags=7", b"one").assert(200, "true");
    put(&s, "/v1/kv/k", b"two").assert(200, "true");
    let e = kv_entry(&s, "k").unwrap();
    assert_eq!(entry_value(&e), b"two");
    assert_eq!(e["Flags"], 0, "absent flags means 0");
}

#[test]
fn kv_create_index_kept_across_updates_and_renewed_after_delete() {
    let s = start();
    kv_set(&s, "k", b"1");
    let c1 = kv_entry(&s, "k").unwrap()["CreateIndex"].as_u64().unwrap();
    kv_set(&s, "k", b"2");
    let e = kv_entry(&s, "k").unwrap();
    assert_eq!(e["CreateIndex"].as_u64().unwrap(), c1);
    assert!(e["ModifyIndex"].as_u64().unwrap() > c1);
    delete(&s, "/v1/kv/k").assert(200, "true");
    kv_set(&s, "k", b"3");
    let e = kv_entry(&s, "k").unwrap();
    assert!(e["CreateIndex"].as_u64().unwrap() > c1);
    assert_eq!(e["CreateIndex"], e["ModifyIndex"]);
}

#[test]
fn index_starts_above_one_at_boot_and_is_global_across_kinds() {
    let s = start();
    assert!(s.current_index() > 1, "boot index {}", s.current_index());
    kv_set(&s, "a", b"1");
    let a = modify_index(&s, "a");
    assert!(a > 1);
    let sid = session_create(&s, &json!({}));
    let si = session_info(&s, &sid).unwrap()["CreateIndex"]
        .as_u64()
        .unwrap();
    kv_set(&s, "b", b"1");
    let b = modify_index(&s, "b");
    assert!(a < si && si < b, "one counter shared: {a} {si} {b}");
}

#[test]
fn identical_put_is_a_noop_that_keeps_modify_index_but_consumes_an_index() {
    let s = start();
    put(&s, "/v1/kv/k?flags=3", b"same").assert(200, "true");
    let m = modify_index(&s, "k");
    let before = s.current_index();
    put(&s, "/v1/kv/k?flags=3", b"same").assert(200, "true");
    assert_eq!(modify_index(&s, "k"), m, "identical write must not bump");
    assert_eq!(s.current_index(), before + 1, "but it reaches raft");
    kv_set(&s, "other", b"x");
    assert_eq!(modify_index(&s, "other"), before + 2);
    put(&s, "/v1/kv/k?flags=4", b"same").assert(200, "true");
    assert!(modify_index(&s, "k") > m, "a flags change is a real change");
}

/// §6.1 also says LockIndex is preserved, but Consul's `kvsSetTxn` keeps only the Session
/// (LockIndex comes from the request, 0 for a plain PUT), so LockIndex is not asserted here.
#[test]
fn plain_put_on_locked_key_keeps_session_and_replaces_value() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    acquire(&s, "l", &sid, b"v1").assert(200, "true");
    put(&s, "/v1/kv/l", b"v2").assert(200, "true");
    let e = kv_entry(&s, "l").unwrap();
    assert_eq!(
        e["Session"],
        sid.as_str(),
        "a plain PUT neither releases nor fails"
    );
    assert_eq!(entry_value(&e), b"v2");
    let other = session_create(&s, &json!({}));
    acquire(&s, "l", &other, b"x").assert(200, "false");
}

// ---- CAS -------------------------------------------------------------------------------

#[test]
fn cas_zero_creates_only_when_key_is_missing() {
    let s = start();
    put(&s, "/v1/kv/c?cas=0", b"1").assert(200, "true");
    put(&s, "/v1/kv/c?cas=0", b"2").assert(200, "false");
    assert_eq!(entry_value(&kv_entry(&s, "c").unwrap()), b"1");
}

#[test]
fn cas_with_matching_modify_index_writes_and_stale_index_fails() {
    let s = start();
    kv_set(&s, "c", b"1");
    let m = modify_index(&s, "c");
    put(&s, &format!("/v1/kv/c?cas={}", m + 100), b"x").assert(200, "false");
    put(&s, &format!("/v1/kv/c?cas={m}"), b"2").assert(200, "true");
    put(&s, &format!("/v1/kv/c?cas={m}"), b"3").assert(200, "false");
    assert_eq!(entry_value(&kv_entry(&s, "c").unwrap()), b"2");
    put(&s, "/v1/kv/nokey?cas=5", b"x").assert(200, "false");
    assert!(kv_entry(&s, "nokey").is_none());
}

#[test]
fn failed_cas_consumes_a_global_index_without_changing_modify_index() {
    let s = start();
    kv_set(&s, "c", b"1");
    let m = modify_index(&s, "c");
    put(&s, &format!("/v1/kv/c?cas={}", m + 1000), b"x").assert(200, "false");
    assert_eq!(modify_index(&s, "c"), m);
    kv_set(&s, "later", b"y");
    assert_eq!(
        modify_index(&s, "later"),
        m + 2,
        "the failed CAS took index {}",
        m + 1
    );
}

#[test]
fn cas_write_keeps_the_lock_holder() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    acquire(&s, "l", &sid, b"v").assert(200, "true");
    let m = modify_index(&s, "l");
    put(&s, &format!("/v1/kv/l?cas={m}"), b"w").assert(200, "true");
    assert_eq!(kv_entry(&s, "l").unwrap()["Session"], sid.as_str());
}

// ---- acquire / release --------------------------------------------------------------------

#[test]
fn acquire_missing_key_creates_it_with_lock_index_1() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    put(
        &s,
        &format!("/v1/kv/new?acquire={sid}&flags={LOCK_FLAG}"),
        b"me",
    )
    .assert(200, "true");
    let e = kv_entry(&s, "new").unwrap();
    assert_eq!(e["LockIndex"], 1);
    assert_eq!(e["Session"], sid.as_str());
    assert_eq!(e["Flags"].as_u64(), Some(LOCK_FLAG));
    assert_eq!(entry_value(&e), b"me");
    assert_eq!(e["CreateIndex"], e["ModifyIndex"]);
}

#[test]
fn acquire_of_key_held_by_another_session_returns_false_and_consumes_index() {
    let s = start();
    let a = session_create(&s, &json!({}));
    let b = session_create(&s, &json!({}));
    acquire(&s, "l", &a, b"a").assert(200, "true");
    let m = modify_index(&s, "l");
    let before = s.current_index();
    acquire(&s, "l", &b, b"b").assert(200, "false");
    assert_eq!(s.current_index(), before + 1);
    let e = kv_entry(&s, "l").unwrap();
    assert_eq!(e["Session"], a.as_str());
    assert_eq!(e["ModifyIndex"].as_u64().unwrap(), m);
    assert_eq!(entry_value(&e), b"a");
}

#[test]
fn reacquire_by_holder_updates_value_keeps_lock_index_and_same_data_is_noop() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    acquire(&s, "l", &sid, b"v1").assert(200, "true");
    let c = kv_entry(&s, "l").unwrap()["CreateIndex"].as_u64().unwrap();
    acquire(&s, "l", &sid, b"v2").assert(200, "true");
    let e = kv_entry(&s, "l").unwrap();
    assert_eq!(e["LockIndex"], 1);
    assert_eq!(e["CreateIndex"].as_u64().unwrap(), c);
    assert_eq!(entry_value(&e), b"v2");
    let m = e["ModifyIndex"].as_u64().unwrap();
    assert!(m > c);
    acquire(&s, "l", &sid, b"v2").assert(200, "true");
    assert_eq!(modify_index(&s, "l"), m, "identical re-acquire is a no-op");
}

#[test]
fn acquire_of_unlocked_existing_key_increments_lock_index() {
    let s = start();
    let a = session_create(&s, &json!({}));
    let b = session_create(&s, &json!({}));
    kv_set(&s, "l", b"plain");
    acquire(&s, "l", &a, b"a").assert(200, "true");
    assert_eq!(kv_entry(&s, "l").unwrap()["LockIndex"], 1);
    release(&s, "l", &a, b"a").assert(200, "true");
    acquire(&s, "l", &b, b"b").assert(200, "true");
    let e = kv_entry(&s, "l").unwrap();
    assert_eq!(e["LockIndex"], 2);
    assert_eq!(e["Session"], b.as_str());
}

#[test]
fn release_overwrites_value_and_flags_with_the_request() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    put(
        &s,
        &format!("/v1/kv/l?acquire={sid}&flags={LOCK_FLAG}"),
        b"held",
    )
    .assert(200, "true");
    let c = kv_entry(&s, "l").unwrap()["CreateIndex"].as_u64().unwrap();
    release(&s, "l", &sid, b"").assert(200, "true");
    let e = kv_entry(&s, "l").unwrap();
    assert!(e.get("Session").is_none(), "{e}");
    assert!(
        e["Value"].is_null(),
        "empty release body wipes the value: {e}"
    );
    assert_eq!(e["Flags"], 0, "no flags param resets Flags to 0");
    assert_eq!(e["LockIndex"], 1);
    assert_eq!(e["CreateIndex"].as_u64().unwrap(), c);
    assert!(e["ModifyIndex"].as_u64().unwrap() > c);
    // Go's Unlock resends value and flags, so they survive.
    acquire(&s, "l", &sid, b"again").assert(200, "true");
    put(
        &s,
        &format!("/v1/kv/l?flags={LOCK_FLAG}&release={sid}"),
        b"again",
    )
    .assert(200, "true");
    let e = kv_entry(&s, "l").unwrap();
    assert_eq!(entry_value(&e), b"again");
    assert_eq!(e["Flags"].as_u64(), Some(LOCK_FLAG));
}

#[test]
fn release_by_non_holder_or_of_missing_key_returns_false_and_consumes_index() {
    let s = start();
    let a = session_create(&s, &json!({}));
    let b = session_create(&s, &json!({}));
    acquire(&s, "l", &a, b"a").assert(200, "true");
    let m = modify_index(&s, "l");
    let before = s.current_index();
    release(&s, "l", &b, b"x").assert(200, "false");
    assert_eq!(s.current_index(), before + 1);
    assert_eq!(modify_index(&s, "l"), m);
    release(&s, "missing", &a, b"x").assert(200, "false");
    assert!(kv_entry(&s, "missing").is_none());
    release(&s, "l", &a.to_uppercase(), b"x").assert(200, "false");
    assert_eq!(kv_entry(&s, "l").unwrap()["Session"], a.as_str());
}

#[test]
fn explicit_release_sets_no_lock_delay() {
    let s = start();
    let a = session_with_delay(&s, "30s");
    let b = session_with_delay(&s, "30s");
    acquire(&s, "l", &a, b"a").assert(200, "true");
    release(&s, "l", &a, b"a").assert(200, "true");
    acquire(&s, "l", &b, b"b").assert(200, "true");
}

#[test]
fn any_client_can_acquire_with_any_live_session_id() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    // A second, unrelated connection uses the same session id.
    Req::put(&format!("/v1/kv/x?acquire={sid}"))
        .body("v")
        .header("User-Agent", "someone-else")
        .send(&s)
        .assert(200, "true");
}

// ---- delete ----------------------------------------------------------------------------

#[test]
fn delete_returns_true_even_for_missing_key_and_removes_locked_keys_without_delay() {
    let s = start();
    delete(&s, "/v1/kv/never").assert(200, "true");
    let a = session_with_delay(&s, "30s");
    let b = session_with_delay(&s, "30s");
    acquire(&s, "l", &a, b"a").assert(200, "true");
    delete(&s, "/v1/kv/l").assert(200, "true");
    assert!(kv_entry(&s, "l").is_none());
    acquire(&s, "l", &b, b"b").assert(200, "true");
    assert_eq!(kv_entry(&s, "l").unwrap()["LockIndex"], 1);
}

#[test]
fn delete_cas_on_missing_key_returns_true() {
    let s = start();
    delete(&s, "/v1/kv/ghost?cas=12345").assert(200, "true");
    delete(&s, "/v1/kv/ghost?cas=0").assert(200, "true");
}

#[test]
fn delete_cas_deletes_on_matching_index_and_refuses_stale() {
    let s = start();
    kv_set(&s, "d", b"1");
    let m = modify_index(&s, "d");
    delete(&s, &format!("/v1/kv/d?cas={}", m + 1)).assert(200, "false");
    assert!(kv_entry(&s, "d").is_some());
    delete(&s, &format!("/v1/kv/d?cas={m}")).assert(200, "true");
    assert!(kv_entry(&s, "d").is_none());
}

#[test]
fn delete_recurse_removes_the_string_prefix_subtree_only() {
    let s = start();
    for k in ["t/1", "t/2/3", "tt", "u"] {
        kv_set(&s, k, b"v");
    }
    delete(&s, "/v1/kv/t/?recurse").assert(200, "true");
    assert!(kv_entry(&s, "t/1").is_none());
    assert!(kv_entry(&s, "t/2/3").is_none());
    assert!(kv_entry(&s, "tt").is_some());
    delete(&s, "/v1/kv/t?recurse").assert(200, "true");
    assert!(kv_entry(&s, "tt").is_none(), "plain string prefix");
    assert!(kv_entry(&s, "u").is_some());
}

#[test]
fn delete_recurse_with_empty_key_deletes_everything() {
    let s = start();
    for k in ["a", "b/c", "d"] {
        kv_set(&s, k, b"v");
    }
    delete(&s, "/v1/kv/?recurse").assert(200, "true");
    let r = get(&s, "/v1/kv/?recurse");
    assert_eq!(r.status, 404);
}

// ---- path handling ---------------------------------------------------------------------

#[test]
fn kv_path_with_double_slash_or_dot_segment_is_redirected_301() {
    let s = start();
    for (path, target) in [
        ("/v1/kv/a//b", "/v1/kv/a/b"),
        ("/v1/kv/a/./b", "/v1/kv/a/b"),
        ("/v1/kv/a/../b", "/v1/kv/b"),
    ] {
        let r = put(&s, path, b"x");
        assert_eq!(r.status, 301, "{path}: {}", r.text());
        let loc = r.header("Location").unwrap_or_default();
        assert!(loc.ends_with(target), "{path} -> {loc}");
    }
    assert!(
        kv_entry(&s, "a/b").is_none(),
        "a redirected PUT writes nothing"
    );
    assert!(kv_entry(&s, "b").is_none());
}

#[test]
fn kv_without_trailing_slash_redirects_to_kv_slash() {
    let s = start();
    let r = get(&s, "/v1/kv");
    assert_eq!(r.status, 301);
    assert!(r
        .header("Location")
        .unwrap_or_default()
        .ends_with("/v1/kv/"));
}
