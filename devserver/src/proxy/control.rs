//! The proxy's control API (`/_proxy/` on its control address).

use super::*;

pub(super) async fn control_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("baton-devserver proxy: control accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let shared = shared.clone();
                async move {
                    let (status, body) = control(&shared, req.method(), req.uri());
                    Ok::<_, Infallible>(respond(status, body))
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await
            {
                log::debug!("baton-devserver proxy: control connection: {e}");
            }
        });
    }
}

/// A control answer: JSON (`Ok`) or plain text (`Err`).
type Answer = Result<serde_json::Value, String>;

fn respond(status: u16, body: Answer) -> Response<Full<Bytes>> {
    let (ctype, bytes) = match body {
        Ok(v) => {
            let mut b = serde_json::to_vec(&v).unwrap_or_default();
            b.push(b'\n');
            ("application/json", b)
        }
        Err(text) => ("text/plain; charset=utf-8", text.into_bytes()),
    };
    let mut resp = Response::new(Full::new(Bytes::from(bytes)));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(ctype),
    );
    resp
}

/// A non-negative Go duration from the query parameter `name`.
fn duration_param(q: &Query, name: &str) -> Result<Duration, String> {
    let v = q.get(name);
    match parse_go_duration(v) {
        Ok(ns) if ns >= 0 => Ok(Duration::from_nanos(ns as u64)),
        Ok(_) => Err(format!("?{name}= must not be negative, got {v:?}")),
        Err(e) => Err(format!(
            "bad ?{name}= (want a Go duration such as 50ms): {e}"
        )),
    }
}

fn go_duration(d: Duration) -> String {
    format_go_duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// Handles one control request: the status code and the answer.
fn control(shared: &Shared, method: &Method, uri: &hyper::Uri) -> (u16, Answer) {
    let q = Query::parse(uri.query());
    let action = *method == Method::PUT || *method == Method::POST;
    let done = || (200, Ok(json!(true)));
    let bad = |msg: String| (400, Err(msg));
    match (uri.path(), action) {
        ("/_proxy/blackhole", true) => {
            shared.set_blackhole();
            done()
        }
        ("/_proxy/heal", true) => {
            shared.heal();
            done()
        }
        ("/_proxy/reset", true) => {
            shared.reset();
            done()
        }
        ("/_proxy/delay", true) => {
            if !q.has("d") {
                return bad(
                    "missing ?d= (a Go duration such as 50ms; 0s turns the delay off)".into(),
                );
            }
            let base = match duration_param(&q, "d") {
                Ok(d) => d,
                Err(e) => return bad(e),
            };
            let jitter = if q.has("jitter") {
                match duration_param(&q, "jitter") {
                    Ok(d) => d,
                    Err(e) => return bad(e),
                }
            } else {
                Duration::ZERO
            };
            shared.set_delay(base, jitter);
            done()
        }
        ("/_proxy/drop-after", true) => {
            let v = q.get("bytes");
            if !q.has("bytes") {
                return bad("missing ?bytes= (a byte count)".into());
            }
            match v.parse::<u64>() {
                Ok(n) if v.bytes().all(|b| b.is_ascii_digit()) => {
                    shared.drop_after(n);
                    done()
                }
                _ => bad(format!("?bytes= must be a non-negative integer, got {v:?}")),
            }
        }
        ("/_proxy/status", false) if *method == Method::GET => {
            let f = shared.faults();
            let s = shared.stats();
            let body = json!({
                "mode": if f.blackhole { "blackhole" } else { "forward" },
                "upstream": shared.upstream.to_string(),
                "delay": go_duration(f.delay),
                "jitter": go_duration(f.jitter),
                "drop_after": f.drop_after,
                "connections": {"accepted": s.accepted, "open": s.open},
                "bytes": {"to_upstream": s.bytes_to_upstream, "to_client": s.bytes_to_client},
            });
            (200, Ok(body))
        }
        (path, _) => (
            404,
            Err(format!("unknown control request: {method} {path}")),
        ),
    }
}
