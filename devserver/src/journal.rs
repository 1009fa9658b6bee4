//! The request journal: what clients sent, for tests that must check a rule
//! about every request (e.g. "no request carries a session after it was lost").
//! Off by default; bounded.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Most entries kept; older ones are dropped first.
const CAPACITY: usize = 100_000;
/// Most bytes of a body kept per entry.
const BODY_MAX: usize = 64 * 1024;

/// One `/v1/` request as the server received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalEntry {
    /// When it arrived (before any injected latency or hold).
    pub at: Instant,
    /// `GET`, `PUT`, `DELETE`.
    pub method: String,
    /// The decoded path, e.g. `/v1/session/renew/<id>`.
    pub path: String,
    /// The raw query string (without `?`), e.g. `acquire=<id>&flags=3`.
    pub query: String,
    /// The body as text (lossy UTF-8, cut after 64 KiB).
    pub body: String,
}

impl JournalEntry {
    /// Whether the request names `text` in its path, query or body.
    pub fn mentions(&self, text: &str) -> bool {
        self.path.contains(text) || self.query.contains(text) || self.body.contains(text)
    }
}

#[derive(Default)]
pub(crate) struct Journal {
    on: AtomicBool,
    entries: Mutex<VecDeque<JournalEntry>>,
}

impl Journal {
    pub fn set(&self, on: bool) {
        self.on.store(on, Ordering::SeqCst);
    }

    pub fn enabled(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    pub fn record(&self, at: Instant, method: &str, path: &str, query: &str, body: &[u8]) {
        if !self.enabled() {
            return;
        }
        let body = String::from_utf8_lossy(&body[..body.len().min(BODY_MAX)]).into_owned();
        let mut q = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() >= CAPACITY {
            q.pop_front();
        }
        q.push_back(JournalEntry {
            at,
            method: method.to_string(),
            path: path.to_string(),
            query: query.to_string(),
            body,
        });
    }

    pub fn entries(&self) -> Vec<JournalEntry> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}
