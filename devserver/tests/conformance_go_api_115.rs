//! Consul 1.15's official `api` package tests (issue 43 item 2), ported assertion by assertion,
//! against an in-process dev server emulating the release the test was written for.
//!
//! `TestAPI_ACLPolicy_List` (api/acl_test.go) lists three created policies and the builtin
//! ones; `TestAPI_CatalogServices_FilterExpr_NodeMeta` (api/catalog_test.go) filters
//! `/v1/catalog/services` on a node meta key with go-bexpr's index selector.

mod common;

use baton_devserver::ConsulVersion;
use common::*;

fn ok_json(r: Response) -> Value {
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn acl_server(version: &str) -> DevServer {
    start_with(|c| {
        c.acl_token = Some("root".into());
        c.consul_version = ConsulVersion::parse(version).unwrap();
    })
}

fn as_root(method: &str, path: &str, body: Option<&Value>) -> Req {
    let r = Req::new(method, path).header("X-Consul-Token", "root");
    match body {
        Some(b) => r.json(b),
        None => r,
    }
}

/// TestAPI_ACLPolicy_List as of 1.15.5: three created policies, `global-management` and
/// `builtin/global-read-only` (five in all); each created one listed with its name,
/// description, indexes, hash and datacenters.
#[test]
fn acl_policy_list_has_both_builtin_policies_when_emulating_1_15_10() {
    let s = acl_server("1.15.10");
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
    assert_ne!(r.index(), 0);
    assert_eq!(r.header("X-Consul-KnownLeader"), Some("true"));
    let list = ok_json(r);
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 5, "{list:?}");
    for c in &created {
        let e = list.iter().find(|e| e["ID"] == c["ID"]).unwrap();
        for f in ["Name", "Description", "CreateIndex", "ModifyIndex", "Hash"] {
            assert_eq!(e[f], c[f], "{f}");
        }
        assert_eq!(e["Datacenters"], c["Datacenters"]);
    }
    let by_id = |id: &str| list.iter().find(|e| e["ID"] == id).cloned();
    assert_eq!(
        by_id("00000000-0000-0000-0000-000000000001").unwrap()["Name"],
        "global-management"
    );
    let read_only = by_id("00000000-0000-0000-0000-000000000002").unwrap();
    assert_eq!(read_only["Name"], "builtin/global-read-only");
    // The builtin policy cannot be deleted, and a token linked to it reads but cannot write.
    as_root(
        "DELETE",
        "/v1/acl/policy/00000000-0000-0000-0000-000000000002",
        None,
    )
    .send(&s)
    .assert_prefix(
        500,
        "Delete operation not permitted on the builtin builtin/global-read-only policy",
    );
    let token = ok_json(
        as_root(
            "PUT",
            "/v1/acl/token",
            Some(&json!({"Policies": [{"Name": "builtin/global-read-only"}]})),
        )
        .send(&s),
    );
    let secret = token["SecretID"].as_str().unwrap();
    let r = Req::get("/v1/kv/x")
        .header("X-Consul-Token", secret)
        .send(&s);
    assert_eq!(r.status, 404, "{}", r.text());
    Req::put("/v1/kv/x")
        .header("X-Consul-Token", secret)
        .body("1")
        .send(&s)
        .assert_prefix(403, "Permission denied");
}

/// The read-only policy came with 1.14.9, 1.15.5 and 1.16.1: 1.15.4 and 1.16.0 list only
/// `global-management` (TestAPI_ACLPolicy_List of those releases expects four).
#[test]
fn acl_policy_list_has_no_read_only_policy_before_it_came() {
    for version in ["1.15.4", "1.16.0", "1.14.8"] {
        let s = acl_server(version);
        let list = ok_json(as_root("GET", "/v1/acl/policies", None).send(&s));
        let ids: Vec<&str> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["ID"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["00000000-0000-0000-0000-000000000001"], "{version}");
    }
}

/// TestAPI_CatalogServices_FilterExpr_NodeMeta: `NodeMeta["synthetic"] == "true"` (go-bexpr's
/// index selector) keeps the services of nodes with that meta; the dotted form is the same.
#[test]
fn catalog_services_filter_on_a_node_meta_index_selector() {
    let s = start();
    for (node, synthetic, service) in [("ext", "false", "outside"), ("syn", "true", "inside")] {
        let reg = json!({"Node": node, "Address": "10.0.0.9", "NodeMeta": {"synthetic": synthetic},
                         "Service": {"Service": service, "Port": 80}});
        assert_eq!(put_json(&s, "/v1/catalog/register", &reg).status, 200);
    }
    for (filter, want_inside, want_outside) in [
        (r#"NodeMeta["synthetic"] == "true""#, true, false),
        (r#"NodeMeta["synthetic"] == false"#, false, true),
        ("NodeMeta.synthetic != true", false, true),
        (
            r#""synthetic" in NodeMeta and NodeMeta["absent"] is empty"#,
            true,
            true,
        ),
    ] {
        let q = percent_encoding::utf8_percent_encode(filter, percent_encoding::NON_ALPHANUMERIC);
        let r = get(&s, &format!("/v1/catalog/services?filter={q}"));
        let services = ok_json(r);
        assert_eq!(
            services.get("inside").is_some(),
            want_inside,
            "{filter}: {services}"
        );
        assert_eq!(
            services.get("outside").is_some(),
            want_outside,
            "{filter}: {services}"
        );
    }
}

/// TestAPI_ACLToken_ListFiltered (api/acl_test.go): three tokens with service identities
/// s1, s2 and both; `GET /v1/acl/tokens?servicename=` (what `TokenListFiltered` sends for
/// `ACLTokenFilterOptions.ServiceName`) lists the two naming each service, an empty JSON
/// list for a service no token names, and two filters at once are refused with the state
/// store's "can only filter by one of policy, role, serviceName, or methodName at a time".
#[test]
fn acl_token_list_filtered_by_service_name() {
    let s = acl_server("1.15.10");
    for (desc, services) in [
        ("token1", vec!["s1"]),
        ("token2", vec!["s2"]),
        ("token3", vec!["s1", "s2"]),
    ] {
        let ids: Vec<Value> = services.iter().map(|n| json!({"ServiceName": n})).collect();
        let body = json!({"Description": desc, "ServiceIdentities": ids});
        let created = ok_json(as_root("PUT", "/v1/acl/token", Some(&body)).send(&s));
        assert_ne!(created["AccessorID"], "", "{created}");
        assert_ne!(created["SecretID"], "", "{created}");
    }
    for (service, want) in [
        ("s1", vec!["token1", "token3"]),
        ("s2", vec!["token2", "token3"]),
        ("nothing", vec![]),
    ] {
        let r = as_root(
            "GET",
            &format!("/v1/acl/tokens?servicename={service}"),
            None,
        )
        .send(&s);
        assert_ne!(r.index(), 0, "{service}");
        assert_eq!(r.header("X-Consul-KnownLeader"), Some("true"));
        let list = ok_json(r);
        // Go decodes `null` into a nil slice, which `require.Empty` accepts but the two
        // listings' `require.Len` do not; Consul itself always answers a JSON array.
        let list = list
            .as_array()
            .unwrap_or_else(|| panic!("{service}: {list}"));
        let mut found: Vec<&str> = list
            .iter()
            .map(|t| t["Description"].as_str().unwrap())
            .collect();
        found.sort_unstable();
        assert_eq!(found, want, "{service}");
    }
    let r = as_root("GET", "/v1/acl/tokens?servicename=s&authmethod=a", None).send(&s);
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(
        r.text().contains("can only filter by one of"),
        "{}",
        r.text()
    );
}

/// The `Definition` the api package's `HealthCheckDefinition.UnmarshalJSON` decodes: each
/// duration as Go's `time.Duration` string (that type reads the string back) and no other
/// field set (an empty `Header` map would not equal the expected nil one).
fn check_definition(addr_field: &str, addr: &str, durations: [&str; 3]) -> Value {
    json!({addr_field: addr, "Interval": durations[0], "Timeout": durations[1],
           "DeregisterCriticalServiceAfter": durations[2]})
}

/// What `encoding/json` leaves in a Go struct decoded from `v`: the value of each field of
/// `fields` (matched case-insensitively, as Go does), the rest left at their zero values
/// (`zero`). Comparing that to the expected struct is what `require.Equal` does.
fn go_decode(v: &Value, fields: &[(&str, Value)]) -> Value {
    let obj = v.as_object().unwrap();
    let mut out = serde_json::Map::new();
    for (name, zero) in fields {
        let got = obj
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .filter(|v| !v.is_null())
            .unwrap_or_else(|| zero.clone());
        out.insert((*name).into(), got);
    }
    Value::Object(out)
}

/// `api.CatalogService`'s fields and zero values (Consul 1.15).
fn catalog_service_fields() -> Vec<(&'static str, Value)> {
    let s = || json!("");
    let n = Value::Null;
    vec![
        ("ID", s()),
        ("Node", s()),
        ("Address", s()),
        ("Datacenter", s()),
        ("TaggedAddresses", n.clone()),
        ("NodeMeta", n.clone()),
        ("ServiceID", s()),
        ("ServiceName", s()),
        ("ServiceAddress", s()),
        ("ServiceTaggedAddresses", n.clone()),
        ("ServiceTags", n.clone()),
        ("ServiceMeta", n.clone()),
        ("ServicePort", json!(0)),
        ("ServiceWeights", json!({"Passing": 0, "Warning": 0})),
        ("ServiceEnableTagOverride", json!(false)),
        ("ServiceProxy", n.clone()),
        ("CreateIndex", json!(0)),
        ("Checks", n.clone()),
        ("ModifyIndex", json!(0)),
        ("Namespace", s()),
        ("Partition", s()),
    ]
}

/// `api.Node`'s fields and zero values (Consul 1.15).
fn node_fields() -> Vec<(&'static str, Value)> {
    vec![
        ("ID", json!("")),
        ("Node", json!("")),
        ("Address", json!("")),
        ("Datacenter", json!("")),
        ("TaggedAddresses", Value::Null),
        ("Meta", Value::Null),
        ("CreateIndex", json!(0)),
        ("ModifyIndex", json!(0)),
        ("Partition", json!("")),
        ("PeerName", json!("")),
    ]
}

/// `api.HealthCheck`'s fields and zero values (Consul 1.15); `Definition` compared apart.
fn health_check_fields() -> Vec<(&'static str, Value)> {
    let s = || json!("");
    vec![
        ("Node", s()),
        ("CheckID", s()),
        ("Name", s()),
        ("Status", s()),
        ("Notes", s()),
        ("Output", s()),
        ("ServiceID", s()),
        ("ServiceName", s()),
        ("ServiceTags", Value::Null),
        ("Type", s()),
        ("Namespace", s()),
        ("Partition", s()),
        ("ExposedPort", json!(0)),
        ("PeerName", s()),
        ("CreateIndex", json!(0)),
        ("ModifyIndex", json!(0)),
    ]
}

/// `api.HealthCheckDefinition` as decoded: the fields the test sets, anything else sent must
/// decode to its zero value (`Header` nil, `TLSSkipVerify` false, strings empty).
fn definition_as_decoded(d: &Value) -> Value {
    let s = || json!("");
    go_decode(
        d,
        &[
            ("HTTP", s()),
            ("Header", Value::Null),
            ("Method", s()),
            ("Body", s()),
            ("TLSServerName", s()),
            ("TLSSkipVerify", json!(false)),
            ("TCP", s()),
            ("UDP", s()),
            ("GRPC", s()),
            ("GRPCUseTLS", json!(false)),
            ("Interval", s()),
            ("Timeout", s()),
            ("DeregisterCriticalServiceAfter", s()),
        ],
    )
}

/// TestAPI_ClientTxn (api/txn_test.go): a catalog register of node `foo` with service `foo1`
/// and four checks (TCP `bar`/`baz`, UDP `bor`/`bur`, durations in their definitions); a txn
/// of a lock without a session, a KV get and catalog gets fails with exactly two errors; with
/// the session it answers eight results equal to the expected structs once decoded as the
/// api package decodes them (all four checks registered at one index and never modified);
/// then a read-only txn reads the agent's own node with its tagged addresses and meta.
fn client_txn(version: &str, expect_consul_version_meta: bool) {
    let s = start_with(|c| {
        c.consul_version = ConsulVersion::parse(version).unwrap();
        c.node_id = Some("5e4d6c3b-2a19-4f08-8e7d-6c5b4a392817".into());
    });
    let node_id = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0";
    let check = |id: &str, status: &str, def: Value, ty: Option<&str>| {
        let mut c = json!({"CheckID": id, "Status": status, "Definition": def});
        if let Some(t) = ty {
            c["Type"] = json!(t);
        }
        c
    };
    // The api package sends every definition field; durations as Go duration strings.
    let sent_def = |field: &str, addr: &str, d: [&str; 3]| {
        let mut v = json!({"HTTP": "", "Header": null, "Method": "", "Body": "",
                           "TLSServerName": "", "TLSSkipVerify": false, "TCP": "", "UDP": "",
                           "GRPC": "", "GRPCUseTLS": false});
        for (k, x) in check_definition(field, addr, d).as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    };
    let reg = json!({
        "ID": node_id, "Node": "foo", "Address": "2.2.2.2",
        "Service": {"ID": "foo1", "Service": "foo"},
        "Checks": [
            check("bar", "critical", sent_def("TCP", "1.1.1.1", ["5s", "10s", "20s"]), None),
            check("baz", "passing", sent_def("TCP", "2.2.2.2", ["40s", "1m20s", "2m40s"]), None),
            check("bor", "critical", sent_def("UDP", "1.1.1.1", ["5s", "10s", "20s"]), Some("udp")),
            check("bur", "passing", sent_def("UDP", "2.2.2.2", ["5s", "10s", "20s"]), Some("udp")),
        ],
    });
    let r = put_json(&s, "/v1/catalog/register", &reg);
    assert_eq!(r.status, 200, "{}", r.text());
    let node = ok_json(get(&s, "/v1/catalog/node/foo"));
    assert_eq!(node["Node"]["ID"], node_id);
    let sid = session_create(&s, &json!({"Checks": []}));

    let key = "test/txn-key";
    let value_b64 = "dGVzdA=="; // "test"
    let mut ops = json!([
        {"KV": {"Verb": "lock", "Key": key, "Value": value_b64}},
        {"KV": {"Verb": "get", "Key": key}},
        {"Node": {"Verb": "get", "Node": {"Node": "foo"}}},
        {"Service": {"Verb": "get", "Node": "foo", "Service": {"ID": "foo1"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "bar"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "baz"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "bor"}}},
        {"Check": {"Verb": "get", "Check": {"Node": "foo", "CheckID": "bur"}}},
    ]);
    let r = txn(&s, &ops);
    assert_eq!(r.status, 409, "{}", r.text());
    let ret = r.json();
    let errors = ret["Errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{ret}");
    assert!(ret["Results"].as_array().is_none_or(Vec::is_empty), "{ret}");
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
    let ret = ok_json(txn(&s, &ops));
    assert!(ret["Errors"].as_array().is_none_or(Vec::is_empty), "{ret}");
    let results = ret["Results"].as_array().unwrap();
    assert_eq!(results.len(), 8, "{ret}");
    let kv = |i: usize| &results[i]["KV"];
    for (i, value) in [(0, Value::Null), (1, json!(value_b64))] {
        assert_eq!(kv(i)["Key"], key);
        assert_eq!(kv(i)["Session"], sid.as_str());
        assert_eq!(kv(i)["LockIndex"], 1);
        assert_eq!(kv(i)["Value"], value, "result {i}");
        assert_eq!(kv(i).get("Partition").cloned().unwrap_or(json!("")), "");
    }
    let n = go_decode(&results[2]["Node"], &node_fields());
    let create = n["CreateIndex"].clone();
    assert_eq!(
        n,
        json!({"ID": node_id, "Node": "foo", "Address": "2.2.2.2", "Datacenter": "dc1",
               "TaggedAddresses": null, "Meta": null, "CreateIndex": create,
               "ModifyIndex": create, "Partition": "", "PeerName": ""})
    );
    let svc = go_decode(&results[3]["Service"], &catalog_service_fields());
    let create = svc["CreateIndex"].clone();
    let mut want = go_decode(&json!({}), &catalog_service_fields());
    want["ID"] = json!("foo1");
    want["CreateIndex"] = create.clone();
    want["ModifyIndex"] = create;
    assert_eq!(svc, want, "the service result as api.CatalogService");
    let check_index = results[4]["Check"]["CreateIndex"].clone();
    for (i, (id, status, field, addr, durations, ty)) in [
        (
            "bar",
            "critical",
            "TCP",
            "1.1.1.1",
            ["5s", "10s", "20s"],
            "tcp",
        ),
        (
            "baz",
            "passing",
            "TCP",
            "2.2.2.2",
            ["40s", "1m20s", "2m40s"],
            "tcp",
        ),
        (
            "bor",
            "critical",
            "UDP",
            "1.1.1.1",
            ["5s", "10s", "20s"],
            "udp",
        ),
        (
            "bur",
            "passing",
            "UDP",
            "2.2.2.2",
            ["5s", "10s", "20s"],
            "udp",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let got = &results[4 + i]["Check"];
        let mut want = go_decode(&json!({}), &health_check_fields());
        for (k, v) in [
            ("Node", json!("foo")),
            ("CheckID", json!(id)),
            ("Status", json!(status)),
            ("Type", json!(ty)),
            ("CreateIndex", check_index.clone()),
            ("ModifyIndex", check_index.clone()),
        ] {
            want[k] = v;
        }
        assert_eq!(go_decode(got, &health_check_fields()), want, "check {id}");
        assert_eq!(
            definition_as_decoded(&got["Definition"]),
            definition_as_decoded(&check_definition(field, addr, durations)),
            "check {id}'s definition"
        );
    }

    // A read-only txn reading the agent's own node.
    let agent = ok_json(get(&s, "/v1/agent/self"));
    let (name, id) = (
        agent["Config"]["NodeName"].as_str().unwrap().to_string(),
        agent["Config"]["NodeID"].as_str().unwrap().to_string(),
    );
    assert_eq!(id, "5e4d6c3b-2a19-4f08-8e7d-6c5b4a392817");
    let ops = json!([
        {"KV": {"Verb": "get", "Key": key}},
        {"Node": {"Verb": "get", "Node": {"ID": id, "Node": name}}},
    ]);
    let ret = ok_json(txn(&s, &ops));
    let results = ret["Results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{ret}");
    assert_eq!(results[0]["KV"]["Value"], value_b64);
    assert_eq!(results[0]["KV"]["Session"], sid.as_str());
    let n = go_decode(&results[1]["Node"], &node_fields());
    let bind = "127.0.0.1";
    let mut meta = json!({"consul-network-segment": ""});
    if expect_consul_version_meta {
        meta["consul-version"] = json!(version);
    }
    assert_eq!(
        n,
        json!({"ID": id, "Node": name, "Address": "127.0.0.1", "Datacenter": "dc1",
               "TaggedAddresses": {"lan": bind, "lan_ipv4": bind, "wan": bind, "wan_ipv4": bind},
               "Meta": meta, "CreateIndex": n["CreateIndex"], "ModifyIndex": n["ModifyIndex"],
               "Partition": "", "PeerName": ""})
    );
    // The regular KV read agrees.
    let e = kv_entry(&s, key).unwrap();
    assert_eq!(e["LockIndex"], 1);
    assert_eq!(e["Session"], sid.as_str());
}

/// TestAPI_ClientTxn of 1.15: the agent's node has no `consul-version` meta (that came with
/// 1.16.1, GH-17754).
#[test]
fn client_txn_when_emulating_1_15_10() {
    client_txn("1.15.10", false);
}

/// TestAPI_ClientTxn from 1.16.1: the agent's node carries `consul-version` (GH-17754).
#[test]
fn client_txn_when_emulating_1_16_1() {
    client_txn("1.16.1", true);
}

/// 1.16.0 came before `consul-version` node meta.
#[test]
fn client_txn_when_emulating_1_16_0() {
    client_txn("1.16.0", false);
}

/// TestAPI_AgentMembersOpts as of 1.15.5: `MembersOpts.Filter` (sent as `?filter=`, GH-18223)
/// narrows the member list (the test's WAN pool of two down to one). Here one server's pools:
/// a filter on a member's tags keeps or drops it, on the LAN and the WAN pool alike.
#[test]
fn agent_members_are_filtered_by_a_bexpr_filter() {
    let s = start();
    for wan in ["", "&wan=1"] {
        for (filter, want) in [
            (r#"Tags["dc"] == "dc1""#, 1),
            (r#"Tags.dc == "dc2""#, 0),
            (r#"Status == 1 and Tags["role"] != "bogus""#, 1),
        ] {
            let q =
                percent_encoding::utf8_percent_encode(filter, percent_encoding::NON_ALPHANUMERIC);
            let members = ok_json(get(&s, &format!("/v1/agent/members?filter={q}{wan}")));
            let n = members.as_array().map_or(0, Vec::len);
            assert_eq!(n, want, "{filter} {wan}: {members}");
        }
    }
    // Before the filter came (1.15.4), the parameter is ignored: every member is listed.
    let old = start_with(|c| c.consul_version = ConsulVersion::parse("1.15.4").unwrap());
    let q = percent_encoding::utf8_percent_encode(
        r#"Tags.dc == "dc2""#,
        percent_encoding::NON_ALPHANUMERIC,
    );
    let members = ok_json(get(&old, &format!("/v1/agent/members?filter={q}")));
    assert_eq!(members.as_array().map_or(0, Vec::len), 1, "{members}");
}
