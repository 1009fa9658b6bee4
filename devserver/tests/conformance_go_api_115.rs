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
