//! What Consul's own `api` package tests (Consul 1.15, `api/*_test.go`) check, pinned here since
//! their Go harness cannot run on these machines. Each test names the Go test it stands for;
//! the checks are the ones that Go test makes, restated against the HTTP answers.

mod common;

use common::*;

fn meta_server() -> DevServer {
    start_with(|c| {
        c.node_meta = vec![("somekey".into(), "somevalue".into())];
        c.node_id = Some("0b6b2a4c-1111-2222-3333-444444444444".into());
    })
}

fn ok(r: Response) {
    assert_eq!(r.status, 200, "{}", r.text());
}

fn ok_json(r: Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// TestAPI_CatalogNodes: one node, the configured NodeID, lan/wan tagged addresses, the
/// network-segment meta, ModifyIndex equal to the answer's index, index at least 2.
#[test]
fn catalog_nodes_is_the_agent_node_with_its_configured_id() {
    let s = start_with(|c| c.node_id = Some("0b6b2a4c-1111-2222-3333-444444444444".into()));
    let r = get(&s, "/v1/catalog/nodes");
    let index = r.index();
    let nodes = ok_json(r);
    assert!(index >= 2);
    let n = &nodes.as_array().unwrap()[..];
    assert_eq!(n.len(), 1);
    assert_eq!(n[0]["ID"], "0b6b2a4c-1111-2222-3333-444444444444");
    assert_eq!(n[0]["Node"], s.node_name());
    assert_eq!(n[0]["Address"], "127.0.0.1");
    assert_eq!(n[0]["Datacenter"], "dc1");
    assert_eq!(n[0]["TaggedAddresses"]["lan"], "127.0.0.1");
    assert_eq!(n[0]["TaggedAddresses"]["wan"], "127.0.0.1");
    // `consul-version` since 1.16.1 (GH-17754); the dev server emulates the current release.
    let version = baton_devserver::ConsulVersion::CURRENT.to_string();
    assert_eq!(
        n[0]["Meta"],
        json!({"consul-network-segment": "", "consul-version": version})
    );
    assert_eq!(n[0]["ModifyIndex"], index);
    // agent/self reports the same ID.
    let me = ok_json(get(&s, "/v1/agent/self"));
    assert_eq!(me["Config"]["NodeID"], n[0]["ID"]);
}

/// TestAPI_CatalogNodes_MetaFilter: the configured `node_meta` is on the agent's node, and a
/// `node-meta` filter finds it; a filter nothing matches gives an empty list with an index.
#[test]
fn catalog_nodes_meta_filter_uses_the_configured_node_meta() {
    let s = meta_server();
    let r = get(&s, "/v1/catalog/nodes?node-meta=somekey:somevalue");
    assert!(r.index() > 0);
    let nodes = ok_json(r);
    assert_eq!(nodes[0]["Meta"]["somekey"], "somevalue");
    assert!(nodes[0]["TaggedAddresses"]["wan"].is_string());
    assert_eq!(nodes[0]["Datacenter"], "dc1");
    let r = get(&s, "/v1/catalog/nodes?node-meta=nope:nope");
    assert!(r.index() > 0);
    assert_eq!(ok_json(r), json!([]));
    assert_eq!(
        ok_json(get(&s, "/v1/agent/self"))["Meta"]["somekey"],
        "somevalue"
    );
}

/// TestAPI_CatalogServices_NodeMetaFilter, TestAPI_CatalogService_NodeMetaFilter,
/// TestAPI_CatalogServices_FilterExpr_NodeMeta (`NodeMeta.somekey == somevalue` as a filter).
#[test]
fn catalog_services_meta_filters_use_the_configured_node_meta() {
    let s = meta_server();
    let r = get(&s, "/v1/catalog/services?node-meta=somekey:somevalue");
    assert!(r.index() > 0);
    assert!(ok_json(r).get("consul").is_some());
    let r = get(&s, "/v1/catalog/services?node-meta=nope:nope");
    assert!(r.index() > 0);
    assert_eq!(ok_json(r), json!({}));
    let list = ok_json(get(
        &s,
        "/v1/catalog/service/consul?node-meta=somekey:somevalue",
    ));
    assert_eq!(list[0]["Datacenter"], "dc1");
    assert_eq!(list[0]["NodeMeta"]["somekey"], "somevalue");
    let q = "/v1/catalog/service/consul?filter=NodeMeta.somekey%20%3D%3D%20somevalue";
    assert_eq!(ok_json(get(&s, q)).as_array().unwrap().len(), 1);
    let q = "/v1/catalog/service/consul?filter=NodeMeta.somekey%20%3D%3D%20other";
    assert_eq!(ok_json(get(&s, q)), json!([]));
}

/// TestAPI_HealthChecks_NodeMetaFilter, TestAPI_HealthService_NodeMetaFilter,
/// TestAPI_HealthState_NodeMetaFilter.
#[test]
fn health_meta_filters_use_the_configured_node_meta() {
    let s = meta_server();
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "foo", "Check": {"TTL": "15s"}}),
    ));
    let r = get(&s, "/v1/health/checks/foo?node-meta=somekey:somevalue");
    assert!(r.index() > 0);
    assert_eq!(ok_json(r).as_array().unwrap().len(), 1);
    let e = ok_json(get(
        &s,
        "/v1/health/service/consul?passing&node-meta=somekey:somevalue",
    ));
    assert!(e[0]["Node"]["TaggedAddresses"]["wan"].is_string());
    assert_eq!(e[0]["Node"]["Datacenter"], "dc1");
    let r = get(&s, "/v1/health/state/any?node-meta=somekey:somevalue");
    assert!(r.index() > 0);
    assert!(!ok_json(r).as_array().unwrap().is_empty());
    let none = ok_json(get(&s, "/v1/health/state/any?node-meta=nope:nope"));
    assert_eq!(none, json!([]));
}

fn proxy_registration(node: &str) -> Value {
    json!({
        "Datacenter": "dc1", "Node": node, "Address": "192.168.10.10", "SkipNodeUpdate": true,
        "Service": {
            "Kind": "connect-proxy", "ID": "web-proxy1", "Service": "web-proxy", "Port": 8001,
            "Proxy": {
                "DestinationServiceName": "web", "DestinationServiceID": "web1",
                "LocalServiceAddress": "127.0.0.2", "LocalServicePort": 8080,
                "Upstreams": [
                    {"DestinationName": "db", "LocalBindPort": 9191,
                     "Config": {"connect_timeout_ms": 1000}},
                    {"DestinationType": "prepared_query", "DestinationName": "geo-cache",
                     "LocalBindPort": 8181}
                ]
            }
        }
    })
}

/// TestAPI_CatalogNode: a proxy registered on the agent's node with `SkipNodeUpdate` comes back
/// with its proxy config as sent (the opaque upstream `Config` keeps its keys), beside the
/// `consul` service; the node keeps its own address.
#[test]
fn catalog_node_returns_a_proxy_config_as_registered() {
    let s = start();
    let reg = proxy_registration(&s.node_name());
    ok_json(put_json(&s, "/v1/catalog/register", &reg));
    let r = get(&s, &format!("/v1/catalog/node/{}", s.node_name()));
    assert!(r.index() > 0);
    let info = ok_json(r);
    let services = info["Services"].as_object().unwrap();
    assert_eq!(services.len(), 2, "{info}");
    assert!(info["Node"]["TaggedAddresses"]["wan"].is_string());
    assert_eq!(info["Node"]["Datacenter"], "dc1");
    assert_eq!(info["Node"]["Address"], "127.0.0.1");
    assert_eq!(services["web-proxy1"]["Proxy"], reg["Service"]["Proxy"]);
}

/// TestAPI_CatalogNodeServiceList: `/v1/catalog/node-services/<node>` lists the same services
/// as a list; an unknown node is a null node with no services.
#[test]
fn catalog_node_service_list_lists_the_node_services() {
    let s = start();
    let reg = proxy_registration(&s.node_name());
    ok_json(put_json(&s, "/v1/catalog/register", &reg));
    let r = get(&s, &format!("/v1/catalog/node-services/{}", s.node_name()));
    assert!(r.index() > 0);
    let info = ok_json(r);
    let list = info["Services"].as_array().unwrap();
    assert_eq!(list.len(), 2, "{info}");
    assert_eq!(info["Node"]["Node"], s.node_name());
    let proxy = list.iter().find(|v| v["ID"] == "web-proxy1").unwrap();
    assert_eq!(proxy["Proxy"], reg["Service"]["Proxy"]);
    assert_eq!(
        ok_json(get(&s, "/v1/catalog/node-services/nope")),
        json!({"Node": null, "Services": []})
    );
}

/// TestAPI_CatalogServiceCached: with `?cached` the first read is a miss, the next one a hit
/// of age 0 (`X-Cache`, `Age`), still with the datacenter and an index.
#[test]
fn catalog_service_cached_hits_after_the_first_read() {
    let s = start();
    let first = get(&s, "/v1/catalog/service/consul?cached");
    assert_eq!(first.header("X-Cache"), Some("MISS"));
    assert!(first.index() > 0);
    assert_eq!(ok_json(first)[0]["Datacenter"], "dc1");
    let second = get(&s, "/v1/catalog/service/consul?cached");
    assert_eq!(second.header("X-Cache"), Some("HIT"));
    assert_eq!(second.header("Age"), Some("0"));
    // Without `?cached` there is no cache header.
    assert_eq!(
        get(&s, "/v1/catalog/service/consul").header("X-Cache"),
        None
    );
    let h = get(&s, "/v1/health/service/consul?cached");
    assert_eq!(h.header("X-Cache"), Some("MISS"));
}

/// TestAPI_AgentServiceSocket: a service registered with a `SocketPath` and no address shows
/// the path and an empty address.
#[test]
fn agent_service_socket_path_is_kept() {
    let s = start();
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "foo1", "Port": 8000, "Address": "192.168.0.42"}),
    ));
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "foo2", "SocketPath": "/tmp/foo2.sock"}),
    ));
    let services = ok_json(get(&s, "/v1/agent/services"));
    assert_eq!(services["foo1"]["Address"], "192.168.0.42");
    assert_eq!(services["foo2"]["Address"], "");
    assert_eq!(services["foo2"]["SocketPath"], "/tmp/foo2.sock");
    assert!(services["foo1"].get("SocketPath").is_none());
    let list = ok_json(get(&s, "/v1/catalog/service/foo2"));
    assert_eq!(list[0]["ServiceSocketPath"], "/tmp/foo2.sock");
}

/// TestAPI_AgentJoin: joining the agent's own serf LAN address (from
/// `DebugConfig.SerfAdvertiseAddrLAN`, `tcp://` stripped) succeeds.
#[test]
fn agent_join_of_its_own_serf_address_succeeds() {
    let s = start_with(|c| c.serf_ports = (18311, 18312));
    let me = ok_json(get(&s, "/v1/agent/self"));
    let lan = me["DebugConfig"]["SerfAdvertiseAddrLAN"].as_str().unwrap();
    assert_eq!(lan, "tcp://127.0.0.1:18311");
    let addr = lan.strip_prefix("tcp://").unwrap();
    let r = put(&s, &format!("/v1/agent/join/{addr}"), b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let r = put(&s, "/v1/agent/join/127.0.0.1:18312?wan=1", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    // Another address has no agent behind it.
    let r = put(&s, "/v1/agent/join/127.0.0.1:1", b"");
    assert_eq!(r.status, 500, "{}", r.text());
}

/// TestAPI_AgentMonitor, TestAPI_AgentMonitorJSON: the first line of the stream is a log line
/// at INFO or DEBUG (`[INFO]`), or, with `logjson`, a JSON object.
#[test]
fn agent_monitor_answers_a_log_line_plain_or_json() {
    let s = start();
    let r = get(&s, "/v1/agent/monitor?loglevel=debug");
    assert_eq!(r.status, 200, "{}", r.text());
    let text = r.text();
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("[INFO]") || first.contains("[DEBUG]"),
        "{first}"
    );
    let r = get(&s, "/v1/agent/monitor?loglevel=debug&logjson");
    let text = r.text();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(first.is_object());
    assert_eq!(first["@level"], "info");
}

/// TestAPI_AgentMetrics: the gauges include `consul.runtime.alloc_bytes`.
#[test]
fn agent_metrics_include_runtime_gauges() {
    let s = start();
    let m = ok_json(get(&s, "/v1/agent/metrics"));
    let names: Vec<&str> = m["Gauges"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["Name"].as_str())
        .collect();
    assert!(names.contains(&"consul.runtime.alloc_bytes"), "{names:?}");
}

/// TestAPI_OperatorRaftGetConfiguration: one server, the leader, a voter;
/// TestAPI_OperatorRaftRemovePeerByAddress: an unknown address is named in the error.
#[test]
fn operator_raft_configuration_is_one_leader_voter() {
    let s = start();
    let c = ok_json(get(&s, "/v1/operator/raft/configuration"));
    let servers = c["Servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0]["Leader"], true);
    assert_eq!(servers[0]["Voter"], true);
    assert_eq!(servers[0]["Node"], s.node_name());
    assert_eq!(c["Index"], 0);
    // py-consul's test_raft_transfer_leader_no_other_peers: no peer to hand leadership to.
    let r = Req::new("POST", "/v1/operator/raft/transfer-leader").send(&s);
    assert_eq!(r.status, 500, "{}", r.text());
    let r = Req::new("POST", "/v1/operator/raft/transfer-leader?id=nope").send(&s);
    assert_eq!(r.status, 500, "{}", r.text());
    let r = Req::delete("/v1/operator/raft/peer?address=nope").send(&s);
    assert_eq!(r.status, 500);
    assert!(r
        .text()
        .contains("address \"nope\" was not found in the Raft configuration"));
}

/// TestAPI_OperatorAutopilotGetSetConfiguration, TestAPI_OperatorAutopilotCASConfiguration:
/// `CleanupDeadServers` starts true; a PUT stores false; a CAS with a stale `ModifyIndex`
/// answers false and changes nothing, with the current one true.
#[test]
fn operator_autopilot_configuration_set_and_cas() {
    let s = start();
    let c = ok_json(get(&s, "/v1/operator/autopilot/configuration"));
    assert_eq!(c["CleanupDeadServers"], true);
    let idx = c["ModifyIndex"].as_u64().unwrap();
    let stale = put_json(
        &s,
        &format!("/v1/operator/autopilot/configuration?cas={}", idx - 1),
        &json!({"CleanupDeadServers": false}),
    );
    assert_eq!(ok_json(stale), json!(false));
    assert_eq!(
        ok_json(get(&s, "/v1/operator/autopilot/configuration"))["CleanupDeadServers"],
        true
    );
    let fresh = put_json(
        &s,
        &format!("/v1/operator/autopilot/configuration?cas={idx}"),
        &json!({"CleanupDeadServers": false}),
    );
    assert_eq!(ok_json(fresh), json!(true));
    let c = ok_json(get(&s, "/v1/operator/autopilot/configuration"));
    assert_eq!(c["CleanupDeadServers"], false);
    assert!(c["ModifyIndex"].as_u64().unwrap() > idx);
    // A plain PUT (AutopilotSetConfiguration) stores too.
    ok(put_json(
        &s,
        "/v1/operator/autopilot/configuration",
        &json!({"CleanupDeadServers": true}),
    ));
    let c = ok_json(get(&s, "/v1/operator/autopilot/configuration"));
    assert_eq!(c["CleanupDeadServers"], true);
}

/// TestAPI_OperatorAutopilotServerHealth: one healthy server named as the node.
#[test]
fn operator_autopilot_health_is_one_healthy_server() {
    let s = start();
    let h = ok_json(get(&s, "/v1/operator/autopilot/health"));
    let servers = h["Servers"].as_array().unwrap();
    assert_eq!(servers.len(), 1);
    assert_eq!(servers[0]["Healthy"], true);
    assert_eq!(servers[0]["Name"], s.node_name());
}

/// TestAPI_OperatorUsage: 4 services, 5 instances (with `consul`), one Connect proxy and one
/// native instance, 3 billable.
#[test]
fn operator_usage_counts_the_catalog() {
    let s = start();
    for svc in [
        json!({"ID": "redis1", "Service": "redis", "Port": 8000}),
        json!({"ID": "redis2", "Service": "redis", "Port": 8001}),
        json!({"Kind": "connect-proxy", "ID": "proxy1", "Service": "proxy", "Port": 9000,
               "Proxy": {"DestinationServiceName": "foo"}}),
        json!({"ID": "web-native", "Service": "web", "Port": 8002, "Connect": {"Native": true}}),
    ] {
        let reg = json!({"Datacenter": "dc1", "Node": "foobar", "Address": "192.168.10.10",
                         "Service": svc});
        ok_json(put_json(&s, "/v1/catalog/register", &reg));
    }
    let u = ok_json(get(&s, "/v1/operator/usage"));
    assert_eq!(u["KnownLeader"], true);
    let dc = &u["Usage"]["dc1"];
    assert_eq!(dc["Services"], 4);
    assert_eq!(dc["ServiceInstances"], 5);
    assert_eq!(dc["BillableServiceInstances"], 3);
    let kinds = dc["ConnectServiceInstances"].as_object().unwrap();
    assert_eq!(kinds["connect-native"], 1);
    assert_eq!(kinds["connect-proxy"], 1);
    for k in [
        "api-gateway",
        "ingress-gateway",
        "mesh-gateway",
        "terminating-gateway",
    ] {
        assert_eq!(kinds[k], 0, "{k}");
    }
}

fn acl_server() -> DevServer {
    start_with(|c| c.acl_token = Some("root".into()))
}

fn as_root(method: &str, path: &str, body: Option<&Value>) -> Req {
    let r = Req::new(method, path).header("X-Consul-Token", "root");
    match body {
        Some(b) => r.json(b),
        None => r,
    }
}

/// TestAPI_ACLReplication: replication is neither enabled nor running.
#[test]
fn acl_replication_is_off() {
    let s = acl_server();
    let r = as_root("GET", "/v1/acl/replication", None).send(&s);
    let v = ok_json(r);
    assert_eq!(v["Enabled"], false);
    assert_eq!(v["Running"], false);
    // Without ACLs there is no ACL system to report on.
    let plain = start();
    assert_eq!(get(&plain, "/v1/acl/replication").status, 401);
}

/// TestAPI_ACLPolicy_CreateUpdate: an update without `Datacenters` clears them, keeps the
/// CreateIndex and moves the ModifyIndex; a read then equals the update's answer.
#[test]
fn acl_policy_update_replaces_datacenters() {
    let s = acl_server();
    let created = ok_json(
        as_root(
            "PUT",
            "/v1/acl/policy",
            Some(&json!({"Name": "test-policy", "Description": "d",
                          "Rules": "node_prefix \"\" { policy = \"read\" }",
                          "Datacenters": ["dc1"]})),
        )
        .send(&s),
    );
    let id = created["ID"].as_str().unwrap();
    let mut read = ok_json(as_root("GET", &format!("/v1/acl/policy/{id}"), None).send(&s));
    assert_eq!(read, created);
    read["Rules"] = json!(format!(
        "{} service_prefix \"\" {{ policy = \"read\" }}",
        read["Rules"].as_str().unwrap()
    ));
    read["Datacenters"] = Value::Null;
    let updated = ok_json(as_root("PUT", &format!("/v1/acl/policy/{id}"), Some(&read)).send(&s));
    assert_eq!(updated["Rules"], read["Rules"]);
    assert_eq!(updated["CreateIndex"], created["CreateIndex"]);
    assert_ne!(updated["ModifyIndex"], created["ModifyIndex"]);
    assert!(updated.get("Datacenters").is_none(), "{updated}");
    let again = ok_json(as_root("GET", &format!("/v1/acl/policy/{id}"), None).send(&s));
    assert_eq!(again, updated);
}

/// TestAPI_ACLPolicy_List: the three created and the global-management policy, each entry
/// with the created policy's name, description, indexes, hash and datacenters.
#[test]
fn acl_policy_list_has_the_created_and_the_builtin_policy() {
    let s = acl_server();
    let mut created = Vec::new();
    for (name, rules, dcs) in [
        (
            "policy1",
            "node_prefix \"\" { policy = \"read\" }",
            json!(["dc1"]),
        ),
        (
            "policy2",
            "service \"app\" { policy = \"write\" }",
            json!(["dc1", "dc2"]),
        ),
        ("policy3", "acl = \"read\"", Value::Null),
    ] {
        let body = json!({"Name": name, "Description": format!("{name} description"),
                          "Rules": rules, "Datacenters": dcs});
        created.push(ok_json(
            as_root("PUT", "/v1/acl/policy", Some(&body)).send(&s),
        ));
    }
    let r = as_root("GET", "/v1/acl/policies", None).send(&s);
    assert!(r.index() > 0);
    assert_eq!(r.header("X-Consul-KnownLeader"), Some("true"));
    let list = ok_json(r);
    let list = list.as_array().unwrap();
    // Three created, `global-management` and (from 1.14.9/1.15.5/1.16.1, so in the current
    // release) `builtin/global-read-only`.
    assert_eq!(list.len(), 5);
    for c in &created {
        let e = list.iter().find(|e| e["ID"] == c["ID"]).unwrap();
        for f in [
            "Name",
            "Description",
            "CreateIndex",
            "ModifyIndex",
            "Hash",
            "Datacenters",
        ] {
            assert_eq!(e.get(f), c.get(f), "{f}");
        }
    }
    assert!(list
        .iter()
        .any(|e| e["ID"] == "00000000-0000-0000-0000-000000000001"));
}

/// TestAPI_ACLToken_CreateUpdate: links named twice (by ID, then again by name) are kept
/// once, each with both ID and name; the SecretID and CreateIndex stay.
#[test]
fn acl_token_update_keeps_each_policy_link_once() {
    let s = acl_server();
    let mut p = Vec::new();
    for name in ["one", "two", "three"] {
        let body = json!({"Name": name, "Rules": "acl = \"read\""});
        p.push(ok_json(
            as_root("PUT", "/v1/acl/policy", Some(&body)).send(&s),
        ));
    }
    let created = ok_json(
        as_root(
            "PUT",
            "/v1/acl/token",
            Some(&json!({"Description": "token created",
                          "Policies": [{"ID": p[0]["ID"]}, {"Name": "three"}]})),
        )
        .send(&s),
    );
    let id = created["AccessorID"].as_str().unwrap();
    let mut read = ok_json(as_root("GET", &format!("/v1/acl/token/{id}"), None).send(&s));
    assert_eq!(read, created);
    let links = read["Policies"].as_array_mut().unwrap();
    links.push(json!({"ID": p[1]["ID"]}));
    links.push(json!({"Name": "three"}));
    let updated = ok_json(as_root("PUT", &format!("/v1/acl/token/{id}"), Some(&read)).send(&s));
    let mut got: Vec<(String, String)> = updated["Policies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["ID"].as_str().unwrap().to_string(),
                l["Name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<(String, String)> = p
        .iter()
        .map(|x| {
            (
                x["ID"].as_str().unwrap().to_string(),
                x["Name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(updated["SecretID"], created["SecretID"]);
    assert_eq!(updated["CreateIndex"], created["CreateIndex"]);
    assert_ne!(updated["ModifyIndex"], created["ModifyIndex"]);
    let again = ok_json(as_root("GET", &format!("/v1/acl/token/{id}"), None).send(&s));
    assert_eq!(again, updated);
}

/// TestAPI_ACLToken_ListFiltered: `?policy=`, `?role=` and `?servicename=` narrow the list.
#[test]
fn acl_token_list_filters_by_policy_role_and_service() {
    let s = acl_server();
    let pol = ok_json(
        as_root(
            "PUT",
            "/v1/acl/policy",
            Some(&json!({"Name": "p", "Rules": "acl = \"read\""})),
        )
        .send(&s),
    );
    let role = ok_json(
        as_root(
            "PUT",
            "/v1/acl/role",
            Some(&json!({"Name": "r", "Policies": [{"ID": pol["ID"]}]})),
        )
        .send(&s),
    );
    let by_policy = ok_json(
        as_root(
            "PUT",
            "/v1/acl/token",
            Some(&json!({"Description": "by policy", "Policies": [{"ID": pol["ID"]}]})),
        )
        .send(&s),
    );
    let by_role = ok_json(
        as_root(
            "PUT",
            "/v1/acl/token",
            Some(&json!({"Description": "by role", "Roles": [{"ID": role["ID"]}]})),
        )
        .send(&s),
    );
    let by_service = ok_json(
        as_root(
            "PUT",
            "/v1/acl/token",
            Some(&json!({"Description": "by service",
                          "ServiceIdentities": [{"ServiceName": "web"}]})),
        )
        .send(&s),
    );
    let only = |q: &str| -> Vec<Value> {
        ok_json(as_root("GET", &format!("/v1/acl/tokens?{q}"), None).send(&s))
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["AccessorID"].clone())
            .collect()
    };
    assert_eq!(
        only(&format!("policy={}", pol["ID"].as_str().unwrap())),
        vec![by_policy["AccessorID"].clone()]
    );
    assert_eq!(
        only(&format!("role={}", role["ID"].as_str().unwrap())),
        vec![by_role["AccessorID"].clone()]
    );
    assert_eq!(
        only("servicename=web"),
        vec![by_service["AccessorID"].clone()]
    );
    assert!(only("servicename=nope").is_empty());
}

/// TestAPI_ClientTxn: a txn mixing KV, node, service and check gets. Without a session the
/// lock fails ("missing session") and so does the get of the unlocked key ("doesn't exist"),
/// with no results; with one, eight results in op order: the KV pair twice, the node as
/// registered (ID, tagged addresses, meta), the service (with empty `Proxy` and `Connect`),
/// and the four checks with their definitions. A read-only txn reads the agent's own node.
#[test]
fn txn_reads_nodes_services_and_checks_beside_kv() {
    let s = start_with(|c| c.node_id = Some("0b6b2a4c-1111-2222-3333-444444444444".into()));
    let node_id = "2b6b2a4c-1111-2222-3333-444444444444";
    let reg = json!({
        "ID": node_id, "Node": "foo", "Address": "2.2.2.2",
        "TaggedAddresses": {"wlan": "2.2.2.2"}, "NodeMeta": {"n1": "v1"},
        "Service": {"ID": "foo1", "Service": "foo", "Address": "2.2.2.2", "Port": 12345,
                    "TaggedAddresses": {"wlan": {"Address": "2.2.2.2", "Port": 12345}},
                    "Tags": ["tag1", "tag2"], "Meta": {"s1": "v1"}},
        "Checks": [
            {"CheckID": "bar", "Status": "critical",
             "Definition": {"TCP": "1.1.1.1", "Interval": "5s", "Timeout": "10s",
                            "DeregisterCriticalServiceAfter": "20s"}},
            {"CheckID": "baz", "Status": "passing",
             "Definition": {"TCP": "2.2.2.2", "Interval": "40s", "Timeout": "1m20s",
                            "DeregisterCriticalServiceAfter": "2m40s"}},
            {"CheckID": "bor", "Status": "critical", "Type": "udp",
             "Definition": {"UDP": "1.1.1.1", "Interval": "5s", "Timeout": "10s",
                            "DeregisterCriticalServiceAfter": "20s"}},
            {"CheckID": "bur", "Status": "passing", "Type": "udp",
             "Definition": {"UDP": "2.2.2.2", "Interval": "5s", "Timeout": "10s",
                            "DeregisterCriticalServiceAfter": "20s"}}
        ]
    });
    ok_json(put_json(&s, "/v1/catalog/register", &reg));
    let sid = session_create(&s, &json!({}));
    let mut ops = json!([
        {"KV": {"Verb": "lock", "Key": "txn-key", "Value": b64(b"test")}},
        {"KV": {"Verb": "get", "Key": "txn-key"}},
        {"Node": {"Verb": "get", "Node": {"Node": "foo"}}},
        {"Service": {"Verb": "get", "Node": "foo", "Service": {"ID": "foo1"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "bar"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "baz"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "bor"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "bur"}}}
    ]);
    let r = txn(&s, &ops);
    assert_eq!(r.status, 409, "{}", r.text());
    let v = r.json();
    assert!(v["Results"].is_null(), "{v}");
    let errors = v["Errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{v}");
    assert_eq!(errors[0]["OpIndex"], 0);
    assert!(errors[0]["What"]
        .as_str()
        .unwrap()
        .contains("missing session"));
    assert!(errors[1]["What"]
        .as_str()
        .unwrap()
        .contains("doesn't exist"));

    ops[0]["KV"]["Session"] = json!(sid);
    let v = ok_json(txn(&s, &ops));
    let res = v["Results"].as_array().unwrap();
    assert_eq!(res.len(), 8, "{v}");
    assert!(v["Errors"].is_null());
    assert_eq!(res[0]["KV"]["Session"], sid);
    assert_eq!(res[0]["KV"]["LockIndex"], 1);
    assert!(res[0]["KV"]["Value"].is_null());
    assert_eq!(res[1]["KV"]["Value"], b64(b"test"));
    let n = &res[2]["Node"];
    assert_eq!(n["ID"], node_id);
    assert_eq!(n["Node"], "foo");
    assert_eq!(n["Address"], "2.2.2.2");
    assert_eq!(n["Datacenter"], "dc1");
    assert_eq!(n["TaggedAddresses"], json!({"wlan": "2.2.2.2"}));
    assert_eq!(n["Meta"], json!({"n1": "v1"}));
    assert_eq!(n["CreateIndex"], n["ModifyIndex"]);
    let sv = &res[3]["Service"];
    assert_eq!(sv["ID"], "foo1");
    assert_eq!(sv["Service"], "foo");
    assert_eq!(sv["Port"], 12345);
    assert_eq!(sv["Tags"], json!(["tag1", "tag2"]));
    assert_eq!(sv["Meta"], json!({"s1": "v1"}));
    assert_eq!(
        sv["TaggedAddresses"]["wlan"],
        json!({"Address": "2.2.2.2", "Port": 12345})
    );
    assert_eq!(sv["Weights"], json!({"Passing": 1, "Warning": 1}));
    assert!(sv["Proxy"].is_object() && sv["Connect"].is_object(), "{sv}");
    for (i, (id, status, def_key, addr, interval)) in [
        ("bar", "critical", "TCP", "1.1.1.1", "5s"),
        ("baz", "passing", "TCP", "2.2.2.2", "40s"),
        ("bor", "critical", "UDP", "1.1.1.1", "5s"),
        ("bur", "passing", "UDP", "2.2.2.2", "5s"),
    ]
    .into_iter()
    .enumerate()
    {
        let c = &res[4 + i]["Check"];
        assert_eq!(c["Node"], "foo");
        assert_eq!(c["CheckID"], id);
        assert_eq!(c["Status"], status);
        assert_eq!(c["Definition"][def_key], addr);
        assert_eq!(c["Definition"]["Interval"], interval);
        assert!(c["ServiceTags"].is_null(), "{c}");
    }

    // Read-only: the key and the agent's node.
    let ro = json!([
        {"KV": {"Verb": "get", "Key": "txn-key"}},
        {"Node": {"Verb": "get", "Node": {"ID": "0b6b2a4c-1111-2222-3333-444444444444",
                                          "Node": s.node_name()}}}
    ]);
    let v = ok_json(txn(&s, &ro));
    let res = v["Results"].as_array().unwrap();
    assert_eq!(res[0]["KV"]["Session"], sid);
    let n = &res[1]["Node"];
    assert_eq!(n["ID"], "0b6b2a4c-1111-2222-3333-444444444444");
    assert_eq!(n["Address"], "127.0.0.1");
    assert_eq!(n["TaggedAddresses"]["lan"], "127.0.0.1");
    let version = baton_devserver::ConsulVersion::CURRENT.to_string();
    assert_eq!(
        n["Meta"],
        json!({"consul-network-segment": "", "consul-version": version})
    );
}

/// TestAPI_ClientTxnWrite (the write half): node, service and check `set` in one txn, then a
/// failing op rolls all of them back.
#[test]
fn txn_writes_nodes_services_and_checks_atomically() {
    let s = start();
    let ops = json!([
        {"KV": {"Verb": "set", "Key": "k1"}},
        {"Node": {"Verb": "set", "Node": {"Node": "n1", "Address": "1.1.1.1",
                                          "TaggedAddresses": {"wlan": "1.1.1.1"},
                                          "Meta": {"n1": "v1"}}}},
        {"Service": {"Verb": "set", "Node": "n1",
                     "Service": {"ID": "s1", "Service": "s1", "Port": 12345,
                                 "Address": "1.1.1.1", "Tags": ["tag1", "tag2"]}}},
        {"Check": {"Verb": "set", "Check": {"Node": "n1", "CheckID": "c1", "ServiceID": "s1",
                                            "Status": "passing", "Type": "tcp",
                                            "Definition": {"TCP": "1.1.1.1", "Interval": "40s"}}}}
    ]);
    let v = ok_json(txn(&s, &ops));
    let res = v["Results"].as_array().unwrap();
    assert_eq!(res.len(), 4, "{v}");
    assert_eq!(res[1]["Node"]["Meta"], json!({"n1": "v1"}));
    assert_eq!(res[2]["Service"]["Port"], 12345);
    assert_eq!(res[3]["Check"]["ServiceName"], "s1");
    assert_eq!(res[3]["Check"]["ServiceTags"], json!(["tag1", "tag2"]));
    assert_eq!(
        get(&s, "/v1/catalog/node/n1").json()["Node"]["Address"],
        "1.1.1.1"
    );

    // A failing op (a service on a node that does not exist) undoes the node written before it.
    let ops = json!([
        {"Node": {"Verb": "set", "Node": {"Node": "n2", "Address": "2.2.2.2"}}},
        {"Service": {"Verb": "set", "Node": "nope", "Service": {"ID": "s2", "Service": "s2"}}}
    ]);
    let r = txn(&s, &ops);
    assert_eq!(r.status, 409, "{}", r.text());
    let v = r.json();
    assert_eq!(v["Errors"][0]["OpIndex"], 1);
    assert_eq!(v["Errors"][0]["What"], "node \"nope\" doesn't exist");
    assert!(get(&s, "/v1/catalog/node/n2").json().is_null());
    // Deleting works in a txn too.
    let del = json!([{"Node": {"Verb": "delete", "Node": {"Node": "n1"}}}]);
    ok_json(txn(&s, &del));
    assert!(get(&s, "/v1/catalog/node/n1").json().is_null());
}

/// TestAPI_PreparedQuery: create (with `NodeMeta` and `ServiceMeta` filters), read back (the
/// same definition), list, update, execute by ID and by name (the healthy instance, with its
/// node's tagged addresses and datacenter), a critical check hides an instance unless its ID
/// is in `IgnoreCheckIDs`, delete.
#[test]
fn prepared_query_lifecycle_and_execution() {
    let s = start();
    let reg = json!({"Datacenter": "dc1", "Node": "foobar", "Address": "192.168.10.10",
                     "TaggedAddresses": {"wan": "127.0.0.1"}, "NodeMeta": {"somekey": "somevalue"},
                     "Service": {"ID": "redis1", "Service": "redis", "Tags": ["master", "v1"],
                                 "Meta": {"redis-version": "4.0"}, "Port": 8000}});
    ok_json(put_json(&s, "/v1/catalog/register", &reg));
    let def = json!({"Name": "test",
                     "Service": {"Service": "redis", "NodeMeta": {"somekey": "somevalue"},
                                 "ServiceMeta": {"redis-version": "4.0"}}});
    let created = ok_json(Req::new("POST", "/v1/query").json(&def).send(&s));
    let id = created["ID"].as_str().unwrap().to_string();
    let read = ok_json(get(&s, &format!("/v1/query/{id}")));
    assert_eq!(read.as_array().unwrap().len(), 1);
    assert_eq!(read[0]["ID"], id);
    assert_eq!(read[0]["Name"], "test");
    assert_eq!(read[0]["Service"]["Service"], "redis");
    assert_eq!(
        read[0]["Service"]["NodeMeta"],
        json!({"somekey": "somevalue"})
    );
    assert_eq!(
        read[0]["Service"]["ServiceMeta"],
        json!({"redis-version": "4.0"})
    );
    assert!(read[0]["Service"]["IgnoreCheckIDs"].is_null());
    let list = ok_json(get(&s, "/v1/query"));
    assert_eq!(list, read);
    let mut upd = read[0].clone();
    upd["Name"] = json!("my-query");
    ok(put_json(&s, &format!("/v1/query/{id}"), &upd));
    assert_eq!(
        ok_json(get(&s, &format!("/v1/query/{id}")))[0]["Name"],
        "my-query"
    );
    for by in [id.as_str(), "my-query"] {
        let r = ok_json(get(&s, &format!("/v1/query/{by}/execute")));
        let nodes = r["Nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), 1, "{r}");
        assert_eq!(nodes[0]["Node"]["Node"], "foobar");
        assert_eq!(nodes[0]["Node"]["TaggedAddresses"]["wan"], "127.0.0.1");
        assert_eq!(nodes[0]["Node"]["Datacenter"], "dc1");
    }
    let mut reg2 = reg.clone();
    reg2["Node"] = json!("failingnode");
    reg2["Check"] = json!({"Node": "failingnode", "ServiceID": "redis1", "Name": "failingcheck",
                           "Status": "critical"});
    ok_json(put_json(&s, "/v1/catalog/register", &reg2));
    let r = ok_json(get(&s, &format!("/v1/query/{id}/execute")));
    assert_eq!(r["Nodes"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["Nodes"][0]["Node"]["Node"], "foobar");
    upd["Service"]["IgnoreCheckIDs"] = json!(["failingcheck"]);
    ok(put_json(&s, &format!("/v1/query/{id}"), &upd));
    let r = ok_json(get(&s, &format!("/v1/query/{id}/execute")));
    assert_eq!(r["Nodes"].as_array().unwrap().len(), 2, "{r}");
    ok(Req::delete(&format!("/v1/query/{id}")).send(&s));
    assert_eq!(ok_json(get(&s, "/v1/query")), json!([]));
    assert_eq!(get(&s, &format!("/v1/query/{id}")).status, 404);
}
