//! Blocking-query conformance (consul-semantics.md §6.5, §13 "Blocking"): when a query
//! blocks, what wakes it, what does not, timeouts, defaults and clamping, the missing-key
//! special case. Timing is asserted as "has / has not answered yet" around instants.

mod common;

use std::thread;
use std::time::Duration;

use common::*;

/// How long to let a spawned blocking query reach its wait before changing anything.
const SETTLE: Duration = Duration::from_millis(300);

fn block(s: &DevServer, path: &str) -> Pending {
    Req::get(path).timeout(Duration::from_secs(45)).spawn(s)
}

#[test]
fn wait_without_index_or_with_index_zero_does_not_block() {
    let s = start();
    kv_set(&s, "k", b"v");
    for q in ["?wait=30s", "?index=0&wait=30s", "?index=0"] {
        let p = block(&s, &format!("/v1/kv/k{q}"));
        let (r, _) = p.expect(Duration::from_secs(5));
        assert_eq!(r.status, 200, "{q}");
    }
    let p = block(&s, "/v1/kv/missing?index=0&wait=30s");
    assert_eq!(p.expect(Duration::from_secs(5)).0.status, 404);
}

#[test]
fn blocking_get_returns_at_once_when_index_is_already_past_n() {
    let s = start();
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let p = block(&s, &format!("/v1/kv/k?index={}&wait=30s", m - 1));
    let (r, _) = p.expect(Duration::from_secs(5));
    assert_eq!((r.status, r.index()), (200, m));
}

#[test]
fn blocking_get_wakes_on_key_change_with_new_index() {
    let s = start();
    kv_set(&s, "k", b"v1");
    let m = modify_index(&s, "k");
    let p = block(&s, &format!("/v1/kv/k?index={m}&wait=30s"));
    thread::sleep(SETTLE);
    assert!(p.still_waiting(), "answered before any change");
    kv_set(&s, "k", b"v2");
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!(r.status, 200);
    assert!(r.index() > m);
    assert_eq!(entry_value(&r.json()[0]), b"v2");
}

#[test]
fn blocking_get_times_out_after_wait_with_same_index_and_body() {
    let s = start();
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let plain = get(&s, "/v1/kv/k");
    let p = block(&s, &format!("/v1/kv/k?index={m}&wait=1s"));
    thread::sleep(Duration::from_millis(700));
    assert!(p.still_waiting(), "returned before the 1s wait");
    let (r, at) = p.expect(Duration::from_secs(10));
    assert!(
        at - p.started >= Duration::from_millis(950),
        "{:?}",
        at - p.started
    );
    assert_eq!((r.status, r.index()), (200, m));
    assert_eq!(r.json(), plain.json());
}

#[test]
fn blocking_missing_key_times_out_with_404() {
    let s = start();
    kv_set(&s, "other", b"x");
    let n = get(&s, "/v1/kv/missing").index();
    let p = block(&s, &format!("/v1/kv/missing?index={n}&wait=800ms"));
    thread::sleep(Duration::from_millis(500));
    assert!(p.still_waiting());
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!((r.status, r.index()), (404, n));
}

#[test]
fn blocking_present_key_returns_404_with_table_index_when_deleted() {
    let s = start();
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let p = block(&s, &format!("/v1/kv/k?index={m}&wait=30s"));
    thread::sleep(SETTLE);
    assert!(p.still_waiting());
    delete(&s, "/v1/kv/k").assert(200, "true");
    let del_idx = s.current_index();
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!((r.status, r.index()), (404, del_idx));
}

#[test]
fn blocking_missing_key_ignores_unrelated_writes_until_key_appears() {
    let s = start();
    kv_set(&s, "seed", b"x");
    let n = get(&s, "/v1/kv/wanted").index();
    let p = block(&s, &format!("/v1/kv/wanted?index={n}&wait=30s"));
    thread::sleep(SETTLE);
    assert!(p.still_waiting());
    kv_set(&s, "unrelated/1", b"x");
    kv_set(&s, "unrelated/2", b"y");
    delete(&s, "/v1/kv/seed").assert(200, "true");
    thread::sleep(Duration::from_millis(500));
    assert!(
        p.still_waiting(),
        "unrelated KV writes released a missing-key query"
    );
    kv_set(&s, "wanted", b"here");
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!(r.status, 200);
    assert_eq!(r.index(), modify_index(&s, "wanted"));
}

#[test]
fn blocking_missing_key_first_run_returns_at_once_if_kv_activity_moved_past_index() {
    let s = start();
    kv_set(&s, "seed", b"x");
    let n = get(&s, "/v1/kv/wanted").index();
    kv_set(&s, "unrelated", b"x");
    let p = block(&s, &format!("/v1/kv/wanted?index={n}&wait=30s"));
    let (r, _) = p.expect(Duration::from_secs(5));
    assert_eq!(r.status, 404);
    assert!(r.index() > n, "the spurious 404 carries the newer index");
    // Fed back, the newer index blocks properly.
    let p2 = block(&s, &format!("/v1/kv/wanted?index={}&wait=30s", r.index()));
    thread::sleep(SETTLE);
    assert!(p2.still_waiting());
    kv_set(&s, "wanted", b"v");
    assert_eq!(p2.expect(Duration::from_secs(10)).0.status, 200);
}

#[test]
fn blocking_with_index_higher_than_current_waits_for_timeout() {
    let s = start();
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let p = block(&s, &format!("/v1/kv/k?index={}&wait=1s", m + 1000));
    thread::sleep(Duration::from_millis(700));
    assert!(p.still_waiting());
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!((r.status, r.index()), (200, m));
}

#[test]
fn identical_put_does_not_wake_a_blocking_query() {
    let s = start();
    put(&s, "/v1/kv/k?flags=1", b"same").assert(200, "true");
    let m = modify_index(&s, "k");
    let p = block(&s, &format!("/v1/kv/k?index={m}&wait=1500ms"));
    thread::sleep(SETTLE);
    put(&s, "/v1/kv/k?flags=1", b"same").assert(200, "true");
    thread::sleep(Duration::from_millis(700));
    assert!(p.still_waiting(), "a no-op write woke the watcher");
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!(r.index(), m);
}

#[test]
fn identical_reacquire_by_holder_does_not_wake_a_blocking_query() {
    let s = start();
    let sid = session_create(&s, &json!({}));
    acquire(&s, "l", &sid, b"v").assert(200, "true");
    let m = modify_index(&s, "l");
    let p = block(&s, &format!("/v1/kv/l?index={m}&wait=1500ms"));
    thread::sleep(SETTLE);
    acquire(&s, "l", &sid, b"v").assert(200, "true");
    thread::sleep(Duration::from_millis(700));
    assert!(p.still_waiting(), "a no-op re-acquire woke the watcher");
    assert_eq!(p.expect(Duration::from_secs(10)).0.index(), m);
}

#[test]
fn absent_or_zero_wait_uses_default_query_time() {
    let s = start_with(|c| c.default_query_time = Duration::from_secs(1));
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    for q in ["", "&wait=0s"] {
        let p = block(&s, &format!("/v1/kv/k?index={m}{q}"));
        thread::sleep(Duration::from_millis(600));
        assert!(p.still_waiting(), "{q:?}: did not block");
        let (r, _) = p.expect(Duration::from_secs(10));
        assert_eq!(r.index(), m, "{q:?}: timed out with the same index");
    }
}

#[test]
fn wait_above_max_query_time_is_clamped() {
    let s = start_with(|c| c.max_query_time = Duration::from_secs(1));
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let p = block(&s, &format!("/v1/kv/k?index={m}&wait=60s"));
    thread::sleep(Duration::from_millis(600));
    assert!(p.still_waiting());
    let (r, _) = p.expect(Duration::from_secs(15));
    assert_eq!((r.status, r.index()), (200, m));
}

#[test]
fn blocking_recurse_wakes_on_write_under_prefix_only() {
    let s = start();
    kv_set(&s, "p/1", b"x");
    let n = get(&s, "/v1/kv/p/?recurse").index();
    let p = block(&s, &format!("/v1/kv/p/?recurse&index={n}&wait=30s"));
    thread::sleep(SETTLE);
    kv_set(&s, "q/1", b"outside");
    thread::sleep(Duration::from_millis(500));
    assert!(p.still_waiting(), "a write outside the prefix released it");
    kv_set(&s, "p/2", b"inside");
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!(r.status, 200);
    assert_eq!(r.index(), modify_index(&s, "p/2"));
    assert_eq!(r.json().as_array().unwrap().len(), 2);
}

#[test]
fn blocking_keys_wakes_on_delete_under_prefix() {
    let s = start();
    kv_set(&s, "p/1", b"x");
    kv_set(&s, "p/2", b"x");
    let n = get(&s, "/v1/kv/p/?keys").index();
    let p = block(&s, &format!("/v1/kv/p/?keys&index={n}&wait=30s"));
    thread::sleep(SETTLE);
    assert!(p.still_waiting());
    delete(&s, "/v1/kv/p/1").assert(200, "true");
    let (r, _) = p.expect(Duration::from_secs(10));
    assert_eq!(r.json(), json!(["p/2"]));
    assert!(r.index() > n);
}

#[test]
fn blocking_session_list_and_info_wake_on_session_changes() {
    let s = start();
    let a = session_create(&s, &json!({}));
    let n = get(&s, "/v1/session/list").index();
    let list = block(&s, &format!("/v1/session/list?index={n}&wait=30s"));
    let info = block(&s, &format!("/v1/session/info/{a}?index={n}&wait=30s"));
    let node = block(
        &s,
        &format!("/v1/session/node/{}?index={n}&wait=30s", s.node_name()),
    );
    thread::sleep(SETTLE);
    assert!(list.still_waiting() && info.still_waiting() && node.still_waiting());
    kv_set(&s, "kv-does-not-count", b"x");
    thread::sleep(Duration::from_millis(300));
    assert!(list.still_waiting(), "a KV write woke a session query");
    put(&s, &format!("/v1/session/destroy/{a}"), b"").assert(200, "true");
    for p in [list, info, node] {
        let (r, _) = p.expect(Duration::from_secs(10));
        assert_eq!(r.status, 200);
        assert!(r.index() > n);
        assert_eq!(r.json(), json!([]));
    }
}

#[test]
fn blocking_query_wakes_when_invalidation_releases_the_key() {
    let s = start();
    let sid = session_with_delay(&s, "0s");
    acquire(&s, "l", &sid, b"v").assert(200, "true");
    let m = modify_index(&s, "l");
    let p = block(&s, &format!("/v1/kv/l?consistent&index={m}&wait=30s"));
    thread::sleep(SETTLE);
    assert!(p.still_waiting());
    assert!(s.invalidate_session(&sid));
    let (r, _) = p.expect(Duration::from_secs(10));
    assert!(r.index() > m);
    assert!(r.json()[0].get("Session").is_none());
}

#[test]
fn many_blocking_clients_hold_connections_and_all_wake() {
    let s = start();
    kv_set(&s, "k", b"v");
    let m = modify_index(&s, "k");
    let waiters: Vec<Pending> = (0..40)
        .map(|_| block(&s, &format!("/v1/kv/k?index={m}&wait=30s")))
        .collect();
    thread::sleep(Duration::from_millis(500));
    assert!(waiters.iter().all(Pending::still_waiting));
    // The server keeps answering other requests meanwhile.
    assert_eq!(get(&s, "/v1/kv/k").status, 200);
    kv_set(&s, "k", b"w");
    for p in waiters {
        let (r, _) = p.expect(Duration::from_secs(15));
        assert!(r.index() > m);
    }
}

#[test]
fn config_defaults_match_consul_query_times_and_limits() {
    let c = Config::default();
    assert_eq!(c.default_query_time, Duration::from_secs(300));
    assert_eq!(c.max_query_time, Duration::from_secs(600));
    assert_eq!(c.session_ttl_min, Duration::from_secs(10));
    assert_eq!(c.kv_max_value_size, 524_288);
    assert_eq!(c.txn_max_req_len, 524_288);
    assert_eq!(c.max_conns_per_client, 200);
}
