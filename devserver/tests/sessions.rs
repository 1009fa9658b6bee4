//! Session endpoint conformance: create defaults and validation, info/list/node, renew,
//! destroy, TTL timers at 2×TTL, invalidation (release/delete behaviour, checks) and
//! lock-delay (consul-semantics.md §3.1–3.4, §6.2–6.4, §13 "Node and sessions",
//! "Timers and delay").

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::*;

const ZERO_UUID_SHAPE: [usize; 5] = [8, 4, 4, 4, 12];

fn is_lower_uuid(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip(ZERO_UUID_SHAPE)
            .all(|(p, n)| p.len() == n && p.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
}

fn register_check(s: &DevServer, node: &str, check: &str, status: &str) {
    let r = put_json(
        s,
        "/v1/catalog/register",
        &json!({"Node": node, "Address": "127.0.0.1",
                "Check": {"CheckID": check, "Status": status}}),
    );
    assert_eq!(r.status, 200, "catalog register: {}", r.text());
}

// ---- create ----------------------------------------------------------------------------

#[test]
fn session_create_returns_only_a_lowercase_uuid_id() {
    let s = start();
    let r = Req::put("/v1/session/create").send(&s);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(keys_of(&v), ["ID"]);
    let id = v["ID"].as_str().unwrap();
    assert!(is_lower_uuid(id), "{id}");
    let other = session_create(&s, &json!({}));
    assert!(is_lower_uuid(&other));
    assert_ne!(id, other);
}

#[test]
fn session_defaults_to_agent_node_with_serf_health_release_and_15s_lock_delay() {
    let s = start();
    let id = session_create(&s, &json!({}));
    let info = session_info(&s, &id).unwrap();
    assert_eq!(info["ID"], id.as_str());
    assert_eq!(info["Name"], "");
    assert_eq!(info["Node"], s.node_name().as_str());
    assert_eq!(info["LockDelay"].as_u64(), Some(15_000_000_000));
    assert_eq!(info["Behavior"], "release");
    assert_eq!(info["TTL"], "");
    assert_eq!(info["NodeChecks"], json!(["serfHealth"]));
    assert!(info["ServiceChecks"].is_null());
    assert!(info.get("Checks").is_none(), "Checks folded away: {info}");
}

#[test]
fn session_json_has_go_field_order_and_modify_index_equals_create_index() {
    let s = start();
    let id = session_create(&s, &json!({"Name": "n", "TTL": "1500ms"}));
    let info = session_info(&s, &id).unwrap();
    assert_eq!(
        keys_of(&info),
        [
            "ID",
            "Name",
            "Node",
            "LockDelay",
            "Behavior",
            "TTL",
            "NodeChecks",
            "ServiceChecks",
            "CreateIndex",
            "ModifyIndex"
        ]
    );
    assert_eq!(info["CreateIndex"], info["ModifyIndex"]);
    assert_eq!(info["TTL"], "1500ms", "TTL echoed verbatim");
}

#[test]
fn session_lock_delay_accepts_go_duration_strings_and_nanoseconds() {
    let s = start();
    for (given, ns) in [
        (json!("15s"), 15_000_000_000u64),
        (json!("2500ms"), 2_500_000_000),
        (json!(3_000_000_000u64), 3_000_000_000),
        (json!("0s"), 0),
        (json!(0), 0),
    ] {
        let id = session_create(&s, &json!({ "LockDelay": given }));
        let info = session_info(&s, &id).unwrap();
        assert_eq!(info["LockDelay"].as_u64(), Some(ns), "LockDelay {given}");
    }
}

#[test]
fn session_lock_delay_below_1000_is_multiplied_by_one_second() {
    let s = start();
    for (given, ns) in [
        (json!(15), 15_000_000_000u64),
        (json!("500ns"), 500_000_000_000),
        (json!(999), 999_000_000_000),
        (json!(1000), 1000),
    ] {
        let id = session_create(&s, &json!({ "LockDelay": given }));
        let info = session_info(&s, &id).unwrap();
        assert_eq!(info["LockDelay"].as_u64(), Some(ns), "LockDelay {given}");
    }
}

#[test]
fn session_lock_delay_over_60s_is_accepted_and_echoed() {
    let s = start();
    let id = session_create(&s, &json!({"LockDelay": "120s"}));
    assert_eq!(
        session_info(&s, &id).unwrap()["LockDelay"].as_u64(),
        Some(120_000_000_000)
    );
}

#[test]
fn session_create_ignores_unknown_fields_and_overwritten_ids() {
    let s = start();
    let id = session_create(
        &s,
        &json!({"Bogus": 1, "ID": "not-this", "CreateIndex": 7, "Name": "x"}),
    );
    assert_ne!(id, "not-this");
    let info = session_info(&s, &id).unwrap();
    assert_eq!(info["Name"], "x");
    assert_ne!(info["CreateIndex"], 7);
}

#[test]
fn session_behavior_delete_is_stored() {
    let s = start();
    let id = session_create(&s, &json!({"Behavior": "delete"}));
    assert_eq!(session_info(&s, &id).unwrap()["Behavior"], "delete");
}

#[test]
fn session_ttl_zero_forms_mean_no_ttl() {
    let s = start();
    for ttl in ["", "0", "0s"] {
        let r = put_json(&s, "/v1/session/create", &json!({ "TTL": ttl }));
        assert_eq!(r.status, 200, "TTL {ttl:?}: {}", r.text());
    }
}

#[test]
fn session_create_with_empty_checks_has_no_checks() {
    let s = start();
    let a = session_create(&s, &json!({"Checks": []}));
    let ia = session_info(&s, &a).unwrap();
    assert_eq!(ia["NodeChecks"], json!([]));
    assert!(ia.get("Checks").is_none());
    let b = session_create(&s, &json!({"NodeChecks": []}));
    let ib = session_info(&s, &b).unwrap();
    assert_eq!(ib["NodeChecks"], json!([]));
    assert!(ib.get("Checks").is_none());
}

#[test]
fn session_legacy_checks_alone_are_unioned_with_serf_health() {
    let s = start();
    register_check(&s, &s.node_name(), "x", "passing");
    let id = session_create(&s, &json!({"Checks": ["x"]}));
    let info = session_info(&s, &id).unwrap();
    assert_eq!(info["Checks"], json!(["x"]));
    assert_eq!(info["NodeChecks"], json!(["serfHealth"]));
    // Both are enforced: x going critical invalidates the session.
    register_check(&s, &s.node_name(), "x", "critical");
    assert!(
        poll_until(Duration::from_secs(5), || session_info(&s, &id).is_none()).is_some(),
        "legacy check x is enforced"
    );
}

#[test]
fn session_list_info_and_node_index_is_sessions_table_index() {
    let s = start();
    let a = session_create(&s, &json!({}));
    let ca = session_info(&s, &a).unwrap()["CreateIndex"]
        .as_u64()
        .unwrap();
    kv_set(&s, "unrelated", b"x");
    let r = get(&s, "/v1/session/list");
    assert_eq!(r.index(), ca, "KV writes do not move the sessions index");
    let b = session_create(&s, &json!({}));
    let cb = session_info(&s, &b).unwrap()["CreateIndex"]
        .as_u64()
        .unwrap();
    assert_eq!(get(&s, &format!("/v1/session/info/{a}")).index(), cb);
    assert_eq!(
        get(&s, &format!("/v1/session/node/{}", s.node_name())).index(),
        cb
    );
    put(&s, &format!("/v1/session/destroy/{a}"), b"").assert(200, "true");
    let destroyed_at = s.current_index();
    assert_eq!(get(&s, "/v1/session/list").index(), destroyed_at);
}

#[test]
fn session_list_is_ordered_by_id_and_node_lookup_is_case_insensitive() {
    let s = start();
    let mut ids: Vec<String> = (0..6).map(|_| session_create(&s, &json!({}))).collect();
    ids.sort();
    let listed: Vec<String> = get(&s, "/v1/session/list")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["ID"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(listed, ids);
    let upper = s.node_name().to_uppercase();
    let by_node = get(&s, &format!("/v1/session/node/{upper}"));
    assert_eq!(by_node.status, 200);
    assert_eq!(by_node.json().as_array().unwrap().len(), 6);
    let none = get(&s, "/v1/session/node/other-node");
    assert_eq!((none.status, none.json()), (200, json!([])));
}

#[test]
fn session_info_of_unknown_id_is_200_empty_array() {
    let s = start();
    let r = get(&s, "/v1/session/info/6f5a9a4c-0000-4000-8000-000000000000");
    assert_eq!((r.status, r.json()), (200, json!([])));
    r.index();
    let l = get(&s, "/v1/session/list");
    assert_eq!((l.status, l.json()), (200, json!([])));
}

// ---- renew -----------------------------------------------------------------------------

#[test]
fn session_renew_returns_one_element_array_without_index_change_or_meta_headers() {
    let s = start();
    let id = session_create(&s, &json!({"TTL": "10s"}));
    let before = s.current_index();
    let info = session_info(&s, &id).unwrap();
    let r = put(&s, &format!("/v1/session/renew/{id}"), b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 1);
    assert_eq!(arr[0], info, "renew echoes the stored session unchanged");
    assert_eq!(arr[0]["TTL"], "10s");
    assert!(r.header("X-Consul-Index").is_none());
    assert!(r.header("X-Consul-Knownleader").is_none());
    assert_eq!(s.current_index(), before, "renew is not a raft write");
    kv_set(&s, "probe", b"x");
    assert_eq!(modify_index(&s, "probe"), before + 1);
}

#[test]
fn session_renew_without_ttl_is_a_200_noop() {
    let s = start();
    let id = session_create(&s, &json!({}));
    let r = put(&s, &format!("/v1/session/renew/{id}"), b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()[0]["ID"], id.as_str());
}

#[test]
fn session_renew_unknown_id_is_404_with_text() {
    let s = start();
    let id = "00000000-1111-2222-3333-444444444444";
    put(&s, &format!("/v1/session/renew/{id}"), b"")
        .assert(404, &format!("Session id '{id}' not found"));
}

// ---- destroy and invalidation -------------------------------------------------------------

#[test]
fn session_destroy_returns_true_for_known_and_unknown_ids() {
    let s = start();
    let id = session_create(&s, &json!({}));
    put(&s, &format!("/v1/session/destroy/{id}"), b"").assert(200, "true");
    assert!(session_info(&s, &id).is_none());
    put(&s, &format!("/v1/session/destroy/{id}"), b"").assert(200, "true");
    put(&s, "/v1/session/destroy/nope", b"").assert(200, "true");
}

#[test]
fn destroy_releases_keys_keeping_value_flags_lock_index_with_new_modify_index() {
    let s = start();
    let id = session_with_delay(&s, "0s");
    put(
        &s,
        &format!("/v1/kv/l?acquire={id}&flags={LOCK_FLAG}"),
        b"val",
    )
    .assert(200, "true");
    let before = kv_entry(&s, "l").unwrap();
    let sessions_idx = get(&s, "/v1/session/list").index();
    put(&s, &format!("/v1/session/destroy/{id}"), b"").assert(200, "true");
    let after = kv_entry(&s, "l").unwrap();
    assert!(after.get("Session").is_none(), "{after}");
    assert_eq!(entry_value(&after), b"val");
    assert_eq!(after["Flags"].as_u64(), Some(LOCK_FLAG));
    assert_eq!(after["LockIndex"], before["LockIndex"]);
    assert_eq!(after["CreateIndex"], before["CreateIndex"]);
    assert!(after["ModifyIndex"].as_u64() > before["ModifyIndex"].as_u64());
    assert!(get(&s, "/v1/session/list").index() > sessions_idx);
}

#[test]
fn invalidation_of_delete_behavior_session_deletes_its_keys() {
    let s = start();
    let id = session_create(&s, &json!({"Behavior": "delete", "LockDelay": "0s"}));
    acquire(&s, "d/1", &id, b"x").assert(200, "true");
    acquire(&s, "d/2", &id, b"y").assert(200, "true");
    kv_set(&s, "d/3", b"z");
    let kv_idx = get(&s, "/v1/kv/?recurse").index();
    put(&s, &format!("/v1/session/destroy/{id}"), b"").assert(200, "true");
    assert!(kv_entry(&s, "d/1").is_none());
    assert!(kv_entry(&s, "d/2").is_none());
    assert!(kv_entry(&s, "d/3").is_some(), "unheld keys stay");
    let r = get(&s, "/v1/kv/d/1");
    assert!(r.index() > kv_idx, "the delete leaves a tombstone index");
}

#[test]
fn delete_behavior_does_not_delete_keys_released_before_invalidation() {
    let s = start();
    let id = session_create(&s, &json!({"Behavior": "delete", "LockDelay": "0s"}));
    acquire(&s, "k", &id, b"x").assert(200, "true");
    release(&s, "k", &id, b"x").assert(200, "true");
    put(&s, &format!("/v1/session/destroy/{id}"), b"").assert(200, "true");
    assert!(kv_entry(&s, "k").is_some());
}

#[test]
fn session_create_on_critical_check_fails_but_warning_is_fine() {
    let s = start();
    let node = s.node_name();
    register_check(&s, &node, "warn", "warning");
    register_check(&s, &node, "crit", "critical");
    let ok = put_json(
        &s,
        "/v1/session/create",
        &json!({"NodeChecks": ["serfHealth", "warn"]}),
    );
    assert_eq!(ok.status, 200, "{}", ok.text());
    put_json(
        &s,
        "/v1/session/create",
        &json!({"NodeChecks": ["serfHealth", "crit"]}),
    )
    .assert(500, "apply failed: Check 'crit' is in critical state");
}

#[test]
fn session_check_going_critical_invalidates_but_warning_does_not() {
    let s = start();
    let node = s.node_name();
    register_check(&s, &node, "c", "passing");
    let id = session_create(&s, &json!({"NodeChecks": ["c"], "LockDelay": "0s"}));
    acquire(&s, "held", &id, b"v").assert(200, "true");
    register_check(&s, &node, "c", "warning");
    assert!(
        session_info(&s, &id).is_some(),
        "warning does not invalidate"
    );
    register_check(&s, &node, "c", "critical");
    assert!(session_info(&s, &id).is_none(), "critical invalidates");
    assert!(kv_entry(&s, "held").unwrap().get("Session").is_none());
}

#[test]
fn session_check_deregistered_invalidates_session() {
    let s = start();
    let node = s.node_name();
    register_check(&s, &node, "c", "passing");
    let id = session_create(&s, &json!({"NodeChecks": ["serfHealth", "c"]}));
    let r = put_json(
        &s,
        "/v1/catalog/deregister",
        &json!({"Node": node, "CheckID": "c"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(session_info(&s, &id).is_none());
}

#[test]
fn session_on_registered_node_works_and_unknown_node_is_rejected() {
    let s = start();
    register_check(&s, "n2", "serfHealth", "passing");
    let id = session_create(&s, &json!({"Node": "n2"}));
    assert_eq!(session_info(&s, &id).unwrap()["Node"], "n2");
    put_json(&s, "/v1/session/create", &json!({"Node": "ghost"}))
        .assert(500, "apply failed: Missing node registration");
}

// ---- TTL -------------------------------------------------------------------------------

#[test]
fn session_ttl_expires_at_about_twice_ttl() {
    let s = start();
    let ttl = Duration::from_secs(1);
    let sent = Instant::now();
    let id = session_create(&s, &json!({"TTL": "1s", "NodeChecks": []}));
    let created = Instant::now();
    // Past 1×TTL the session must still be alive (Consul expires at 2×TTL).
    sleep_until(created + ttl * 5 / 4);
    let alive = session_info(&s, &id).is_some();
    let answered = Instant::now();
    if answered < sent + ttl * 2 - Duration::from_millis(100) {
        assert!(alive, "session expired after 1×TTL, before 2×TTL");
    } else {
        eprintln!("machine too slow to check the 1.25×TTL instant; skipping that assertion");
    }
    let gone = poll_until(Duration::from_secs(8), || session_info(&s, &id).is_none())
        .expect("session with TTL 1s still alive ~9s later");
    assert!(
        gone >= sent + ttl * 2 - Duration::from_millis(150),
        "expired {:?} after create, before 2×TTL",
        gone - sent
    );
}

#[test]
fn session_renew_rearms_the_ttl_timer() {
    let s = start();
    let ttl = Duration::from_secs(1);
    let id = session_create(&s, &json!({"TTL": "1s", "NodeChecks": []}));
    let created = Instant::now();
    sleep_until(created + ttl * 6 / 5);
    let renew_sent = Instant::now();
    let r = put(&s, &format!("/v1/session/renew/{id}"), b"");
    assert_eq!(r.status, 200, "renewed before expiry: {}", r.text());
    // The original deadline (created + 2×TTL) passes; the renewed one (renew + 2×TTL) not yet.
    sleep_until(created + ttl * 2 + Duration::from_millis(400));
    let alive = session_info(&s, &id).is_some();
    if Instant::now() < renew_sent + ttl * 2 - Duration::from_millis(100) {
        assert!(alive, "renew did not re-arm the timer");
    }
    let gone = poll_until(Duration::from_secs(8), || session_info(&s, &id).is_none())
        .expect("renewed session never expired");
    assert!(gone >= renew_sent + ttl * 2 - Duration::from_millis(150));
}

#[test]
fn session_ttl_expiry_releases_keys_and_applies_lock_delay() {
    let s = start();
    let id = session_create(
        &s,
        &json!({"TTL": "300ms", "LockDelay": "30s", "NodeChecks": []}),
    );
    acquire(&s, "ttl/lock", &id, b"v").assert(200, "true");
    assert!(
        poll_until(Duration::from_secs(8), || session_info(&s, &id).is_none()).is_some(),
        "TTL 300ms session never expired"
    );
    let e = kv_entry(&s, "ttl/lock").unwrap();
    assert!(e.get("Session").is_none(), "{e}");
    assert_eq!(entry_value(&e), b"v");
    let other = session_with_delay(&s, "0s");
    acquire(&s, "ttl/lock", &other, b"me").assert(200, "false");
}

#[test]
fn session_ttl_below_minimum_uses_configured_min_in_message() {
    let s = start();
    // 100ms < session_ttl_min (200ms) in this fixture.
    let r = put_json(&s, "/v1/session/create", &json!({"TTL": "100ms"}));
    assert_prefix_500(&r, "Invalid Session TTL '100000000', must be between [");
}

fn assert_prefix_500(r: &Response, prefix: &str) {
    r.assert_prefix(500, prefix);
}

// ---- lock-delay --------------------------------------------------------------------------

#[test]
fn acquire_during_lock_delay_returns_false_without_index_bump() {
    let s = start();
    let holder = session_with_delay(&s, "30s");
    acquire(&s, "ld", &holder, b"v").assert(200, "true");
    put(&s, &format!("/v1/session/destroy/{holder}"), b"").assert(200, "true");
    let other = session_with_delay(&s, "0s");
    let m = modify_index(&s, "ld");
    let before = s.current_index();
    acquire(&s, "ld", &other, b"x").assert(200, "false");
    assert_eq!(
        s.current_index(),
        before,
        "lock-delay rejection never reaches raft"
    );
    assert_eq!(modify_index(&s, "ld"), m);
    kv_set(&s, "probe", b"p");
    assert_eq!(modify_index(&s, "probe"), before + 1);
}

#[test]
fn lock_delay_blocks_every_session_even_empty_or_unknown_ids() {
    let s = start();
    let holder = session_with_delay(&s, "30s");
    acquire(&s, "ld", &holder, b"v").assert(200, "true");
    put(&s, &format!("/v1/session/destroy/{holder}"), b"").assert(200, "true");
    let fresh = session_with_delay(&s, "0s");
    acquire(&s, "ld", &fresh, b"x").assert(200, "false");
    // The delay is checked before session validation: no 500 here.
    put(&s, "/v1/kv/ld?acquire=", b"x").assert(200, "false");
    put(
        &s,
        "/v1/kv/ld?acquire=00000000-0000-0000-0000-00000000dead",
        b"x",
    )
    .assert(200, "false");
    // The previous holder's ID is dead, so it is also refused, but with false.
    acquire(&s, "ld", &holder, b"x").assert(200, "false");
    // Another key is unaffected.
    acquire(&s, "other", &fresh, b"x").assert(200, "true");
}

#[test]
fn lock_delay_does_not_block_put_cas_delete_or_release() {
    let s = start();
    let holder = session_with_delay(&s, "30s");
    acquire(&s, "ld", &holder, b"v").assert(200, "true");
    put(&s, &format!("/v1/session/destroy/{holder}"), b"").assert(200, "true");
    put(&s, "/v1/kv/ld", b"plain").assert(200, "true");
    let m = modify_index(&s, "ld");
    put(&s, &format!("/v1/kv/ld?cas={m}"), b"cas").assert(200, "true");
    let other = session_with_delay(&s, "0s");
    release(&s, "ld", &other, b"r").assert(200, "false");
    delete(&s, "/v1/kv/ld").assert(200, "true");
    assert!(kv_entry(&s, "ld").is_none());
    acquire(&s, "ld", &other, b"x").assert(200, "false");
}

#[test]
fn lock_delay_expires_after_the_session_lock_delay() {
    let s = start();
    let delay = Duration::from_millis(2500);
    let holder = session_with_delay(&s, "2500ms");
    acquire(&s, "ld", &holder, b"v").assert(200, "true");
    let other = session_with_delay(&s, "0s");
    let destroy_sent = Instant::now();
    put(&s, &format!("/v1/session/destroy/{holder}"), b"").assert(200, "true");
    let first = acquire(&s, "ld", &other, b"x");
    if Instant::now() < destroy_sent + delay - Duration::from_millis(200) {
        first.assert(200, "false");
    }
    let won = poll_until(Duration::from_secs(10), || {
        acquire(&s, "ld", &other, b"x").json() == json!(true)
    })
    .expect("lock-delay of 2.5s never ended");
    assert!(
        won >= destroy_sent + delay - Duration::from_millis(50),
        "acquired {:?} after invalidation, before the 2.5s lock-delay",
        won - destroy_sent
    );
}

#[test]
fn lock_delay_zero_allows_immediate_reacquire_after_invalidation() {
    let s = start();
    let holder = session_with_delay(&s, "0s");
    acquire(&s, "ld", &holder, b"v").assert(200, "true");
    put(&s, &format!("/v1/session/destroy/{holder}"), b"").assert(200, "true");
    let other = session_with_delay(&s, "0s");
    acquire(&s, "ld", &other, b"x").assert(200, "true");
}

#[test]
fn lock_delay_applies_to_each_key_released_by_invalidation() {
    let s = start();
    let holder = session_with_delay(&s, "30s");
    for k in ["m/1", "m/2", "m/3"] {
        acquire(&s, k, &holder, b"v").assert(200, "true");
    }
    assert!(s.invalidate_session(&holder));
    let other = session_with_delay(&s, "0s");
    for k in ["m/1", "m/2", "m/3"] {
        acquire(&s, k, &other, b"x").assert(200, "false");
    }
}

#[test]
fn session_renew_keeps_session_alive_across_several_ttls() {
    let s = start();
    let id = session_create(&s, &json!({"TTL": "400ms", "NodeChecks": []}));
    let start_t = Instant::now();
    // Renew every ~200ms for ~2s (> 2×TTL several times over).
    while start_t.elapsed() < Duration::from_secs(2) {
        let r = put(&s, &format!("/v1/session/renew/{id}"), b"");
        assert_eq!(r.status, 200, "expired despite renewals: {}", r.text());
        thread::sleep(Duration::from_millis(200));
    }
    assert!(session_info(&s, &id).is_some());
}
