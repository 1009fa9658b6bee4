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

/// A dev server listening on its serf ports, as `consul agent` does.
fn agent(node: &str, dc: &str, server: bool) -> DevServer {
    start_with(|c| {
        c.node_name = node.into();
        c.datacenter = dc.into();
        c.server = server;
        c.serf_listen = true;
        c.serf_ports = (0, 0);
    })
}

/// The serf address `/v1/agent/self` advertises (`tcp://` stripped): `LAN` or `WAN`.
fn serf_addr(s: &DevServer, pool: &str) -> String {
    let me = ok_json(get(s, "/v1/agent/self"));
    me["DebugConfig"][format!("SerfAdvertiseAddr{pool}")]
        .as_str()
        .unwrap()
        .strip_prefix("tcp://")
        .unwrap()
        .to_string()
}

/// TestAPI_AgentMembersOpts: a server of dc2 joins the first one's WAN address; the first one
/// then lists both in its WAN pool (`?wan=1`), and still only itself on the LAN.
#[test]
fn agent_members_wan_lists_the_joined_server() {
    let s1 = agent("node1", "dc1", true);
    let s2 = agent("node2", "dc2", true);
    let r = put(
        &s2,
        &format!("/v1/agent/join/{}?wan=1", serf_addr(&s1, "WAN")),
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let wan = ok_json(get(&s1, "/v1/agent/members?wan=1"));
    let mut names: Vec<&str> = wan
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["node1.dc1", "node2.dc2"]);
    let node2 = wan
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["Name"] == "node2.dc2");
    assert_eq!(node2.unwrap()["Tags"]["dc"], "dc2");
    assert_eq!(
        ok_json(get(&s1, "/v1/agent/members"))
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // The joiner learnt the other server too.
    assert_eq!(
        ok_json(get(&s2, "/v1/agent/members?wan=1"))
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// TestAPI_AgentLeave: a client agent joins the server's LAN address and leaves; it then stops
/// answering, and the server lists it with Serf's `StatusLeft` (3).
#[test]
fn agent_leave_shows_the_member_as_left() {
    let s1 = agent("node1", "dc1", true);
    let s2 = agent("node2", "dc1", false);
    let r = put(
        &s2,
        &format!("/v1/agent/join/{}", serf_addr(&s1, "LAN")),
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let members = ok_json(get(&s1, "/v1/agent/members"));
    let other = |list: &Value| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|m| m["Name"] != "node1")
            .cloned()
            .unwrap()
    };
    assert_eq!(other(&members)["Status"], 1);
    assert_eq!(other(&members)["Tags"]["role"], "node");
    let r = put(&s2, "/v1/agent/leave", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    // The leaver then shuts down, as a Consul agent does: nothing answers on its address.
    assert!(
        poll_until(Duration::from_secs(20), || s2.has_left()).is_some(),
        "the agent did not stop after leave"
    );
    assert!(std::net::TcpStream::connect(s2.addr()).is_err());
    let members = ok_json(get(&s1, "/v1/agent/members"));
    assert_eq!(members.as_array().unwrap().len(), 2);
    assert_eq!(other(&members)["Name"], "node2");
    assert_eq!(other(&members)["Status"], 3);
}

/// A join to a serf address nobody listens on fails with Serf's text for it.
#[test]
fn agent_join_of_a_closed_port_is_refused() {
    let s = agent("node1", "dc1", true);
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap();
    drop(free);
    put(&s, &format!("/v1/agent/join/{addr}"), b"").assert(
        500,
        &format!("1 error occurred:\n\t* Failed to join {addr}: dial tcp {addr}: connect: connection refused\n\n"),
    );
}

/// TestAPI_OperatorAutopilotState: the servers by node ID; this one healthy, under its name,
/// the leader and the only voter.
#[test]
fn operator_autopilot_state_is_this_healthy_server() {
    let s = start_with(|c| c.node_id = Some("0b6b2a4c-1111-2222-3333-444444444444".into()));
    let id = "0b6b2a4c-1111-2222-3333-444444444444";
    let v = ok_json(get(&s, "/v1/operator/autopilot/state"));
    let srv = &v["Servers"][id];
    assert_eq!(srv["Healthy"], true);
    assert_eq!(srv["Name"], s.node_name());
    assert_eq!(srv["Status"], "leader");
    assert_eq!(v["Leader"], id);
    assert_eq!(v["Voters"], json!([id]));
    assert_eq!(v["Servers"].as_object().unwrap().len(), 1);
}
