//! Response headers and bodies on the wire: query-meta headers in Go canonical case and where
//! they must not appear, the ACL policy header, JSON formatting (compact / pretty),
//! `/v1/status/leader` and `/v1/agent/self` (consul-semantics.md §1, §2, §3.7, §13 "Headers
//! and status codes", "Other endpoints").

mod common;

use common::*;

const META: [&str; 4] = [
    "X-Consul-Index",
    "X-Consul-Knownleader",
    "X-Consul-Lastcontact",
    "X-Consul-Query-Backend",
];

#[track_caller]
fn assert_meta(r: &Response, what: &str) {
    for h in META {
        assert!(
            r.exact_header(h).is_some(),
            "{what}: {h} missing or not in Go canonical case; headers {:?}",
            r.header_names()
        );
    }
    assert_eq!(r.canonical("X-Consul-Knownleader"), "true", "{what}");
    assert_eq!(r.canonical("X-Consul-Lastcontact"), "0", "{what}");
    assert_eq!(
        r.canonical("X-Consul-Query-Backend"),
        "blocking-query",
        "{what}"
    );
    assert_ne!(r.index(), 0, "{what}: X-Consul-Index is never 0");
    assert!(
        r.header("X-Consul-Effective-Consistency").is_none(),
        "{what}: never on KV or session endpoints"
    );
}

#[track_caller]
fn assert_no_meta(r: &Response, what: &str) {
    for h in META {
        assert!(r.header(h).is_none(), "{what}: unexpected {h}");
    }
}

#[test]
fn kv_reads_emit_meta_headers_in_go_canonical_case() {
    let s = start();
    kv_set(&s, "d/k", b"v");
    for path in [
        "/v1/kv/d/k",
        "/v1/kv/d/missing",
        "/v1/kv/d/k?raw",
        "/v1/kv/d/?recurse",
        "/v1/kv/d/?keys",
        "/v1/kv/?keys",
        "/v1/kv/d/k?consistent",
        "/v1/kv/d/k?stale",
    ] {
        let r = get(&s, path);
        assert!(r.status == 200 || r.status == 404, "{path}: {}", r.status);
        assert_meta(&r, path);
    }
}

#[test]
fn session_reads_emit_meta_headers_in_go_canonical_case() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    for path in [
        format!("/v1/session/info/{sid}"),
        "/v1/session/info/00000000-0000-0000-0000-000000000000".to_string(),
        "/v1/session/list".to_string(),
        format!("/v1/session/node/{}", s.node_name()),
    ] {
        let r = get(&s, &path);
        assert_eq!(r.status, 200, "{path}");
        assert_meta(&r, &path);
    }
}

#[test]
fn session_list_index_is_never_zero_on_a_fresh_server() {
    let s = start();
    let r = get(&s, "/v1/session/list");
    assert_eq!(r.text(), "[]");
    assert_ne!(r.index(), 0);
}

#[test]
fn writes_and_status_leader_emit_no_query_meta() {
    let s = start();
    let sid = session_create(&s, &json!({"TTL": "10s"}));
    for (what, r) in [
        ("kv put", put(&s, "/v1/kv/k", b"v")),
        ("kv acquire", acquire(&s, "l", &sid, b"v")),
        ("kv delete", delete(&s, "/v1/kv/k")),
        ("session create", put(&s, "/v1/session/create", b"")),
        (
            "session renew",
            put(&s, &format!("/v1/session/renew/{sid}"), b""),
        ),
        (
            "session destroy",
            put(&s, &format!("/v1/session/destroy/{sid}"), b""),
        ),
        ("status leader", get(&s, "/v1/status/leader")),
        (
            "write txn",
            txn(
                &s,
                &json!([{"KV": {"Verb": "set", "Key": "t", "Value": null}}]),
            ),
        ),
    ] {
        assert_eq!(r.status, 200, "{what}: {}", r.text());
        assert_no_meta(&r, what);
    }
}

#[test]
fn default_acl_policy_header_is_on_every_wrapped_response() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    for (what, r) in [
        ("kv get 404", get(&s, "/v1/kv/missing")),
        ("kv put", put(&s, "/v1/kv/k", b"v")),
        ("kv 400", get(&s, "/v1/kv/")),
        ("kv 500", put(&s, "/v1/kv/k?flags=x", b"v")),
        ("session create", put(&s, "/v1/session/create", b"")),
        ("session info", get(&s, &format!("/v1/session/info/{sid}"))),
        ("renew 404", put(&s, "/v1/session/renew/nope", b"")),
        (
            "txn",
            txn(&s, &json!([{"KV": {"Verb": "get-or-empty", "Key": "k"}}])),
        ),
        ("status leader", get(&s, "/v1/status/leader")),
        ("agent self", get(&s, "/v1/agent/self")),
    ] {
        assert_eq!(
            r.exact_header("X-Consul-Default-Acl-Policy"),
            Some("allow"),
            "{what}: headers {:?}",
            r.header_names()
        );
    }
}

#[test]
fn results_filtered_by_acls_header_is_absent_without_acls() {
    let s = start();
    kv_set(&s, "k", b"v");
    for path in ["/v1/kv/?recurse", "/v1/kv/?keys", "/v1/session/list"] {
        assert!(get(&s, path)
            .header("X-Consul-Results-Filtered-By-ACLs")
            .is_none());
    }
}

#[test]
fn json_bodies_are_compact_and_application_json_by_default() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    for (what, r) in [
        ("kv put", put(&s, "/v1/kv/k", b"v")),
        ("kv get", get(&s, "/v1/kv/k")),
        ("session create", put(&s, "/v1/session/create", b"")),
        ("session info", get(&s, &format!("/v1/session/info/{sid}"))),
        ("status leader", get(&s, "/v1/status/leader")),
    ] {
        assert_eq!(r.header("Content-Type"), Some("application/json"), "{what}");
        let t = r.text();
        assert!(!t.ends_with('\n'), "{what}: trailing newline in {t:?}");
        assert!(!t.contains("\n "), "{what}: indented {t:?}");
    }
}

#[test]
fn pretty_param_indents_with_four_spaces_and_a_trailing_newline() {
    let s = start();
    assert_eq!(put(&s, "/v1/kv/k?pretty", b"v").text(), "true\n");
    let r = put(&s, "/v1/session/create?pretty", b"");
    let t = r.text();
    assert!(t.starts_with("{\n    \"ID\": \""), "{t:?}");
    assert!(t.ends_with("\"\n}\n"), "{t:?}");
    let g = get(&s, "/v1/kv/k?pretty").text();
    assert!(
        g.starts_with("[\n    {\n        \"LockIndex\": 0,"),
        "{g:?}"
    );
    assert!(g.ends_with("\n]\n"), "{g:?}");
}

#[test]
fn pretty_config_mimics_consul_dev_mode() {
    let s = start_with(|c| c.pretty = true);
    assert_eq!(put(&s, "/v1/kv/k", b"v").text(), "true\n");
    let t = put(&s, "/v1/session/create", b"").text();
    assert!(t.starts_with("{\n    \"ID\": \""), "{t:?}");
    assert!(t.ends_with('\n'));
    // Raw values are never reformatted.
    assert_eq!(get(&s, "/v1/kv/k?raw").body, b"v");
}

#[test]
fn status_leader_is_a_json_string() {
    let s = start();
    let r = get(&s, "/v1/status/leader");
    assert_eq!(r.status, 200);
    let v = r.json();
    let addr = v.as_str().expect("a JSON string");
    assert!(addr.contains(':'), "host:port, got {addr:?}");
}

#[test]
fn agent_self_top_level_values_are_objects_or_null_with_config_node_name() {
    let s = start_with(|c| {
        c.node_name = "node-under-test".into();
        c.datacenter = "dc7".into();
    });
    let r = get(&s, "/v1/agent/self");
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    for (k, val) in v.as_object().expect("object") {
        assert!(
            val.is_object() || val.is_null(),
            "top-level {k} is {val}: Go's client would fail"
        );
    }
    for k in ["Config", "Member"] {
        assert!(v.get(k).is_some(), "{k} missing: {v}");
    }
    assert_eq!(v["Config"]["NodeName"], "node-under-test");
    assert_eq!(v["Config"]["Datacenter"], "dc7");
    assert_eq!(v["Config"]["Server"], true);
    assert_eq!(s.node_name(), "node-under-test");
}

#[test]
fn custom_node_name_is_the_session_default_node() {
    let s = start_with(|c| c.node_name = "elsewhere".into());
    let sid = session_create(&s, &json!({}));
    assert_eq!(session_info(&s, &sid).unwrap()["Node"], "elsewhere");
}

#[test]
fn keep_alive_connection_serves_several_requests() {
    let s = start();
    let mut c = Conn::open(s.addr()).unwrap();
    for i in 0..5 {
        let r = c
            .send(&Req::put(&format!("/v1/kv/k{i}")).body("v"))
            .unwrap();
        assert_eq!(r.text(), "true");
    }
    let r = c.send(&Req::get("/v1/kv/?keys")).unwrap();
    assert_eq!(r.json().as_array().unwrap().len(), 5);
}

/// Self-check of the test client: a chunked body with extensions and trailers, and header
/// names in odd case, parse as sent (the dev server itself answers with Content-Length).
#[test]
fn raw_client_parses_chunked_bodies_and_keeps_header_case() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut sock, _) = listener.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = sock.read(&mut buf).unwrap();
        sock.write_all(
            b"HTTP/1.1 200 OK\r\nx-consul-INDEX: 7\r\nTransfer-Encoding: chunked\r\n\r\n\
              4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: x\r\n\r\n",
        )
        .unwrap();
    });
    let r = Req::get("/").try_send_to(addr).unwrap();
    server.join().unwrap();
    assert!(r.chunked);
    assert_eq!(r.body, b"Wikipedia");
    assert_eq!(r.exact_header("x-consul-INDEX"), Some("7"));
    assert!(r.exact_header("X-Consul-Index").is_none());
    assert_eq!(r.header("X-Consul-Index"), Some("7"));
}
