//! "No cluster leader": how a Consul cluster answers while it elects a raft leader.
//!
//! A server without a leader cannot forward what needs one (KV, sessions, txn,
//! catalog and health reads at default consistency). It does not fail at once:
//! Consul's RPC layer waits up to `rpc_hold_timeout` (7 s by default) for a
//! leader to appear and retries, so a short election costs a client only a slow
//! answer. Past the hold it answers 500 with `No cluster leader`
//! (`agent/structs/errors.go`, `ErrNoLeader`). A client agent in front of the
//! servers says it in its own words: the server's text behind `rpc error making
//! call: `, `Raft leader not found in server lookup mapping` (its router does not
//! know the new leader yet, `errLeaderNotTracked`), or `rpc error getting client:
//! failed to get conn: …` when the server it picked is down (the RPC pool's
//! wrappers, `agent/pool/pool.go`). Session TTL timers stop meanwhile and
//! restart at a full 2×TTL on the new leader (`server.go`, `initializeSessionTimers`);
//! that part lives with the timers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::watch;

/// What a leaderless cluster answers with, and after how long.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NoLeader {
    /// How long a request that needs the leader waits for one before it fails,
    /// as Consul's `rpc_hold_timeout` does (7 s by default). A leader that returns
    /// meanwhile answers the request normally. Zero fails at once.
    pub hold: Duration,
    /// Whose words the 500s are in.
    pub answers: NoLeaderAnswers,
}

/// Whose words a leaderless cluster's 500s are in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NoLeaderAnswers {
    /// A server's: `No cluster leader`.
    #[default]
    Server,
    /// A client agent's, in turn: `rpc error making call: No cluster leader`,
    /// `Raft leader not found in server lookup mapping`, and `rpc error getting
    /// client: failed to get conn: dial tcp 127.0.0.1:8300: connect: connection
    /// refused`.
    ClientAgent,
}

impl NoLeaderAnswers {
    /// Parses `server` or `agent` (the control endpoint's `answers=`).
    pub fn parse(s: &str) -> Option<NoLeaderAnswers> {
        match s {
            "" | "server" => Some(NoLeaderAnswers::Server),
            "agent" | "client-agent" => Some(NoLeaderAnswers::ClientAgent),
            _ => None,
        }
    }
}

/// A client agent's texts for one leaderless moment, used in turn.
const CLIENT_AGENT_TEXTS: [&str; 3] = [
    "rpc error making call: No cluster leader",
    "Raft leader not found in server lookup mapping",
    "rpc error getting client: failed to get conn: dial tcp 127.0.0.1:8300: connect: connection refused",
];

/// The leader's presence, and how its absence answers.
pub(crate) struct Leaderless {
    present: watch::Sender<bool>,
    mode: Mutex<NoLeader>,
    answered: AtomicU64,
}

impl Default for Leaderless {
    fn default() -> Self {
        Leaderless {
            present: watch::channel(true).0,
            mode: Mutex::new(NoLeader::default()),
            answered: AtomicU64::new(0),
        }
    }
}

impl Leaderless {
    pub fn has_leader(&self) -> bool {
        *self.present.borrow()
    }

    /// Ends ("true") or starts a leaderless window; `mode` says how it answers.
    pub fn set(&self, present: bool, mode: Option<NoLeader>) {
        if let Some(m) = mode {
            *self.mode.lock().unwrap_or_else(|e| e.into_inner()) = m;
        }
        self.present.send_replace(present);
    }

    /// For a request that needs the leader: waits up to the hold for one.
    pub async fn hold(&self) {
        if self.has_leader() {
            return;
        }
        let hold = self.mode.lock().unwrap_or_else(|e| e.into_inner()).hold;
        if hold.is_zero() {
            return;
        }
        let mut rx = self.present.subscribe();
        let _ = tokio::time::timeout(hold, rx.wait_for(|p| *p)).await;
    }

    /// The text of the next 500 a request that needs the leader gets.
    pub fn text(&self) -> &'static str {
        match self.mode.lock().unwrap_or_else(|e| e.into_inner()).answers {
            NoLeaderAnswers::Server => "No cluster leader",
            NoLeaderAnswers::ClientAgent => {
                let n = self.answered.fetch_add(1, Ordering::Relaxed) as usize;
                CLIENT_AGENT_TEXTS[n % CLIENT_AGENT_TEXTS.len()]
            }
        }
    }
}

/// Whether a request on `path` needs the raft leader (it is forwarded to it).
/// Agent endpoints and `/v1/status/*` are answered by the agent itself.
pub(crate) fn needs_leader(path: &str) -> bool {
    [
        "/v1/kv/",
        "/v1/txn",
        "/v1/session/",
        "/v1/catalog/",
        "/v1/health/",
    ]
    .iter()
    .any(|p| path.starts_with(p))
}
