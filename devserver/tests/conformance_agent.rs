//! The agent's services and checks, and sessions bound to them. Each rule names where Consul
//! (1.15) implements it.

mod common;

use std::time::Duration;

use common::*;

fn checks(s: &DevServer) -> Value {
    let r = get(s, "/v1/agent/checks");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn ok(r: Response) {
    assert_eq!(r.status, 200, "{}", r.text());
}

fn ttl_check(s: &DevServer, id: &str, ttl: &str, service: Option<&str>) {
    let mut body = json!({"Name": id, "TTL": ttl});
    if let Some(svc) = service {
        body["ServiceID"] = json!(svc);
    }
    ok(put_json(s, "/v1/agent/check/register", &body));
}

/// agent.go `AddCheck`: a new check starts critical; agent_endpoint.go `agentCheckUpdate` →
/// `updateTTLCheck` sets status and output (`?note=`).
#[test]
fn ttl_check_starts_critical_and_follows_pass_warn_fail_with_note() {
    let s = start();
    ttl_check(&s, "web-ttl", "30s", None);
    let c = &checks(&s)["web-ttl"];
    assert_eq!(c["Status"], "critical");
    assert_eq!(c["Type"], "ttl");
    assert_eq!(c["Node"], s.node_name());
    for (verb, status) in [
        ("pass", "passing"),
        ("warn", "warning"),
        ("fail", "critical"),
    ] {
        ok(put(
            &s,
            &format!("/v1/agent/check/{verb}/web-ttl?note=n-{verb}"),
            b"",
        ));
        let c = &checks(&s)["web-ttl"];
        assert_eq!(
            (c["Status"].as_str(), c["Output"].as_str()),
            (Some(status), Some(&*format!("n-{verb}")))
        );
    }
    ok(put_json(
        &s,
        "/v1/agent/check/update/web-ttl",
        &json!({"Status": "passing", "Output": "fine"}),
    ));
    assert_eq!(checks(&s)["web-ttl"]["Output"], "fine");
}

/// agent_endpoint.go `AgentCheckUpdate`: an unknown status is 400 `Invalid check status`;
/// `vetCheckUpdateWithAuthorizer`: an unknown check is 404; agent.go `updateTTLCheck`: a
/// check without a TTL is 500 `CheckID "x" does not have associated TTL`.
#[test]
fn check_update_errors() {
    let s = start();
    let r = put_json(&s, "/v1/agent/check/update/x", &json!({"Status": "bogus"}));
    r.assert(400, "Invalid check status: 'bogus'");
    put(&s, "/v1/agent/check/pass/nope", b"").assert(
        404,
        "Unknown check ID \"nope\". Ensure that the check ID is passed, not the check name.",
    );
    ok(put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "tcp", "TCP": "127.0.0.1:1", "Interval": "10s"}),
    ));
    put(&s, "/v1/agent/check/pass/tcp", b"")
        .assert(500, "CheckID \"tcp\" does not have associated TTL");
    put_json(&s, "/v1/agent/check/register", &json!({"TTL": "1s"}))
        .assert(400, "Missing check name");
    put_json(&s, "/v1/agent/check/register", &json!({"Name": "x"}))
        .assert(400, "Invalid check: TTL must be > 0 for TTL checks");
    put_json(
        &s,
        "/v1/agent/check/register",
        &json!({"Name": "x", "TTL": "1s", "ServiceID": "ghost"}),
    )
    .assert(404, "ServiceID \"ghost\" does not exist");
}

/// checks/check.go `CheckTTL.run`: a TTL that passes without an update turns the check
/// critical with output `TTL expired`.
#[test]
fn ttl_check_goes_critical_when_its_ttl_passes() {
    let s = start();
    ttl_check(&s, "short", "300ms", None);
    ok(put(&s, "/v1/agent/check/pass/short", b""));
    assert_eq!(checks(&s)["short"]["Status"], "passing");
    let went = poll_until(Duration::from_secs(10), || {
        checks(&s)["short"]["Status"] == "critical"
    });
    assert!(went.is_some(), "the TTL check never expired");
    assert_eq!(checks(&s)["short"]["Output"], "TTL expired");
}

/// agent.go `AddService`: checks without an ID are `service:<id>` (`:<n>` when several);
/// `RemoveService` removes the service's checks with it.
#[test]
fn service_checks_are_named_after_the_service_and_follow_its_deregistration() {
    let s = start();
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "web", "Port": 80, "Check": {"TTL": "10s"}, "Checks": [{"TTL": "10s"}]}),
    ));
    let c = checks(&s);
    assert_eq!(keys_of(&c), vec!["service:web:1", "service:web:2"]);
    assert_eq!(c["service:web:1"]["ServiceName"], "web");
    assert_eq!(c["service:web:1"]["Name"], "Service 'web' check");
    let svc = get(&s, "/v1/agent/services").json();
    assert_eq!(svc["web"]["Port"], 80);
    assert_eq!(svc["web"]["Weights"], json!({"Passing": 1, "Warning": 1}));
    ok(put(&s, "/v1/agent/service/deregister/web", b""));
    assert_eq!(checks(&s), json!({}));
    assert_eq!(get(&s, "/v1/agent/services").json(), json!({}));
    put(&s, "/v1/agent/service/deregister/web", b"").assert(
        404,
        "Unknown service ID \"web\". Ensure that the service ID is passed, not the service name.",
    );
    get(&s, "/v1/agent/service/web").assert(404, "unknown service ID: web");
}

/// agent.go `EnableNodeMaintenance`/`EnableServiceMaintenance`: a critical check
/// `_node_maintenance` / `_service_maintenance:<id>` with the reason (or the default text) as
/// notes; agent_endpoint.go: `enable` is required and parsed with `strconv.ParseBool`.
#[test]
fn maintenance_mode_registers_a_critical_check() {
    let s = start();
    put(&s, "/v1/agent/maintenance", b"").assert(400, "Missing value for enable");
    put(&s, "/v1/agent/maintenance?enable=maybe", b"")
        .assert(400, "Invalid value for enable: \"maybe\"");
    ok(put(
        &s,
        "/v1/agent/maintenance?enable=true&reason=upgrade",
        b"",
    ));
    let c = &checks(&s)["_node_maintenance"];
    assert_eq!(
        (c["Status"].as_str(), c["Notes"].as_str()),
        (Some("critical"), Some("upgrade"))
    );
    ok(put(&s, "/v1/agent/maintenance?enable=false", b""));
    assert!(checks(&s).get("_node_maintenance").is_none());
    put(&s, "/v1/agent/service/maintenance/ghost?enable=true", b"")
        .assert(404, "No service registered with ID \"ghost\"");
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "db"}),
    ));
    ok(put(&s, "/v1/agent/service/maintenance/db?enable=true", b""));
    let c = &checks(&s)["_service_maintenance:db"];
    assert_eq!(c["ServiceID"], "db");
    assert_eq!(
        c["Notes"],
        "Maintenance mode is enabled for this service, but no reason was provided. This is a default message."
    );
}

/// state/session.go `sessionCreateTxn`: every bound check must exist and not be critical
/// (`Check '<id>' is in critical state`), node checks and service checks alike.
#[test]
fn session_bound_to_a_critical_service_check_is_refused() {
    let s = start();
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "api"}),
    ));
    ttl_check(&s, "api-ttl", "30s", Some("api"));
    let r = put_json(
        &s,
        "/v1/session/create",
        &json!({"ServiceChecks": [{"ID": "api-ttl"}]}),
    );
    r.assert(500, "apply failed: Check 'api-ttl' is in critical state");
    ok(put(&s, "/v1/agent/check/warn/api-ttl", b""));
    let id = session_create(&s, &json!({"ServiceChecks": [{"ID": "api-ttl"}]}));
    assert!(session_info(&s, &id).is_some(), "warning is fine");
}

/// state/catalog.go `ensureCheckTxn`: a check turning critical deletes the sessions bound to
/// it (through the session-checks index), with the session's behaviour and lock-delay.
#[test]
fn ttl_expiry_invalidates_the_bound_session_and_releases_its_lock() {
    let s = start();
    ttl_check(&s, "worker", "400ms", None);
    ok(put(&s, "/v1/agent/check/pass/worker", b""));
    let id = session_create(
        &s,
        &json!({"NodeChecks": ["serfHealth", "worker"], "LockDelay": "0s"}),
    );
    acquire(&s, "lock", &id, b"me").assert(200, "true");
    let gone = poll_until(Duration::from_secs(10), || session_info(&s, &id).is_none());
    assert!(gone.is_some(), "the session outlived its check");
    let e = kv_entry(&s, "lock").expect("release behaviour keeps the key");
    assert!(e.get("Session").is_none(), "lock released: {e}");
}

/// state/catalog.go `deleteCheckTxn` / `deleteServiceTxn`: deleting a check, or the service
/// that owns it, invalidates the sessions bound to it.
#[test]
fn deregistering_the_service_invalidates_sessions_bound_to_its_checks() {
    let s = start();
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "svc", "Check": {"CheckID": "svc-ttl", "TTL": "30s", "Status": "passing"}}),
    ));
    let id = session_create(&s, &json!({"ServiceChecks": [{"ID": "svc-ttl"}]}));
    ok(put(&s, "/v1/agent/service/deregister/svc", b""));
    assert!(session_info(&s, &id).is_none());
}

/// state/session.go `deleteSessionTxn` (the path every invalidation takes): a session with
/// `Behavior: delete` bound to a check that turns critical deletes its keys, and its
/// lock-delay then keeps the key from being acquired (agent/consul/kvs_endpoint.go
/// `kvsPreApply` checks `KVSLockDelay` before apply).
#[test]
fn check_failure_applies_delete_behaviour_and_lock_delay() {
    let s = start();
    ttl_check(&s, "hb", "30s", None);
    ok(put(&s, "/v1/agent/check/pass/hb", b""));
    let id = session_create(
        &s,
        &json!({"NodeChecks": ["hb"], "Behavior": "delete", "LockDelay": "30s"}),
    );
    acquire(&s, "leader", &id, b"me").assert(200, "true");
    ok(put(&s, "/v1/agent/check/fail/hb?note=stopped", b""));
    assert!(session_info(&s, &id).is_none(), "critical invalidates");
    assert!(
        kv_entry(&s, "leader").is_none(),
        "delete behaviour removes the key"
    );
    let other = session_create(&s, &json!({"NodeChecks": []}));
    acquire(&s, "leader", &other, b"you").assert(200, "false");
}

/// agent/session_endpoint.go `fixupEmptySessionChecks` keeps the old `Checks` list when
/// `NodeChecks` is not empty, and the state store enforces both; a warning check does not
/// invalidate (only `api.HealthCritical` does in `ensureCheckTxn`).
#[test]
fn legacy_checks_field_binds_too_and_warning_does_not_invalidate() {
    let s = start();
    ttl_check(&s, "legacy", "30s", None);
    ok(put(&s, "/v1/agent/check/pass/legacy", b""));
    let id = session_create(
        &s,
        &json!({"Checks": ["legacy"], "NodeChecks": ["serfHealth"]}),
    );
    ok(put(&s, "/v1/agent/check/warn/legacy", b""));
    assert!(session_info(&s, &id).is_some(), "warning keeps the session");
    ok(put(&s, "/v1/agent/check/fail/legacy", b""));
    assert!(session_info(&s, &id).is_none(), "critical ends it");
}

/// agent/agent_endpoint.go `AgentRegisterService` → `AddService` with
/// `replace-existing-checks`: checks of the service not in the new definition are removed.
#[test]
fn replace_existing_checks_drops_checks_left_out() {
    let s = start();
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "w", "Checks": [{"CheckID": "a", "TTL": "10s"}, {"CheckID": "b", "TTL": "10s"}]}),
    ));
    ok(put_json(
        &s,
        "/v1/agent/service/register?replace-existing-checks",
        &json!({"Name": "w", "Check": {"CheckID": "a", "TTL": "10s"}}),
    ));
    assert_eq!(keys_of(&checks(&s)), vec!["a"]);
}

/// agent/agent_endpoint.go `AgentSelf`: `Stats` carries the server's `consul` stats
/// (agent/consul/server.go `Stats`: `leader`, `leader_addr`, `server`), and `Member` is the
/// agent's own entry of `/v1/agent/members`.
#[test]
fn agent_self_reports_leadership_and_its_member_entry() {
    let s = start();
    let me = get(&s, "/v1/agent/self").json();
    let stats = &me["Stats"]["consul"];
    assert_eq!(
        (
            stats["leader"].as_str(),
            stats["leader_addr"].as_str(),
            stats["server"].as_str()
        ),
        (Some("true"), Some("127.0.0.1:8300"), Some("true"))
    );
    for key in [
        "Config",
        "DebugConfig",
        "Coord",
        "Member",
        "Stats",
        "Meta",
        "xDS",
    ] {
        assert!(me.get(key).is_some(), "{key} missing");
    }
    let members = get(&s, "/v1/agent/members").json();
    assert_eq!(members[0], me["Member"]);
    assert_eq!(
        get(&s, "/v1/agent/members?wan=1").json()[0]["Name"],
        format!("{}.dc1", s.node_name())
    );
    s.set_leader(false);
    let stats = get(&s, "/v1/agent/self").json()["Stats"]["consul"].clone();
    assert_eq!(
        (stats["leader"].as_str(), stats["leader_addr"].as_str()),
        (Some("false"), Some(""))
    );
}

/// agent/local/state.go `UpdateCheck`: an update that changes neither status nor output is
/// not synced to the catalog (no raft write, no index), though it re-arms the TTL; a change is.
#[test]
fn a_repeated_heartbeat_is_no_catalog_write() {
    let s = start();
    ttl_check(&s, "beat", "30s", None);
    ok(put(&s, "/v1/agent/check/pass/beat", b""));
    let global = s.current_index();
    let checks_index = get(&s, "/v1/health/state/any").index();
    ok(put(&s, "/v1/agent/check/pass/beat", b""));
    assert_eq!(s.current_index(), global);
    assert_eq!(get(&s, "/v1/health/state/any").index(), checks_index);
    ok(put(&s, "/v1/agent/check/warn/beat", b""));
    assert!(get(&s, "/v1/health/state/any").index() > checks_index);
}

/// agent/agent_endpoint.go `agentHealthService`: the local health of a service is the worst of
/// its checks, as the status code too (passing 200, warning 429, critical 503); an unknown ID
/// is 404 (`AgentHealthServiceByID`), as text with `?format=text`.
#[test]
fn local_service_health_aggregates_its_checks() {
    let s = start();
    ok(put_json(
        &s,
        "/v1/agent/service/register",
        &json!({"Name": "api", "Check": {"CheckID": "api-ttl", "TTL": "30s", "Status": "passing"}}),
    ));
    let r = get(&s, "/v1/agent/health/service/id/api");
    assert_eq!(
        (r.status, r.json()["AggregatedStatus"].clone()),
        (200, json!("passing"))
    );
    ok(put(&s, "/v1/agent/check/warn/api-ttl", b""));
    assert_eq!(get(&s, "/v1/agent/health/service/name/api").status, 429);
    ok(put(&s, "/v1/agent/check/fail/api-ttl", b""));
    let r = get(&s, "/v1/agent/health/service/id/api?format=text");
    assert_eq!((r.status, r.text()), (503, "critical".to_string()));
    get(&s, "/v1/agent/health/service/id/ghost?format=text")
        .assert(404, "ServiceId ghost not found");
}

/// agent/coordinate_endpoint.go: an update is stored for the node and read back by
/// `/v1/coordinate/node/<n>`; the WAN pool lists the server as `<node>.<dc>`.
#[test]
fn coordinates_round_trip() {
    let s = start();
    let dcs = get(&s, "/v1/coordinate/datacenters").json();
    assert_eq!(
        dcs[0]["Coordinates"][0]["Node"],
        format!("{}.dc1", s.node_name())
    );
    assert_eq!(get(&s, "/v1/coordinate/node/n1").status, 404);
    let coord = json!({"Adjustment": 0.0, "Error": 1.5, "Height": 0.0, "Vec": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]});
    ok(put_json(
        &s,
        "/v1/coordinate/update",
        &json!({"Node": "n1", "Coord": coord}),
    ));
    let got = get(&s, "/v1/coordinate/node/n1").json();
    assert_eq!(got[0]["Coord"], coord);
}
