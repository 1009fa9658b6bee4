//! A [`LeaderTask`] run as futures: [`AsyncLeaderTask::run_async`] for a Rust task,
//! and [`LeaderTerms`] / [`Term`], the same run one term at a time, for a task that is
//! not a Rust future (a binding's coroutine or JavaScript function).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_core::Stream;

use super::super::bounded::Bounded;
use super::super::call::Call;
use super::super::observe::LeaderStream;
use super::super::{AsyncHold, Waiting};
use crate::client::Client;
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::recipes::leader_task::{Begin, Flow, LeaderTask, RunGuard, TermStart};

/// A [`LeaderTask`]'s run as futures.
pub trait AsyncLeaderTask {
    /// [`LeaderTask::run`] as a future: campaigns, runs `task(token)` while leading —
    /// its token fires the moment leadership ends or `stop` fires — resigns when it
    /// returns, and campaigns again (unless requeue is off) until `stop` fires. The
    /// callbacks, outcomes and errors are `run`'s; nothing holds a thread while it waits
    /// (the campaign and the hand-over wait are woken by the key hub). Dropping the
    /// future ends the run: a leadership still held is given back.
    fn run_async<F, Fut>(
        &self,
        task: F,
        stop: &CancelToken,
    ) -> impl Future<Output = Result<()>> + Send
    where
        F: FnMut(CancelToken) -> Fut + Send,
        Fut: Future<Output = Result<()>> + Send;

    /// The run one term at a time, for a caller whose task is not a Rust future:
    /// [`LeaderTerms::next_term`] campaigns, the caller runs its task with the
    /// [`Term::token`], then [`Term::finish`] tells how it ended. Kind `Conflict` when a
    /// run of this task is under way.
    fn terms(&self, stop: &CancelToken) -> Result<LeaderTerms>;
}

impl AsyncLeaderTask for Arc<LeaderTask> {
    fn run_async<F, Fut>(
        &self,
        mut task: F,
        stop: &CancelToken,
    ) -> impl Future<Output = Result<()>> + Send
    where
        F: FnMut(CancelToken) -> Fut + Send,
        Fut: Future<Output = Result<()>> + Send,
    {
        let terms = self.terms(stop);
        async move {
            let terms = terms?;
            while let Some(term) = terms.next_term().await? {
                let result = task(term.token()).await;
                if !term.finish(result).await? {
                    break;
                }
            }
            Ok(())
        }
    }

    fn terms(&self, stop: &CancelToken) -> Result<LeaderTerms> {
        let run = self.start_run()?;
        Ok(LeaderTerms {
            task: Arc::clone(self),
            stop: stop.clone(),
            state: Arc::new(Mutex::new(RunState {
                hand_over: None,
                over: false,
                _run: Some(run),
            })),
        })
    }
}

struct RunState {
    /// The LockIndex of the last term, when it ended itself: wait for another
    /// candidate to take over after it before campaigning.
    hand_over: Option<u64>,
    /// The run has ended (stopped, or a term ended it).
    over: bool,
    /// Dropped when the run ends: resigns, stops the `on_new_leader` feed.
    _run: Option<RunGuard>,
}

/// A run of a [`LeaderTask`], one term at a time (see [`AsyncLeaderTask::terms`]). Dropping
/// it ends the run (a leadership still held is given back).
pub struct LeaderTerms {
    task: Arc<LeaderTask>,
    stop: CancelToken,
    state: Arc<Mutex<RunState>>,
}

impl std::fmt::Debug for LeaderTerms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderTerms")
            .field("key", &self.task.key())
            .field("over", &lock(&self.state).over)
            .finish()
    }
}

/// One term of a [`LeaderTerms`] run: the task runs with [`Term::token`], then
/// [`Term::finish`] ends it.
pub struct Term {
    task: Arc<LeaderTask>,
    stop: CancelToken,
    state: Arc<Mutex<RunState>>,
    start: Option<TermStart>,
}

impl std::fmt::Debug for Term {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Term")
            .field("key", &self.task.key())
            .finish()
    }
}

impl LeaderTerms {
    /// Waits for the next term: first, after a term that ended itself, up to the
    /// requeue delay for another candidate to take over; then campaigns until elected.
    /// `Ok(Some(term))` when leading (`on_started_leading` has run), `Ok(None)` once the
    /// run is over (`stop` fired, or the last term ended it). Errors: a campaign's
    /// non-transient error, which ends the run (as [`LeaderTask::run`]'s). Holds no
    /// thread while it waits.
    pub fn next_term(&self) -> Waiting<Option<Term>> {
        let (task, stop, state) = (
            Arc::clone(&self.task),
            self.stop.clone(),
            Arc::clone(&self.state),
        );
        Box::pin(async move {
            let hand_over = {
                let mut st = lock(&state);
                if st.over {
                    return Ok(None);
                }
                st.hand_over.take()
            };
            if let Some(term) = hand_over {
                wait_for_hand_over(&task, term, &stop).await;
            }
            let elected = elect(&task, &stop).await;
            if !matches!(elected, Ok(true)) {
                end_run(&task, &state);
                return elected.map(|_| None);
            }
            // On a step thread: the callback is the user's, and a stop that came
            // first resigns (a request).
            let t = Arc::clone(&task);
            let s = stop.clone();
            let client = task.election().lock().shared_client().clone();
            let begun = Call::start(
                &client,
                CancelToken::new(),
                move |_| Ok(t.begin_term(&s)),
                None,
            )
            .await?;
            match begun {
                Begin::Started(start) => Ok(Some(Term {
                    task,
                    stop,
                    state,
                    start: Some(start),
                })),
                Begin::Stopped(resigned) => {
                    end_run(&task, &state);
                    resigned.map(|_| None)
                }
            }
        })
    }
}

impl Term {
    /// Fires the moment leadership ends or the run's `stop` fires: the task's
    /// cancellation.
    pub fn token(&self) -> CancelToken {
        self.start
            .as_ref()
            .map(|s| s.token.clone())
            .unwrap_or_default()
    }

    /// The task ended with `result`: resigns if still leading, runs
    /// `on_stopped_leading`, and says whether the run goes on (`Ok(true)`: call
    /// [`LeaderTerms::next_term`] again) or is over (`Ok(false)`). A failure with requeue
    /// off is returned as the error, as [`LeaderTask::run`] returns it (a binding passes
    /// its task's failure as an [`Error`] and knows it when it comes back).
    pub fn finish(mut self, result: Result<()>) -> Waiting<bool> {
        let Some(start) = self.start.take() else {
            return Box::pin(std::future::ready(Ok(false)));
        };
        let (task, stop, state) = (
            Arc::clone(&self.task),
            self.stop.clone(),
            Arc::clone(&self.state),
        );
        let client = task.election().lock().shared_client().clone();
        let call = Call::start(
            &client,
            CancelToken::new(),
            move |_| {
                Ok(match task.end_term(start, result, &stop) {
                    Flow::Done(outcome) => {
                        end_run(&task, &state);
                        outcome.map(|_| false)
                    }
                    Flow::Again { hand_over } => {
                        lock(&state).hand_over = hand_over;
                        Ok(true)
                    }
                })
            },
            None,
        );
        Box::pin(async move { call.await? })
    }
}

impl Drop for Term {
    /// A term dropped unfinished ends the run: leadership is given back.
    fn drop(&mut self) {
        if self.start.take().is_some() {
            end_run(&self.task, &self.state);
        }
    }
}

/// Marks the run over and ends it: the guard resigns (a request) and stops the feed, on a
/// step thread of `task`'s client, not on the executor's thread that may call this.
fn end_run(task: &LeaderTask, state: &Arc<Mutex<RunState>>) {
    let run = {
        let mut st = lock(state);
        st.over = true;
        st._run.take()
    };
    let Some(run) = run else { return };
    let client = task.election().lock().shared_client();
    let job = Box::new(move || {
        drop(run);
        false
    });
    if let Err(e) = client.core().step(job) {
        // The job, and the guard in it, were dropped unrun: the client is closed.
        log::debug!("baton leader task {:?}: ending the run: {e}", task.key());
    }
}

impl Drop for LeaderTerms {
    /// The last handle on a run ends it (a term still held keeps it going).
    fn drop(&mut self) {
        if Arc::strong_count(&self.state) == 1 {
            end_run(&self.task, &self.state);
        }
    }
}

/// Campaigns until elected (`Ok(true)`) or `stop` fires (`Ok(false)`).
async fn elect(task: &LeaderTask, stop: &CancelToken) -> Result<bool> {
    let election = task.election();
    let client = election.lock().shared_client().clone();
    loop {
        if stop.is_cancelled() {
            return Ok(false);
        }
        election.lock().set_value(task.value());
        match election.acquire_async_with(None, stop).await {
            Ok(true) => return Ok(true),
            Ok(false) => continue,
            Err(e) => match task.campaign_failed(e, stop) {
                Some(e) => return Err(e),
                None => pause(&client, task.retry_pause(), stop).await,
            },
        }
    }
}

/// Sleeps `d` on the client's timer, or until `stop` fires.
async fn pause(client: &Client, d: Duration, stop: &CancelToken) {
    let never = std::future::pending::<Result<()>>();
    let _ = Bounded::new(client, never, Some(d), Some(stop), "", "").await;
}

/// Waits up to the requeue delay for another candidate to take the key after the term with
/// LockIndex `term` (see `Observer::taken_over_since`), or `stop`.
async fn wait_for_hand_over(task: &LeaderTask, term: u64, stop: &CancelToken) {
    let delay = task.hand_over_wait();
    if delay.is_zero() || stop.is_cancelled() {
        return;
    }
    let client = task.election().lock().shared_client().clone();
    let end = Instant::now() + delay;
    let mut stream = match LeaderStream::following(&client, task.key(), true) {
        Ok(s) => s,
        Err(e) => {
            log::debug!("baton leader task {:?}: {e}", task.key());
            pause(&client, delay, stop).await;
            return;
        }
    };
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        let next = std::future::poll_fn(|cx| match Pin::new(&mut stream).poll_next(cx) {
            Poll::Ready(Some(r)) => Poll::Ready(r),
            Poll::Ready(None) => Poll::Ready(Err(Error::new(ErrorKind::Closed, "closed"))),
            Poll::Pending => Poll::Pending,
        });
        match Bounded::new(&client, next, Some(left), Some(stop), "", "").await {
            Ok(_) if stream.taken_over_since(term) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::Timeout | ErrorKind::Cancelled) => return,
            Err(e) => {
                log::debug!("baton leader task {:?}: {e}", task.key());
                pause(&client, end.saturating_duration_since(Instant::now()), stop).await;
                return;
            }
        }
    }
}
