//! Fault controls, on the handle and over `/_devserver/`: pause, latency, restart, no-leader,
//! session invalidation, node failure (also via catalog deregistration), request counts and
//! the per-client connection cap (devserver-api.md; consul-semantics.md §1, §6.2, §6.4).

mod common;

use std::thread;
use std::time::Duration;

use common::*;

/// How long a request must stay unanswered to count as "hanging".
const HANG: Duration = Duration::from_millis(300);

#[test]
fn pause_makes_requests_hang_until_resume() {
    let s = start();
    kv_set(&s, "k", b"v");
    s.pause();
    let p = Req::get("/v1/kv/k").spawn(&s);
    thread::sleep(HANG);
    assert!(p.still_waiting(), "a paused server answered");
    s.resume();
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!(r.status, 200);
    assert_eq!(entry_value(&r.json()[0]), b"v");
}

#[test]
fn pause_holds_a_request_on_an_open_connection() {
    let s = start();
    let mut c = Conn::open(s.addr()).unwrap();
    let r = c.send(&Req::get("/v1/status/leader")).unwrap();
    assert_eq!(r.status, 200);
    s.pause();
    c.write_req(&Req::get("/v1/status/leader")).unwrap();
    let early = c.read_response(HANG, false);
    assert!(
        matches!(&early, Err(e) if is_timeout(e)),
        "answered while paused: {early:?}"
    );
    s.resume();
    // The response may have been partially buffered by the failed attempt; open anew if so.
    let r = Req::get("/v1/status/leader").send(&s);
    assert_eq!(r.status, 200);
}

#[test]
fn pause_and_resume_over_http_control_path_which_answers_while_paused() {
    let s = start();
    let r = put(&s, "/_devserver/pause", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json();
    let p = Req::get("/v1/status/leader").spawn(&s);
    let st = get(&s, "/_devserver/status").json();
    assert_eq!(st["paused"], true, "{st}");
    thread::sleep(HANG);
    assert!(p.still_waiting());
    assert_eq!(put(&s, "/_devserver/resume", b"").status, 200);
    assert_eq!(p.expect(Duration::from_secs(10)).0.status, 200);
    assert_eq!(get(&s, "/_devserver/status").json()["paused"], false);
}

#[test]
fn latency_delays_every_v1_request_and_can_be_cleared() {
    let s = start();
    s.set_latency(Duration::from_millis(1500));
    let p = Req::get("/v1/status/leader").spawn(&s);
    thread::sleep(HANG * 2);
    assert!(p.still_waiting(), "answered before the added latency");
    let (r, at) = p.expect(Duration::from_secs(10));
    assert_eq!(r.status, 200);
    assert!(at - p.started >= Duration::from_millis(1450));
    s.set_latency(Duration::ZERO);
    let p = Req::get("/v1/status/leader").spawn(&s);
    assert_eq!(p.expect(Duration::from_secs(5)).0.status, 200);
}

#[test]
fn latency_over_http_control_is_reported_in_status() {
    let s = start();
    assert_eq!(put(&s, "/_devserver/latency?d=1500ms", b"").status, 200);
    assert_eq!(get(&s, "/_devserver/status").json()["latency_ms"], 1500);
    let p = Req::put("/v1/kv/k").body("v").spawn(&s);
    thread::sleep(HANG * 2);
    assert!(p.still_waiting());
    assert_eq!(p.expect(Duration::from_secs(10)).0.json(), json!(true));
    assert_eq!(put(&s, "/_devserver/latency?d=0s", b"").status, 200);
    assert_eq!(get(&s, "/_devserver/status").json()["latency_ms"], 0);
}

#[test]
fn restart_loses_all_state_keeps_the_index_and_the_port() {
    let s = start();
    let addr = s.addr();
    for i in 0..30 {
        kv_set(&s, &format!("k{i}"), b"v");
    }
    let sid = session_create(&s, &json!({}));
    acquire(&s, "lock", &sid, b"v").assert(200, "true");
    let old_index = s.current_index();
    s.restart();
    assert_eq!(s.addr(), addr);
    assert!(kv_entry(&s, "k0").is_none());
    assert_eq!(get(&s, "/v1/kv/?keys").json(), json!([]));
    assert_eq!(get(&s, "/v1/session/list").json(), json!([]));
    put(&s, &format!("/v1/session/renew/{sid}"), b"")
        .assert(404, &format!("Session id '{sid}' not found"));
    assert!(
        s.current_index() >= old_index,
        "the index went back across the restart: {} after {old_index}",
        s.current_index()
    );
    kv_set(&s, "fresh", b"v");
    assert!(
        modify_index(&s, "fresh") > old_index,
        "a write after the restart got index {} <= {old_index} from before it",
        modify_index(&s, "fresh")
    );
}

/// A fencing token (a lock's ModifyIndex) taken after a restart is above one taken before it,
/// over the HTTP control path as other processes use it; `/_devserver/status` agrees.
#[test]
fn restart_keeps_indexes_increasing_for_fencing_tokens() {
    let s = start();
    for i in 0..5 {
        kv_set(&s, &format!("k{i}"), b"v");
    }
    let sid = session_create(&s, &json!({}));
    acquire(&s, "lock", &sid, b"v").assert(200, "true");
    let before = modify_index(&s, "lock");
    let status_before = get(&s, "/_devserver/status").json()["index"]
        .as_u64()
        .unwrap();
    assert_eq!(put(&s, "/_devserver/restart", b"").status, 200);
    let status_after = get(&s, "/_devserver/status").json()["index"]
        .as_u64()
        .unwrap();
    assert!(
        status_after >= status_before,
        "status index {status_after} after the restart, {status_before} before"
    );
    // The status names the serving process (here, the test's own).
    assert_eq!(
        get(&s, "/_devserver/status").json()["pid"],
        json!(std::process::id())
    );
    let sid = session_create(&s, &json!({}));
    acquire(&s, "lock", &sid, b"v").assert(200, "true");
    let after = modify_index(&s, "lock");
    assert!(
        after > before,
        "fencing token {after} after the restart, {before} before"
    );
    // The session's own index and the catalog's are past the old ones too.
    let r = get(&s, &format!("/v1/session/info/{sid}"));
    assert!(r.json()[0]["CreateIndex"].as_u64().unwrap() > before);
    assert!(get(&s, "/v1/catalog/nodes").index() > before);
}

#[test]
fn restart_drops_open_connections() {
    let s = start();
    let mut idle = Conn::open(s.addr()).unwrap();
    assert_eq!(
        idle.send(&Req::get("/v1/status/leader")).unwrap().status,
        200
    );
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let blocked = Req::get(&format!("/v1/kv/k?index={m}&wait=30s"))
        .timeout(Duration::from_secs(40))
        .spawn(&s);
    thread::sleep(HANG);
    assert!(blocked.still_waiting());
    s.restart();
    assert!(
        idle.closed_within(Duration::from_secs(5)),
        "idle keep-alive connection survived the restart"
    );
    match blocked.wait(Duration::from_secs(5)) {
        Some((Err(_), _)) => {}
        Some((Ok(r), _)) => panic!(
            "blocking query answered across a restart: {} {}",
            r.status,
            r.text()
        ),
        None => panic!("blocking query connection not dropped by restart"),
    }
}

/// A connection that has carried nothing yet is dropped too, as by an agent
/// process that restarts: a request on its way in must not reach the new state
/// (a blocking query from an old index would wait on it for its whole wait).
#[test]
fn restart_drops_connections_that_carried_nothing_yet() {
    let s = start();
    let mut fresh = Conn::open(s.addr()).unwrap();
    assert!(
        poll_until(Duration::from_secs(5), || s.open_connections() == 1).is_some(),
        "the server never took the connection in"
    );
    s.restart();
    assert!(
        fresh.closed_within(Duration::from_secs(5)),
        "a connection with no request yet survived the restart"
    );
}

#[test]
fn restart_over_http_control_path() {
    let s = start();
    kv_set(&s, "k", b"v");
    assert_eq!(put(&s, "/_devserver/restart", b"").status, 200);
    assert!(
        poll_until(Duration::from_secs(5), || Req::get("/v1/kv/k")
            .try_send_to(s.addr())
            .is_ok_and(|r| r.status == 404))
        .is_some(),
        "state survived an HTTP-triggered restart"
    );
}

#[test]
fn no_leader_gives_500_no_cluster_leader_and_empty_status_leader() {
    let s = start();
    kv_set(&s, "k", b"v");
    let sid = session_create(&s, &json!({}));
    let leader = get(&s, "/v1/status/leader");
    assert_eq!(leader.status, 200);
    let addr = leader.json();
    assert!(addr.as_str().is_some_and(|a| !a.is_empty()), "{addr}");
    s.set_leader(false);
    for req in [
        Req::get("/v1/kv/k"),
        Req::get("/v1/kv/?recurse"),
        Req::put("/v1/kv/k").body("w"),
        Req::delete("/v1/kv/k"),
        Req::put("/v1/session/create"),
        Req::put(&format!("/v1/session/renew/{sid}")),
        Req::put(&format!("/v1/session/destroy/{sid}")),
        Req::get("/v1/session/list"),
        Req::get(&format!("/v1/session/info/{sid}")),
        Req::put("/v1/txn").json(&json!([{"KV": {"Verb": "get-or-empty", "Key": "k"}}])),
    ] {
        let what = format!("{} {}", req.method, req.path);
        let r = req.send(&s);
        assert_eq!(
            (r.status, r.text().as_str()),
            (500, "No cluster leader"),
            "{what}"
        );
    }
    let r = get(&s, "/v1/status/leader");
    assert_eq!((r.status, r.json()), (200, json!("")));
    assert_eq!(get(&s, "/_devserver/status").json()["leader"], false);
    s.set_leader(true);
    assert_eq!(
        entry_value(&kv_entry(&s, "k").unwrap()),
        b"v",
        "nothing applied"
    );
    assert!(session_info(&s, &sid).is_some());
    assert_eq!(get(&s, "/v1/status/leader").json(), addr);
}

#[test]
fn no_leader_over_http_control_path() {
    let s = start();
    assert_eq!(put(&s, "/_devserver/leader?present=false", b"").status, 200);
    get(&s, "/v1/kv/k").assert(500, "No cluster leader");
    assert_eq!(get(&s, "/v1/status/leader").json(), json!(""));
    assert_eq!(put(&s, "/_devserver/leader?present=true", b"").status, 200);
    assert_eq!(get(&s, "/v1/kv/k").status, 404);
}

#[test]
fn invalidate_session_releases_keys_and_applies_lock_delay() {
    let s = start();
    let sid = session_with_delay(&s, "30s");
    put(
        &s,
        &format!("/v1/kv/l?acquire={sid}&flags={LOCK_FLAG}"),
        b"v",
    )
    .assert(200, "true");
    let m = modify_index(&s, "l");
    assert!(s.invalidate_session(&sid));
    assert!(session_info(&s, &sid).is_none());
    let e = kv_entry(&s, "l").unwrap();
    assert!(e.get("Session").is_none());
    assert_eq!(entry_value(&e), b"v");
    assert!(e["ModifyIndex"].as_u64().unwrap() > m);
    let other = session_with_delay(&s, "0s");
    acquire(&s, "l", &other, b"x").assert(200, "false");
    assert!(!s.invalidate_session(&sid), "already gone");
    assert!(!s.invalidate_session("00000000-0000-0000-0000-000000000000"));
}

#[test]
fn invalidate_session_over_http_control_path() {
    let s = start();
    let sid = session_with_delay(&s, "30s");
    acquire(&s, "l", &sid, b"v").assert(200, "true");
    let r = put(&s, &format!("/_devserver/session/invalidate/{sid}"), b"");
    assert_eq!((r.status, r.json()), (200, json!(true)));
    assert!(session_info(&s, &sid).is_none());
    let other = session_with_delay(&s, "0s");
    acquire(&s, "l", &other, b"x").assert(200, "false");
    let r = put(&s, &format!("/_devserver/session/invalidate/{sid}"), b"");
    assert_eq!((r.status, r.json()), (200, json!(false)));
}

#[test]
fn fail_node_invalidates_serf_health_sessions_and_blocks_new_ones_until_heal() {
    let s = start();
    let checked = session_with_delay_and_checks(&s, "30s", json!(["serfHealth"]));
    let unchecked = session_with_delay_and_checks(&s, "0s", json!([]));
    acquire(&s, "l", &checked, b"v").assert(200, "true");
    s.fail_node();
    assert!(
        session_info(&s, &checked).is_none(),
        "serfHealth critical invalidates"
    );
    assert!(
        session_info(&s, &unchecked).is_some(),
        "no checks, nothing to fail"
    );
    assert!(kv_entry(&s, "l").unwrap().get("Session").is_none());
    acquire(&s, "l", &unchecked, b"x").assert(200, "false");
    put_json(&s, "/v1/session/create", &json!({}))
        .assert(500, "apply failed: Check 'serfHealth' is in critical state");
    s.heal_node();
    let r = put_json(&s, "/v1/session/create", &json!({}));
    assert_eq!(r.status, 200, "{}", r.text());
}

fn session_with_delay_and_checks(s: &DevServer, delay: &str, checks: Value) -> String {
    session_create(s, &json!({"LockDelay": delay, "NodeChecks": checks}))
}

#[test]
fn fail_and_heal_node_over_http_control_path() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    assert_eq!(put(&s, "/_devserver/node/fail", b"").status, 200);
    assert!(session_info(&s, &sid).is_none());
    assert_eq!(put_json(&s, "/v1/session/create", &json!({})).status, 500);
    assert_eq!(put(&s, "/_devserver/node/heal", b"").status, 200);
    assert_eq!(put_json(&s, "/v1/session/create", &json!({})).status, 200);
}

#[test]
fn catalog_deregister_of_a_node_invalidates_its_sessions_with_lock_delay() {
    let s = start();
    let r = put_json(
        &s,
        "/v1/catalog/register",
        &json!({"Node": "worker", "Address": "10.0.0.9",
                "Check": {"CheckID": "serfHealth", "Status": "passing"}}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let remote = session_create(&s, &json!({"Node": "worker", "LockDelay": "30s"}));
    let local = session_with_delay(&s, "0s");
    acquire(&s, "w", &remote, b"v").assert(200, "true");
    let r = put_json(&s, "/v1/catalog/deregister", &json!({"Node": "worker"}));
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(session_info(&s, &remote).is_none());
    assert!(
        session_info(&s, &local).is_some(),
        "other nodes' sessions stay"
    );
    assert!(kv_entry(&s, "w").unwrap().get("Session").is_none());
    acquire(&s, "w", &local, b"x").assert(200, "false");
    put_json(&s, "/v1/session/create", &json!({"Node": "worker"}))
        .assert(500, "apply failed: Missing node registration");
}

#[test]
fn catalog_deregister_of_the_agent_node_invalidates_its_sessions() {
    let s = start();
    let sid = session_with_delay(&s, "0s");
    let r = put_json(
        &s,
        "/v1/catalog/deregister",
        &json!({ "Node": s.node_name() }),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(session_info(&s, &sid).is_none());
}

#[test]
fn request_counts_by_route_and_reset() {
    let s = start();
    s.reset_request_counts();
    kv_set(&s, "a", b"1");
    kv_set(&s, "b/c", b"1");
    let first = get(&s, "/v1/kv/a");
    let index = get(&s, "/v1/kv/a")
        .header("x-consul-index")
        .unwrap()
        .to_string();
    // A blocking query that answers at once (the index is older than the key's).
    get(&s, "/v1/kv/a?index=1&wait=1s");
    let sid = session_create(&s, &json!({}));
    session_info(&s, &sid);
    txn(&s, &json!([{"KV": {"Verb": "get-or-empty", "Key": "a"}}]));
    let c = s.request_counts();
    assert_eq!(c.by_route.get("PUT /v1/kv"), Some(&2), "{:?}", c.by_route);
    assert_eq!(c.by_route.get("GET /v1/kv"), Some(&3));
    assert_eq!(c.blocking_by_route.get("GET /v1/kv"), Some(&1));
    assert_eq!(c.non_blocking("GET /v1/kv"), 2);
    assert_eq!(c.non_blocking("PUT /v1/kv"), 2);
    // Answer bodies are counted by route: the two PUTs answered `true`, the three GETs the
    // same entry of "a" as the first one read.
    assert_eq!(c.body_bytes_by_route.get("PUT /v1/kv"), Some(&8));
    assert_eq!(
        c.body_bytes_by_route.get("GET /v1/kv"),
        Some(&(3 * first.body.len() as u64))
    );
    assert!(index.parse::<u64>().unwrap() > 1);
    assert_eq!(c.by_route.get("PUT /v1/session/create"), Some(&1));
    assert_eq!(c.by_route.get("GET /v1/session/info"), Some(&1));
    assert_eq!(c.by_route.get("PUT /v1/txn"), Some(&1));
    assert!(c.total >= 6);
    let http = get(&s, "/_devserver/requests").json();
    assert_eq!(http["by_route"]["PUT /v1/kv"], 2, "{http}");
    assert_eq!(http["blocking_by_route"]["GET /v1/kv"], 1, "{http}");
    assert_eq!(http["body_bytes_by_route"]["PUT /v1/kv"], 8, "{http}");
    assert!(http["total"].as_u64().unwrap() >= 6);
    assert_eq!(delete(&s, "/_devserver/requests").status, 200);
    let after = s.request_counts();
    assert_eq!(after.by_route.get("PUT /v1/kv"), None);
    s.reset_request_counts();
    assert_eq!(s.request_counts().total, 0);
}

#[test]
fn control_status_reports_the_current_index() {
    let s = start();
    kv_set(&s, "k", b"v");
    let st = get(&s, "/_devserver/status").json();
    assert_eq!(
        keys_of(&st)
            .iter()
            .filter(|k| ["paused", "latency_ms", "leader", "index"].contains(&k.as_str()))
            .count(),
        4,
        "{st}"
    );
    assert_eq!(st["index"].as_u64(), Some(s.current_index()));
    assert_eq!(st["leader"], true);
    assert_eq!(st["paused"], false);
}

#[test]
fn connections_beyond_the_per_client_cap_get_429() {
    let s = start_with(|c| c.max_conns_per_client = 3);
    let mut held: Vec<Conn> = (0..3)
        .map(|_| {
            let mut c = Conn::open(s.addr()).unwrap();
            assert_eq!(c.send(&Req::get("/v1/status/leader")).unwrap().status, 200);
            c
        })
        .collect();
    let r = Req::get("/v1/status/leader").send(&s);
    assert_eq!(r.status, 429, "{}", r.text());
    drop(held.pop());
    assert!(
        poll_until(Duration::from_secs(5), || Req::get("/v1/status/leader")
            .try_send_to(s.addr())
            .is_ok_and(|r| r.status == 200))
        .is_some(),
        "a freed slot was never reusable"
    );
}

/// Consul counts a connection against its client's cap when it accepts it: Go's `http.Server`
/// runs the `ConnState(StateNew)` hook, where go-connlimit counts, in its accept loop, before
/// the connection's goroutine starts. So connections count in the order they were made, idle
/// or not: with the cap filled by connections that have sent nothing, the next one is refused,
/// every time, however the server schedules its connections' work.
#[test]
fn idle_connections_fill_the_cap_in_the_order_they_were_made() {
    let s = start_with(|c| c.max_conns_per_client = 4);
    for round in 0..100 {
        let held: Vec<Conn> = (0..4).map(|_| Conn::open(s.addr()).unwrap()).collect();
        let r = Req::get("/v1/status/leader").send(&s);
        assert_eq!(r.status, 429, "round {round}: {}", r.text());
        drop(held);
        assert!(
            poll_until(Duration::from_secs(5), || s.open_connections() == 0).is_some(),
            "round {round}: the server never saw the idle connections close ({} open)",
            s.open_connections()
        );
    }
}

/// A leaderless window with a hold (Consul's rpc_hold_timeout): a request that needs
/// the leader waits up to the hold, is answered normally when a leader returns within
/// it, else gets a client agent's 500 texts in turn; agent-local endpoints answer at once.
#[test]
fn no_leader_holds_requests_and_answers_in_a_client_agent_s_words() {
    use baton_devserver::{NoLeader, NoLeaderAnswers};
    let s = start();
    kv_set(&s, "k", b"v");
    s.set_no_leader(NoLeader {
        hold: Duration::from_secs(30),
        answers: NoLeaderAnswers::ClientAgent,
    });
    // Held: no answer while no leader is elected...
    let p = Req::get("/v1/kv/k").spawn(&s);
    thread::sleep(HANG);
    assert!(p.still_waiting(), "a leaderless server answered at once");
    // ...the agent's own endpoints answer meanwhile...
    assert_eq!(get(&s, "/v1/status/leader").json(), json!(""));
    assert_eq!(get(&s, "/v1/agent/self").status, 200);
    // ...and a leader elected within the hold answers the held request normally.
    s.end_no_leader();
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!(r.status, 200);
    assert_eq!(entry_value(&r.json()[0]), b"v");

    // Past the hold: a client agent's texts, in turn, over the control path too.
    let r = put(
        &s,
        "/_devserver/leader?present=false&hold=50ms&answers=agent",
        b"",
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let mut texts = std::collections::BTreeSet::new();
    for _ in 0..3 {
        let started = std::time::Instant::now();
        let r = get(&s, "/v1/kv/k");
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert_eq!(r.status, 500);
        texts.insert(r.text());
    }
    let expected: std::collections::BTreeSet<String> = [
        "rpc error making call: No cluster leader",
        "Raft leader not found in server lookup mapping",
        "rpc error getting client: failed to get conn: dial tcp 127.0.0.1:8300: connect: connection refused",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(texts, expected);
    let bad = put(&s, "/_devserver/leader?present=false&answers=mars", b"");
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(put(&s, "/_devserver/leader?present=true", b"").status, 200);
    assert_eq!(get(&s, "/v1/kv/k").status, 200);
}

/// The request journal records `/v1/` requests (method, path, query, body) only while on.
#[test]
fn the_journal_records_requests_while_on() {
    let s = start();
    kv_set(&s, "before", b"x");
    assert!(s.journal().is_empty());
    s.record_requests(true);
    let r = put(&s, "/v1/kv/j?flags=7", b"body-text");
    assert_eq!(r.status, 200);
    s.record_requests(false);
    kv_set(&s, "after", b"x");
    let j = s.journal();
    assert_eq!(j.len(), 1, "{j:?}");
    assert_eq!(
        (
            j[0].method.as_str(),
            j[0].path.as_str(),
            j[0].query.as_str()
        ),
        ("PUT", "/v1/kv/j", "flags=7")
    );
    assert_eq!(j[0].body, "body-text");
    assert!(j[0].mentions("body-text") && !j[0].mentions("nothing"));
}
