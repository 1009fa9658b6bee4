//! Read options (blocking index and wait, consistency) and the meta data of answers.

use std::time::Duration;

use crate::foundations::cancel::CancelToken;

/// Consul's default blocking wait when none is given.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(300);

/// Consul's maximum blocking wait.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(600);

/// Meta data Consul sends with read answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryMeta {
    /// `X-Consul-Index` (0 if absent).
    pub index: u64,
    /// `X-Consul-KnownLeader`.
    pub known_leader: bool,
    /// `X-Consul-LastContact` in milliseconds.
    pub last_contact_ms: u64,
}

/// Read consistency mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Consistency {
    /// Answered by the leader without a quorum check (Consul's default).
    #[default]
    Default,
    /// `?consistent`: the leader verifies leadership first.
    Consistent,
    /// `?stale`: any server may answer.
    Stale,
}

/// Options of a read: blocking index and wait, consistency, cancellation and deadline.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Block until the result's index is greater than this (0 = answer at once).
    /// Values are used as given; see [`next_index`](crate::runtime::pacing::next_index) for
    /// the rules when feeding back indexes.
    pub index: u64,
    /// Longest time the server may hold a blocking query (server default 5 min,
    /// max 10 min).
    pub wait: Option<Duration>,
    /// Consistency mode.
    pub consistency: Consistency,
    /// Cancels the call from another thread.
    pub cancel: Option<CancelToken>,
    /// Deadline of the whole call. A blocking query's own timeout is
    /// `wait + wait/16 + 5 s`; this can only shorten it.
    pub timeout: Option<Duration>,
}

impl QueryOptions {
    /// Blocking query options: wait for an index above `index`, at most `wait`.
    pub fn blocking(index: u64, wait: Duration) -> QueryOptions {
        QueryOptions {
            index,
            wait: Some(wait),
            ..Default::default()
        }
    }

    /// Sets the cancel token.
    pub fn with_cancel(mut self, cancel: CancelToken) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Sets the deadline.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sets the consistency mode.
    pub fn with_consistency(mut self, consistency: Consistency) -> Self {
        self.consistency = consistency;
        self
    }
}

/// Formats a wait the way the Go client does: integer milliseconds + `ms`,
/// a positive sub-millisecond value becomes `1ms`.
pub(crate) fn format_wait(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 && !d.is_zero() {
        "1ms".to_string()
    } else {
        format!("{ms}ms")
    }
}
