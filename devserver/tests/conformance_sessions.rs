//! Sessions, TTL timers, invalidation and lock-delay (consul-semantics.md §3.1–3.4, §6.2–6.4).

mod raw;

use std::time::{Duration, Instant};

use raw::*;
use serde_json::json;

#[test]
fn session_defaults_to_agent_node_serf_health_release_and_15s_lock_delay() {
    let s = start();
    let a = s.addr();
    let id = session(a, "");
    let r = get(a, &format!("/v1/session/info/{id}"));
    let idx = r.index();
    let v = r.json();
    assert_eq!(
        v,
        json!([{"ID": id, "Name": "", "Node": s.node_name(), "LockDelay": 15000000000u64,
                "Behavior": "release", "TTL": "", "NodeChecks": ["serfHealth"],
                "ServiceChecks": null, "CreateIndex": idx, "ModifyIndex": idx}])
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
}

#[test]
fn session_ids_are_lowercase_uuid_format() {
    let s = start();
    for _ in 0..20 {
        let id = session(s.addr(), "{}");
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12],
            "{id}"
        );
        assert!(
            id.chars()
                .all(|c| c == '-' || c.is_ascii_digit() || ('a'..='f').contains(&c)),
            "{id}"
        );
    }
}

#[test]
fn lock_delay_zero_is_really_zero_and_small_numbers_are_seconds() {
    let s = start();
    let a = s.addr();
    let info = |id: &str| get(a, &format!("/v1/session/info/{id}")).json()[0].clone();
    assert_eq!(info(&session(a, r#"{"LockDelay":"0s"}"#))["LockDelay"], 0);
    assert_eq!(info(&session(a, r#"{"LockDelay":0}"#))["LockDelay"], 0);
    assert_eq!(
        info(&session(a, r#"{"LockDelay":15}"#))["LockDelay"],
        15_000_000_000u64,
        "15 means 15 s"
    );
    assert_eq!(
        info(&session(a, r#"{"LockDelay":"500ns"}"#))["LockDelay"],
        500_000_000_000u64,
        "<1000 ns are seconds"
    );
    assert_eq!(
        info(&session(a, r#"{"LockDelay":"2500ms"}"#))["LockDelay"],
        2_500_000_000u64
    );
    assert_eq!(
        info(&session(a, r#"{"lockdelay":"3s"}"#))["LockDelay"],
        3_000_000_000u64,
        "field names match case-insensitively"
    );
}

#[test]
fn lock_delay_over_60s_is_accepted_and_stored_as_given() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"LockDelay":"90s"}"#);
    assert_eq!(
        get(a, &format!("/v1/session/info/{id}")).json()[0]["LockDelay"],
        90_000_000_000u64
    );
}

#[test]
fn check_fixup_follows_consul() {
    let s = start();
    let a = s.addr();
    let info = |id: &str| get(a, &format!("/v1/session/info/{id}")).json()[0].clone();
    let none = info(&session(a, r#"{"NodeChecks":[]}"#));
    assert_eq!(
        none["NodeChecks"],
        serde_json::json!([]),
        "Go's CreateNoChecks"
    );
    let legacy = info(&session(a, r#"{"Checks":[]}"#));
    assert_eq!(
        legacy["NodeChecks"],
        serde_json::json!([]),
        "pre-1.7 clients' empty Checks"
    );
    assert!(legacy.get("Checks").is_none());
}

#[test]
fn session_on_unknown_node_is_500_missing_node_registration() {
    let s = start();
    let r = put(s.addr(), "/v1/session/create", br#"{"Node":"ghost"}"#);
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "apply failed: Missing node registration")
    );
}

#[test]
fn session_with_unknown_or_critical_check_is_500() {
    let s = start();
    let a = s.addr();
    let r = put(a, "/v1/session/create", br#"{"NodeChecks":["nope"]}"#);
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "apply failed: Missing check 'nope' registration")
    );
    let node = s.node_name();
    put(
        a,
        "/v1/catalog/register",
        format!(r#"{{"Node":"{node}","Address":"127.0.0.1","Check":{{"CheckID":"db","Status":"critical"}}}}"#).as_bytes(),
    );
    let r = put(a, "/v1/session/create", br#"{"NodeChecks":["db"]}"#);
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "apply failed: Check 'db' is in critical state")
    );
}

#[test]
fn session_create_error_texts() {
    let s = start();
    let a = s.addr();
    let cases: &[(&[u8], u16, &str)] = &[
        (
            br#"{"Behavior":"explode"}"#,
            500,
            "Invalid Behavior setting 'explode'",
        ),
        (
            br#"{"TTL":"5x"}"#,
            500,
            "Session TTL '5x' invalid: time: unknown unit \"x\" in duration \"5x\"",
        ),
        (
            br#"{"TTL":"50ms"}"#,
            500,
            "Invalid Session TTL '50000000', must be between [100ms=24h0m0s]",
        ),
        (
            br#"{"TTL":"25h"}"#,
            500,
            "Invalid Session TTL '90000000000000', must be between [100ms=24h0m0s]",
        ),
        (br#"{"Node":""}"#, 500, "Must provide Node"),
    ];
    for (body, status, text) in cases {
        let r = put(a, "/v1/session/create", body);
        assert_eq!(
            (r.status, r.text()),
            (*status, text.to_string()),
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    let r = put(a, "/v1/session/create", b"{not json");
    assert_eq!(r.status, 400);
    assert!(
        r.text().starts_with("Request decode failed: "),
        "{}",
        r.text()
    );
    let r = put(a, "/v1/session/create", br#"{"LockDelay":"soon"}"#);
    assert_eq!(
        (r.status, r.text().as_str()),
        (
            400,
            "Request decode failed: time: invalid duration \"soon\""
        )
    );
    assert!(
        get(a, "/v1/session/list")
            .json()
            .as_array()
            .unwrap()
            .is_empty(),
        "no half-made sessions"
    );
}

#[test]
fn ttl_of_zero_means_no_ttl_and_is_echoed() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"TTL":"0s"}"#);
    assert_eq!(
        get(a, &format!("/v1/session/info/{id}")).json()[0]["TTL"],
        "0s"
    );
}

#[test]
fn session_ttl_expires_at_about_twice_ttl() {
    let s = start();
    let a = s.addr();
    let created = Instant::now();
    let id = session(a, r#"{"TTL":"1s"}"#);
    // Consul only promises "not before TTL"; the timer is 2×TTL = 2 s.
    std::thread::sleep(Duration::from_millis(1300).saturating_sub(created.elapsed()));
    assert!(
        session_exists(a, &id),
        "still alive after TTL (timer is 2×TTL)"
    );
    assert!(
        eventually(Duration::from_secs(8), || !session_exists(a, &id)),
        "gone after 2×TTL"
    );
    assert!(
        created.elapsed() >= Duration::from_secs(2),
        "not before 2×TTL"
    );
}

#[test]
fn renew_rearms_the_ttl_timer_and_changes_no_index() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"TTL":"300ms"}"#);
    let start = Instant::now();
    let before = s.current_index();
    while start.elapsed() < Duration::from_millis(1500) {
        let r = put(a, &format!("/v1/session/renew/{id}"), b"");
        assert_eq!(r.status, 200);
        assert!(
            r.header("X-Consul-Index").is_none(),
            "renew sets no meta headers"
        );
        let body = r.json();
        assert_eq!(body.as_array().unwrap().len(), 1);
        assert_eq!(body[0]["TTL"], "300ms");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(session_exists(a, &id), "renewed well past 2×TTL");
    assert_eq!(s.current_index(), before, "renews are not raft writes");
}

#[test]
fn renew_unknown_session_is_404_with_consul_text() {
    let s = start();
    let r = put(s.addr(), "/v1/session/renew/abc", b"");
    assert_eq!(
        (r.status, r.text().as_str()),
        (404, "Session id 'abc' not found")
    );
}

#[test]
fn destroy_unknown_session_is_200_true_and_info_unknown_is_empty_array() {
    let s = start();
    let a = s.addr();
    let before = s.current_index();
    let r = put(a, "/v1/session/destroy/abc", b"");
    assert_eq!((r.status, r.json()), (200, json!(true)));
    assert_eq!(s.current_index(), before, "nothing to destroy, no write");
    let r = get(a, "/v1/session/info/abc");
    assert_eq!((r.status, r.json()), (200, json!([])));
}

#[test]
fn missing_session_or_node_in_path_is_400() {
    let s = start();
    let a = s.addr();
    for (m, p, t) in [
        ("PUT", "/v1/session/destroy/", "Missing session"),
        ("PUT", "/v1/session/renew/", "Missing session"),
        ("GET", "/v1/session/info/", "Missing session"),
        ("GET", "/v1/session/node/", "Missing node name"),
    ] {
        let r = req(a, m, p, &[], b"");
        assert_eq!((r.status, r.text()), (400, t.to_string()), "{m} {p}");
    }
}

#[test]
fn session_endpoints_report_the_sessions_table_index() {
    let s = start();
    let a = s.addr();
    let s1 = session(a, "{}");
    put(a, "/v1/kv/unrelated", b"x");
    let s2 = session(a, "{}");
    let created2 = get(a, &format!("/v1/session/info/{s2}")).json()[0]["CreateIndex"]
        .as_u64()
        .unwrap();
    for path in [
        format!("/v1/session/info/{s1}"),
        "/v1/session/list".into(),
        format!("/v1/session/node/{}", s.node_name()),
    ] {
        let r = get(a, &path);
        assert_eq!(
            r.index(),
            created2,
            "{path}: last session create, not the session's own index"
        );
    }
    let list = get(a, "/v1/session/list").json();
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["ID"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "list is ordered by ID");
    let node_upper = s.node_name().to_uppercase();
    assert_eq!(
        get(a, &format!("/v1/session/node/{node_upper}"))
            .json()
            .as_array()
            .unwrap()
            .len(),
        2,
        "node match is case-insensitive"
    );
}

#[test]
fn invalidation_releases_keys_applies_lock_delay_and_bumps_indexes() {
    let s = start();
    let a = s.addr();
    let holder = session(a, r#"{"LockDelay":"2s"}"#);
    let other = session(a, r#"{"LockDelay":"0s"}"#);
    put(a, &format!("/v1/kv/lk?acquire={holder}&flags=7"), b"v");
    let before = entry(a, "lk").unwrap();
    let sessions_idx = get(a, "/v1/session/list").index();
    let destroyed = Instant::now();
    assert_eq!(
        put(a, &format!("/v1/session/destroy/{holder}"), b"").json(),
        json!(true)
    );
    let after = entry(a, "lk").unwrap();
    assert!(after.get("Session").is_none(), "released");
    assert_eq!(
        after["Value"], before["Value"],
        "value kept on invalidation"
    );
    assert_eq!(after["Flags"], 7);
    assert_eq!(after["LockIndex"], 1);
    assert!(after["ModifyIndex"].as_u64() > before["ModifyIndex"].as_u64());
    assert!(get(a, "/v1/session/list").index() > sessions_idx);
    // Lock-delay: every session is refused until it ends, with no index consumed.
    let idx = s.current_index();
    assert_eq!(
        put(a, &format!("/v1/kv/lk?acquire={other}"), b"").json(),
        json!(false)
    );
    assert_eq!(
        put(a, "/v1/kv/lk?acquire=", b"").json(),
        json!(false),
        "the delay check runs before session checks"
    );
    assert_eq!(
        s.current_index(),
        idx,
        "lock-delay rejections never reach raft"
    );
    assert!(
        destroyed.elapsed() < Duration::from_millis(1800),
        "the checks above ran inside the delay"
    );
    assert!(eventually(Duration::from_secs(8), || put(
        a,
        &format!("/v1/kv/lk?acquire={other}"),
        b""
    )
    .json()
        == json!(true)));
    assert!(
        destroyed.elapsed() >= Duration::from_secs(2),
        "not before the delay ended"
    );
}

#[test]
fn explicit_release_sets_no_lock_delay() {
    let s = start();
    let a = s.addr();
    let s1 = session(a, r#"{"LockDelay":"30s"}"#);
    let s2 = session(a, "{}");
    put(a, &format!("/v1/kv/lk?acquire={s1}"), b"");
    put(a, &format!("/v1/kv/lk?release={s1}"), b"");
    put(a, &format!("/v1/session/destroy/{s1}"), b"");
    assert_eq!(
        put(a, &format!("/v1/kv/lk?acquire={s2}"), b"").json(),
        json!(true)
    );
}

#[test]
fn delete_behavior_deletes_held_keys_on_invalidation_but_not_released_ones() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"Behavior":"delete","LockDelay":"0s"}"#);
    put(a, &format!("/v1/kv/held?acquire={id}"), b"");
    put(a, &format!("/v1/kv/released?acquire={id}"), b"");
    put(a, &format!("/v1/kv/released?release={id}"), b"");
    put(a, &format!("/v1/session/destroy/{id}"), b"");
    assert!(entry(a, "held").is_none());
    assert!(
        entry(a, "released").is_some(),
        "a released key is no longer the session's (#968)"
    );
}

#[test]
fn acquire_with_destroyed_or_unknown_session_is_500_and_empty_session_is_500() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"LockDelay":"0s"}"#);
    put(a, &format!("/v1/session/destroy/{id}"), b"");
    let r = put(a, &format!("/v1/kv/k?acquire={id}"), b"");
    assert_eq!(
        (r.status, r.text()),
        (500, format!("raft apply failed: invalid session \"{id}\""))
    );
    for q in ["acquire=", "release="] {
        let r = put(a, &format!("/v1/kv/k?{q}"), b"");
        assert_eq!(
            (r.status, r.text().as_str()),
            (500, "raft apply failed: missing session"),
            "{q}"
        );
    }
}

#[test]
fn node_deregistration_invalidates_its_sessions_and_new_ones_fail_until_reregistered() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"LockDelay":"0s"}"#);
    put(a, &format!("/v1/kv/lk?acquire={id}"), b"");
    let node = s.node_name();
    assert_eq!(
        put(
            a,
            "/v1/catalog/deregister",
            format!(r#"{{"Node":"{node}"}}"#).as_bytes()
        )
        .json(),
        json!(true)
    );
    assert!(!session_exists(a, &id));
    assert!(entry(a, "lk").unwrap().get("Session").is_none());
    let r = put(a, "/v1/session/create", b"");
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "apply failed: Missing node registration")
    );
    s.heal_node();
    assert_eq!(put(a, "/v1/session/create", b"").status, 200);
}

#[test]
fn check_going_critical_or_deregistered_invalidates_bound_sessions() {
    let s = start();
    let a = s.addr();
    let node = s.node_name();
    put(a, "/v1/catalog/register", format!(r#"{{"Node":"{node}","Address":"127.0.0.1","Checks":[{{"CheckID":"c1","Status":"passing"}},{{"CheckID":"c2","Status":"passing"}}]}}"#).as_bytes());
    let bound1 = session(a, r#"{"NodeChecks":["serfHealth","c1"]}"#);
    let bound2 = session(a, r#"{"NodeChecks":["c2"]}"#);
    let free = session(a, r#"{"NodeChecks":[]}"#);
    put(
        a,
        "/v1/catalog/register",
        format!(r#"{{"Node":"{node}","Address":"127.0.0.1","Check":{{"CheckID":"c1","Status":"warning"}}}}"#).as_bytes(),
    );
    assert!(session_exists(a, &bound1), "warning does not invalidate");
    put(
        a,
        "/v1/catalog/register",
        format!(r#"{{"Node":"{node}","Address":"127.0.0.1","Check":{{"CheckID":"c1","Status":"critical"}}}}"#).as_bytes(),
    );
    assert!(!session_exists(a, &bound1), "critical does");
    put(
        a,
        "/v1/catalog/deregister",
        format!(r#"{{"Node":"{node}","Address":"127.0.0.1","CheckID":"c2"}}"#).as_bytes(),
    );
    assert!(!session_exists(a, &bound2), "deregistering the check does");
    s.fail_node();
    assert!(
        session_exists(a, &free),
        "a session with no checks survives serfHealth failing"
    );
}
