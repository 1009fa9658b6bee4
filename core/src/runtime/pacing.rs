//! Pacing of blocking-query loops, shared by every one of them (the key hub's polls, the
//! session monitor, a barrier's poll): the next index to send, the backoff after a failure,
//! and the pause after an answer that made no progress.

use std::time::{Duration, Instant};

/// The index to send with the next blocking query, after a query sent with
/// `prev` returned `got` (consul-semantics §6.5): if the index went backwards,
/// start over with 0 (a non-blocking read); otherwise use it, but never below 1.
pub fn next_index(prev: u64, got: u64) -> u64 {
    if got < prev {
        0
    } else {
        got.max(1)
    }
}

/// Backoff for retrying failed polls: the first retry after a success goes at
/// once, then 100 ms doubling to 5 s.
///
/// A long poll is most often cut by the server closing its connections (an
/// agent restart, a leader change): the state may have changed under the
/// poll, and a holder must learn that before anyone else acts on it, so the
/// first retry does not wait. A server that is down costs one refused connect
/// more.
#[derive(Debug)]
pub(crate) struct Backoff(Option<Duration>);

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff(None)
    }
    pub(crate) fn reset(&mut self) {
        self.0 = None;
    }
    pub(crate) fn next(&mut self) -> Duration {
        let next = match self.0 {
            None => Duration::ZERO,
            Some(d) if d.is_zero() => Duration::from_millis(100),
            Some(d) => (d * 2).min(Duration::from_secs(5)),
        };
        self.0 = Some(next);
        next
    }
}

/// Paces a blocking-query loop against answers that make no progress early.
///
/// Consul holds a blocking query until the index passes the one sent or the
/// wait ends, and never answers index 0 (consul-semantics §6.5). A server or
/// proxy that answers at once without progress (the same or a lower index, or
/// none at all, read as 0) would have a client poll it in a tight loop;
/// Consul's guidance is for clients to rate-limit. The first such answer in a
/// row costs nothing (an index that went backwards is read afresh at once),
/// later ones pause with [`Backoff`] (100 ms doubling to 5 s). An answer with
/// progress, or one that came only after half the wait (a plain timeout),
/// resets it; so against a real Consul it never pauses.
#[derive(Debug)]
pub(crate) struct Pacer {
    started: Instant,
    backoff: Backoff,
}

impl Pacer {
    pub(crate) fn new() -> Pacer {
        Pacer {
            started: Instant::now(),
            backoff: Backoff::new(),
        }
    }

    /// Notes that a poll is being sent now.
    pub(crate) fn sending(&mut self) {
        self.started = Instant::now();
    }

    /// The pause before the next poll, after an answer with index `got` to a
    /// poll sent with index `sent` (0: not blocking) that could block `wait`.
    pub(crate) fn after(&mut self, sent: u64, got: u64, wait: Duration) -> Duration {
        let early = self.started.elapsed() < wait / 2;
        if got == 0 || (got <= sent && early) {
            self.backoff.next()
        } else {
            self.backoff.reset();
            Duration::ZERO
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_rules() {
        assert_eq!(next_index(0, 0), 1);
        assert_eq!(next_index(0, 5), 5);
        assert_eq!(next_index(5, 5), 5);
        assert_eq!(next_index(5, 9), 9);
        assert_eq!(next_index(9, 3), 0);
        assert_eq!(next_index(1, 0), 0);
    }

    #[test]
    fn the_pacer_pauses_only_on_early_answers_without_progress() {
        let wait = Duration::from_secs(300);
        let mut p = Pacer::new();
        // Progress, and a plain timeout (no progress after the whole wait): no pause.
        p.sending();
        assert_eq!(p.after(0, 5, wait), Duration::ZERO);
        p.sending();
        assert_eq!(p.after(5, 9, wait), Duration::ZERO);
        p.started = Instant::now() - wait;
        assert_eq!(p.after(9, 9, wait), Duration::ZERO);
        // Early answers without progress: the first is free, then 100 ms doubling.
        for (sent, got) in [(9, 9), (9, 0), (0, 0), (9, 3)] {
            let mut p = Pacer::new();
            p.sending();
            assert_eq!(p.after(sent, got, wait), Duration::ZERO);
            assert_eq!(p.after(sent, got, wait), Duration::from_millis(100));
            assert_eq!(p.after(sent, got, wait), Duration::from_millis(200));
            // Progress resets it.
            assert_eq!(p.after(sent, sent + 1, wait), Duration::ZERO);
            assert_eq!(p.after(sent, got, wait), Duration::ZERO);
        }
    }

    #[test]
    fn backoff_retries_at_once_then_doubles_to_a_cap() {
        let mut b = Backoff::new();
        assert_eq!(b.next(), Duration::ZERO);
        assert_eq!(b.next(), Duration::from_millis(100));
        assert_eq!(b.next(), Duration::from_millis(200));
        for _ in 0..10 {
            b.next();
        }
        assert_eq!(b.next(), Duration::from_secs(5));
        b.reset();
        assert_eq!(b.next(), Duration::ZERO);
        assert_eq!(b.next(), Duration::from_millis(100));
    }
}
