//! The leader task for Node: the core runs each term, the JavaScript task runs in between.

use super::*;

/// A leader task (see `LeaderTask` in lib/leader_task.js): the campaign and the end of each
/// term are the core's (`next_term_async`, `Term::finish_async`); the JavaScript task runs
/// between them, and its callbacks are called by lib/leader_task.js on the JS thread.
#[napi(js_name = "NativeLeaderTask")]
pub struct NativeLeaderTask {
    pub(super) inner: OffThread<Arc<baton::LeaderTask>>,
    pub(super) client: OffThread<baton::Client>,
    /// Why the last term ended, as the core's `on_stopped_leading` said.
    pub(super) stopped: Arc<Mutex<Option<StoppedInfo>>>,
}

/// Why a term ended: `returned`, `failed`, `lost` (with the loss's reason), `stopped`.
#[napi(object)]
pub struct StoppedInfo {
    /// `returned`, `failed`, `lost` or `stopped`.
    pub reason: String,
    /// With `lost`: why leadership ended (`key_changed`, `session_lost`, ...).
    pub lost_reason: Option<String>,
}

impl From<&baton::StoppedLeading> for StoppedInfo {
    fn from(s: &baton::StoppedLeading) -> Self {
        StoppedInfo {
            reason: s.name().to_string(),
            lost_reason: match s {
                baton::StoppedLeading::Lost(l) => Some(l.name().to_string()),
                _ => None,
            },
        }
    }
}

#[napi]
impl NativeLeaderTask {
    /// The election's key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// Whether this candidate leads now.
    #[napi]
    pub fn is_leader(&self) -> bool {
        self.inner.is_leader()
    }

    /// Why the election's last holding ended (`key_changed`, `session_lost`, ...), or null.
    #[napi]
    pub fn lost_reason(&self) -> Option<&'static str> {
        crate::holding::lost_reason(self.inner.election())
    }

    /// The sequencer while leading, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.election().sequencer().map(NativeSequencer::from)
    }

    /// The current leader (one consistent read), or null.
    #[napi(ts_return_type = "Promise<NativeLeader | null>")]
    pub fn leader<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let t = self.inner.clone();
        on_thread(env, move || {
            t.election().leader().map(|l| l.map(NativeLeader::from))
        })
    }

    /// Why the last term ended (set by its `finish`), or null; taken: a second call returns
    /// null until another term ends.
    #[napi]
    pub fn take_stopped(&self) -> Option<StoppedInfo> {
        self.stopped
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[napi]
impl NativeLeaderTask {
    /// Starts a run, one term at a time, ended by `stop`; throws `BATON_CONFLICT` when a run
    /// of this task is under way.
    #[napi]
    pub fn terms(&self, stop: &NativeCancel) -> Result<NativeLeaderTerms> {
        let terms = self.inner.terms(&stop.inner).map_err(js_err)?;
        Ok(NativeLeaderTerms {
            inner: OffThread::new(Arc::new(Mutex::new(Some(terms)))),
            client: OffThread::new(self.client.clone()),
        })
    }
}

/// A run of a leader task, one term at a time (`baton::aio::LeaderTerms`).
#[napi(js_name = "NativeLeaderTerms")]
pub struct NativeLeaderTerms {
    pub(super) inner: OffThread<Arc<Mutex<Option<LeaderTerms>>>>,
    pub(super) client: OffThread<baton::Client>,
}

#[napi]
impl NativeLeaderTerms {
    /// Waits for the next term (after a term the task ended: the hand-over wait; then the
    /// campaign): resolves with the term, or null once the run is over (`stop` fired, or the
    /// last term ended it). Holds no thread while it waits.
    #[napi(ts_return_type = "Promise<NativeTerm | null>")]
    pub fn next_term<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let next = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(LeaderTerms::next_term);
        let Some(next) = next else {
            return driven(env, async { Ok(None::<NativeTerm>) });
        };
        let client = self.client.clone();
        driven(env, async move {
            Ok(next.await?.map(|term| NativeTerm {
                token: term.token(),
                term: Mutex::new(Some(term)),
                client: OffThread::new(client),
            }))
        })
    }

    /// Ends the run (a leadership still held is given back, off the JS thread).
    #[napi]
    pub fn end(&self) {
        close_shared(&self.inner);
    }
}

/// One term of a leader task: the task runs while it lasts.
#[napi(js_name = "NativeTerm")]
pub struct NativeTerm {
    pub(super) term: Mutex<Option<Term>>,
    pub(super) token: baton::CancelToken,
    pub(super) client: OffThread<baton::Client>,
}

#[napi]
impl NativeTerm {
    /// Whether the term's token has fired (leadership lost, or `stop`).
    #[napi]
    pub fn is_over(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves true the moment the term's token fires (leadership lost, or `stop`); rejects
    /// with `BATON_CANCELLED` when `cancel` fires first (the task returned). Holds no thread.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn ended<'e>(&self, env: &'e Env, cancel: &NativeCancel) -> Result<Object<'e>> {
        let over = Bounded::new(
            &self.client,
            std::future::pending::<baton::Result<bool>>(),
            None,
            Some(&self.token),
            "",
            "term over",
        );
        let over = async move {
            match over.await {
                Err(e) if e.kind() == baton::ErrorKind::Cancelled => Ok(true),
                other => other,
            }
        };
        let waited = Bounded::new(
            &self.client,
            over,
            None,
            Some(&cancel.inner),
            "",
            "the task returned first",
        );
        driven(env, waited)
    }

    /// Ends the term with the task's outcome (`failed`: its error's message; null when it
    /// returned): resigns if still leading, runs `on_stopped_leading`; resolves true when
    /// `nextTerm` should be called again, false when the run is over; rejects when the task
    /// failed and requeue is off (lib/leader_task.js rethrows the task's own error then).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn finish<'e>(&self, env: &'e Env, failed: Option<String>) -> Result<Object<'e>> {
        let term = self
            .term
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| invalid("this term is already finished"))?;
        let outcome = match failed {
            Some(m) => Err(baton::Error::new(
                baton::ErrorKind::Server,
                format!("the leader task failed: {m}"),
            )),
            None => Ok(()),
        };
        driven(env, term.finish(outcome))
    }
}
