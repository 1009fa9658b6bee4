//! The fault-control path, `/_devserver/...`, outside Consul's `/v1/` namespace so no Consul
//! client can hit it by accident. It keeps answering while the server is paused, so a test in
//! another process (C, Python, Node) can pause and resume it.
//!
//! | request | effect |
//! |---|---|
//! | `PUT /_devserver/pause` / `resume` | stop answering `/v1/` (requests hang) / answer again |
//! | `PUT /_devserver/latency?d=50ms` | fixed delay before each `/v1/` request (`d=0s` off) |
//! | `PUT /_devserver/restart` | all state lost, open connections dropped |
//! | `PUT /_devserver/leader?present=false[&hold=7s][&answers=agent]` | "no cluster leader" mode (`true` ends it): requests that need the leader wait `hold` for one, then get a server's (`No cluster leader`) or a client agent's 500s |
//! | `PUT /_devserver/session/invalidate/<id>` | invalidate as a failed TTL/check would |
//! | `PUT /_devserver/node/fail` / `node/heal` | agent node's `serfHealth` critical / passing |
//! | `GET /_devserver/requests` / `DELETE` | request counts and answer body bytes per route, and the requests in flight / reset the counts |
//! | `GET /_devserver/status` | paused, latency, leader, current index, the server's process id |
//!
//! Faults that hit one client alone live beside these in `proxy.rs`: a `FaultProxy` in front
//! of that client (in-process, or `baton-devserver proxy --to HOST:PORT` with its own control
//! address) answers, under `/_proxy/` on that address:
//!
//! | request | effect |
//! |---|---|
//! | `PUT /_proxy/blackhole` | forward nothing either way and answer nothing; connections stay open |
//! | `PUT /_proxy/delay?d=50ms[&jitter=20ms]` | delay each forwarded chunk, both ways (`d=0s` off) |
//! | `PUT /_proxy/drop-after?bytes=N` | close each connection, open or new, after N more bytes |
//! | `PUT /_proxy/reset` | reset (RST) every open connection; later ones work |
//! | `PUT /_proxy/heal` | all proxy faults off; held bytes flow again, nothing is closed |
//! | `GET /_proxy/status` | mode, delay, jitter, drop_after, connections, bytes each way |

use hyper::Method;
use serde_json::json;

use crate::godur::parse_go_duration;
use crate::leaderless::{NoLeader, NoLeaderAnswers};
use crate::query::{Query, Reply};
use crate::shared::Shared;
use crate::state::CheckStatus;

/// Handles one control request.
pub(crate) async fn handle(shared: &Shared, method: &Method, path: &str, q: &Query) -> Reply {
    let action = *method == Method::PUT || *method == Method::POST;
    let ok = || Reply::json(200, &json!(true), false);
    let rest = path.trim_start_matches("/_devserver/");
    match (rest, action) {
        ("pause", true) => {
            shared.set_paused(true);
            ok()
        }
        ("resume", true) => {
            shared.set_paused(false);
            ok()
        }
        ("latency", true) => match parse_go_duration(q.get("d")) {
            Ok(ns) if ns >= 0 => {
                shared.set_latency(std::time::Duration::from_nanos(ns as u64));
                ok()
            }
            Ok(_) => Reply::text(400, "latency must not be negative"),
            Err(e) => Reply::text(400, format!("bad latency ?d=: {e}")),
        },
        ("restart", true) => {
            shared.restart();
            ok()
        }
        ("leader", true) => match q.get("present") {
            "true" | "1" => {
                shared.write(|st| st.rearm_all_timers());
                shared.set_leader(true, None);
                shared.timer_kick.notify_one();
                ok()
            }
            "false" | "0" => {
                let hold = match q.get("hold") {
                    "" => Ok(0),
                    h => parse_go_duration(h),
                };
                let hold = match hold {
                    Ok(ns) if ns >= 0 => std::time::Duration::from_nanos(ns as u64),
                    Ok(_) => return Reply::text(400, "hold must not be negative"),
                    Err(e) => return Reply::text(400, format!("bad ?hold=: {e}")),
                };
                let Some(answers) = NoLeaderAnswers::parse(q.get("answers")) else {
                    return Reply::text(
                        400,
                        format!(
                            "?answers= must be server or agent, got {:?}",
                            q.get("answers")
                        ),
                    );
                };
                shared.set_leader(false, Some(NoLeader { hold, answers }));
                shared.timer_kick.notify_one();
                ok()
            }
            other => Reply::text(
                400,
                format!("?present= must be true or false, got {other:?}"),
            ),
        },
        ("node/fail", true) => {
            shared.set_serf_health(CheckStatus::Critical);
            ok()
        }
        ("node/heal", true) => {
            shared.set_serf_health(CheckStatus::Passing);
            ok()
        }
        ("requests", false) if *method == Method::GET => {
            let c = shared.counts();
            Reply::json(
                200,
                &json!({
                    "total": c.total,
                    "by_route": c.by_route,
                    "blocking_by_route": c.blocking_by_route,
                    "body_bytes_by_route": c.body_bytes_by_route,
                    "in_flight": c.in_flight,
                }),
                false,
            )
        }
        ("requests", false) if *method == Method::DELETE => {
            shared.reset_counts();
            ok()
        }
        ("status", false) if *method == Method::GET => {
            let body = json!({
                "paused": *shared.paused.borrow(),
                "latency_ms": shared.latency().as_millis() as u64,
                "leader": shared.has_leader(),
                "index": shared.read(|st| st.current_index()),
                // The process serving (a test that starts the server through a wrapper can
                // watch it end).
                "pid": std::process::id(),
            });
            Reply::json(200, &body, false)
        }
        (r, true) if r.starts_with("session/invalidate/") => {
            let id = &r["session/invalidate/".len()..];
            Reply::json(200, &json!(shared.invalidate_session(id)), false)
        }
        _ => Reply::text(404, format!("unknown control request: {method} {path}")),
    }
}
