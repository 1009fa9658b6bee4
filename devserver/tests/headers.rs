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
    assert_eq!(r.json(), json!([]));
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
    // Consul's layout without `-dev` (whatever BATON_TEST_DEVSERVER_PRETTY says).
    let s = start_with(|c| c.pretty = false);
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

/// One answer of every shape baton reads (booleans, objects, arrays, a string, a 409 body), from
/// a server that pretty-prints (`pretty`) or not, with `?pretty` on the request when `param`.
fn json_answers(s: &DevServer, param: bool) -> Vec<(&'static str, Response)> {
    let q = if param { "?pretty" } else { "" };
    let amp = if param { "&pretty" } else { "" };
    let sid = session_create(s, &json!({"TTL": "10s"}));
    put(s, "/v1/kv/shape", b"v").assert(200, "true");
    let stale_cas = json!([{"KV": {"Verb": "cas", "Key": "shape", "Index": 1, "Value": "eA=="}}]);
    let ok_txn = json!([{"KV": {"Verb": "get", "Key": "shape"}}]);
    vec![
        ("kv put", put(s, &format!("/v1/kv/k{q}"), b"v")),
        (
            "kv cas false",
            put(s, &format!("/v1/kv/k?cas=1{amp}"), b"v"),
        ),
        ("kv get", get(s, &format!("/v1/kv/shape{q}"))),
        ("kv keys", get(s, &format!("/v1/kv/?keys{amp}"))),
        ("kv delete", delete(s, &format!("/v1/kv/k{q}"))),
        (
            "session create",
            put(s, &format!("/v1/session/create{q}"), b""),
        ),
        (
            "session info",
            get(s, &format!("/v1/session/info/{sid}{q}")),
        ),
        (
            "session renew",
            put(s, &format!("/v1/session/renew/{sid}{q}"), b""),
        ),
        (
            "session destroy",
            put(s, &format!("/v1/session/destroy/{sid}{q}"), b""),
        ),
        ("txn 200", put_json(s, &format!("/v1/txn{q}"), &ok_txn)),
        ("txn 409", put_json(s, &format!("/v1/txn{q}"), &stale_cas)),
        ("status leader", get(s, &format!("/v1/status/leader{q}"))),
    ]
}

/// Consul's `marshalJSON` (agent/http.go): `json.Marshal` (compact, no newline) unless the
/// agent runs `-dev` or the request has `?pretty`; then `json.MarshalIndent(obj, "", "    ")`
/// followed by one `\n`. The same JSON either way.
#[test]
fn every_json_answer_ends_with_a_newline_exactly_when_pretty() {
    let compact = start_with(|c| c.pretty = false);
    let dev = start_with(|c| c.pretty = true);
    for (mode, s, param, pretty) in [
        ("compact", &compact, false, false),
        ("?pretty", &compact, true, true),
        ("--pretty", &dev, false, true),
    ] {
        let mut values = Vec::new();
        for (what, r) in json_answers(s, param) {
            let t = r.text();
            assert!(r.is_json(), "{mode} {what}: {:?} {t:?}", r.headers);
            assert!(
                [200, 409].contains(&r.status),
                "{mode} {what}: {} {t:?}",
                r.status
            );
            let v = r.json();
            if pretty {
                assert!(
                    t.ends_with('\n') && !t.ends_with("\n\n"),
                    "{mode} {what}: one trailing newline: {t:?}"
                );
                if v.is_object() || v.as_array().is_some_and(|a| !a.is_empty()) {
                    assert!(t.contains("\n    "), "{mode} {what}: 4-space indent: {t:?}");
                }
            } else {
                assert!(
                    !t.contains('\n'),
                    "{mode} {what}: compact, no newline: {t:?}"
                );
            }
            values.push(v);
        }
        // The values themselves do not depend on the layout.
        let shape: Vec<&str> = values
            .iter()
            .map(|v| match v {
                Value::Bool(true) => "true",
                Value::Bool(false) => "false",
                Value::Object(_) => "object",
                Value::Array(_) => "array",
                Value::String(_) => "string",
                _ => "other",
            })
            .collect();
        assert_eq!(
            shape,
            [
                "true", "false", "array", "array", "true", "object", "array", "array", "true",
                "object", "object", "string"
            ],
            "{mode}"
        );
    }
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
        assert_eq!(r.json(), json!(true));
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
