//! More of Consul's own `api` package tests (Consul 1.15, `api/*_test.go`), pinned here as
//! `conformance_api.rs` pins the others: each test names the Go test it stands for and makes
//! the checks that Go test makes, against the HTTP answers.

mod common;

use std::time::{Duration, Instant};

use common::*;

fn ok_json(r: Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn register_foo(s: &DevServer, port: u16) {
    let reg = json!({"Name": "foo", "Tags": ["bar", "baz"], "Port": port,
                     "Checks": [{"TTL": "15s"}, {"TTL": "30s"}]});
    let r = put_json(s, "/v1/agent/service/register", &reg);
    assert_eq!(r.status, 200, "{}", r.text());
}

/// TestAPI_AgentService: the service as `api.AgentService` (empty `Meta`, default weights, the
/// datacenter) with Consul's `ContentHash` for it, the same hash in `X-Consul-ContentHash`.
#[test]
fn agent_service_has_consuls_content_hash() {
    let s = start();
    register_foo(&s, 8000);
    let r = get(&s, "/v1/agent/service/foo");
    let header = r.header("X-Consul-ContentHash").map(str::to_string);
    let v = ok_json(r);
    assert_eq!(
        v,
        json!({"ID": "foo", "Service": "foo", "Tags": ["bar", "baz"], "Meta": {}, "Port": 8000,
               "Address": "", "Weights": {"Passing": 1, "Warning": 1},
               "EnableTagOverride": false, "ContentHash": "3e352f348d44f7eb",
               "Datacenter": "dc1"})
    );
    assert_eq!(header.as_deref(), Some("3e352f348d44f7eb"));
    assert_eq!(
        get(&s, "/v1/agent/service/nope").text(),
        "unknown service ID: nope"
    );
}

/// TestAPI_AgentService (blocking half): with `?hash=` the current hash, the answer waits the
/// whole `?wait=`; a change of the service ends the wait with the new hash; a hash that is not
/// the current one answers at once.
#[test]
fn agent_service_blocks_on_its_content_hash() {
    let s = start();
    register_foo(&s, 8000);
    let hash = get(&s, "/v1/agent/service/foo").json()["ContentHash"]
        .as_str()
        .unwrap()
        .to_string();
    let wait = Duration::from_millis(300);
    let started = Instant::now();
    let r = get(&s, &format!("/v1/agent/service/foo?hash={hash}&wait=300ms"));
    assert!(
        started.elapsed() >= wait,
        "answered after {:?}",
        started.elapsed()
    );
    assert_eq!(ok_json(r)["ContentHash"], hash.as_str());
    // A change releases a long wait, with the new hash.
    let pending = Req::get(&format!("/v1/agent/service/foo?hash={hash}&wait=60s")).spawn(&s);
    register_foo(&s, 8001);
    let (r, _) = pending.expect(Duration::from_secs(30));
    let v = ok_json(r);
    assert_eq!(v["Port"], 8001);
    assert_ne!(v["ContentHash"], hash.as_str());
    // A stale hash does not block at all.
    let pending = Req::get(&format!("/v1/agent/service/foo?hash={hash}&wait=60s")).spawn(&s);
    let (r, _) = pending.expect(Duration::from_secs(30));
    assert_eq!(ok_json(r)["Port"], 8001);
    // `wait` is parsed as Consul parses it.
    get(&s, "/v1/agent/service/foo?hash=x&wait=soon").assert(400, "Invalid wait time");
}

/// TestAPI_PreparedQueryRemoveEmptyTags: `Template.RemoveEmptyTags` is stored as sent, false
/// on create, true after an update.
#[test]
fn prepared_query_keeps_remove_empty_tags() {
    let s = start();
    let mut def = json!({"Name": "test", "Service": {"Service": "redis"},
                         "Template": {"RemoveEmptyTags": false}});
    let created = ok_json(Req::new("POST", "/v1/query").json(&def).send(&s));
    let id = created["ID"].as_str().unwrap().to_string();
    let read = ok_json(get(&s, &format!("/v1/query/{id}")));
    assert_eq!(read.as_array().unwrap().len(), 1);
    assert_eq!(read[0]["Template"]["RemoveEmptyTags"], false);
    def["ID"] = json!(id);
    def["Template"]["RemoveEmptyTags"] = json!(true);
    let r = put_json(&s, &format!("/v1/query/{id}"), &def);
    assert_eq!(r.status, 200, "{}", r.text());
    let read = ok_json(get(&s, &format!("/v1/query/{id}")));
    assert_eq!(read.as_array().unwrap().len(), 1);
    assert_eq!(read[0]["Template"]["RemoveEmptyTags"], true);
}

fn non_bootstrapped(default_allow: bool) -> DevServer {
    start_with(|c| {
        c.acl_enabled = true;
        c.acl_default_allow = default_allow;
    })
}

/// TestAPI_ACLBootstrap: ACLs on and not bootstrapped. With the default policy `allow` the
/// anonymous token lists the one member; with `deny` it may not read ACLs, a token is refused
/// with the not-bootstrapped text, the bootstrap answers a management token, which then lists
/// the two tokens (itself and anonymous); a second bootstrap is refused.
#[test]
fn acl_bootstrap_makes_the_management_token_once() {
    let s = non_bootstrapped(true);
    let members = ok_json(get(&s, "/v1/agent/members"));
    assert_eq!(members.as_array().unwrap().len(), 1);
    assert_eq!(
        get(&s, "/v1/acl/tokens").text(),
        "Permission denied: anonymous token lacks permission 'acl:read'. The anonymous token is used implicitly when a request does not specify a token."
    );
    drop(s);

    let s = non_bootstrapped(false);
    get(&s, "/v1/acl/tokens").assert(
        403,
        "Permission denied: anonymous token lacks permission 'acl:read'. The anonymous token is used implicitly when a request does not specify a token.",
    );
    Req::get("/v1/acl/tokens")
        .header("X-Consul-Token", "root")
        .send(&s)
        .assert(
            403,
            "ACL system must be bootstrapped before making any requests that require authorization: ACL not found",
        );
    let r = Req::put("/v1/acl/bootstrap").send(&s);
    let index = r.index();
    let token = ok_json(r);
    assert_eq!(token["Description"], "Bootstrap Token (Global Management)");
    assert_eq!(
        token["Policies"],
        json!([{"ID": "00000000-0000-0000-0000-000000000001", "Name": "global-management"}])
    );
    assert_eq!(token["CreateIndex"], index);
    let secret = token["SecretID"].as_str().unwrap();
    let list = ok_json(
        Req::get("/v1/acl/tokens")
            .header("X-Consul-Token", secret)
            .send(&s),
    );
    let mut ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["AccessorID"].as_str().unwrap())
        .collect();
    ids.sort();
    let mut want = vec![
        "00000000-0000-0000-0000-000000000002",
        token["AccessorID"].as_str().unwrap(),
    ];
    want.sort();
    assert_eq!(ids, want);
    // After the bootstrap an unknown token is just not found, and there is no second one.
    Req::get("/v1/acl/tokens")
        .header("X-Consul-Token", "root")
        .send(&s)
        .assert(403, "ACL not found");
    Req::put("/v1/acl/bootstrap").send(&s).assert(
        403,
        &format!("Permission denied: ACL bootstrap no longer allowed (reset index: {index})"),
    );
}

/// With an initial management token configured the system is bootstrapped from the start.
#[test]
fn acl_bootstrap_is_refused_with_an_initial_management_token() {
    let s = start_with(|c| c.acl_token = Some("root".into()));
    let r = Req::put("/v1/acl/bootstrap").send(&s);
    assert_eq!(r.status, 403);
    assert!(
        r.text()
            .starts_with("Permission denied: ACL bootstrap no longer allowed (reset index: "),
        "{}",
        r.text()
    );
}
