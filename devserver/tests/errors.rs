//! The §4 error catalogue, row by row, and bad input that must neither crash the server nor
//! change its state (consul-semantics.md §1 routing, §3, §4, §13 "Headers and status codes").

mod common;

use std::time::Duration;

use common::*;

/// A server holding a little state: two keys (one locked) and a session.
fn seeded() -> (DevServer, String) {
    let s = start();
    kv_set(&s, "seed/a", b"1");
    let sid = session_create(&s, &json!({}));
    acquire(&s, "seed/lock", &sid, b"held").assert(200, "true");
    (s, sid)
}

#[track_caller]
fn assert_unchanged(s: &DevServer, before: &(u16, Value, u64, Value, u64), what: &str) {
    assert_eq!(&snapshot(s), before, "state changed after {what}");
    assert_eq!(
        get(s, "/v1/status/leader").status,
        200,
        "server died after {what}"
    );
}

// ---- routing ---------------------------------------------------------------------------

#[test]
fn wrong_method_is_405_with_allow_header_and_text() {
    let s = start();
    for (method, path) in [
        ("POST", "/v1/kv/k"),
        ("POST", "/v1/session/create"),
        ("GET", "/v1/session/create"),
        ("GET", "/v1/session/destroy/x"),
        ("DELETE", "/v1/session/info/x"),
        ("POST", "/v1/txn"),
        ("GET", "/v1/txn"),
        ("PUT", "/v1/status/leader"),
    ] {
        let r = Req::new(method, path).body("x").send(&s);
        r.assert(405, &format!("method {method} not allowed"));
        let allow = r
            .header("Allow")
            .unwrap_or_else(|| panic!("{method} {path}: no Allow"));
        assert!(allow.contains("OPTIONS"), "{path}: Allow {allow:?}");
        assert!(!allow.contains(method), "{path}: Allow {allow:?}");
    }
    let r = Req::new("POST", "/v1/kv/k").send(&s);
    let allow: Vec<&str> = r.header("Allow").unwrap().split(',').collect();
    for m in ["DELETE", "GET", "OPTIONS", "PUT"] {
        assert!(allow.contains(&m), "KV Allow {allow:?} lacks {m}");
    }
    assert!(kv_entry(&s, "k").is_none(), "a 405 wrote nothing");
}

#[test]
fn options_on_registered_route_is_200_with_allow_and_no_body() {
    let s = start();
    let r = Req::new("OPTIONS", "/v1/session/create").send(&s);
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty(), "{:?}", r.text());
    let allow: Vec<&str> = r.header("Allow").unwrap().split(',').collect();
    assert!(
        allow.contains(&"OPTIONS") && allow.contains(&"PUT"),
        "{allow:?}"
    );
}

#[test]
fn unknown_v1_path_is_404_invalid_url_path() {
    let s = start();
    for path in ["/v1/nope", "/v1/session/create/", "/v1/session/lists"] {
        let r = Req::put(path).send(&s);
        r.assert(
            404,
            "Invalid URL path: not a recognized HTTP API endpoint\n",
        );
    }
}

#[test]
fn non_printable_char_in_decoded_path_is_400_with_empty_body() {
    let s = start();
    for path in ["/v1/kv/a%01b", "/v1/kv/a%7Fb", "/v1/session/info/%0A"] {
        let r = get(&s, path);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        assert!(r.body.is_empty(), "{path}: {:?}", r.text());
    }
    let r = put(&s, "/v1/kv/x%00y", b"v");
    assert_eq!(r.status, 400);
    assert_eq!(get(&s, "/v1/kv/?keys").json(), json!([]));
}

// ---- query parser ------------------------------------------------------------------------

#[test]
fn invalid_wait_is_400_on_every_kv_method_and_session_reads() {
    let (s, sid) = seeded();
    let before = snapshot(&s);
    for (m, path) in [
        ("GET", "/v1/kv/seed/a?index=1&wait=forever"),
        ("GET", "/v1/kv/seed/a?wait=10"),
        ("PUT", "/v1/kv/seed/a?wait=x"),
        ("DELETE", "/v1/kv/seed/a?wait=x"),
        ("GET", "/v1/session/list?wait=x"),
    ] {
        Req::new(m, path)
            .body("changed")
            .send(&s)
            .assert(400, "Invalid wait time");
    }
    Req::get(&format!("/v1/session/info/{sid}?wait=1x"))
        .send(&s)
        .assert(400, "Invalid wait time");
    assert_unchanged(&s, &before, "bad wait");
}

#[test]
fn invalid_index_is_400() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    for (m, path) in [
        ("GET", "/v1/kv/seed/a?index=abc"),
        ("GET", "/v1/kv/seed/a?index=-1"),
        ("PUT", "/v1/kv/seed/a?index=1.5"),
        ("DELETE", "/v1/kv/seed/a?index=x"),
        ("GET", "/v1/session/list?index=x"),
    ] {
        Req::new(m, path)
            .body("changed")
            .send(&s)
            .assert(400, "Invalid index");
    }
    assert_unchanged(&s, &before, "bad index");
}

#[test]
fn stale_with_consistent_is_400() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    let text = "Cannot specify ?stale with ?consistent, conflicting semantics.";
    get(&s, "/v1/kv/seed/a?stale&consistent").assert(400, text);
    put(&s, "/v1/kv/seed/a?stale&consistent", b"x").assert(400, text);
    get(&s, "/v1/session/list?stale=&consistent=").assert(400, text);
    assert_unchanged(&s, &before, "stale+consistent");
}

#[test]
fn bad_max_stale_is_400() {
    let s = start();
    get(&s, "/v1/kv/k?max_stale=soon").assert(400, "Invalid max_stale value \"soon\"");
}

#[test]
fn consistency_modes_all_answer_the_same_on_a_single_node() {
    let s = start();
    kv_set(&s, "k", b"v");
    let base = get(&s, "/v1/kv/k");
    for q in [
        "?stale",
        "?consistent",
        "?leader",
        "?max_stale=5s",
        "?cached",
    ] {
        let r = get(&s, &format!("/v1/kv/k{q}"));
        assert_eq!(r.status, 200, "{q}");
        assert_eq!(r.json(), base.json(), "{q}");
        assert_eq!(r.canonical("X-Consul-Knownleader"), "true", "{q}");
        assert_eq!(r.canonical("X-Consul-Lastcontact"), "0", "{q}");
    }
}

#[test]
fn ns_or_partition_param_on_kv_and_session_endpoints_is_400() {
    let (s, sid) = seeded();
    let before = snapshot(&s);
    let ns = "Invalid query parameter: \"ns\" - Namespaces are a Consul Enterprise feature";
    let part =
        "Invalid query parameter: \"partition\" - Partitions are a Consul Enterprise feature";
    get(&s, "/v1/kv/seed/a?ns=default").assert(400, ns);
    put(&s, "/v1/kv/seed/a?ns=default", b"x").assert(400, ns);
    delete(&s, "/v1/kv/seed/a?partition=default").assert(400, part);
    put(&s, "/v1/session/create?ns=team", b"").assert(400, ns);
    put(&s, "/v1/session/create?partition=p", b"").assert(400, part);
    get(&s, "/v1/session/list?ns=x").assert(400, ns);
    get(&s, &format!("/v1/session/info/{sid}?partition=x")).assert(400, part);
    assert_unchanged(&s, &before, "enterprise params");
    // An empty value is not "non-empty".
    assert_eq!(get(&s, "/v1/kv/seed/a?ns=").status, 200);
}

#[test]
fn ns_or_partition_header_is_400_invalid_header() {
    let s = start();
    for h in ["X-Consul-Namespace", "X-Consul-Partition"] {
        let r = Req::get("/v1/kv/k").header(h, "default").send(&s);
        r.assert_prefix(400, "Invalid header: ");
    }
}

#[test]
fn status_leader_and_agent_self_ignore_ns_and_partition() {
    let s = start();
    assert_eq!(get(&s, "/v1/status/leader?ns=x&partition=y").status, 200);
    assert_eq!(get(&s, "/v1/agent/self?ns=x&partition=y").status, 200);
}

// ---- KV-specific -----------------------------------------------------------------------------

#[test]
fn kv_missing_key_name_is_400() {
    let s = start();
    get(&s, "/v1/kv/").assert(400, "Missing key name");
    put(&s, "/v1/kv/", b"v").assert(400, "Missing key name");
    delete(&s, "/v1/kv/").assert(400, "Missing key name");
    put(&s, "/v1/kv/?cas=0", b"v").assert(400, "Missing key name");
    assert_eq!(get(&s, "/v1/kv/?keys").json(), json!([]));
}

#[test]
fn kv_conflicting_flags_is_400_with_sorted_query() {
    let (s, sid) = seeded();
    let before = snapshot(&s);
    put(&s, "/v1/kv/seed/a?cas=0&acquire=abc", b"x")
        .assert(400, "Conflicting flags: acquire=abc&cas=0");
    put(
        &s,
        &format!("/v1/kv/seed/lock?release={sid}&acquire={sid}"),
        b"x",
    )
    .assert(
        400,
        &format!("Conflicting flags: acquire={sid}&release={sid}"),
    );
    put(&s, "/v1/kv/seed/a?flags=1&cas=5&release=r", b"x")
        .assert(400, "Conflicting flags: cas=5&flags=1&release=r");
    delete(&s, "/v1/kv/seed/?recurse&cas=0").assert(400, "Conflicting flags: cas=0&recurse=");
    assert_unchanged(&s, &before, "conflicting flags");
}

#[test]
fn kv_bad_flags_or_cas_number_is_500_with_strconv_text() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    put(&s, "/v1/kv/seed/a?flags=x", b"v")
        .assert(500, "strconv.ParseUint: parsing \"x\": invalid syntax");
    put(&s, "/v1/kv/seed/a?flags=-1", b"v")
        .assert(500, "strconv.ParseUint: parsing \"-1\": invalid syntax");
    put(&s, "/v1/kv/seed/a?cas=1.0", b"v")
        .assert(500, "strconv.ParseUint: parsing \"1.0\": invalid syntax");
    delete(&s, "/v1/kv/seed/a?cas=abc")
        .assert(500, "strconv.ParseUint: parsing \"abc\": invalid syntax");
    assert_unchanged(&s, &before, "bad numbers");
}

#[test]
fn kv_value_over_max_size_is_413_with_exact_text_and_not_stored() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    let r = put(&s, "/v1/kv/big", &vec![b'x'; 524_289]);
    let text = r.text();
    r.assert_prefix(
        413,
        "Request body(524289 bytes) too large, max size: 524288 bytes. See ",
    );
    assert!(
        text.ends_with("kv_max_value_size."),
        "413 text should point at kv_max_value_size: {text:?}"
    );
    assert_unchanged(&s, &before, "an oversize PUT");
    // Exactly the limit is fine.
    kv_set(&s, "edge", &vec![b'y'; 524_288]);
    assert_eq!(entry_value(&kv_entry(&s, "edge").unwrap()).len(), 524_288);
}

#[test]
fn kv_size_limit_checks_content_length_header_only() {
    let s = start();
    let r = Req::put("/v1/kv/declared")
        .header("Content-Length", "600000")
        .timeout(Duration::from_secs(10))
        .try_send_to(s.addr());
    // The server answers from the header alone, before any body arrives.
    let r = r.expect("answered without reading a body");
    r.assert_prefix(
        413,
        "Request body(600000 bytes) too large, max size: 524288 bytes.",
    );
    assert!(kv_entry(&s, "declared").is_none());
}

#[test]
fn chunked_kv_put_bypasses_the_size_limit() {
    let s = start();
    let big = vec![b'z'; 600_000];
    Req::put("/v1/kv/chunked")
        .body(big.clone())
        .chunked()
        .send(&s)
        .assert(200, "true");
    assert_eq!(entry_value(&kv_entry(&s, "chunked").unwrap()), big);
}

#[test]
fn kv_max_value_size_is_configurable() {
    let s = start_with(|c| c.kv_max_value_size = 10);
    put(&s, "/v1/kv/k", b"0123456789").assert(200, "true");
    put(&s, "/v1/kv/k", b"0123456789A").assert_prefix(
        413,
        "Request body(11 bytes) too large, max size: 10 bytes. See ",
    );
}

#[test]
fn acquire_with_unknown_or_destroyed_session_is_500_invalid_session() {
    let (s, _) = seeded();
    let ghost = "01234567-89ab-cdef-0123-456789abcdef";
    let before = snapshot(&s);
    acquire(&s, "seed/free", ghost, b"x").assert(
        500,
        &format!("raft apply failed: invalid session \"{ghost}\""),
    );
    let dead = session_with_delay(&s, "0s");
    put(&s, &format!("/v1/session/destroy/{dead}"), b"").assert(200, "true");
    let before = (before.0, before.1, before.2, snapshot(&s).3, snapshot(&s).4);
    acquire(&s, "seed/free", &dead, b"x").assert(
        500,
        &format!("raft apply failed: invalid session \"{dead}\""),
    );
    assert_unchanged(&s, &before, "acquire with a dead session");
}

#[test]
fn acquire_or_release_with_empty_session_is_500_missing_session() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    put(&s, "/v1/kv/seed/a?acquire=", b"x").assert(500, "raft apply failed: missing session");
    put(&s, "/v1/kv/seed/lock?release=", b"x").assert(500, "raft apply failed: missing session");
    put(&s, "/v1/kv/seed/a?acquire", b"x").assert(500, "raft apply failed: missing session");
    assert_unchanged(&s, &before, "empty session");
}

#[test]
fn unknown_datacenter_is_500_no_path_and_own_dc_works() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    get(&s, "/v1/kv/seed/a?dc=mars").assert(500, "No path to datacenter");
    put(&s, "/v1/kv/seed/a?dc=mars", b"x").assert(500, "No path to datacenter");
    get(&s, "/v1/session/list?dc=mars").assert(500, "No path to datacenter");
    assert_unchanged(&s, &before, "unknown dc");
    assert_eq!(get(&s, "/v1/kv/seed/a?dc=dc1").status, 200);
}

// ---- session-specific ----------------------------------------------------------------------

#[test]
fn session_create_bad_json_or_lock_delay_is_400_request_decode_failed() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    for body in [
        &b"{"[..],
        b"not json",
        b"[1,2]",
        b"{\"LockDelay\": \"soon\"}",
        b"{\"Name\": 5}",
    ] {
        let r = Req::put("/v1/session/create").body(body.to_vec()).send(&s);
        assert!(
            r.status == 400 && r.text().starts_with("Request decode failed: "),
            "body {:?}: got {} {:?}",
            String::from_utf8_lossy(body),
            r.status,
            r.text()
        );
    }
    assert_unchanged(&s, &before, "bad session bodies");
}

#[test]
fn session_create_bad_ttl_string_is_500() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    put_json(&s, "/v1/session/create", &json!({"TTL": "abc"}))
        .assert_prefix(500, "Session TTL 'abc' invalid: ");
    put_json(&s, "/v1/session/create", &json!({"TTL": "10"}))
        .assert_prefix(500, "Session TTL '10' invalid: ");
    assert_unchanged(&s, &before, "bad TTL");
}

#[test]
fn session_create_ttl_out_of_range_is_500_with_nanoseconds() {
    let s = DevServer::start(Config::default()).unwrap();
    put_json(&s, "/v1/session/create", &json!({"TTL": "5s"})).assert(
        500,
        "Invalid Session TTL '5000000000', must be between [10s=24h0m0s]",
    );
    put_json(&s, "/v1/session/create", &json!({"TTL": "25h"})).assert(
        500,
        "Invalid Session TTL '90000000000000', must be between [10s=24h0m0s]",
    );
    for ok in ["10s", "24h"] {
        let r = put_json(&s, "/v1/session/create", &json!({ "TTL": ok }));
        assert_eq!(r.status, 200, "TTL {ok}: {}", r.text());
    }
    assert_eq!(
        get(&s, "/v1/session/list").json().as_array().unwrap().len(),
        2
    );
}

#[test]
fn session_create_bad_behavior_is_500() {
    let s = start();
    put_json(&s, "/v1/session/create", &json!({"Behavior": "explode"}))
        .assert(500, "Invalid Behavior setting 'explode'");
    assert_eq!(get(&s, "/v1/session/list").json(), json!([]));
}

#[test]
fn session_create_with_empty_node_is_500_must_provide_node() {
    let s = start();
    put_json(&s, "/v1/session/create", &json!({"Node": ""})).assert(500, "Must provide Node");
}

#[test]
fn session_create_on_unknown_node_is_500_missing_node_registration() {
    let s = start();
    put_json(&s, "/v1/session/create", &json!({"Node": "nowhere"}))
        .assert(500, "apply failed: Missing node registration");
    assert_eq!(get(&s, "/v1/session/list").json(), json!([]));
}

#[test]
fn session_create_with_unknown_check_is_500_missing_check() {
    let s = start();
    put_json(&s, "/v1/session/create", &json!({"NodeChecks": ["nope"]}))
        .assert(500, "apply failed: Missing check 'nope' registration");
    // Legacy Checks alone are unioned with serfHealth, and still checked.
    put_json(&s, "/v1/session/create", &json!({"Checks": ["gone"]}))
        .assert(500, "apply failed: Missing check 'gone' registration");
}

#[test]
fn missing_session_id_or_node_in_path_is_400() {
    let s = start();
    put(&s, "/v1/session/destroy/", b"").assert(400, "Missing session");
    put(&s, "/v1/session/renew/", b"").assert(400, "Missing session");
    get(&s, "/v1/session/info/").assert(400, "Missing session");
    get(&s, "/v1/session/node/").assert(400, "Missing node name");
}

// ---- robustness ----------------------------------------------------------------------------

#[test]
fn bad_input_never_crashes_the_server_or_changes_state() {
    let (s, sid) = seeded();
    let before = snapshot(&s);
    let bad: Vec<Req> = vec![
        Req::put("/v1/session/create").body("{\"TTL\": \"1h\", \"Behavior\": "),
        Req::put("/v1/session/create").json(&json!({"TTL": "-5s"})),
        Req::put("/v1/session/create").json(&json!({"LockDelay": "1y"})),
        Req::put("/v1/session/create").json(&json!({"Node": "ghost", "TTL": "10s"})),
        Req::put("/v1/session/renew/not-a-session"),
        Req::put("/v1/session/renew/00000000-0000-0000-0000-000000000000"),
        Req::put("/v1/kv/seed/a?acquire=no-such-session").body("x"),
        Req::put("/v1/kv/seed/lock?release=no-such-session").body("x"),
        Req::put(&format!("/v1/kv/seed/lock?release={}", sid.to_uppercase())).body("x"),
        Req::put("/v1/kv/seed/a?cas=99999999999999999999999").body("x"),
        Req::put("/v1/kv/seed/a?flags=1e3").body("x"),
        Req::get("/v1/kv/seed/a?index=18446744073709551616"),
        Req::get("/v1/kv/seed/a?index=1&wait=-"),
        Req::get("/v1/kv/seed/a?wait=1h&index=abc"),
        Req::put("/v1/txn").body("[{\"KV\": {\"Verb\": \"set\", \"Key\": \"seed/a\"}}"),
        Req::put("/v1/txn").body("[{\"KV\": {\"Verb\": \"zap\", \"Key\": \"seed/a\"}}]"),
        Req::put("/v1/txn")
            .body("[{\"KV\": {\"Verb\": \"set\", \"Key\": \"seed/a\", \"Value\": \"@@@\"}}]"),
        Req::put("/v1/txn")
            .body("[{\"KV\": {\"Verb\": \"set\", \"Key\": \"seed/a\", \"Flags\": -1}}]"),
        Req::put("/v1/txn").body(""),
        Req::put("/v1/kv/seed/big").body(vec![0u8; 700_000]),
        Req::put("/v1/catalog/register").body("{nope"),
        Req::put("/v1/catalog/deregister").body("{nope"),
        Req::new("PATCH", "/v1/kv/seed/a").body("x"),
        Req::get("/v1/kv/seed/%ZZ"),
    ];
    for req in bad {
        let what = format!("{} {}", req.method, req.path);
        match req.try_send_to(s.addr()) {
            // Refused, or (release by a non-holder) answered `false`.
            Ok(r) => assert!(
                r.status >= 300 || (r.is_json() && r.json() == json!(false)),
                "{what} should have been refused, got {} {}",
                r.status,
                r.text()
            ),
            Err(e) => panic!("{what}: no answer ({e})"),
        }
        assert_unchanged(&s, &before, &what);
    }
}

#[test]
fn malformed_http_does_not_take_the_server_down() {
    let (s, _) = seeded();
    let before = snapshot(&s);
    let garbage: [&[u8]; 6] = [
        b"GARBAGE\r\n\r\n",
        b"GET /v1/kv/seed/a HTTP/1.1\r\nContent-Length: nope\r\n\r\n",
        b"PUT /v1/kv/seed/a HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab",
        b"PUT /v1/kv/seed/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"\x00\x01\x02\xff\xfe\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
    ];
    for g in garbage {
        let mut c = Conn::open(s.addr()).unwrap();
        let _ = c.write_raw(g);
        let _ = c.stream.shutdown(std::net::Shutdown::Write);
        // Whatever it answers (or not), it must close or answer promptly enough and live on.
        let _ = c.closed_within(Duration::from_secs(3));
        assert_unchanged(&s, &before, &format!("{:?}", String::from_utf8_lossy(g)));
    }
}

#[test]
fn bad_latency_duration_on_control_path_changes_nothing() {
    let s = start();
    let r = put(&s, "/_devserver/latency?d=soon", b"");
    assert!(r.status >= 400, "{} {}", r.status, r.text());
    let st = get(&s, "/_devserver/status").json();
    assert_eq!(st["latency_ms"], 0);
    assert_eq!(get(&s, "/v1/status/leader").status, 200);
}

#[test]
fn session_renew_validates_wait_and_index_but_create_does_not_parse_them() {
    let s = start();
    let sid = session_create(&s, &json!({"TTL": "10s"}));
    put(&s, &format!("/v1/session/renew/{sid}?wait=x"), b"").assert(400, "Invalid wait time");
    put(&s, &format!("/v1/session/renew/{sid}?index=x"), b"").assert(400, "Invalid index");
    let r = put(&s, "/v1/session/create?wait=x&index=y", b"");
    assert_eq!(
        r.status,
        200,
        "create ignores blocking params: {}",
        r.text()
    );
}
