//! Riding out a cluster's bad moments inside a call that has time left.
//!
//! A Consul cluster without a raft leader (an election after a server restart,
//! an upgrade, a network blip) answers `500 No cluster leader` and the like for a
//! few seconds; a client agent restarting refuses connections. Such failures go
//! away by themselves ([`Error::is_transient`]), so an acquire, a campaign or a
//! semaphore wait with time left tries again, with a growing pause, instead of
//! failing; a refusal (403, 400, a conflict) still fails at once. The pause is
//! cut short by the call's deadline, its cancel token, the loss of its session
//! and the client's close.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crossbeam_channel::select;

use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::runtime::lease::Session;
use crate::transport::conn::Conn;
use crate::transport::http::ProbeSlot;

/// The first pause after a transient failure...
const FIRST_PAUSE: Duration = Duration::from_millis(50);
/// ...doubling up to this. However many calls of a client wait, one of them
/// probes at a time, and the first answer Consul gives any thread of the
/// client ends every pause (see `http::Availability`).
const MAX_PAUSE: Duration = Duration::from_millis(250);
/// After this long without any answer (refused, reset, not resolved, no
/// answer in time), a call says so once at warn level: a wrong address or
/// port looks the same as an agent that is down, and a call without a
/// deadline would otherwise wait in silence.
const WARN_UNREACHED_AFTER: Duration = Duration::from_secs(1);
/// After this long of answers that say "not now" (no cluster leader, 429,
/// 503: a raft election normally ends within seconds), the same warning.
const WARN_AFTER: Duration = Duration::from_secs(10);

/// The judgement of a waiting call (`what`: "lock acquire"), started before it runs
/// ([`Judging::start`]) and given its outcome after ([`Judging::verdict`]): it tells
/// contention from an unreachable Consul. A call that ran out of time ("not acquired", or a
/// `Timeout` error) although not one of its requests got an answer from Consul ends with a
/// `Connection` error naming the address, where it came from and the last failure, in every
/// language. A call in which Consul answered keeps its outcome: someone else holds the key,
/// or Consul could not decide in time (no leader, 429, 503).
pub(crate) struct Judging {
    started: Instant,
    reach: crate::foundations::scope::ReachGuard,
}

impl Judging {
    /// Starts recording whether the calling thread's requests reach Consul.
    pub(crate) fn start() -> Judging {
        Judging {
            started: Instant::now(),
            reach: crate::foundations::scope::track_reach(),
        }
    }

    /// When the call started.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// The call's outcome, judged.
    pub(crate) fn verdict(self, conn: &Conn, what: &str, result: Result<bool>) -> Result<bool> {
        let timed_out = match &result {
            Ok(false) => true,
            Err(e) => e.kind() == ErrorKind::Timeout,
            Ok(true) => false,
        };
        if !timed_out {
            return result;
        }
        let Some((tries, last)) = self.reach.unreached() else {
            return result;
        };
        let address = conn.transport.address();
        // The last failure may already name the address (a refused connection does).
        let at = if last.contains(&address) {
            String::new()
        } else {
            format!(" at {address}")
        };
        // Transient as its causes are: a caller that retries its own calls may
        // try again (an agent restarting refuses connections for a while).
        Err(Error::new(
            ErrorKind::Connection,
            format!(
                "{what}: no answer from Consul{at} in {:.1} s ({tries} {}); last error: {last}",
                self.started.elapsed().as_secs_f64(),
                if tries == 1 { "try" } else { "tries" }
            ),
        )
        .transient())
    }
}

/// One call's run of transient failures, for the one warning it is worth: after
/// [`WARN_UNREACHED_AFTER`] without any answer, or [`WARN_AFTER`] of "not now" answers.
/// Shared by the blocking calls ([`RideOut`]) and the async acquire (`aio`).
#[derive(Debug, Default)]
pub(crate) struct Unavailable {
    since: Option<Instant>,
    warned: bool,
}

impl Unavailable {
    /// Notes the transient failure `e` of `what`, and warns once when the run has lasted.
    pub(crate) fn note(&mut self, core: &Conn, what: &str, e: &Error, has_deadline: bool) {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        // A status means Consul answered "not now"; none means nothing answered.
        let warn_after = if e.status().is_none() {
            WARN_UNREACHED_AFTER
        } else {
            WARN_AFTER
        };
        if self.warned || now - since < warn_after {
            return;
        }
        self.warned = true;
        let state = if e.status().is_none() {
            let address = core.transport.address();
            if e.to_string().contains(&address) {
                "nothing has answered".to_string()
            } else {
                format!("nothing has answered at {address}")
            }
        } else {
            "Consul has been unavailable".to_string()
        };
        log::warn!(
            "baton {what}: {state} for {:.1} s ({e}); still trying{}",
            (now - since).as_secs_f64(),
            if has_deadline {
                " until the call's deadline"
            } else {
                " (no deadline: check the address if this persists)"
            }
        );
    }
}

/// Whether `e` is Consul's answer that its cluster has no usable leader: a transient 500
/// (no leader, a leadership change, an agent that cannot reach a server), not a rate limit.
fn no_leader(e: &Error) -> bool {
    e.status() == Some(500)
        && e.is_transient()
        && !e
            .server_text()
            .is_some_and(|t| t.to_ascii_lowercase().contains("rate limit"))
}

/// One pause of a call riding out a transient failure: when it ends, however it ends, its
/// time is counted in the client's metrics as time spent waiting out a Consul without a
/// leader, when that was the failure.
struct Paused<'a> {
    core: &'a Conn,
    since: Instant,
    leaderless: bool,
}

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        if self.leaderless {
            self.core.transport.metrics.leaderless(self.since.elapsed());
        }
    }
}

/// Retries of transient failures for one call (see the module docs).
pub(crate) struct RideOut<'a> {
    core: &'a Conn,
    what: &'a str,
    deadline: Option<Instant>,
    cancel: Option<&'a CancelToken>,
    session: Option<&'a Session>,
    pause: Duration,
    retries: u32,
    /// The deadline had passed when the call began (a try-once call).
    try_once: bool,
    /// The current run of transient failures.
    failing: Unavailable,
    /// Held while this call's next try is the client's probe of an
    /// unavailable Consul.
    probe: Option<ProbeSlot<'a>>,
}

impl<'a> RideOut<'a> {
    /// Retries for `what` (named in logs and errors) until `deadline` (`None`:
    /// for as long as it takes), interrupted by `cancel` and by the client's close.
    pub(crate) fn new(
        core: &'a Conn,
        what: &'a str,
        deadline: Option<Instant>,
        cancel: Option<&'a CancelToken>,
    ) -> RideOut<'a> {
        RideOut {
            core,
            what,
            deadline,
            cancel,
            session: None,
            pause: FIRST_PAUSE,
            retries: 0,
            try_once: deadline.is_some_and(|d| d <= Instant::now()),
            failing: Unavailable::default(),
            probe: None,
        }
    }

    /// Also stops when `session` is lost (the call cannot succeed on it).
    pub(crate) fn on_session(mut self, session: &'a Session) -> RideOut<'a> {
        self.session = Some(session);
        self
    }

    /// Runs `op` until it succeeds, fails for good, or no time is left.
    pub(crate) fn run<T>(&mut self, mut op: impl FnMut() -> Result<T>) -> Result<T> {
        loop {
            let result = op();
            // A probe ends with its answer.
            self.probe = None;
            match result {
                Ok(v) => {
                    self.pause = FIRST_PAUSE;
                    self.failing = Unavailable::default();
                    return Ok(v);
                }
                Err(e) => self.wait_after(e)?,
            }
        }
    }

    /// [`RideOut::wait_after`] for a caller whose next request is not made
    /// through [`RideOut::run`]: the probe slot is given back at once, so it
    /// is never kept while the caller waits on something else.
    pub(crate) fn pause(&mut self, e: Error) -> Result<()> {
        let r = self.wait_after(e);
        self.probe = None;
        r
    }

    /// After a failure `e`: returns it if it is not transient; otherwise waits
    /// before the next try, or fails if the call ends first. With no time left
    /// for another try, the error is `e` itself for a try-once call (it reports
    /// what went wrong), else a `Timeout` naming `e` (an acquire turns it into
    /// "not acquired by the deadline").
    fn wait_after(&mut self, e: Error) -> Result<()> {
        if !e.is_transient() {
            return Err(e);
        }
        self.probe = None;
        let now = Instant::now();
        let mut wake = now + self.pause;
        if let Some(d) = self.deadline {
            if d <= now + Duration::from_millis(1) {
                return Err(self.gave_up(e));
            }
            wake = wake.min(d);
        }
        self.retries += 1;
        self.core.transient_retries.fetch_add(1, Ordering::Relaxed);
        // Counted when the pause ends, however it ends.
        let _paused = Paused {
            core: self.core,
            since: now,
            leaderless: no_leader(&e),
        };
        self.failing
            .note(self.core, self.what, &e, self.deadline.is_some());
        log::debug!(
            "baton {}: Consul unavailable ({e}); retry {} in {:?}",
            self.what,
            self.retries,
            wake - now
        );
        self.pause = (self.pause * 2).min(MAX_PAUSE);
        let never = crossbeam_channel::never();
        let cancel = self.cancel.map_or_else(|| never.clone(), |c| c.receiver());
        let lost = self
            .session
            .map_or_else(|| never.clone(), |s| s.cancel_token().receiver());
        let closed = self.core.closing.receiver();
        let availability = &self.core.transport.availability;
        let back = availability.next_answer().receiver();
        loop {
            select! {
                // Consul answered another thread of this client: try again now.
                recv(back) -> _ => {
                    self.core.transport.metrics.retry();
                    return Ok(());
                }
                recv(cancel) -> _ => return Err(Error::new(
                    ErrorKind::Cancelled,
                    format!("{} cancelled", self.what),
                )),
                recv(lost) -> _ => return Err(Error::new(
                    ErrorKind::SessionInvalidated,
                    format!(
                        "session {} was lost during {} while Consul was unavailable ({e})",
                        self.session.map_or("", |s| s.id()),
                        self.what
                    ),
                )),
                recv(closed) -> _ => {
                    return Err(Error::new(ErrorKind::Closed, "the baton client is closed"))
                }
                recv(crossbeam_channel::at(wake)) -> _ => {}
            }
            if self.deadline.is_some_and(|d| d <= Instant::now()) {
                return Err(self.gave_up(e));
            }
            // One call of the client probes at a time; the others wait for its
            // answer (which wakes them through `back`) or their next turn.
            if let Some(slot) = availability.try_probe() {
                self.probe = Some(slot);
                self.core.transport.metrics.retry();
                return Ok(());
            }
            wake = Instant::now() + self.pause;
            if let Some(d) = self.deadline {
                wake = wake.min(d);
            }
        }
    }

    fn gave_up(&self, e: Error) -> Error {
        if self.try_once {
            return e;
        }
        Error::new(
            ErrorKind::Timeout,
            format!(
                "{}: the deadline passed while Consul was unavailable ({} retries; last error: {e})",
                self.what, self.retries
            ),
        )
    }
}
