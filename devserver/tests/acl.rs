//! ACL behaviour with `acl_token` set: default deny, `ACL not found` for unknown tokens, the
//! three ways to pass a token and their priority, list filtering without 403
//! (consul-semantics.md §1 "Tokens", §3.8, §4 "ACL denied").

mod common;

use common::*;

const TOKEN: &str = "s3cret-management-token";

fn acl_server() -> DevServer {
    start_with(|c| c.acl_token = Some(TOKEN.to_string()))
}

/// A PUT authorised with the management token.
fn admin_put(s: &DevServer, path: &str, body: &[u8]) -> Response {
    Req::put(path)
        .header("X-Consul-Token", TOKEN)
        .body(body.to_vec())
        .send(s)
}

#[test]
fn no_token_is_403_permission_denied() {
    let s = acl_server();
    admin_put(&s, "/v1/kv/k", b"v").assert(200, "true");
    get(&s, "/v1/kv/k").assert_prefix(403, "Permission denied");
    put(&s, "/v1/kv/k", b"w").assert_prefix(403, "Permission denied");
    delete(&s, "/v1/kv/k").assert_prefix(403, "Permission denied");
    put(&s, "/v1/session/create", b"").assert_prefix(403, "Permission denied");
    get(&s, "/v1/agent/self").assert_prefix(403, "Permission denied");
    let e = Req::get("/v1/kv/k")
        .header("X-Consul-Token", TOKEN)
        .send(&s)
        .json();
    assert_eq!(entry_value(&e[0]), b"v", "denied writes changed nothing");
}

#[test]
fn wrong_token_is_403_acl_not_found() {
    let s = acl_server();
    for req in [
        Req::get("/v1/kv/k"),
        Req::put("/v1/kv/k").body("v"),
        Req::put("/v1/session/create"),
        Req::put("/v1/txn").json(&json!([{"KV": {"Verb": "get-or-empty", "Key": "k"}}])),
    ] {
        let r = req.header("X-Consul-Token", "not-the-token").send(&s);
        r.assert(403, "ACL not found");
    }
}

#[test]
fn right_token_works_via_header_bearer_and_query_param() {
    let s = acl_server();
    admin_put(&s, "/v1/kv/k", b"v").assert(200, "true");
    let via_header = Req::get("/v1/kv/k")
        .header("X-Consul-Token", TOKEN)
        .send(&s);
    let via_bearer = Req::get("/v1/kv/k")
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send(&s);
    let via_lower_bearer = Req::get("/v1/kv/k")
        .header("Authorization", &format!("bearer {TOKEN}"))
        .send(&s);
    let via_query = get(&s, &format!("/v1/kv/k?token={TOKEN}"));
    for (how, r) in [
        ("X-Consul-Token", via_header),
        ("Authorization: Bearer", via_bearer),
        ("Authorization: bearer", via_lower_bearer),
        ("?token=", via_query),
    ] {
        assert_eq!(r.status, 200, "{how}: {}", r.text());
    }
    let r = Req::put(&format!("/v1/session/create?token={TOKEN}")).send(&s);
    assert_eq!(r.status, 200, "{}", r.text());
}

#[test]
fn token_sources_have_query_then_header_then_bearer_priority() {
    let s = acl_server();
    admin_put(&s, "/v1/kv/k", b"v").assert(200, "true");
    // ?token= wins over the header.
    Req::get("/v1/kv/k?token=wrong")
        .header("X-Consul-Token", TOKEN)
        .send(&s)
        .assert(403, "ACL not found");
    let r = Req::get(&format!("/v1/kv/k?token={TOKEN}"))
        .header("X-Consul-Token", "wrong")
        .send(&s);
    assert_eq!(r.status, 200);
    // X-Consul-Token wins over Authorization.
    Req::get("/v1/kv/k")
        .header("X-Consul-Token", "wrong")
        .header("Authorization", &format!("Bearer {TOKEN}"))
        .send(&s)
        .assert(403, "ACL not found");
    let r = Req::get("/v1/kv/k")
        .header("X-Consul-Token", TOKEN)
        .header("Authorization", "Bearer wrong")
        .send(&s);
    assert_eq!(r.status, 200);
}

#[test]
fn default_acl_policy_header_reports_deny_when_acls_are_on() {
    let s = acl_server();
    let r = get(&s, "/v1/kv/k");
    assert_eq!(r.canonical("X-Consul-Default-Acl-Policy"), "deny");
    let open = start();
    assert_eq!(
        get(&open, "/v1/kv/k").canonical("X-Consul-Default-Acl-Policy"),
        "allow"
    );
}

#[test]
fn kv_recurse_and_keys_filter_silently_instead_of_403() {
    let s = acl_server();
    admin_put(&s, "/v1/kv/a", b"1").assert(200, "true");
    admin_put(&s, "/v1/kv/b", b"2").assert(200, "true");
    let keys = get(&s, "/v1/kv/?keys");
    assert_eq!((keys.status, keys.json()), (200, json!([])));
    assert!(
        keys.header("X-Consul-Results-Filtered-By-ACLs").is_none(),
        "only set when the request carried a token"
    );
    let rec = get(&s, "/v1/kv/?recurse");
    assert_eq!(rec.status, 404, "{}", rec.text());
    let all = Req::get("/v1/kv/?keys")
        .header("X-Consul-Token", TOKEN)
        .send(&s);
    assert_eq!(all.json(), json!(["a", "b"]));
}

#[test]
fn txn_without_token_reports_permission_denied_per_op() {
    let s = acl_server();
    let r = txn(
        &s,
        &json!([
            {"KV": {"Verb": "set", "Key": "x", "Value": null}},
            {"KV": {"Verb": "set", "Key": "y", "Value": null}}
        ]),
    );
    assert_eq!(r.status, 409, "{}", r.text());
    let v = r.json();
    let errs = v["Errors"].as_array().unwrap();
    assert_eq!(errs.len(), 2, "every denied op is listed: {v}");
    for (i, e) in errs.iter().enumerate() {
        assert_eq!(e["OpIndex"], i);
        assert!(
            e["What"].as_str().unwrap().starts_with("Permission denied"),
            "{e}"
        );
    }
    let ok = Req::put("/v1/txn")
        .header("X-Consul-Token", TOKEN)
        .json(&json!([{"KV": {"Verb": "set", "Key": "x", "Value": null}}]))
        .send(&s);
    assert_eq!(ok.status, 200, "{}", ok.text());
}

#[test]
fn session_and_lock_flow_works_with_the_management_token() {
    let s = acl_server();
    let r = Req::put("/v1/session/create")
        .header("X-Consul-Token", TOKEN)
        .json(&json!({"TTL": "10s"}))
        .send(&s);
    assert_eq!(r.status, 200, "{}", r.text());
    let sid = r.json()["ID"].as_str().unwrap().to_string();
    admin_put(&s, &format!("/v1/kv/l?acquire={sid}"), b"me").assert(200, "true");
    admin_put(&s, &format!("/v1/session/renew/{sid}"), b"");
    Req::put(&format!("/v1/session/renew/{sid}"))
        .send(&s)
        .assert_prefix(403, "Permission denied");
    admin_put(&s, &format!("/v1/session/destroy/{sid}"), b"").assert(200, "true");
}
