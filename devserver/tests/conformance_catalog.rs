//! Catalog, health, status and the Connect CA root: what Consul's Go test harness waits for,
//! the per-table indexes of blocking reads, `?dc=` routing and the error texts. Each rule
//! names where Consul (1.15) implements it.

mod common;

use std::time::Duration;

use common::*;

fn register(s: &DevServer, body: Value) {
    let r = put_json(s, "/v1/catalog/register", &body);
    assert_eq!((r.status, r.json()), (200, json!(true)), "{}", r.text());
}

/// sdk/testutil/server.go `WaitForLeader`, `WaitForActiveCARoot`, `WaitForSerfCheck`: the three
/// answers the Go harness polls for before any `api` test runs.
#[test]
fn a_fresh_server_answers_what_the_go_test_harness_waits_for() {
    let s = start();
    let r = get(&s, "/v1/catalog/nodes");
    assert_eq!(r.status, 200);
    assert_eq!(r.canonical("X-Consul-Knownleader"), "true");
    assert!(r.index() >= 2, "index {}", r.index());
    let nodes = r.json();
    assert_eq!(nodes[0]["Node"], s.node_name());
    assert!(nodes[0]["TaggedAddresses"]["lan"].is_string(), "{nodes}");

    let roots = get(&s, "/v1/agent/connect/ca/roots").json();
    let active = roots["ActiveRootID"].as_str().unwrap();
    assert!(!active.is_empty());
    let list = roots["Roots"].as_array().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["ID"], active);
    assert_eq!(list[0]["Active"], true);
    assert!(list[0]["RootCert"]
        .as_str()
        .unwrap()
        .starts_with("-----BEGIN CERTIFICATE-----"));
    // The same root on every read, and on the non-agent path.
    assert_eq!(
        get(&s, "/v1/connect/ca/roots").json()["ActiveRootID"],
        active
    );

    let checks = get(&s, &format!("/v1/health/node/{}", s.node_name())).json();
    let serf = checks
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["CheckID"] == "serfHealth")
        .expect("serfHealth registered");
    assert_eq!(serf["Status"], "passing");
}

/// agent/consul/catalog_endpoint.go `Catalog.Register`: node and address are required (500);
/// a service with no ID takes its name; agent/catalog_endpoint.go `CatalogNodeServices`
/// answers `null` for an unknown node.
#[test]
fn register_then_read_back_through_every_catalog_listing() {
    let s = start();
    put_json(&s, "/v1/catalog/register", &json!({"Address": "10.0.0.1"}))
        .assert(500, "Must provide node");
    put_json(&s, "/v1/catalog/register", &json!({"Node": "n1"}))
        .assert(500, "Must provide address if SkipNodeUpdate is not set");
    register(
        &s,
        json!({"Node": "n1", "Address": "10.0.0.1", "Service": {"Service": "web", "Tags": ["a"], "Port": 80}}),
    );
    register(
        &s,
        json!({"Node": "n2", "Address": "10.0.0.2", "Service": {"Service": "web", "Tags": ["b"]}}),
    );
    let nodes: Vec<Value> = get(&s, "/v1/catalog/nodes")
        .json()
        .as_array()
        .unwrap()
        .clone();
    let names: Vec<&str> = nodes.iter().map(|n| n["Node"].as_str().unwrap()).collect();
    assert_eq!(names, vec![s.node_name().as_str(), "n1", "n2"]);
    assert_eq!(
        get(&s, "/v1/catalog/services").json(),
        json!({"consul": [], "web": ["a", "b"]})
    );
    let web = get(&s, "/v1/catalog/service/web?tag=a").json();
    assert_eq!(web.as_array().unwrap().len(), 1);
    assert_eq!(web[0]["Node"], "n1");
    assert_eq!(web[0]["ServiceID"], "web");
    assert_eq!(web[0]["ServicePort"], 80);
    assert_eq!(web[0]["Address"], "10.0.0.1");
    let n1 = get(&s, "/v1/catalog/node/n1").json();
    assert_eq!(n1["Node"]["Address"], "10.0.0.1");
    assert_eq!(keys_of(&n1["Services"]), vec!["web"]);
    assert_eq!(get(&s, "/v1/catalog/node/ghost").json(), Value::Null);
    get(&s, "/v1/catalog/node/").assert(400, "Missing node name");
    get(&s, "/v1/catalog/service/").assert(400, "Missing service name");
    put_json(&s, "/v1/catalog/deregister", &json!({"Node": "n1"}));
    assert_eq!(get(&s, "/v1/catalog/node/n1").json(), Value::Null);
    assert_eq!(get(&s, "/v1/catalog/service/web").json()[0]["Node"], "n2");
}

/// agent/consul/state/catalog.go: each listing reports its own table's index
/// (`nodes`, `services`, `checks`), and a blocking read returns once that index moves.
#[test]
fn blocking_reads_wake_on_their_table_and_report_its_index() {
    let s = start();
    let svc_index = get(&s, "/v1/catalog/services").index();
    let nodes_index = get(&s, "/v1/catalog/nodes").index();
    let pending = Req::get(&format!("/v1/catalog/services?index={svc_index}&wait=30s")).spawn(&s);
    let counted = poll_until(Duration::from_secs(10), || {
        s.request_counts()
            .blocking_by_route
            .contains_key("GET /v1/catalog/services")
    });
    assert!(counted.is_some());
    assert!(pending.still_waiting(), "nothing changed yet");
    // A check alone moves the checks table, not the services table.
    register(
        &s,
        json!({"Node": s.node_name(), "Address": "127.0.0.1",
               "Check": {"CheckID": "disk", "Name": "disk", "Status": "passing"}}),
    );
    assert_eq!(get(&s, "/v1/catalog/services").index(), svc_index);
    let checks_index = get(&s, "/v1/health/state/any").index();
    assert!(checks_index > svc_index);
    register(
        &s,
        json!({"Node": "n9", "Address": "10.0.0.9", "Service": {"Service": "db"}}),
    );
    let (r, _) = pending.expect(Duration::from_secs(20));
    assert!(r.index() > svc_index);
    assert!(r.json().get("db").is_some(), "{}", r.text());
    assert!(get(&s, "/v1/catalog/nodes").index() > nodes_index);
}

/// agent/http.go `parseDC` + the RPC router: a datacenter other than the agent's has no path
/// (500 `No path to datacenter`), on every catalog, health and status read.
#[test]
fn a_foreign_datacenter_has_no_path() {
    let s = start();
    for path in [
        "/v1/status/leader?dc=dc9",
        "/v1/status/peers?dc=dc9",
        "/v1/catalog/nodes?dc=dc9",
        "/v1/catalog/services?dc=dc9",
        "/v1/catalog/service/consul?dc=dc9",
        "/v1/catalog/node/x?dc=dc9",
        "/v1/health/node/x?dc=dc9",
        "/v1/health/checks/x?dc=dc9",
        "/v1/health/service/x?dc=dc9",
        "/v1/health/state/any?dc=dc9",
    ] {
        get(&s, path).assert(500, "No path to datacenter");
    }
    assert_eq!(
        get(&s, "/v1/status/peers").json(),
        json!(["127.0.0.1:8300"])
    );
    assert_eq!(get(&s, "/v1/status/peers?dc=dc1").status, 200);
}

/// agent/consul/health_endpoint.go `ServiceNodes` with `?passing` (`filterNonPassing`):
/// an instance with any check that is not passing (warning included) is left out;
/// `/v1/health/state/<state>` lists checks in that state.
#[test]
fn health_service_passing_leaves_out_instances_with_a_failing_check() {
    let s = start();
    for (node, status) in [("ok", "passing"), ("warn", "warning"), ("bad", "critical")] {
        register(
            &s,
            json!({"Node": node, "Address": "10.0.0.1", "Service": {"Service": "api"},
                   "Check": {"CheckID": "api-check", "Name": "api", "Status": status, "ServiceID": "api"}}),
        );
    }
    let all = get(&s, "/v1/health/service/api").json();
    assert_eq!(all.as_array().unwrap().len(), 3);
    assert_eq!(all[0]["Checks"][0]["ServiceName"], "api");
    let passing = get(&s, "/v1/health/service/api?passing").json();
    let nodes: Vec<&str> = passing
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["Node"]["Node"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, vec!["ok"]);
    let critical = get(&s, "/v1/health/state/critical").json();
    assert_eq!(critical.as_array().unwrap().len(), 1);
    assert_eq!(critical[0]["Node"], "bad");
    let checks = get(&s, "/v1/health/checks/api").json();
    assert_eq!(checks.as_array().unwrap().len(), 3);
}

/// go-bexpr filters (agent/consul `Catalog.ListNodes` with `Filter`): a listing keeps the
/// items the expression selects; one that does not parse is an error.
#[test]
fn filter_expressions_select_items() {
    let s = start();
    register(
        &s,
        json!({"Node": "f1", "Address": "10.0.0.1", "Service": {"Service": "web", "Tags": ["prod"]}}),
    );
    register(
        &s,
        json!({"Node": "f2", "Address": "10.0.0.2", "Service": {"Service": "web", "Tags": ["dev"]}}),
    );
    let r = get(&s, "/v1/catalog/nodes?filter=Node%20%3D%3D%20%22f1%22").json();
    assert_eq!(r.as_array().unwrap().len(), 1);
    let r = get(
        &s,
        "/v1/health/service/web?filter=%22prod%22%20in%20Service.Tags",
    )
    .json();
    assert_eq!(r[0]["Node"]["Node"], "f1");
    assert_eq!(r.as_array().unwrap().len(), 1);
    assert_eq!(get(&s, "/v1/catalog/nodes?filter=((").status, 500);
}

/// agent/acl_endpoint.go `checkACLDisabled`: with ACLs off every ACL endpoint is 401
/// `ACL support disabled`.
#[test]
fn acl_endpoints_without_acls_are_401() {
    let s = start();
    get(&s, "/v1/acl/tokens").assert(401, "ACL support disabled");
    put(&s, "/v1/agent/token/default", b"{}").assert(401, "ACL support disabled");
}

/// agent/consul/acl_endpoint.go: token CRUD needs `acl:read`/`acl:write`; the anonymous token
/// is denied; a token created with the management token can be read back, and a deleted one
/// is `ACL not found`.
#[test]
fn acl_token_crud_with_the_management_token() {
    let s = start_with(|c| c.acl_token = Some("root".into()));
    get(&s, "/v1/acl/tokens").assert_prefix(
        403,
        "Permission denied: anonymous token lacks permission 'acl:read'",
    );
    let list = Req::get("/v1/acl/tokens")
        .header("X-Consul-Token", "root")
        .send(&s)
        .json();
    let descs: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["Description"].as_str().unwrap())
        .collect();
    assert!(descs.contains(&"Initial Management Token") && descs.contains(&"Anonymous Token"));
    let created = Req::put("/v1/acl/token")
        .header("X-Consul-Token", "root")
        .json(&json!({"Description": "worker", "Policies": [{"Name": "global-management"}]}))
        .send(&s)
        .json();
    let accessor = created["AccessorID"].as_str().unwrap().to_string();
    let secret = created["SecretID"].as_str().unwrap().to_string();
    assert_eq!(
        created["Policies"][0]["ID"],
        "00000000-0000-0000-0000-000000000001"
    );
    // The new token, linked to global-management, may register a service.
    let r = Req::put("/v1/agent/service/register")
        .header("X-Consul-Token", &secret)
        .json(&json!({"Name": "web"}))
        .send(&s);
    assert_eq!(r.status, 200, "{}", r.text());
    let r = Req::delete(&format!("/v1/acl/token/{accessor}"))
        .header("X-Consul-Token", "root")
        .send(&s);
    assert_eq!(r.json(), json!(true));
    Req::get(&format!("/v1/acl/token/{accessor}"))
        .header("X-Consul-Token", "root")
        .send(&s)
        .assert(403, "ACL not found");
    Req::get("/v1/acl/tokens?dc=dc9")
        .header("X-Consul-Token", "root")
        .send(&s)
        .assert(500, "No path to datacenter");
    Req::get("/v1/agent/services")
        .header("X-Consul-Token", &secret)
        .send(&s)
        .assert(403, "ACL not found");
}

/// agent/event_endpoint.go: a fired event is listed by the agent, its payload base64.
#[test]
fn fired_events_are_listed() {
    let s = start();
    let fired = put(&s, "/v1/event/fire/deploy", b"v2").json();
    assert_eq!(fired["Name"], "deploy");
    let list = get(&s, "/v1/event/list?name=deploy").json();
    assert_eq!(list[0]["ID"], fired["ID"]);
    assert_eq!(list[0]["Payload"], b64(b"v2"));
    assert_eq!(get(&s, "/v1/event/list?name=other").json(), json!([]));
}

/// agent/http.go `setConsistency` / `QueryMeta.ConsistencyLevel`: catalog and health reads
/// report the mode they were served in.
#[test]
fn catalog_reads_report_their_effective_consistency() {
    let s = start();
    for (q, mode) in [
        ("", "leader"),
        ("?stale", "stale"),
        ("?consistent", "consistent"),
    ] {
        let r = get(&s, &format!("/v1/catalog/nodes{q}"));
        assert_eq!(r.canonical("X-Consul-Effective-Consistency"), mode);
    }
}

/// agent/consul/catalog_endpoint.go `nodePreApply`, `servicePreApply`, `vetRegisterWithACL`:
/// a node ID must be a UUID, a service needs a name, a check must name the request's node and
/// a service the request or the node has.
#[test]
fn catalog_register_validation_texts() {
    let s = start();
    put_json(
        &s,
        "/v1/catalog/register",
        &json!({"Node": "n", "Address": "a", "ID": "x"}),
    )
    .assert(500, "Bad node ID: uuid string is wrong length");
    put_json(
        &s,
        "/v1/catalog/register",
        &json!({"Node": "n", "Address": "a", "Service": {"ID": "s1"}}),
    )
    .assert(
        500,
        "Must provide service name (Service.Service) when service ID is provided",
    );
    put_json(
        &s,
        "/v1/catalog/register",
        &json!({"Node": "n", "Address": "a", "Check": {"CheckID": "c", "Node": "other"}}),
    )
    .assert(
        500,
        "Node 'other' for check 'c' doesn't match register request node 'n'",
    );
    put_json(
        &s,
        "/v1/catalog/register",
        &json!({"Node": "n", "Address": "a", "Check": {"CheckID": "c", "ServiceID": "ghost"}}),
    )
    .assert(500, "Unknown service ID 'ghost' for check ID 'c'");
    // A check without a status starts critical (state/catalog.go ensureCheckTxn).
    register(
        &s,
        json!({"Node": "n", "Address": "a", "Check": {"Name": "c"}}),
    );
    assert_eq!(get(&s, "/v1/health/node/n").json()[0]["Status"], "critical");
    assert_eq!(get(&s, "/v1/health/node/n").json()[0]["CheckID"], "c");
}

/// agent/acl_endpoint.go: policies are created, read back (by ID and name), listed and deleted;
/// a missing policy reads as 404 (`ACLPolicyRead`), a non-UUID ID is a lookup error, and a
/// name is required (`Invalid Policy: no Name is set`, `ACL.PolicySet`).
#[test]
fn acl_policy_crud() {
    let s = start_with(|c| c.acl_token = Some("root".into()));
    let put_policy = |path: &str, body: Value| {
        Req::put(path)
            .header("X-Consul-Token", "root")
            .json(&body)
            .send(&s)
    };
    let get_root = |path: &str| Req::get(path).header("X-Consul-Token", "root").send(&s);
    put_policy("/v1/acl/policy", json!({"Description": "x"}))
        .assert(500, "Invalid Policy: no Name is set");
    let p = put_policy(
        "/v1/acl/policy",
        json!({"Name": "kv-read", "Rules": "key_prefix \"\" { policy = \"read\" }"}),
    )
    .json();
    let id = p["ID"].as_str().unwrap().to_string();
    assert_eq!(
        get_root(&format!("/v1/acl/policy/{id}")).json()["Name"],
        "kv-read"
    );
    assert_eq!(
        get_root("/v1/acl/policy/name/kv-read").json()["ID"],
        id.as_str()
    );
    let names: Vec<Value> = get_root("/v1/acl/policies")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["Name"].clone())
        .collect();
    assert!(names.contains(&json!("global-management")) && names.contains(&json!("kv-read")));
    let r = Req::delete(&format!("/v1/acl/policy/{id}"))
        .header("X-Consul-Token", "root")
        .send(&s);
    assert_eq!(r.json(), json!(true));
    assert_eq!(get_root(&format!("/v1/acl/policy/{id}")).status, 404);
    get_root("/v1/acl/policy/not-a-uuid").assert(
        500,
        "failed acl policy lookup: index error: UUID must be 36 characters",
    );
}
