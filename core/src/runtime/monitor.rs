//! The session monitor: one blocking query per client on `/v1/session/list`
//! that notices within about a second when Consul drops one of our sessions
//! (destroyed elsewhere, TTL expiry, failed check or node).

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use crate::foundations::error::ErrorKind;
use crate::foundations::threads::Worker;
use crate::runtime::lease::LostReason;
use crate::runtime::lease::SessionShared;
use crate::runtime::pacing::{next_index, Backoff, Pacer};
use crate::transport::conn::Conn;
use crate::transport::http::QueryOptions;

/// How long one blocking poll of the session list may wait.
const MONITOR_WAIT: Duration = Duration::from_secs(60);

/// The sessions to check: those tracked and not lost (asked afresh each round).
pub(crate) type LiveSessions = Box<dyn Fn() -> Vec<Arc<SessionShared>> + Send>;

pub(crate) fn start(core: Arc<Conn>, live: LiveSessions) -> std::io::Result<Worker> {
    Worker::spawn("baton-session-monitor", move || run(core, live))
}

fn run(core: Arc<Conn>, live: LiveSessions) {
    let mut index = 0u64;
    let mut backoff = Backoff::new();
    let mut pacer = Pacer::new();
    loop {
        if core.closing.is_cancelled() {
            return;
        }
        let opts = if index == 0 {
            QueryOptions::default()
        } else {
            QueryOptions::blocking(index, MONITOR_WAIT)
        };
        pacer.sending();
        let result = crate::api::session_api::read_list(&opts, |req| {
            core.transport.send_on(req, Some(&core.closing))
        });
        match result {
            Ok((list, meta)) => {
                backoff.reset();
                let pause = pacer.after(index, meta.index, MONITOR_WAIT);
                index = next_index(index, meta.index);
                let alive: HashSet<&str> = list.iter().map(|e| e.id.as_str()).collect();
                for s in live() {
                    if alive.contains(s.id.as_str()) {
                        continue;
                    }
                    // The list may predate the session's creation: confirm.
                    match crate::api::session_api::info_on(&core, &s.id) {
                        Ok(None) => s.lose(LostReason::Invalidated),
                        Ok(Some(_)) => {}
                        Err(e) => log::debug!("baton session monitor: info failed: {e}"),
                    }
                }
                if !pause.is_zero() && core.closing.wait_timeout(pause) {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Closed => return,
            Err(e) => {
                log::debug!("baton session monitor: {e}");
                index = 0;
                if core.closing.wait_timeout(backoff.next()) {
                    return;
                }
            }
        }
    }
}
