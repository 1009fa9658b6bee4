//! Tokens created through `/v1/acl/token` are allowed what their policies' rules grant
//! (acl/policy_authorizer.go): exact rules beat prefix rules, the longest prefix wins, and
//! listings filter what the token may not read (`X-Consul-Results-Filtered-By-ACLs`).

mod common;

use common::*;

fn root(r: Req) -> Req {
    r.header("X-Consul-Token", "root")
}

/// A token whose only policy has these rules; returns its SecretID.
fn token_with_rules(s: &DevServer, rules: &str) -> String {
    let p = root(Req::put("/v1/acl/policy"))
        .json(&json!({"Name": "p", "Rules": rules}))
        .send(s)
        .json();
    let t = root(Req::put("/v1/acl/token"))
        .json(&json!({"Policies": [{"ID": p["ID"]}]}))
        .send(s)
        .json();
    t["SecretID"].as_str().unwrap().to_string()
}

#[test]
fn key_prefix_rules_allow_deny_and_filter() {
    let s = start_with(|c| c.acl_token = Some("root".into()));
    root(Req::put("/v1/kv/other"))
        .body("x")
        .send(&s)
        .assert(200, "true");
    let t = token_with_rules(
        &s,
        "key_prefix \"app/\" { policy = \"write\" }\nkey \"app/ro\" { policy = \"read\" }",
    );
    let with = |r: Req| r.header("X-Consul-Token", &t).send(&s);
    with(Req::put("/v1/kv/app/x").body("1")).assert(200, "true");
    let r = with(Req::put("/v1/kv/app/ro").body("1"));
    assert_eq!(r.status, 403);
    assert!(
        r.text()
            .ends_with("lacks permission 'key:write' on \"app/ro\""),
        "{}",
        r.text()
    );
    assert!(r
        .text()
        .starts_with("Permission denied: token with AccessorID '"));
    with(Req::get("/v1/kv/other")).assert_prefix(403, "Permission denied: token with AccessorID");
    let r = with(Req::get("/v1/kv/?keys"));
    assert_eq!(r.json(), json!(["app/x"]));
    assert_eq!(r.canonical("X-Consul-Results-Filtered-By-Acls"), "true");
    // A txn op on a key the token may not write fails (409) with the others rolled back.
    let r = with(Req::put("/v1/txn").json(&json!([
        {"KV": {"Verb": "set", "Key": "app/y", "Value": b64(b"1")}},
        {"KV": {"Verb": "set", "Key": "other", "Value": b64(b"2")}}
    ])));
    assert_eq!(r.status, 409, "{}", r.text());
    assert_eq!(root(Req::get("/v1/kv/app/y")).send(&s).status, 404);
}

#[test]
fn session_and_service_identity_rules() {
    let s = start_with(|c| c.acl_token = Some("root".into()));
    let node = s.node_name();
    let t = token_with_rules(&s, &format!("session \"{node}\" {{ policy = \"write\" }}"));
    let r = Req::put("/v1/session/create")
        .header("X-Consul-Token", &t)
        .json(&json!({"NodeChecks": []}))
        .send(&s);
    assert_eq!(r.status, 200, "{}", r.text());
    // A service identity may register its own service, not another.
    let ident = root(Req::put("/v1/acl/token"))
        .json(&json!({"ServiceIdentities": [{"ServiceName": "web"}]}))
        .send(&s)
        .json()["SecretID"]
        .as_str()
        .unwrap()
        .to_string();
    let reg = |name: &str| {
        Req::put("/v1/agent/service/register")
            .header("X-Consul-Token", &ident)
            .json(&json!({"Name": name}))
            .send(&s)
    };
    assert_eq!(reg("web").status, 200);
    reg("db").assert_prefix(403, "Permission denied: token with AccessorID");
}

/// agent/consul/acl_filter.go (`filterACL`): catalog and health listings leave out the nodes
/// and services the token may not read; the anonymous token, under default deny, sees none.
#[test]
fn catalog_and_health_listings_are_filtered_per_token() {
    let s = start_with(|c| c.acl_token = Some("root".into()));
    root(Req::put("/v1/catalog/register"))
        .json(&json!({"Node": "n1", "Address": "10.0.0.1", "Service": {"Service": "web"}}))
        .send(&s)
        .assert(200, "true");
    assert_eq!(get(&s, "/v1/catalog/nodes").json(), json!([]));
    let t = token_with_rules(&s, "node_prefix \"n\" { policy = \"read\" }");
    let with = |path: &str| Req::get(path).header("X-Consul-Token", &t).send(&s).json();
    let nodes = with("/v1/catalog/nodes");
    assert_eq!(nodes.as_array().unwrap().len(), 1);
    assert_eq!(nodes[0]["Node"], "n1");
    assert_eq!(with("/v1/catalog/services"), json!({}));
    assert_eq!(with("/v1/health/service/web"), json!([]));
    let all = Req::get("/v1/health/service/web")
        .header("X-Consul-Token", "root")
        .send(&s)
        .json();
    assert_eq!(all.as_array().unwrap().len(), 1);
}
