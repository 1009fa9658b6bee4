//! HTTP plumbing: accepting connections on TCP, TLS and the unix socket (with Consul's
//! per-client connection cap), Go `ServeMux` routing behaviour (path cleaning redirects, 405
//! with `Allow`, the index handler's 404), the printable-path check, the fault gates, and the
//! headers every wrapped route gets.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Method, Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, UnixListener};

use crate::endpoints::ctx::Ctx;
use crate::query::{Query, Reply};
use crate::shared::{ClientKey, ConnSlot, Shared};

/// Largest body read for any request (a chunked KV PUT bypasses `kv_max_value_size` in Consul;
/// this bound only keeps a runaway client from exhausting memory).
const MAX_BODY: usize = 64 * 1024 * 1024;

/// The registered routes: pattern (a trailing `/` means "this prefix", as in Go's ServeMux)
/// and the methods it accepts.
const ROUTES: &[(&str, &[&str])] = &[
    ("/v1/kv/", &["GET", "PUT", "DELETE"]),
    ("/v1/session/create", &["PUT"]),
    ("/v1/session/destroy/", &["PUT"]),
    ("/v1/session/renew/", &["PUT"]),
    ("/v1/session/info/", &["GET"]),
    ("/v1/session/node/", &["GET"]),
    ("/v1/session/list", &["GET"]),
    ("/v1/txn", &["PUT"]),
    ("/v1/status/leader", &["GET"]),
    ("/v1/status/peers", &["GET"]),
    ("/v1/agent/self", &["GET"]),
    ("/v1/agent/members", &["GET"]),
    ("/v1/agent/services", &["GET"]),
    ("/v1/agent/service/", &["GET"]),
    ("/v1/agent/service/register", &["PUT"]),
    ("/v1/agent/service/deregister/", &["PUT"]),
    ("/v1/agent/service/maintenance/", &["PUT"]),
    ("/v1/agent/maintenance", &["PUT"]),
    ("/v1/agent/checks", &["GET"]),
    ("/v1/agent/check/register", &["PUT"]),
    ("/v1/agent/check/deregister/", &["PUT"]),
    ("/v1/agent/check/pass/", &["PUT"]),
    ("/v1/agent/check/warn/", &["PUT"]),
    ("/v1/agent/check/fail/", &["PUT"]),
    ("/v1/agent/check/update/", &["PUT"]),
    ("/v1/agent/connect/ca/roots", &["GET"]),
    ("/v1/agent/reload", &["PUT"]),
    ("/v1/agent/metrics", &["GET"]),
    ("/v1/agent/monitor", &["GET"]),
    ("/v1/agent/host", &["GET"]),
    ("/v1/agent/version", &["GET"]),
    ("/v1/agent/leave", &["PUT"]),
    ("/v1/agent/force-leave/", &["PUT"]),
    ("/v1/agent/join/", &["PUT"]),
    ("/v1/agent/token/", &["PUT"]),
    ("/v1/agent/health/service/id/", &["GET"]),
    ("/v1/agent/health/service/name/", &["GET"]),
    ("/v1/catalog/register", &["PUT"]),
    ("/v1/catalog/deregister", &["PUT"]),
    ("/v1/catalog/datacenters", &["GET"]),
    ("/v1/catalog/nodes", &["GET"]),
    ("/v1/catalog/services", &["GET"]),
    ("/v1/catalog/service/", &["GET"]),
    ("/v1/catalog/connect/", &["GET"]),
    ("/v1/catalog/node/", &["GET"]),
    ("/v1/catalog/node-services/", &["GET"]),
    ("/v1/catalog/gateway-services/", &["GET"]),
    ("/v1/health/node/", &["GET"]),
    ("/v1/health/checks/", &["GET"]),
    ("/v1/health/state/", &["GET"]),
    ("/v1/health/service/", &["GET"]),
    ("/v1/health/connect/", &["GET"]),
    ("/v1/connect/ca/roots", &["GET"]),
    ("/v1/event/fire/", &["PUT"]),
    ("/v1/event/list", &["GET"]),
    ("/v1/coordinate/datacenters", &["GET"]),
    ("/v1/coordinate/nodes", &["GET"]),
    ("/v1/coordinate/node/", &["GET"]),
    ("/v1/coordinate/update", &["PUT"]),
    ("/v1/query", &["GET", "POST"]),
    ("/v1/query/", &["GET", "PUT", "DELETE"]),
    ("/v1/operator/raft/configuration", &["GET"]),
    ("/v1/operator/raft/peer", &["DELETE"]),
    ("/v1/operator/raft/transfer-leader", &["POST"]),
    ("/v1/operator/autopilot/configuration", &["GET", "PUT"]),
    ("/v1/operator/autopilot/health", &["GET"]),
    ("/v1/operator/autopilot/state", &["GET"]),
    ("/v1/operator/usage", &["GET"]),
    ("/v1/acl/bootstrap", &["PUT"]),
    ("/v1/acl/login", &["POST"]),
    ("/v1/acl/replication", &["GET"]),
    ("/v1/acl/logout", &["POST"]),
    ("/v1/acl/tokens", &["GET"]),
    ("/v1/acl/token", &["PUT"]),
    ("/v1/acl/token/", &["GET", "PUT", "DELETE"]),
    ("/v1/acl/policies", &["GET"]),
    ("/v1/acl/policy", &["PUT"]),
    ("/v1/acl/policy/", &["GET", "PUT", "DELETE"]),
    ("/v1/acl/roles", &["GET"]),
    ("/v1/acl/role", &["PUT"]),
    ("/v1/acl/role/", &["GET", "PUT", "DELETE"]),
    ("/v1/acl/auth-methods", &["GET"]),
    ("/v1/acl/auth-method", &["PUT"]),
    ("/v1/acl/auth-method/", &["GET", "PUT", "DELETE"]),
    ("/v1/acl/binding-rules", &["GET"]),
    ("/v1/acl/binding-rule", &["PUT"]),
    ("/v1/acl/binding-rule/", &["GET", "PUT", "DELETE"]),
    ("/v1/acl/templated-policies", &["GET"]),
    ("/v1/acl/templated-policy/name/", &["GET"]),
    ("/v1/acl/templated-policy/preview/", &["POST"]),
];

/// The route table with the patterns of the families not implemented (which answer 501).
fn all_routes() -> impl Iterator<Item = &'static (&'static str, &'static [&'static str])> {
    ROUTES.iter().chain(UNIMPLEMENTED.iter())
}

/// [`crate::endpoints::unimplemented::FAMILIES`] as route-table rows.
static UNIMPLEMENTED: std::sync::LazyLock<Vec<(&'static str, &'static [&'static str])>> =
    std::sync::LazyLock::new(|| {
        crate::endpoints::unimplemented::FAMILIES
            .iter()
            .map(|(p, m, _)| (*p, *m))
            .collect()
    });

/// What a connection has carried: nothing yet, control requests only, or Consul requests.
const CONN_NEW: u8 = 0;
const CONN_CONTROL: u8 = 1;
const CONN_CONSUL: u8 = 2;
/// The connection carried the answer to `PUT /v1/agent/leave`: when it closes, the server
/// stops.
const CONN_LEFT: u8 = 3;

/// Who is at the other end of a connection: what the per-client connection cap counts it
/// under ([`ClientKey`]) and how the logs name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Peer {
    /// A TCP (or TLS) client.
    Tcp(SocketAddr),
    /// A client of the unix socket ([`crate::Config::unix_socket`]).
    Unix,
}

impl Peer {
    fn client(self) -> ClientKey {
        match self {
            Peer::Tcp(a) => ClientKey::Ip(a.ip()),
            Peer::Unix => ClientKey::Unix,
        }
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Tcp(a) => a.fmt(f),
            // Go's `RemoteAddr` of a unix-socket client, as a Consul agent logs it.
            Peer::Unix => f.write_str("@ (unix socket)"),
        }
    }
}

/// Accepts connections until the task is dropped.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    loop {
        let (stream, addr) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                log::warn!("baton-devserver: accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let accepted = Accepted::new(&shared, Peer::Tcp(addr));
        let shared = shared.clone();
        match &tls {
            None => {
                tokio::spawn(async move { serve_conn(stream, accepted, shared).await });
            }
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    // The handshake runs in the connection's own task, bounded, so a client
                    // that connects and says nothing holds up no one.
                    let handshake = tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        acceptor.accept(stream),
                    );
                    match handshake.await {
                        Ok(Ok(tls_stream)) => serve_conn(tls_stream, accepted, shared).await,
                        // What a Consul agent logs as `http: TLS handshake error from ...`.
                        Ok(Err(e)) => {
                            log::info!(
                                "baton-devserver: TLS handshake error from {}: {e}",
                                accepted.peer
                            )
                        }
                        Err(_) => log::info!(
                            "baton-devserver: TLS handshake error from {}: no handshake within 10s",
                            accepted.peer
                        ),
                    }
                });
            }
        }
    }
}

/// Accepts connections on the unix socket until the task is dropped: the same endpoints,
/// state, fault gates and per-client cap as the TCP listener (every unix-socket client counts
/// as one client, see [`ClientKey::Unix`]).
pub(crate) async fn accept_unix_loop(listener: UnixListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                log::warn!("baton-devserver: accept on the unix socket failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let accepted = Accepted::new(&shared, Peer::Unix);
        tokio::spawn(serve_conn(stream, accepted, shared.clone()));
    }
}

/// The answer of Consul's connection limiter (go-connlimit `tooManyRequestsResponse`) to a
/// connection beyond the per-client cap.
fn too_many_connections() -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from_static(
        b"Your IP is issuing too many concurrent connections, please rate limit your calls\n",
    )));
    *resp.status_mut() = hyper::StatusCode::TOO_MANY_REQUESTS;
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain"),
    );
    resp
}

/// What the accept loop settles about a connection before its task starts, in the order
/// connections come in: its place under the per-client cap (none: it gets the limiter's 429)
/// and the restart it must not outlive.
struct Accepted {
    peer: Peer,
    slot: Option<ConnSlot>,
    generation: tokio::sync::watch::Receiver<u64>,
}

impl Accepted {
    fn new(shared: &Arc<Shared>, peer: Peer) -> Accepted {
        // Before the connection counts as open: a restart after that point drops it.
        let generation = shared.generation.subscribe();
        let slot = shared.admit(peer.client());
        Accepted {
            peer,
            slot,
            generation,
        }
    }
}

async fn serve_conn<S>(stream: S, accepted: Accepted, shared: Arc<Shared>)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let Accepted {
        peer,
        slot,
        mut generation,
    } = accepted;
    let Some(slot) = slot else {
        // Consul's connection limiter answers 429 and closes. hyper takes in the request
        // first, so that closing does not reset the connection before the client reads the
        // answer; bounded, so a client that says nothing holds nothing.
        let svc = hyper::service::service_fn(|_req: Request<Incoming>| async {
            Ok::<_, Infallible>(too_many_connections())
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .title_case_headers(true)
            .keep_alive(false)
            .serve_connection(TokioIo::new(stream), svc);
        if let Ok(Err(e)) = tokio::time::timeout(std::time::Duration::from_secs(10), conn).await {
            log::debug!("baton-devserver: connection from {peer} over the cap: {e}");
        }
        return;
    };
    // A restart drops every connection, as an agent process that restarts does, except one
    // that only ever carried control requests (such as the one asking for the restart, left
    // open to get its answer). A connection that has carried nothing yet is dropped too: a
    // Consul request on its way in must not reach the new state as if nothing happened.
    let carried = Arc::new(AtomicU8::new(CONN_NEW));
    let s2 = shared.clone();
    let flag = carried.clone();
    let svc = hyper::service::service_fn(move |req| {
        let shared = s2.clone();
        let flag = flag.clone();
        async move { Ok::<_, Infallible>(handle(shared, req, &flag).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .title_case_headers(true)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    loop {
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    log::debug!("baton-devserver: connection from {peer}: {e}");
                }
                break;
            }
            changed = generation.changed() => {
                if changed.is_err() || carried.load(Ordering::SeqCst) != CONN_CONTROL {
                    break;
                }
            }
        }
    }
    drop(slot);
    if carried.load(Ordering::SeqCst) == CONN_LEFT {
        // The leave's answer is written (the connection closed after it): stop now.
        shared.left.send_replace(true);
    }
}

/// One request, start to end.
async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
    carried: &AtomicU8,
) -> Response<Full<Bytes>> {
    let raw_path = req.uri().path().to_string();
    if raw_path.starts_with("/_devserver/") || raw_path == "/_devserver" {
        // Control only so far (a Consul client's connection stays one).
        let _ =
            carried.compare_exchange(CONN_NEW, CONN_CONTROL, Ordering::SeqCst, Ordering::SeqCst);
        let method = req.method().clone();
        let query = Query::parse(req.uri().query());
        let reply = crate::control::handle(&shared, &method, &raw_path, &query).await;
        return finish(reply);
    }
    carried.store(CONN_CONSUL, Ordering::SeqCst);
    let _in_flight = shared.in_flight(format!("{} {raw_path}", req.method()));
    let arrived = std::time::Instant::now();
    shared.wait_unpaused().await;
    let latency = shared.latency();
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if crate::leaderless::needs_leader(&raw_path) {
        // A leaderless server holds what it must forward (rpc_hold_timeout).
        shared.leaderless.hold().await;
    }
    let reply = route(&shared, req, arrived).await;
    // A response that completes while paused is held back too.
    shared.wait_unpaused().await;
    let (mut reply, wrapped) = reply;
    if raw_path == "/v1/agent/leave" && reply.status == 200 {
        // The agent shuts down once the answer is out: this connection closes after it.
        carried.store(CONN_LEFT, Ordering::SeqCst);
        reply = reply.with("connection", "close");
    }
    let mut resp = finish(reply);
    if wrapped {
        let policy = if shared.cfg.acls_enabled() && !shared.cfg.acl_default_allow {
            "deny"
        } else {
            "allow"
        };
        let h = resp.headers_mut();
        h.insert(
            "x-consul-default-acl-policy",
            HeaderValue::from_static(policy),
        );
        h.insert("vary", HeaderValue::from_static("Accept-Encoding"));
    }
    resp
}

/// Turns a [`Reply`] into a response.
fn finish(reply: Reply) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(reply.body));
    *resp.status_mut() = hyper::StatusCode::from_u16(reply.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    for (name, value) in reply.headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.append(HeaderName::from_static(name), v);
        }
    }
    resp
}

/// Percent-decodes a path as Go's `URL.Path` holds it. `None` for malformed escapes.
fn decode_path(raw: &str) -> Option<String> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// Go's `path.Clean`, keeping a trailing slash as ServeMux's `cleanPath` does.
fn clean_path(p: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    let mut out = format!("/{}", parts.join("/"));
    if p.ends_with('/') && out != "/" {
        out.push('/');
    }
    out
}

/// Escapes a path for a `Location` header (Go's `URL.EscapedPath` for ordinary paths).
fn escape_path(p: &str) -> String {
    const SET: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
        .add(b' ')
        .add(b'"')
        .add(b'#')
        .add(b'%')
        .add(b'<')
        .add(b'>')
        .add(b'?')
        .add(b'`')
        .add(b'{')
        .add(b'}');
    percent_encoding::utf8_percent_encode(p, SET).to_string()
}

/// Routes a `/v1/` (or unknown) request. The flag says whether the route is a wrapped Consul
/// endpoint (which gets the ACL-policy and `Vary` headers).
async fn route(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    arrived: std::time::Instant,
) -> (Reply, bool) {
    let Some(path) = decode_path(req.uri().path()) else {
        return (Reply::text(400, "400 Bad Request"), false);
    };
    // cleanhttp.PrintablePathCheckHandler runs before the mux.
    if path.chars().any(|c| c.is_control()) {
        return (Reply::text(400, ""), false);
    }
    let cleaned = clean_path(&path);
    if cleaned != path {
        return (redirect(&cleaned, req.uri().query(), req.method()), false);
    }
    // Go's ServeMux: an exact pattern wins, else the longest matching prefix pattern.
    let route = all_routes()
        .filter(|(pat, _)| {
            if pat.ends_with('/') {
                path.starts_with(pat)
            } else {
                path == *pat
            }
        })
        .max_by_key(|(pat, _)| (!pat.ends_with('/'), pat.len()));
    let Some((pattern, methods)) = route else {
        // ServeMux redirects "/v1/kv" to the registered "/v1/kv/".
        let slash = format!("{path}/");
        if all_routes().any(|(p, _)| *p == slash) {
            return (redirect(&slash, req.uri().query(), req.method()), false);
        }
        if path == "/" {
            return (Reply::text(200, "Consul Agent: UI disabled. To enable, set ui_config.enabled=true in the agent configuration and restart."), false);
        }
        return (
            Reply::text(
                404,
                "Invalid URL path: not a recognized HTTP API endpoint\n",
            ),
            false,
        );
    };
    let method = req.method().clone();
    let allow = format!("OPTIONS,{}", methods.join(","));
    if method == Method::OPTIONS {
        return (Reply::text(200, "").with("allow", allow), true);
    }
    if !methods.contains(&method.as_str()) {
        return (
            Reply::text(405, format!("method {method} not allowed")).with("allow", allow),
            true,
        );
    }
    if let Some(family) = crate::endpoints::unimplemented::family(pattern) {
        return (
            crate::endpoints::unimplemented::answer(method.as_str(), &path, family),
            true,
        );
    }
    let query = Query::parse(req.uri().query());
    let route = format!("{} {}", method, pattern.trim_end_matches('/'));
    shared.count(
        route.clone(),
        // Blocking as `query::blocking` decides it: a GET whose index is above 0.
        method == Method::GET && query.get("index").parse::<u64>().is_ok_and(|i| i > 0),
    );
    let headers = req.headers().clone();
    let content_length = headers
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let ctx = Ctx {
        shared: shared.clone(),
        query,
        headers,
        content_length,
    };
    let rest = path[pattern.len()..].to_string();
    // Body-size checks that Consul makes on Content-Length before reading the body.
    if let Some(early) = match *pattern {
        "/v1/kv/" if method == Method::PUT => crate::endpoints::kv::precheck_put(&ctx, &rest),
        "/v1/txn" => crate::endpoints::txn::precheck(&ctx),
        _ => None,
    } {
        return (early, true);
    }
    let raw_query = req.uri().query().unwrap_or_default().to_string();
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => return (Reply::text(413, "Request body too large"), true),
    };
    shared
        .journal
        .record(arrived, method.as_str(), &path, &raw_query, &body);
    let reply = match *pattern {
        "/v1/kv/" => crate::endpoints::kv::handle(&ctx, &method, &rest, body).await,
        "/v1/txn" => crate::endpoints::txn::handle(&ctx, body),
        "/v1/status/leader" if ctx.foreign_dc() => Reply::text(500, "No path to datacenter"),
        "/v1/status/leader" => {
            let leader = if shared.has_leader() {
                "127.0.0.1:8300"
            } else {
                ""
            };
            Reply::json(
                200,
                &serde_json::json!(leader),
                shared.cfg.pretty_json() || ctx.query.has("pretty"),
            )
        }
        "/v1/status/peers" => crate::endpoints::agent_misc::status_peers(&ctx),
        "/v1/connect/ca/roots" => crate::endpoints::connect::ca_roots(&ctx),
        p if p.starts_with("/v1/agent/") => {
            crate::endpoints::agent::handle(&ctx, &method, p, &rest, &body).await
        }
        p if p.starts_with("/v1/catalog/") => {
            crate::endpoints::catalog::handle(&ctx, p, &rest, &body).await
        }
        p if p.starts_with("/v1/event/") || p.starts_with("/v1/coordinate/") => {
            crate::endpoints::event::handle(&ctx, p, &rest, &body).await
        }
        p if p.starts_with("/v1/acl/") => {
            crate::endpoints::acl::handle(&ctx, &method, p, &rest, &body).await
        }
        p if p.starts_with("/v1/query") => {
            crate::endpoints::prepared_query::handle(&ctx, &method, p, &rest, &body)
        }
        p if p.starts_with("/v1/operator/") => {
            crate::endpoints::operator::handle(&ctx, &method, p, &body)
        }
        p if p.starts_with("/v1/health/") => crate::endpoints::health::handle(&ctx, p, &rest).await,
        p => crate::endpoints::session::handle(&ctx, p, &rest, &body).await,
    };
    shared.count_body(&route, reply.body.len());
    (reply, true)
}

/// Go's `http.Redirect` with 301, as ServeMux issues for unclean paths.
fn redirect(path: &str, query: Option<&str>, method: &Method) -> Reply {
    let mut loc = escape_path(path);
    if let Some(q) = query {
        loc.push('?');
        loc.push_str(q);
    }
    let body = if *method == Method::GET || *method == Method::HEAD {
        format!("<a href=\"{loc}\">Moved Permanently</a>.\n\n")
    } else {
        String::new()
    };
    let mut r = Reply::text(301, body).with("location", loc);
    if *method == Method::GET || *method == Method::HEAD {
        r.headers.retain(|(n, _)| *n != "content-type");
        r = r.with("content-type", "text/html; charset=utf-8");
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_path_matches_servemux() {
        assert_eq!(clean_path("/v1/kv/a//b"), "/v1/kv/a/b");
        assert_eq!(clean_path("/v1/kv/a/./b"), "/v1/kv/a/b");
        assert_eq!(clean_path("/v1/kv/a/../b"), "/v1/kv/b");
        assert_eq!(clean_path("/v1/kv/"), "/v1/kv/");
        assert_eq!(clean_path("/v1/kv/a/"), "/v1/kv/a/");
    }
}
