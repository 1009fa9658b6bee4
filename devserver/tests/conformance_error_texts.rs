//! Error texts checked against Consul's source (1.15 and later): each test names the function
//! that answers with the text, and fails if the dev server's status or text differs.

mod common;

use common::*;

/// `agent/agent_endpoint.go` `AgentMembers`: the WAN pool has no segments.
#[test]
fn members_wan_with_a_segment_is_refused() {
    let s = start();
    get(&s, "/v1/agent/members?wan=1&segment=alpha")
        .assert(400, "Cannot provide a segment with wan=true");
    // `_all` is the "every segment" value, allowed with the WAN pool.
    assert_eq!(get(&s, "/v1/agent/members?wan=1&segment=_all").status, 200);
    // Only a non-empty `wan` asks for the WAN pool (`Query().Get("wan") != ""`).
    let lan = get(&s, "/v1/agent/members?wan").json();
    assert_eq!(lan[0]["Name"], s.node_name());
}

/// `agent/health_endpoint.go` `healthServiceNodes` (`getBoolQueryParam`): `?passing` is a Go
/// bool or nothing.
#[test]
fn health_service_passing_must_be_a_bool() {
    let s = start();
    get(&s, "/v1/health/service/consul?passing=maybe").assert(400, "Invalid value for ?passing");
    assert_eq!(get(&s, "/v1/health/service/consul?passing").status, 200);
    assert_eq!(
        get(&s, "/v1/health/service/consul?passing=false").status,
        200
    );
}

/// `agent/consul/state/catalog.go` `ChecksInState` does not validate the state: one no check
/// is in lists nothing.
#[test]
fn health_state_of_an_unknown_status_is_empty() {
    let s = start();
    let r = get(&s, "/v1/health/state/bogus");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!([]));
}

fn acl_server() -> DevServer {
    start_with(|c| c.acl_token = Some("root".into()))
}

/// `agent/acl_endpoint.go` `ACLTokenCRUD`, `ACLAuthMethodCRUD`, `ACLPolicyCRUD`,
/// `ACLRoleCRUD`, `ACLBindingRuleCRUD`: what each names when the path has no ID.
#[test]
fn acl_item_without_an_id_names_what_is_missing() {
    let s = acl_server();
    for (path, text) in [
        ("/v1/acl/token/", "Missing token AccessorID"),
        ("/v1/acl/auth-method/", "Missing auth method name"),
        ("/v1/acl/policy/", "Missing policy ID"),
        ("/v1/acl/role/", "Missing role ID"),
        ("/v1/acl/binding-rule/", "Missing binding rule ID"),
    ] {
        Req::get(path)
            .header("X-Consul-Token", "root")
            .send(&s)
            .assert(400, text);
    }
}

/// `agent/acl_endpoint.go` `ACLLogout`: no token is 401; `ACL.Logout`: a token no login made
/// is not the caller's to log out.
#[test]
fn acl_logout_texts() {
    let s = acl_server();
    Req::new("POST", "/v1/acl/logout")
        .send(&s)
        .assert(401, "Supplied token does not exist");
    Req::new("POST", "/v1/acl/logout")
        .header("X-Consul-Token", "root")
        .send(&s)
        .assert(403, "Permission denied");
    Req::new("POST", "/v1/acl/logout")
        .header("X-Consul-Token", "nobody")
        .send(&s)
        .assert(403, "ACL not found");
}

/// `agent/consul/prepared_query_endpoint.go` `Apply`: an invalid definition and an unknown ID
/// are RPC errors (500) with these texts.
#[test]
fn prepared_query_apply_texts() {
    let s = start();
    Req::new("POST", "/v1/query")
        .json(&json!({"Name": "q", "Service": {"Service": ""}}))
        .send(&s)
        .assert(
            500,
            "Invalid prepared query: Must provide a Service name to query",
        );
    let id = "2c0d4b8e-0000-4000-8000-000000000001";
    put_json(
        &s,
        &format!("/v1/query/{id}"),
        &json!({"Service": {"Service": "redis"}}),
    )
    .assert(
        500,
        &format!("Cannot modify non-existent prepared query: '{id}'"),
    );
    delete(&s, &format!("/v1/query/{id}")).assert(
        500,
        &format!("Cannot modify non-existent prepared query: '{id}'"),
    );
    get(&s, &format!("/v1/query/{id}")).assert(404, "Query not found");
}

fn as_root(method: &str, path: &str) -> Req {
    Req::new(method, path).header("X-Consul-Token", "root")
}

/// `agent/consul/acl_endpoint.go` `TokenDelete`, `PolicyDelete`, `RoleDelete`: deleting what
/// is not there succeeds; the anonymous token, the caller's own token and the builtin policy
/// may not be deleted; an accessor must be a UUID.
#[test]
fn acl_delete_texts() {
    let s = acl_server();
    let unknown = "0b6b2a4c-aaaa-bbbb-cccc-444444444444";
    for kind in ["token", "policy", "role"] {
        let r = as_root("DELETE", &format!("/v1/acl/{kind}/{unknown}")).send(&s);
        assert_eq!((r.status, r.json()), (200, json!(true)), "{kind}");
    }
    as_root("DELETE", "/v1/acl/token/nope")
        .send(&s)
        .assert(500, "Accessor ID is missing or an invalid UUID");
    as_root(
        "DELETE",
        "/v1/acl/token/00000000-0000-0000-0000-000000000002",
    )
    .send(&s)
    .assert(500, "Delete operation not permitted on the anonymous token");
    as_root(
        "DELETE",
        "/v1/acl/policy/00000000-0000-0000-0000-000000000001",
    )
    .send(&s)
    .assert(
        500,
        "Delete operation not permitted on the builtin global-management policy",
    );
    let me = as_root("GET", "/v1/acl/token/self").send(&s).json();
    let own = me["AccessorID"].as_str().unwrap();
    as_root("DELETE", &format!("/v1/acl/token/{own}"))
        .send(&s)
        .assert(
            500,
            "Deletion of the request's authorization token is not permitted",
        );
}

/// `agent/consul/acl_endpoint.go` `PolicySet`, `RoleSet`: the name first, then the ID's form,
/// then whether it exists; a name clash is worded one way on create and another on rename.
#[test]
fn acl_policy_and_role_set_texts() {
    let s = acl_server();
    for (kind, what) in [("policy", "Policy"), ("role", "Role")] {
        as_root("PUT", &format!("/v1/acl/{kind}"))
            .json(&json!({"Name": ""}))
            .send(&s)
            .assert(500, &format!("Invalid {what}: no Name is set"));
        as_root("PUT", &format!("/v1/acl/{kind}/nope"))
            .json(&json!({"Name": "x"}))
            .send(&s)
            .assert(500, &format!("{what} ID invalid UUID"));
        let unknown = "0b6b2a4c-aaaa-bbbb-cccc-444444444444";
        as_root("PUT", &format!("/v1/acl/{kind}/{unknown}"))
            .json(&json!({"Name": "x"}))
            .send(&s)
            .assert(500, &format!("cannot find {kind} {unknown}"));
        let a = as_root("PUT", &format!("/v1/acl/{kind}"))
            .json(&json!({"Name": "a"}))
            .send(&s)
            .json();
        as_root("PUT", &format!("/v1/acl/{kind}"))
            .json(&json!({"Name": "b"}))
            .send(&s);
        as_root("PUT", &format!("/v1/acl/{kind}"))
            .json(&json!({"Name": "a"}))
            .send(&s)
            .assert(
                500,
                &format!("Invalid {what}: A {what} with Name \"a\" already exists"),
            );
        let id = a["ID"].as_str().unwrap();
        as_root("PUT", &format!("/v1/acl/{kind}/{id}"))
            .json(&json!({"Name": "b"}))
            .send(&s)
            .assert(
                500,
                &format!("Invalid {what}: A {kind} with name \"b\" already exists"),
            );
    }
}
