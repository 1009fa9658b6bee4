//! The HTTP CONNECT proxy (`ConnectProxy`, what `HTTPS_PROXY`/`HTTP_PROXY` name), driven by
//! hyper's HTTP/1 client: a tunnel reaches a real dev server and is counted, a refused target
//! is a 502, anything but CONNECT a 405, and stopping the proxy closes its tunnels.

mod common;

use std::future::Future;
use std::net::SocketAddr;

use baton_devserver::ConnectProxy;
use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{ALLOW, HOST};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type Sender = SendRequest<Full<Bytes>>;

/// Runs `f` to completion on a runtime of its own, failing the test if it takes longer than
/// [`TIMEOUT`]. The servers are started and stopped outside it (their handles block).
fn run<F: Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(TIMEOUT, f)
                .await
                .expect("the test finished in time")
        });
}

/// An HTTP/1 client connection over `io` (upgrades allowed, so a CONNECT can take it over).
async fn http1<T>(io: T) -> Sender
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    sender
}

/// A fresh connection to the proxy.
async fn to_proxy(p: &ConnectProxy) -> Sender {
    http1(TokioIo::new(TcpStream::connect(p.addr()).await.unwrap())).await
}

/// `CONNECT target` on `s`.
async fn connect(s: &mut Sender, target: &str) -> Response<Incoming> {
    s.ready().await.unwrap();
    let req = Request::builder()
        .method(Method::CONNECT)
        .uri(target)
        .header(HOST, target)
        .body(Full::default())
        .unwrap();
    s.send_request(req).await.unwrap()
}

/// A tunnel through `p` to `target`, with an HTTP/1 client connection inside it.
async fn tunnel(p: &ConnectProxy, target: &str) -> Sender {
    let mut s = to_proxy(p).await;
    let resp = connect(&mut s, target).await;
    assert_eq!(resp.status(), StatusCode::OK, "CONNECT {target}");
    let upgraded = hyper::upgrade::on(resp).await.unwrap();
    http1(upgraded).await
}

/// One request on `s`: the status, the headers' `Allow` and the body as text.
async fn call(
    s: &mut Sender,
    method: Method,
    uri: &str,
    body: &str,
) -> hyper::Result<(StatusCode, Option<String>, String)> {
    s.ready().await?;
    let req = Request::builder()
        .method(method)
        .uri(uri)
        .header(HOST, "consul")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let resp = s.send_request(req).await?;
    let status = resp.status();
    let allow = resp
        .headers()
        .get(ALLOW)
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok((status, allow, String::from_utf8_lossy(&bytes).into_owned()))
}

/// A port on 127.0.0.1 that refuses connections: bound, never listening (held until the
/// returned socket is dropped, so no other test takes it meanwhile).
fn refusing_port() -> (socket2::Socket, SocketAddr) {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap();
    (s, addr)
}

#[test]
fn a_tunnel_reaches_the_dev_server_and_is_counted() {
    let dev = start();
    let p = ConnectProxy::start().unwrap();
    assert!(p.addr().ip().is_loopback());
    assert_eq!(p.url(), format!("http://{}", p.addr()));
    assert_eq!(p.tunnels(), 0);
    let target = dev.http_addr();
    run(async {
        let mut t = tunnel(&p, &target).await;
        assert_eq!(p.tunnels(), 1);
        // Two requests on the one tunnel (a kept-alive connection to the server).
        let (status, _, body) = call(&mut t, Method::PUT, "/v1/kv/through", "tunnelled")
            .await
            .unwrap();
        assert_eq!((status, body.trim()), (StatusCode::OK, "true"));
        let (status, _, body) = call(&mut t, Method::GET, "/v1/kv/through?raw", "")
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "tunnelled"));
        assert_eq!(p.tunnels(), 1, "one tunnel carried both requests");

        // A host name is resolved by the proxy (ureq sends names as they are).
        let by_name = format!("localhost:{}", dev.addr().port());
        let mut t2 = tunnel(&p, &by_name).await;
        let (status, _, body) = call(&mut t2, Method::GET, "/v1/kv/through?raw", "")
            .await
            .unwrap();
        assert_eq!((status, body.as_str()), (StatusCode::OK, "tunnelled"));
        assert_eq!(p.tunnels(), 2);
    });
    // The write went to that server, not somewhere else.
    Req::get("/v1/kv/through?raw")
        .send(&dev)
        .assert(200, "tunnelled");
}

#[test]
fn a_refused_target_is_a_502_and_not_a_tunnel() {
    let (_held, refusing) = refusing_port();
    let dev = start();
    let p = ConnectProxy::start().unwrap();
    let target = dev.http_addr();
    run(async {
        let mut s = to_proxy(&p).await;
        let resp = connect(&mut s, &refusing.to_string()).await;
        assert_eq!(resp.status(), StatusCode::BAD_GATEWAY);
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let body = String::from_utf8_lossy(&body);
        assert!(
            body.contains(&format!("cannot connect to {refusing}")),
            "{body}"
        );
        assert_eq!(p.tunnels(), 0);
        // The connection to the proxy stays usable: a CONNECT to a live target on it works.
        let resp = connect(&mut s, &target).await;
        assert_eq!(resp.status(), StatusCode::OK);
        let mut t = http1(hyper::upgrade::on(resp).await.unwrap()).await;
        let (status, _, _) = call(&mut t, Method::GET, "/v1/status/leader", "")
            .await
            .unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_eq!(p.tunnels(), 1);
    });
}

#[test]
fn anything_but_connect_is_a_405() {
    let dev = start();
    let p = ConnectProxy::start().unwrap();
    let absolute = format!("{}/v1/status/leader", dev.url());
    run(async {
        let mut s = to_proxy(&p).await;
        // Absolute-URI forwarding, as a forwarding proxy would be asked, and origin form.
        for (method, uri) in [
            (Method::GET, absolute.as_str()),
            (Method::PUT, absolute.as_str()),
            (Method::GET, "/v1/status/leader"),
        ] {
            let (status, allow, body) = call(&mut s, method.clone(), uri, "").await.unwrap();
            assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {uri}");
            assert_eq!(allow.as_deref(), Some("CONNECT"));
            assert!(body.contains("only tunnels"), "{body}");
        }
    });
    assert_eq!(p.tunnels(), 0);
    assert_eq!(dev.request_counts().total, 0, "nothing reached the server");
}

#[test]
fn stopping_the_proxy_closes_its_tunnels() {
    let dev = start();
    let p = ConnectProxy::start().unwrap();
    let proxy_addr = p.addr();
    let target = dev.http_addr();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut t = rt.block_on(async {
        let mut t = tunnel(&p, &target).await;
        let (status, _, _) = call(&mut t, Method::GET, "/v1/status/leader", "")
            .await
            .unwrap();
        assert_eq!(status, StatusCode::OK);
        t
    });
    p.stop();
    rt.block_on(async {
        tokio::time::timeout(TIMEOUT, async {
            let r = call(&mut t, Method::GET, "/v1/status/leader", "").await;
            assert!(r.is_err(), "the tunnel still answered: {r:?}");
            assert!(
                TcpStream::connect(proxy_addr).await.is_err(),
                "the listener still accepts"
            );
        })
        .await
        .expect("the closed tunnel was noticed in time");
    });
}
