//! The families the dev server does not implement answer `501 Not Implemented` naming the
//! method, the path and the family — not a 404 that reads like "no such key", not a body a
//! client would decode as data (the Go client's `requireOK` turns a 501 into an error). One
//! test per family, each with an endpoint Consul's `api` package calls for it.

mod common;

use common::*;

fn assert_unimplemented(s: &DevServer, method: &str, path: &str, family: &str) {
    let r = Req::new(method, path).send(s);
    assert_eq!(r.status, 501, "{method} {path}: {}", r.text());
    let text = r.text();
    let bare = path.split('?').next().unwrap();
    assert!(
        text.starts_with("baton-devserver does not implement "),
        "{text}"
    );
    assert!(text.contains(&format!("{method} {bare} ")), "{text}");
    assert!(text.contains(&format!("({family})")), "{text}");
    assert!(!r.is_json(), "{method} {path} answers JSON");
}

#[test]
fn connect_ca_configuration_and_leaf_certificates() {
    let s = start();
    assert_unimplemented(&s, "GET", "/v1/connect/ca/configuration", "Connect CA");
    assert_unimplemented(&s, "PUT", "/v1/connect/ca/configuration", "Connect CA");
    assert_unimplemented(&s, "GET", "/v1/agent/connect/ca/leaf/web", "Connect CA");
    // The CA root the Go harness waits for is still served.
    assert_eq!(get(&s, "/v1/connect/ca/roots").status, 200);
}

#[test]
fn connect_intentions() {
    let s = start();
    assert_unimplemented(&s, "GET", "/v1/connect/intentions", "Connect intentions");
    assert_unimplemented(&s, "POST", "/v1/connect/intentions", "Connect intentions");
    assert_unimplemented(
        &s,
        "GET",
        "/v1/connect/intentions/exact?source=a&destination=b",
        "Connect intentions",
    );
    assert_unimplemented(
        &s,
        "POST",
        "/v1/agent/connect/authorize",
        "Connect intentions",
    );
}

#[test]
fn config_entries() {
    let s = start();
    assert_unimplemented(&s, "PUT", "/v1/config", "config entries");
    assert_unimplemented(
        &s,
        "GET",
        "/v1/config/service-defaults/web",
        "config entries",
    );
    assert_unimplemented(
        &s,
        "DELETE",
        "/v1/config/service-defaults/web",
        "config entries",
    );
}

#[test]
fn gateways() {
    let s = start();
    assert_unimplemented(&s, "GET", "/v1/health/ingress/web", "gateways");
}

#[test]
fn discovery_chain() {
    let s = start();
    assert_unimplemented(&s, "GET", "/v1/discovery-chain/web", "discovery chain");
    assert_unimplemented(&s, "POST", "/v1/discovery-chain/web", "discovery chain");
}

#[test]
fn cluster_peering() {
    let s = start();
    assert_unimplemented(&s, "POST", "/v1/peering/token", "cluster peering");
    assert_unimplemented(&s, "GET", "/v1/peering/p1", "cluster peering");
    assert_unimplemented(&s, "GET", "/v1/peerings", "cluster peering");
    assert_unimplemented(&s, "GET", "/v1/exported-services", "cluster peering");
}

#[test]
fn snapshots() {
    let s = start();
    assert_unimplemented(&s, "GET", "/v1/snapshot", "snapshots");
    assert_unimplemented(&s, "PUT", "/v1/snapshot", "snapshots");
}

#[test]
fn debug_pprof() {
    let s = start();
    assert_unimplemented(&s, "GET", "/debug/pprof/heap", "debug/pprof");
    assert_unimplemented(&s, "GET", "/debug/pprof/profile?seconds=1", "debug/pprof");
}

#[test]
fn keyring() {
    let s = start();
    assert_unimplemented(&s, "GET", "/v1/operator/keyring", "keyring");
    assert_unimplemented(&s, "POST", "/v1/operator/keyring", "keyring");
}

/// A method Consul does not register for the endpoint is still a 405, as for any route.
#[test]
fn a_method_the_endpoint_does_not_take_is_405() {
    let s = start();
    let r = Req::new("DELETE", "/v1/snapshot").send(&s);
    assert_eq!(r.status, 405, "{}", r.text());
}
