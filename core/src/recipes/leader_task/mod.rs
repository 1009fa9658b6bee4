//! The leader task: run a piece of work only while leading an [`Election`],
//! cancel it the moment leadership ends, resign when it returns, and campaign
//! again — client-go's `leaderelection.RunOrDie` and Curator's
//! `LeaderSelector` (with `autoRequeue`) on a Consul key.
//!
//! It adds no wire format and no thread: the campaign is the election's, the
//! task runs on the thread that calls [`LeaderTask::run`], its token is the
//! election's loss signal, and `on_new_leader` is fed by the client's key hub
//! through the dispatcher (see `observe`).

mod observe;

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::client::Client;
use crate::foundations::cancel::{CancelToken, HookGuard};
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::recipes::election::{Election, Leader};
use crate::recipes::lock::LockLost;

use observe::{NewLeaderCallback, NewLeaderFeed};

/// How long a candidate whose task returned waits, by default, for another
/// candidate to take over before it campaigns again (see
/// [`LeaderTask::requeue_delay`]).
pub const DEFAULT_REQUEUE_DELAY: Duration = Duration::from_millis(500);

/// Why a leader's term ended, as [`LeaderTask::on_stopped_leading`] reports it.
///
/// A term ends only once the task has returned: "stopped leading" always means
/// the task is no longer running (client-go calls `OnStoppedLeading` while the
/// task may still run, and even when it never led).
#[derive(Debug)]
#[non_exhaustive]
pub enum StoppedLeading {
    /// The task returned `Ok`; leadership was given back (resigned).
    Returned,
    /// The task returned this error; leadership was given back (resigned).
    Failed(Error),
    /// Leadership ended under the task (key taken or cleared, session lost,
    /// local lease deadline passed, client closed): the task's token fired at
    /// that moment and the term ended when the task returned. A task that
    /// resigned itself (through [`LeaderTask::election`]) ends its term as
    /// `Lost(LockLost::Released)`.
    Lost(LockLost),
    /// `stop` fired: the task's token fired, and leadership was given back
    /// once the task returned.
    Stopped,
}

impl StoppedLeading {
    /// A stable lowercase name: `"returned"`, `"failed"`, `"lost"`,
    /// `"stopped"`, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            StoppedLeading::Returned => "returned",
            StoppedLeading::Failed(_) => "failed",
            StoppedLeading::Lost(_) => "lost",
            StoppedLeading::Stopped => "stopped",
        }
    }
}

/// The name, then the error or the loss's reason: `lost: session_lost (invalidated)`.
impl fmt::Display for StoppedLeading {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoppedLeading::Failed(e) => write!(f, "failed: {e}"),
            StoppedLeading::Lost(why) => write!(f, "lost: {why}"),
            other => f.write_str(other.name()),
        }
    }
}

type StartedCallback = Arc<dyn Fn() + Send + Sync + 'static>;
type StoppedCallback = Arc<dyn Fn(&StoppedLeading) + Send + Sync + 'static>;

/// Runs a task while leading an election, and only then.
///
/// [`LeaderTask::run`] loops: campaign (waiting, cancellable by `stop`) → call
/// the task on the calling thread with a token that fires the moment
/// leadership ends or `stop` fires → when the task returns, resign if still
/// leading → campaign again, unless `stop` fired or [`LeaderTask::requeue`]
/// is off. It is client-go's `RunOrDie` with Curator's `autoRequeue`, with
/// these differences, each chosen for the complaints users have of those two:
///
/// * **Loss cancels before anyone else starts.** The task's token is the
///   election's own loss signal: it fires as soon as this process learns the
///   leadership ended (the key hub sees the key change, the session is found
///   invalidated, or the local lease deadline passes — last renew's send time +
///   TTL − margin, with no network needed), before any loss callback and
///   before any clean-up request. A session that is invalidated holds its key
///   back for the session's lock-delay, and the local deadline comes before the
///   server's expiry, so the token fires before another candidate can be
///   elected, hence before its task starts — as long as the key change reaches
///   this process within the lock-delay (see the book page, "Leader tasks", for
///   exactly what holds). A task that ignores its token keeps running:
///   fence its writes with [`Election::sequencer`].
/// * **A task error is not a crash.** The leader resigns, reports
///   [`StoppedLeading::Failed`] and (with requeue) campaigns again after the
///   requeue delay; with requeue off, `run` returns the error.
/// * **"Stopped leading" means the task has returned**, and it is never
///   reported for a candidate that did not lead.
/// * **A returning leader lets the others go first**: after its task returns
///   it waits up to [`LeaderTask::requeue_delay`] for another candidate to take
///   over before campaigning again, so requeueing hands leadership round
///   instead of re-winning a key its waiters were about to take.
///
/// Callbacks are set before `run`: [`LeaderTask::on_started_leading`] and
/// [`LeaderTask::on_stopped_leading`] run on the thread calling `run`, just
/// before and just after the task; [`LeaderTask::on_new_leader`] runs on the
/// client's dispatcher thread. None runs after `run` returns.
///
/// The wire format is the election's (Go's `api.Lock` on one key), so Go
/// services and other baton elections take part in the same election.
pub struct LeaderTask {
    election: Election,
    value: Vec<u8>,
    requeue: bool,
    requeue_delay: Duration,
    started: Option<StartedCallback>,
    stopped: Option<StoppedCallback>,
    new_leader: Option<NewLeaderCallback>,
    running: Arc<AtomicBool>,
}

impl fmt::Debug for LeaderTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderTask")
            .field("key", &self.election.key())
            .field("leader", &self.election.is_leader())
            .field("requeue", &self.requeue)
            .field("requeue_delay", &self.requeue_delay)
            .finish()
    }
}

impl Client {
    /// A leader task on the election `key`, campaigning with `value` (e.g. this
    /// process's address) and the client's default session. For other
    /// election options (an explicit session, flags 0), build the election
    /// and use [`LeaderTask::new`].
    pub fn leader_task(&self, key: &str, value: impl Into<Vec<u8>>) -> Result<LeaderTask> {
        Ok(LeaderTask::new(self.election(key)?, value))
    }
}

impl LeaderTask {
    /// A leader task on `election`, campaigning with `value`; it requeues, with
    /// [`DEFAULT_REQUEUE_DELAY`], and has no callbacks.
    pub fn new(election: Election, value: impl Into<Vec<u8>>) -> LeaderTask {
        LeaderTask {
            election,
            value: value.into(),
            requeue: true,
            requeue_delay: DEFAULT_REQUEUE_DELAY,
            started: None,
            stopped: None,
            new_leader: None,
            running: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether to campaign again after a term ends (default `true`, Curator's
    /// `autoRequeue`). With `false`, `run` returns after one term: `Ok` when
    /// the task returned `Ok` or leadership was lost, the task's error when it
    /// failed.
    pub fn requeue(mut self, requeue: bool) -> Self {
        self.requeue = requeue;
        self
    }

    /// How long, after its task returned (or failed) and it resigned, this
    /// candidate waits for another one to take over before campaigning again
    /// (default [`DEFAULT_REQUEUE_DELAY`]). The wait ends as soon as another
    /// leader is seen, so it costs nothing when others are waiting; alone, it
    /// is the pause between two terms (and bounds how fast a failing task is
    /// retried). After a *loss* the candidate campaigns again at once. Zero
    /// campaigns again at once, which usually re-wins the key before the
    /// other candidates' watches wake.
    pub fn requeue_delay(mut self, delay: Duration) -> Self {
        self.requeue_delay = delay;
        self
    }

    /// Called on the thread running [`LeaderTask::run`] each time this
    /// candidate is elected, just before the task starts (client-go's
    /// `OnStartedLeading`, without the task: that is `run`'s argument).
    pub fn on_started_leading(mut self, callback: impl Fn() + Send + Sync + 'static) -> Self {
        self.started = Some(Arc::new(callback));
        self
    }

    /// Called on the thread running [`LeaderTask::run`] each time a term
    /// ends, after the task returned and leadership was given back, with why
    /// it ended. Never called for a candidate that was not elected.
    pub fn on_stopped_leading(
        mut self,
        callback: impl Fn(&StoppedLeading) + Send + Sync + 'static,
    ) -> Self {
        self.stopped = Some(Arc::new(callback));
        self
    }

    /// Called on the client's dispatcher thread while `run` runs: first with
    /// the current leader (`None`: nobody leads), then at every change (a new
    /// leader, a new value, nobody), in order and never stepping back to an
    /// older state (the election's [`Observer`](crate::Observer)). It includes
    /// this candidate's own terms. Changes close together may be reported
    /// once, as the latest. None is called after `run` returns: `run` waits
    /// for one that is running before it returns.
    pub fn on_new_leader(
        mut self,
        callback: impl Fn(Option<Leader>) + Send + Sync + 'static,
    ) -> Self {
        self.new_leader = Some(Arc::new(callback));
        self
    }

    /// The election this task campaigns in: for the task to fence its writes
    /// ([`Election::sequencer`]) or [`Election::proclaim`] a new value.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// The election's key.
    pub fn key(&self) -> &str {
        self.election.key()
    }

    /// Whether this candidate leads now (see [`Election::is_leader`]).
    pub fn is_leader(&self) -> bool {
        self.election.is_leader()
    }

    /// Campaigns and runs `task` while leading, until `stop` fires (or, with
    /// requeue off, for one term).
    ///
    /// `task` runs on this thread with a token that fires the moment
    /// leadership ends or `stop` fires; it should return soon after. When it
    /// returns, the candidate resigns if it still leads (no lock-delay for
    /// the next leader).
    ///
    /// Returns `Ok(())` when `stop` fires — while campaigning, at once, with
    /// nothing held; while leading, once the task returned and leadership was
    /// given back. With requeue off it returns after the one term: `Ok(())`,
    /// or the task's error. Errors: a campaign's non-transient error, which
    /// ends the loop (kind `Closed` when the client closes, `Conflict` when
    /// the key is not an election key, `SessionInvalidated` when an explicit
    /// session is lost, `PermissionDenied`); transient ones are logged and the
    /// campaign retried. A resign after `stop` that Consul did not confirm is
    /// returned as its error (the release goes on in the background and
    /// [`Client::close`] completes it); other resign failures are logged.
    /// Kind `Conflict` if `run` is already running on this `LeaderTask`.
    ///
    /// A panic in `task` or a callback resigns and unwinds out of `run`.
    pub fn run<F>(&self, mut task: F, stop: &CancelToken) -> Result<()>
    where
        F: FnMut(&CancelToken) -> Result<()>,
    {
        let _run = self.start_run()?;
        let mut hand_over: Option<u64> = None;
        loop {
            if let Some(term) = hand_over.take() {
                self.wait_for_hand_over(term, stop);
            }
            if !self.elect(stop)? {
                return Ok(());
            }
            let term = match self.begin_term(stop) {
                Begin::Started(term) => term,
                Begin::Stopped(resigned) => return resigned,
            };
            let result = task(&term.token);
            match self.end_term(term, result, stop) {
                Flow::Done(outcome) => return outcome,
                Flow::Again { hand_over: h } => hand_over = h,
            }
        }
    }

    /// Marks a run as started (kind `Conflict` if one is running) and starts
    /// the `on_new_leader` feed; the guard ends both, resigning first.
    pub(crate) fn start_run(&self) -> Result<RunGuard> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Err(Error::new(
                ErrorKind::Conflict,
                format!("leader task {:?} is already running", self.key()),
            ));
        }
        let mut guard = RunGuard {
            running: Arc::clone(&self.running),
            election: self.election.view(),
            _feed: None,
        };
        guard._feed = match &self.new_leader {
            Some(cb) => Some(NewLeaderFeed::start(
                self.election.lock().shared_client(),
                self.key(),
                cb.clone(),
            )?),
            None => None,
        };
        Ok(guard)
    }

    /// Campaigns until elected (`Ok(true)`) or `stop` fires (`Ok(false)`),
    /// retrying transient failures; other errors end the run.
    fn elect(&self, stop: &CancelToken) -> Result<bool> {
        loop {
            if stop.is_cancelled() {
                return Ok(false);
            }
            match self.election.campaign(&self.value, None, Some(stop)) {
                Ok(true) => return Ok(true),
                Ok(false) => continue,
                Err(e) => match self.campaign_failed(e, stop) {
                    Some(e) => return Err(e),
                    None => {
                        stop.wait_timeout(self.retry_pause());
                    }
                },
            }
        }
    }

    /// A failed campaign: `None` when the run goes on (after
    /// [`LeaderTask::retry_pause`]; `stop` fired, or a transient error, logged),
    /// else the error that ends it.
    pub(crate) fn campaign_failed(&self, e: Error, stop: &CancelToken) -> Option<Error> {
        if stop.is_cancelled() {
            return None;
        }
        if e.is_transient() {
            log::warn!(
                "baton leader task {:?}: campaign failed, retrying: {e}",
                self.key()
            );
            return None;
        }
        Some(e)
    }

    /// How long a campaign that failed transiently waits before the next.
    pub(crate) fn retry_pause(&self) -> Duration {
        self.requeue_delay.max(Duration::from_millis(100))
    }

    /// The value this candidate campaigns with.
    pub(crate) fn value(&self) -> &[u8] {
        &self.value
    }

    /// How long a candidate whose term ended waits for another to take over.
    pub(crate) fn hand_over_wait(&self) -> Duration {
        self.requeue_delay
    }

    /// Just elected: the task's token (fired by the loss of this holding or
    /// by `stop`) and the `on_started_leading` callback; or, when `stop`
    /// fired first, the resign's outcome.
    pub(crate) fn begin_term(&self, stop: &CancelToken) -> Begin {
        if stop.is_cancelled() {
            return Begin::Stopped(self.resign());
        }
        // The election's token for this holding (already fired if it is over),
        // and `stop`, both fire the task's token: on the thread that signals the
        // loss, at the moment it does, before any loss callback.
        let leadership = self.election.cancel_token();
        let token = CancelToken::new();
        let on_loss = {
            let t = token.clone();
            leadership.on_cancel(move || t.cancel())
        };
        let on_stop = {
            let t = token.clone();
            stop.on_cancel(move || t.cancel())
        };
        let lock_index = self.election.sequencer().map(|s| s.lock_index);
        if let Some(cb) = &self.started {
            cb();
        }
        Begin::Started(TermStart {
            token,
            lock_index,
            _links: (on_loss, on_stop),
        })
    }

    /// The task of `term` returned `result`: why the term ended, the resign
    /// (unless it was lost), `on_stopped_leading`, and what the run does next.
    pub(crate) fn end_term(&self, term: TermStart, result: Result<()>, stop: &CancelToken) -> Flow {
        let TermStart { lock_index, .. } = term;
        let why = if !self.election.is_leader() {
            if let Err(e) = &result {
                log::debug!("baton leader task {:?}: after the loss: {e}", self.key());
            }
            StoppedLeading::Lost(self.election.last_lost().unwrap_or(LockLost::KeyChanged))
        } else if stop.is_cancelled() {
            if let Err(e) = &result {
                log::debug!("baton leader task {:?}: after stop: {e}", self.key());
            }
            StoppedLeading::Stopped
        } else {
            match result {
                Ok(()) => StoppedLeading::Returned,
                Err(e) => StoppedLeading::Failed(e),
            }
        };
        let resigned = match why {
            StoppedLeading::Lost(_) => Ok(()),
            _ => self.resign(),
        };
        if let Some(cb) = &self.stopped {
            cb(&why);
        }
        let hand_over = match why {
            StoppedLeading::Stopped => return Flow::Done(resigned),
            StoppedLeading::Failed(e) => {
                if !self.requeue {
                    return Flow::Done(Err(e));
                }
                log::warn!(
                    "baton leader task {:?}: the task failed ({e}); resigned, \
                     campaigning again",
                    self.key()
                );
                lock_index
            }
            StoppedLeading::Returned => lock_index,
            StoppedLeading::Lost(why) => {
                log::info!(
                    "baton leader task {:?}: leadership lost ({why}), task returned",
                    self.key()
                );
                None
            }
        };
        if !self.requeue {
            return Flow::Done(Ok(()));
        }
        Flow::Again { hand_over }
    }

    /// Resigns; an unconfirmed resign is logged and returned (the release
    /// goes on in the background).
    fn resign(&self) -> Result<()> {
        self.election.resign().map(|_| ()).inspect_err(|e| {
            log::warn!(
                "baton leader task {:?}: resign not confirmed ({e}); it goes on in the background",
                self.key()
            )
        })
    }

    /// Waits up to the requeue delay for another candidate to take the key after the term
    /// with LockIndex `term` (see `Observer::taken_over_since`), or `stop`.
    fn wait_for_hand_over(&self, term: u64, stop: &CancelToken) {
        if self.requeue_delay.is_zero() || stop.is_cancelled() {
            return;
        }
        let end = Instant::now() + self.requeue_delay;
        let mut observer = match self.election.observe() {
            Ok(o) => o.reporting_each_term(),
            Err(e) => {
                log::debug!("baton leader task {:?}: {e}", self.key());
                stop.wait_timeout(self.requeue_delay);
                return;
            }
        };
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            match observer.next(Some(left), Some(stop)) {
                Ok(_) if observer.taken_over_since(term) => return,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::Timeout | ErrorKind::Cancelled) => return,
                Err(e) => {
                    log::debug!("baton leader task {:?}: {e}", self.key());
                    stop.wait_timeout(end.saturating_duration_since(Instant::now()));
                    return;
                }
            }
        }
    }
}

/// A run of a leader task: marks it running and feeds `on_new_leader` while it
/// lives; dropped (the run returned, unwound, or its async caller gave up), it
/// resigns a leadership still held, then stops the feed (no `on_new_leader`
/// after it) and marks the task as not running.
pub(crate) struct RunGuard {
    running: Arc<AtomicBool>,
    election: Election,
    _feed: Option<NewLeaderFeed>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if self.election.is_leader() {
            if let Err(e) = self.election.resign() {
                log::warn!(
                    "baton leader task {:?}: resign on exit not confirmed: {e}",
                    self.election.key()
                );
            }
        }
        self._feed = None;
        self.running.store(false, Ordering::SeqCst);
    }
}

/// A term just begun (see [`LeaderTask::begin_term`]).
pub(crate) enum Begin {
    /// The task may start, with this term's token.
    Started(TermStart),
    /// `stop` fired first: the resign's outcome, and the run is over.
    Stopped(Result<()>),
}

/// A term under way: the task's token and what links it to the loss and `stop`.
pub(crate) struct TermStart {
    /// Fired the moment leadership ends or `stop` fires.
    pub(crate) token: CancelToken,
    /// The key's LockIndex for this term, to let another candidate take over after it.
    lock_index: Option<u64>,
    _links: (HookGuard, HookGuard),
}

/// What a run does after a term (see [`LeaderTask::end_term`]).
pub(crate) enum Flow {
    /// Campaign again, first waiting for another candidate to take over after
    /// `hand_over` (the LockIndex of a term that ended itself).
    Again {
        /// The LockIndex of the term that ended, when it ended itself.
        hand_over: Option<u64>,
    },
    /// The run is over, with this outcome.
    Done(Result<()>),
}
