//! The endpoint families the dev server does not implement. Each answers `501 Not Implemented`
//! with a text naming the endpoint and its family, so a client sees at once that the dev
//! server lacks it — never a 404 that reads like "no such key", never an answer a client
//! would decode as data. The list is documented in the crate README.

use crate::query::Reply;

/// Route patterns (as in the route table) of the families not implemented, their methods
/// (those Consul registers), and the family named in the answer.
pub(crate) const FAMILIES: &[(&str, &[&str], &str)] = &[
    (
        "/v1/connect/ca/configuration",
        &["GET", "PUT"],
        "Connect CA",
    ),
    ("/v1/agent/connect/ca/leaf/", &["GET"], "Connect CA"),
    (
        "/v1/connect/intentions",
        &["GET", "POST"],
        "Connect intentions",
    ),
    (
        "/v1/connect/intentions/",
        &["GET", "PUT", "POST", "DELETE"],
        "Connect intentions",
    ),
    (
        "/v1/agent/connect/authorize",
        &["POST"],
        "Connect intentions",
    ),
    ("/v1/config", &["PUT"], "config entries"),
    ("/v1/config/", &["GET", "DELETE"], "config entries"),
    ("/v1/health/ingress/", &["GET"], "gateways"),
    ("/v1/discovery-chain/", &["GET", "POST"], "discovery chain"),
    (
        "/v1/peering/",
        &["GET", "POST", "DELETE"],
        "cluster peering",
    ),
    ("/v1/peerings", &["GET"], "cluster peering"),
    ("/v1/exported-services", &["GET"], "cluster peering"),
    ("/v1/snapshot", &["GET", "PUT"], "snapshots"),
    ("/debug/pprof/", &["GET"], "debug/pprof"),
    (
        "/v1/operator/keyring",
        &["GET", "POST", "PUT", "DELETE"],
        "keyring",
    ),
];

/// The family a route pattern belongs to, when it is one of those not implemented.
pub(crate) fn family(pattern: &str) -> Option<&'static str> {
    FAMILIES
        .iter()
        .find(|(p, _, _)| *p == pattern)
        .map(|(_, _, f)| *f)
}

/// The answer: 501 with the method, path and family named.
pub(crate) fn answer(method: &str, path: &str, family: &str) -> Reply {
    Reply::text(
        501,
        format!(
            "baton-devserver does not implement {method} {path} ({family}): the dev server \
             serves KV, sessions, txn, agent, catalog, health, events, coordinates, prepared \
             queries, ACL, status and operator raft/autopilot/usage only\n"
        ),
    )
}
