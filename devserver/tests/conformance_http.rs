//! Transport-level behaviour, the §4 error catalogue, meta headers, blocking queries, ACLs and
//! fault controls (consul-semantics.md §1, §2, §4, §6.5).

mod raw;

use std::time::{Duration, Instant};

use baton_devserver::Config;
use raw::*;
use serde_json::json;

#[test]
fn kv_get_meta_headers_use_go_canonical_names() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/k", b"v");
    let r = get(a, "/v1/kv/k");
    for name in [
        "X-Consul-Index",
        "X-Consul-Knownleader",
        "X-Consul-Lastcontact",
        "X-Consul-Query-Backend",
        "X-Consul-Default-Acl-Policy",
    ] {
        assert!(
            r.has_exact_header(name),
            "{name} missing or not in Go's canonical case: {:?}",
            r.headers
        );
    }
    assert_eq!(r.header("X-Consul-Query-Backend"), Some("blocking-query"));
    assert_eq!(r.header("X-Consul-Default-Acl-Policy"), Some("allow"));
    assert_eq!(r.header("X-Consul-Lastcontact"), Some("0"));
    assert!(
        r.header("X-Consul-Effective-Consistency").is_none(),
        "never on KV"
    );
    let w = put(a, "/v1/kv/k", b"w");
    assert!(
        w.header("X-Consul-Index").is_none(),
        "writes set no query meta"
    );
    assert!(
        w.has_exact_header("X-Consul-Default-Acl-Policy"),
        "but every wrapped route has the policy header"
    );
    let sl = get(a, "/v1/session/list");
    assert!(
        sl.header("X-Consul-Effective-Consistency").is_none(),
        "never on sessions"
    );
}

#[test]
fn wrong_method_is_405_with_allow_and_options_lists_methods() {
    let s = start();
    let a = s.addr();
    let r = req(a, "POST", "/v1/kv/k", &[], b"x");
    assert_eq!(
        (r.status, r.text().as_str()),
        (405, "method POST not allowed")
    );
    assert_eq!(r.header("Allow"), Some("OPTIONS,GET,PUT,DELETE"));
    let r = req(a, "GET", "/v1/session/create", &[], b"");
    assert_eq!((r.status, r.header("Allow")), (405, Some("OPTIONS,PUT")));
    let r = req(a, "OPTIONS", "/v1/txn", &[], b"");
    assert_eq!((r.status, r.header("Allow")), (200, Some("OPTIONS,PUT")));
    assert!(r.body.is_empty());
}

#[test]
fn unknown_path_is_404_with_consul_text() {
    let s = start();
    let a = s.addr();
    for p in ["/v1/nope", "/v1/session/create/", "/v2/kv/x"] {
        let r = get(a, p);
        assert_eq!(
            (r.status, r.text().as_str()),
            (
                404,
                "Invalid URL path: not a recognized HTTP API endpoint\n"
            ),
            "{p}"
        );
    }
}

#[test]
fn unclean_paths_are_301_redirected_before_consul_code() {
    let s = start();
    let a = s.addr();
    let r = put(a, "/v1/kv//a", b"x");
    assert_eq!((r.status, r.header("Location")), (301, Some("/v1/kv/a")));
    let r = get(a, "/v1/kv/a/./b?raw");
    assert_eq!(
        (r.status, r.header("Location")),
        (301, Some("/v1/kv/a/b?raw"))
    );
    let r = get(a, "/v1/kv");
    assert_eq!((r.status, r.header("Location")), (301, Some("/v1/kv/")));
    assert!(entry(a, "a").is_none(), "the redirected PUT wrote nothing");
}

#[test]
fn non_printable_path_is_400_with_empty_body() {
    let s = start();
    let r = get(s.addr(), "/v1/kv/a%07b");
    assert_eq!(r.status, 400);
    assert!(r.body.is_empty());
}

#[test]
fn percent_encoded_slash_is_part_of_the_key_path() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/a%2Fb", b"x");
    assert!(entry(a, "a/b").is_some(), "%2F decodes to / as in Consul");
    put(a, "/v1/kv/q%3Fmark%20space", b"y");
    assert!(entry(a, "q%3Fmark%20space").is_some());
}

#[test]
fn query_parser_errors_are_400_with_consul_texts_even_on_writes() {
    let s = start();
    let a = s.addr();
    let cases = [
        ("GET", "/v1/kv/k?wait=soon", "Invalid wait time"),
        ("GET", "/v1/kv/k?index=abc", "Invalid index"),
        ("GET", "/v1/kv/k?index=-1", "Invalid index"),
        ("PUT", "/v1/kv/k?wait=1x", "Invalid wait time"),
        ("DELETE", "/v1/kv/k?index=x", "Invalid index"),
        (
            "GET",
            "/v1/kv/k?stale&consistent",
            "Cannot specify ?stale with ?consistent, conflicting semantics.",
        ),
        (
            "GET",
            "/v1/kv/k?max_stale=5s&consistent",
            "Cannot specify ?stale with ?consistent, conflicting semantics.",
        ),
        (
            "GET",
            "/v1/kv/k?max_stale=abc",
            "Invalid max_stale value \"abc\"",
        ),
        ("GET", "/v1/session/list?index=z", "Invalid index"),
        (
            "GET",
            "/v1/kv/k?ns=default",
            "Invalid query parameter: \"ns\" - Namespaces are a Consul Enterprise feature",
        ),
        (
            "PUT",
            "/v1/session/create?partition=p",
            "Invalid query parameter: \"partition\" - Partitions are a Consul Enterprise feature",
        ),
        ("GET", "/v1/kv/", "Missing key name"),
        ("PUT", "/v1/kv/", "Missing key name"),
        ("DELETE", "/v1/kv/", "Missing key name"),
        (
            "PUT",
            "/v1/kv/k?cas=0&acquire=abc",
            "Conflicting flags: acquire=abc&cas=0",
        ),
        (
            "DELETE",
            "/v1/kv/k?recurse&cas=1",
            "Conflicting flags: cas=1&recurse=",
        ),
    ];
    for (m, p, text) in cases {
        let r = req(a, m, p, &[], b"");
        assert_eq!((r.status, r.text()), (400, text.to_string()), "{m} {p}");
    }
    let r = req(a, "GET", "/v1/kv/k", &[("X-Consul-Namespace", "x")], b"");
    assert_eq!(
        (r.status, r.text().as_str()),
        (
            400,
            "Invalid header: \"X-Consul-Namespace\" - Namespaces are a Consul Enterprise feature"
        )
    );
    assert_eq!(
        get(a, "/v1/kv/k?stale").status,
        404,
        "consistency flags alone are fine"
    );
    assert_eq!(
        put(a, "/v1/txn?ns=x", b"[]").status,
        200,
        "txn does not parse ns"
    );
}

#[test]
fn bad_flags_or_cas_numbers_are_500_with_strconv_text() {
    let s = start();
    let a = s.addr();
    let r = put(a, "/v1/kv/k?flags=x", b"");
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "strconv.ParseUint: parsing \"x\": invalid syntax")
    );
    let r = put(a, "/v1/kv/k?cas=-1", b"");
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "strconv.ParseUint: parsing \"-1\": invalid syntax")
    );
    let r = put(a, "/v1/kv/k?flags=18446744073709551616", b"");
    assert_eq!(
        (r.status, r.text().as_str()),
        (
            500,
            "strconv.ParseUint: parsing \"18446744073709551616\": value out of range"
        )
    );
    let r = delete(a, "/v1/kv/k?cas=z");
    assert_eq!(r.status, 500);
    assert!(entry(a, "k").is_none(), "nothing was written");
}

#[test]
fn oversize_value_is_413_and_nothing_is_written() {
    let s = start();
    let a = s.addr();
    let r = put(a, "/v1/kv/big", &vec![b'x'; 524_289]);
    assert_eq!(r.status, 413);
    assert_eq!(
        r.text(),
        "Request body(524289 bytes) too large, max size: 524288 bytes. See https://www.consul.io/docs/agent/config/config-files#kv_max_value_size."
    );
    assert!(entry(a, "big").is_none());
    assert_eq!(
        put(a, "/v1/kv/big", &vec![b'x'; 524_288]).status,
        200,
        "exactly the limit is fine"
    );
}

#[test]
fn unknown_datacenter_is_500_no_path() {
    let s = start();
    let a = s.addr();
    let r = get(a, "/v1/kv/k?dc=elsewhere");
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "No path to datacenter")
    );
    assert_eq!(get(a, "/v1/kv/k?dc=dc1").status, 404);
}

#[test]
fn status_leader_is_a_json_string_and_agent_self_has_object_values() {
    let s = start();
    let a = s.addr();
    let r = get(a, "/v1/status/leader");
    assert!(r.json().is_string());
    assert!(!r.json().as_str().unwrap().is_empty());
    assert!(r.header("X-Consul-Index").is_none());
    let me = get(a, "/v1/agent/self").json();
    for (k, v) in me.as_object().unwrap() {
        assert!(
            v.is_object() || v.is_null(),
            "top-level {k} must be an object or null for the Go client"
        );
    }
    assert_eq!(me["Config"]["NodeName"], s.node_name().as_str());
    assert_eq!(me["Config"]["Datacenter"], "dc1");
}

#[test]
fn pretty_parameter_indents_with_four_spaces_and_newline() {
    let s = start();
    let a = s.addr();
    assert_eq!(put(a, "/v1/kv/p?pretty", b"").text(), "true\n");
    let r = put(a, "/v1/session/create?pretty", b"");
    assert!(r.text().starts_with("{\n    \"ID\": \""), "{}", r.text());
    let dev = start_with(Config {
        pretty: true,
        ..Config::default()
    });
    assert_eq!(
        put(dev.addr(), "/v1/kv/p", b"").text(),
        "true\n",
        "-dev mode"
    );
}

// ----- blocking queries (§6.5) -----

#[test]
fn blocking_query_wakes_on_key_change_with_new_index() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/w", b"1");
    let idx = get(a, "/v1/kv/w").index();
    let waiter = spawn_req(
        a,
        "GET",
        format!("/v1/kv/w?index={idx}&wait=30s"),
        Duration::from_secs(40),
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(!waiter.is_finished(), "parked until something changes");
    let t = Instant::now();
    put(a, "/v1/kv/other", b"unrelated");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !waiter.is_finished(),
        "another key's write does not release it"
    );
    put(a, "/v1/kv/w", b"2");
    let r = waiter.join().unwrap().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "woke on the write, not at the timeout"
    );
    assert!(r.index() > idx);
    assert_eq!(r.json()[0]["Value"], "Mg==");
}

#[test]
fn blocking_query_times_out_with_same_index_and_jitter_below_wait_over_16() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/w", b"1");
    let idx = get(a, "/v1/kv/w").index();
    let t = Instant::now();
    let r = get(a, &format!("/v1/kv/w?index={idx}&wait=800ms"));
    let took = t.elapsed();
    assert_eq!((r.status, r.index()), (200, idx));
    assert!(
        took >= Duration::from_millis(800),
        "not before the wait: {took:?}"
    );
    assert!(
        took < Duration::from_millis(800 + 50 + 1500),
        "wait + jitter (< wait/16) + slack: {took:?}"
    );
}

#[test]
fn index_zero_or_absent_never_blocks_and_wait_alone_does_nothing() {
    let s = start();
    let a = s.addr();
    let t = Instant::now();
    get(a, "/v1/kv/x?wait=10s");
    get(a, "/v1/kv/x?index=0&wait=10s");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn blocking_without_wait_uses_the_default_query_time() {
    let s = start_with(Config {
        default_query_time: Duration::from_millis(600),
        ..Config::default()
    });
    let a = s.addr();
    put(a, "/v1/kv/w", b"1");
    let idx = get(a, "/v1/kv/w").index();
    let t = Instant::now();
    get(a, &format!("/v1/kv/w?index={idx}"));
    assert!(
        t.elapsed() >= Duration::from_millis(600),
        "held for default_query_time"
    );
    let capped = start_with(Config {
        max_query_time: Duration::from_millis(500),
        ..Config::default()
    });
    put(capped.addr(), "/v1/kv/w", b"1");
    let idx = get(capped.addr(), "/v1/kv/w").index();
    let t = Instant::now();
    get(capped.addr(), &format!("/v1/kv/w?index={idx}&wait=60s"));
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "wait is clamped to max_query_time"
    );
}

#[test]
fn blocking_missing_key_returns_at_once_when_index_is_stale_then_ignores_unrelated_writes() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/noise", b"1");
    // A stale index: the first run sees KV activity past it and returns a 404 at once.
    let r = req_timeout(
        a,
        "GET",
        "/v1/kv/absent?index=2&wait=20s",
        &[],
        b"",
        Duration::from_secs(5),
    )
    .unwrap();
    assert_eq!(r.status, 404);
    let idx = r.index();
    assert!(idx > 2);
    let waiter = spawn_req(
        a,
        "GET",
        format!("/v1/kv/absent?index={idx}&wait=20s"),
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_millis(150));
    put(a, "/v1/kv/noise", b"2");
    put(a, "/v1/kv/noise2", b"3");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        !waiter.is_finished(),
        "unrelated writes do not release a missing-key query"
    );
    put(a, "/v1/kv/absent", b"here");
    let r = waiter.join().unwrap().unwrap();
    assert_eq!(r.status, 200);
}

#[test]
fn blocking_present_key_deleted_returns_404_with_table_index() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/d", b"1");
    let idx = get(a, "/v1/kv/d").index();
    let waiter = spawn_req(
        a,
        "GET",
        format!("/v1/kv/d?index={idx}&wait=20s"),
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_millis(150));
    delete(a, "/v1/kv/d");
    let r = waiter.join().unwrap().unwrap();
    assert_eq!(r.status, 404);
    assert!(r.index() > idx);
}

#[test]
fn blocking_on_session_list_wakes_on_create_not_on_renew() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"TTL":"10s"}"#);
    let idx = get(a, "/v1/session/list").index();
    let waiter = spawn_req(
        a,
        "GET",
        format!("/v1/session/list?index={idx}&wait=20s"),
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_millis(150));
    put(a, &format!("/v1/session/renew/{id}"), b"");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!waiter.is_finished(), "renew is not a write");
    session(a, "{}");
    let r = waiter.join().unwrap().unwrap();
    assert!(r.index() > idx);
    assert_eq!(r.json().as_array().unwrap().len(), 2);
}

// ----- ACL -----

fn acl_server() -> baton_devserver::DevServer {
    start_with(Config {
        acl_token: Some("root-token".into()),
        ..Config::default()
    })
}

#[test]
fn acl_without_token_is_403_permission_denied_and_lists_are_filtered() {
    let s = acl_server();
    let a = s.addr();
    let r = put(a, "/v1/kv/k", b"v");
    assert_eq!(r.status, 403);
    assert!(
        r.text().starts_with(
            "Permission denied: anonymous token lacks permission 'key:write' on \"k\""
        ),
        "{}",
        r.text()
    );
    assert_eq!(r.header("X-Consul-Default-Acl-Policy"), Some("deny"));
    req(
        a,
        "PUT",
        "/v1/kv/k",
        &[("X-Consul-Token", "root-token")],
        b"v",
    );
    assert_eq!(
        get(a, "/v1/kv/?recurse").status,
        404,
        "recurse drops unreadable entries instead of 403"
    );
    assert_eq!(get(a, "/v1/kv/k").status, 403);
    assert_eq!(put(a, "/v1/session/create", b"").status, 403);
    assert_eq!(
        get(a, "/v1/status/leader").status,
        200,
        "status needs no token"
    );
}

#[test]
fn acl_unknown_token_is_403_acl_not_found() {
    let s = acl_server();
    let r = req(
        s.addr(),
        "GET",
        "/v1/kv/k",
        &[("X-Consul-Token", "wrong")],
        b"",
    );
    assert_eq!((r.status, r.text().as_str()), (403, "ACL not found"));
}

#[test]
fn acl_token_is_accepted_from_header_bearer_and_query() {
    let s = acl_server();
    let a = s.addr();
    assert_eq!(
        req(
            a,
            "PUT",
            "/v1/kv/k",
            &[("X-Consul-Token", "root-token")],
            b"v"
        )
        .status,
        200
    );
    assert_eq!(
        req(
            a,
            "GET",
            "/v1/kv/k",
            &[("Authorization", "bearer root-token")],
            b""
        )
        .status,
        200
    );
    assert_eq!(get(a, "/v1/kv/k?token=root-token").status, 200);
    let r = req(
        a,
        "PUT",
        "/v1/txn",
        &[],
        br#"[{"KV":{"Verb":"set","Key":"t"}}]"#,
    );
    assert_eq!(r.status, 409);
    assert!(r.json()["Errors"][0]["What"]
        .as_str()
        .unwrap()
        .starts_with("Permission denied"));
}

// ----- fault controls -----

#[test]
fn pause_makes_requests_hang_until_resume() {
    let s = start();
    let a = s.addr();
    s.pause();
    let pending = spawn_req(a, "GET", "/v1/kv/x".into(), Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!pending.is_finished(), "no answer while paused");
    let status = get(a, "/_devserver/status").json();
    assert_eq!(
        status["paused"], true,
        "the control path answers while paused"
    );
    s.resume();
    assert_eq!(pending.join().unwrap().unwrap().status, 404);
}

#[test]
fn pause_and_resume_over_the_control_path() {
    let s = start();
    let a = s.addr();
    assert_eq!(put(a, "/_devserver/pause", b"").json(), json!(true));
    assert!(req_timeout(a, "GET", "/v1/kv/x", &[], b"", Duration::from_millis(300)).is_err());
    put(a, "/_devserver/resume", b"");
    assert_eq!(get(a, "/v1/kv/x").status, 404);
}

#[test]
fn latency_delays_every_request() {
    let s = start();
    let a = s.addr();
    put(a, "/_devserver/latency?d=300ms", b"");
    let t = Instant::now();
    get(a, "/v1/kv/x");
    assert!(t.elapsed() >= Duration::from_millis(300));
    s.set_latency(Duration::ZERO);
    assert_eq!(get(a, "/_devserver/status").json()["latency_ms"], 0);
}

#[test]
fn restart_loses_all_state_and_drops_connections() {
    let s = start();
    let a = s.addr();
    let id = session(a, "{}");
    put(a, &format!("/v1/kv/k?acquire={id}"), b"");
    let waiter = spawn_req(
        a,
        "GET",
        "/v1/session/list?index=99999&wait=20s".into(),
        Duration::from_secs(30),
    );
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(put(a, "/_devserver/restart", b"").json(), json!(true));
    assert!(
        waiter.join().unwrap().is_err(),
        "open connections are dropped"
    );
    assert!(entry(a, "k").is_none());
    assert!(!session_exists(a, &id));
    assert!(s.current_index() < 20, "the index starts over");
}

#[test]
fn no_leader_mode_answers_500_and_status_leader_empty() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"TTL":"200ms"}"#);
    s.set_leader(false);
    for (m, p) in [
        ("GET", "/v1/kv/k".to_string()),
        ("PUT", "/v1/kv/k".into()),
        ("PUT", format!("/v1/session/renew/{id}")),
        ("PUT", "/v1/session/create".into()),
    ] {
        let r = req(a, m, &p, &[], b"");
        assert_eq!(
            (r.status, r.text()),
            (500, "No cluster leader".to_string()),
            "{m} {p}"
        );
    }
    assert_eq!(get(a, "/v1/status/leader").json(), json!(""));
    std::thread::sleep(Duration::from_millis(600));
    put(a, "/_devserver/leader?present=true", b"");
    assert!(
        session_exists(a, &id),
        "TTL timers stop without a leader and restart at 2×TTL"
    );
    assert!(eventually(Duration::from_secs(5), || !session_exists(
        a, &id
    )));
}

#[test]
fn invalidate_session_control_applies_lock_delay() {
    let s = start();
    let a = s.addr();
    let id = session(a, r#"{"LockDelay":"10s"}"#);
    let other = session(a, "{}");
    put(a, &format!("/v1/kv/k?acquire={id}"), b"");
    assert_eq!(
        put(a, &format!("/_devserver/session/invalidate/{id}"), b"").json(),
        json!(true)
    );
    assert!(!session_exists(a, &id));
    assert_eq!(
        put(a, &format!("/v1/kv/k?acquire={other}"), b"").json(),
        json!(false),
        "lock-delay in force"
    );
    assert_eq!(
        put(a, "/_devserver/session/invalidate/unknown", b"").json(),
        json!(false)
    );
}

#[test]
fn fail_node_invalidates_sessions_and_blocks_new_ones_until_healed() {
    let s = start();
    let a = s.addr();
    let id = session(a, "{}");
    put(a, "/_devserver/node/fail", b"");
    assert!(!session_exists(a, &id));
    let r = put(a, "/v1/session/create", b"");
    assert_eq!(
        (r.status, r.text().as_str()),
        (500, "apply failed: Check 'serfHealth' is in critical state")
    );
    put(a, "/_devserver/node/heal", b"");
    assert_eq!(put(a, "/v1/session/create", b"").status, 200);
}

#[test]
fn request_counts_by_route() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/a", b"");
    get(a, "/v1/kv/a");
    get(a, "/v1/kv/a");
    let c = s.request_counts();
    assert_eq!(c.by_route.get("GET /v1/kv"), Some(&2));
    assert_eq!(c.by_route.get("PUT /v1/kv"), Some(&1));
    let http = get(a, "/_devserver/requests").json();
    assert_eq!(
        http["by_route"]["GET /v1/kv"], 2,
        "control requests are not counted"
    );
}

#[test]
fn per_client_connection_cap_answers_429() {
    let s = start_with(Config {
        max_conns_per_client: 2,
        ..Config::default()
    });
    let a = s.addr();
    // Two connections that are certainly being served: each has a blocking query parked.
    let _held: Vec<_> = (0..2)
        .map(|_| {
            spawn_req(
                a,
                "GET",
                "/v1/kv/x?index=99999&wait=3s".into(),
                Duration::from_secs(10),
            )
        })
        .collect();
    assert!(eventually(Duration::from_secs(5), || s
        .request_counts()
        .by_route
        .get("GET /v1/kv")
        == Some(&2)));
    let r = req_timeout(a, "GET", "/v1/kv/x", &[], b"", Duration::from_secs(5)).expect("an answer");
    assert_eq!(r.status, 429, "a third connection from the same IP");
}

#[test]
fn garbage_requests_do_not_crash_or_corrupt_the_server() {
    let s = start();
    let a = s.addr();
    put(a, "/v1/kv/keep", b"safe");
    let before = entry(a, "keep").unwrap();
    let bodies: [(&str, &str, &[u8]); 8] = [
        ("PUT", "/v1/session/create", b"{\"TTL\": 5}"),
        ("PUT", "/v1/session/create", b"[1,2"),
        ("PUT", "/v1/session/create", b"{\"TTL\":\"-5s\"}"),
        (
            "PUT",
            "/v1/txn",
            b"[{\"KV\":{\"Verb\":\"set\",\"Key\":\"keep\",\"Flags\":-1}}]",
        ),
        ("PUT", "/v1/txn", b"\xff\xfe"),
        (
            "PUT",
            "/v1/kv/keep?acquire=00000000-0000-0000-0000-000000000000",
            b"x",
        ),
        ("PUT", "/v1/catalog/register", b"nope"),
        ("GET", "/v1/kv/keep?index=99999999999999999999", b""),
    ];
    for (m, p, b) in bodies {
        let r = req(a, m, p, &[], b);
        assert!((400..600).contains(&r.status), "{m} {p}: {}", r.status);
    }
    let mut raw = std::net::TcpStream::connect(a).unwrap();
    use std::io::Write;
    raw.write_all(b"\x00\x01garbage\r\n\r\n").unwrap();
    drop(raw);
    assert_eq!(entry(a, "keep").unwrap(), before, "state unchanged");
    assert!(get(a, "/v1/session/list")
        .json()
        .as_array()
        .unwrap()
        .is_empty());
}
