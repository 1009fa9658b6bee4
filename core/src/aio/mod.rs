//! Non-blocking calls as futures, on any executor (tokio, smol, async-std,
//! or a hand-rolled one): baton starts no runtime and needs none.
//!
//! ```rust,no_run,edition2024
//! use std::time::Duration;
//! use baton::aio::{AsyncElection, AsyncHold};
//!
//! # async fn run(client: baton::Client) -> baton::Result<()> {
//! let election = client.election("service/leader")?;
//! if election.campaign_async(b"10.0.0.7:8080", Some(Duration::from_secs(30))).await? {
//!     // Lead until the holding ends, whatever ends it.
//!     let why = election.lost().await?;
//!     eprintln!("no longer leader: {why}");
//! }
//! # Ok(())
//! # }
//! ```
//!
//! How it works: the same core types ([`Lock`](crate::Lock),
//! [`Semaphore`](crate::Semaphore), [`Election`],
//! [`Client`]) gain `_async` methods through the extension
//! traits here. A lock's warm acquire and release (its one request settles it:
//! the key known free, a connection idle) are made by the future itself: the
//! request written and the answer read in its own poll, the socket waited on by
//! the client's readiness thread in between. A future's other blocking pieces
//! (one KV request, one try of an acquire) run on a few step threads of the
//! client; the outcome reaches the task through its `Waker`. A future that *waits* — an acquire of a key
//! someone else holds, a loss not happened yet, a leader not changed yet —
//! holds no thread at all: the client's key hub, a prefix watch, a cancel
//! token or the client's timer wakes it, and only then is the next try made.
//! Ten thousand pending acquires cost the same few threads as one.
//!
//! Semantics are the blocking API's:
//!
//! * a timeout argument bounds a call as in the blocking API (`None` waits for
//!   ever, zero tries once); the executor's own timers work too, because
//! * **dropping a future cancels it**, and a cancelled acquire leaves nothing
//!   held: a try in flight whose grant arrives after the drop is given back, as
//!   with a cancel token — so `tokio::time::timeout(d, lock.acquire_async(None))`
//!   timing out leaves the lock free;
//! * loss signals are the same ([`Hold::is_held`](crate::Hold::is_held),
//!   callbacks, the cancel token), plus [`AsyncHold::lost`], a future that
//!   resolves when the holding ends, for `select!`.

mod acquire;
mod bounded;
mod call;
mod contend;
mod lost;
mod observe;
mod socket_wait;
mod waits;
mod wake;
mod warm;

use std::future::Future;
use std::time::Duration;

pub use acquire::Acquire;
pub use bounded::Bounded;
pub use call::Call;
pub use contend::Contend;
pub use lost::{Lost, SessionLost};
pub use observe::{next_shared, LeaderStream, SharedLeaderStream};
pub use waits::{
    counter_next_shared, members_next_shared, AsyncBarrier, AsyncCounter, AsyncDoubleBarrier,
    AsyncGroup, AsyncLeaderTask, AsyncMember, LeaderTerms, SharedCounterWatch, SharedMembersWatch,
    Term,
};

/// A boxed future of a baton call that a language binding (or any caller) can keep and move
/// between threads: `Send` and `'static`, borrowing nothing.
pub type Waiting<T> = std::pin::Pin<Box<dyn Future<Output = Result<T>> + Send + 'static>>;

use crate::api::kv::KvPair;
use crate::api::session_api::SessionOptions;
use crate::api::txn::KvOp;
use crate::client::{Client, CloseReport, WeakClient};
use crate::foundations::cancel::CancelToken;
use crate::foundations::error::Result;
use crate::recipes::election::{Election, Leader};
use crate::recipes::fence::Sequencer;
use crate::runtime::lease::{LostReason, Session};

/// Acquire, release and loss as futures, for [`Lock`](crate::Lock),
/// [`MultiLock`](crate::MultiLock), [`RwLock`](crate::RwLock) (either side),
/// [`Semaphore`](crate::Semaphore) and [`Election`].
pub trait AsyncHold: Contend {
    /// [`Hold::acquire`](crate::Hold::acquire) as a future: `Ok(true)` when
    /// held, `Ok(false)` when `timeout` passed first (`None`: no limit).
    /// Dropping it cancels the acquire and leaves nothing held.
    fn acquire_async(&self, timeout: Option<Duration>) -> Acquire<'_, Self> {
        Acquire::new(self, timeout, None)
    }

    /// [`AsyncHold::acquire_async`] that also ends, with kind `Cancelled` and
    /// nothing held, when `cancel` fires.
    fn acquire_async_with(
        &self,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Acquire<'_, Self> {
        Acquire::new(self, timeout, Some(cancel))
    }

    /// Tries once (`acquire_async(Some(Duration::ZERO))`).
    fn try_acquire_async(&self) -> Acquire<'_, Self> {
        Acquire::new(self, Some(Duration::ZERO), None)
    }

    /// [`Hold::release`](crate::Hold::release) as a future.
    fn release_async(&self) -> Call<bool> {
        if let Some(readiness) = warm::readiness(self.client()) {
            if let Some(call) = self.warm_unlock() {
                return warm::DrivenRelease::call(self.client(), readiness, call);
            }
        }
        let view = self.view();
        Call::start(
            self.client(),
            CancelToken::new(),
            move |_| view.release(),
            None,
        )
    }

    /// Resolves when the current holding ends, to why (`Released` after a
    /// release); at once, to why the last one ended, when nothing is held.
    fn lost(&self) -> Lost<'_, Self> {
        Lost::new(self)
    }

    /// [`AsyncHold::lost`] bounded as the blocking `wait_lost` is: it ends with `Timeout`
    /// while still held at `timeout` (`None`: no limit), or `Cancelled` when `cancel` fires.
    fn lost_within(
        &self,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Bounded<Lost<'_, Self>> {
        let what = self.describe();
        Bounded::new(
            Contend::client(self),
            self.lost(),
            timeout,
            Some(cancel),
            format!("{what} still held at timeout"),
            format!("wait for the loss of {what} cancelled"),
        )
    }
}

impl<H: Contend> AsyncHold for H {}

/// An [`Election`]'s campaign, resignation, proclamation and leaders as
/// futures and a stream.
pub trait AsyncElection {
    /// [`Election::campaign`] as a future (see [`AsyncHold::acquire_async`]).
    fn campaign_async(&self, value: &[u8], timeout: Option<Duration>) -> Acquire<'_, Election>;
    /// [`Election::resign`] as a future.
    fn resign_async(&self) -> Call<bool>;
    /// [`Election::proclaim`] as a future.
    fn proclaim_async(&self, value: &[u8]) -> Call<()>;
    /// [`Election::observe`] as a [`Stream`](futures_core::Stream).
    fn observe_stream(&self) -> Result<LeaderStream>;
}

impl AsyncElection for Election {
    fn campaign_async(&self, value: &[u8], timeout: Option<Duration>) -> Acquire<'_, Election> {
        self.lock().set_value(value);
        Acquire::new(self, timeout, None)
    }
    fn resign_async(&self) -> Call<bool> {
        self.release_async()
    }
    fn proclaim_async(&self, value: &[u8]) -> Call<()> {
        let (view, value) = (self.view(), value.to_vec());
        Call::start(
            self.client(),
            CancelToken::new(),
            move |_| view.proclaim(&value),
            None,
        )
    }
    fn observe_stream(&self) -> Result<LeaderStream> {
        LeaderStream::new(self.client(), self.key())
    }
}

/// The client's requests as futures: KV, transactions, sessions, guarded
/// writes, leaders and close.
///
/// A request cannot be taken back once sent: dropping its future discards the
/// answer (a session created for a dropped future is destroyed).
pub trait AsyncClient {
    /// [`Kv::get`](crate::Kv::get) as a future.
    fn get_async(&self, key: &str) -> Call<Option<KvPair>>;
    /// [`Kv::list`](crate::Kv::list) as a future.
    fn list_async(&self, prefix: &str) -> Call<Vec<KvPair>>;
    /// [`Kv::put`](crate::Kv::put) as a future.
    fn put_async(&self, key: &str, value: &[u8]) -> Call<bool>;
    /// [`Kv::delete`](crate::Kv::delete) as a future.
    fn delete_async(&self, key: &str) -> Call<bool>;
    /// [`Client::txn`] as a future.
    fn txn_async(&self, ops: Vec<KvOp>) -> Call<Vec<KvPair>>;
    /// [`Client::guarded_txn`] as a future.
    fn guarded_txn_async(&self, seq: &Sequencer, ops: Vec<KvOp>) -> Call<Vec<KvPair>>;
    /// [`Client::create_session`] as a future.
    fn create_session_async(&self, options: &SessionOptions) -> Call<Session>;
    /// [`Session::destroy`] as a future.
    fn destroy_session_async(&self, session: &Session) -> Call<()>;
    /// [`SessionApi::destroy`](crate::SessionApi::destroy) as a future: any
    /// session, by ID (another process's, say).
    fn destroy_session_id_async(&self, id: &str) -> Call<()>;
    /// [`Client::observe_leader`] as a [`Stream`](futures_core::Stream).
    fn observe_leader_stream(&self, key: &str) -> Result<LeaderStream>;
    /// [`Client::leader`] as a future.
    fn leader_async(&self, key: &str) -> Call<Option<Leader>>;
    /// [`Client::check_sequencer`] as a future.
    fn check_sequencer_async(&self, seq: &Sequencer) -> Call<bool>;
    /// [`Client::default_session`] as a future (made on first use).
    fn default_session_async(&self) -> Call<Session>;
    /// [`Client::adopt_session`] as a future.
    fn adopt_session_async(&self, id: &str) -> Call<Session>;
    /// Resolves when `session` is lost, to why ([`Session::wait_lost`] as a
    /// future); holds no thread.
    fn session_lost_async(&self, session: &Session) -> SessionLost;
    /// [`AsyncClient::session_lost_async`] bounded as the blocking [`Session::wait_lost`]
    /// is: it ends with `Timeout` while the session is still valid at `timeout` (`None`: no
    /// limit), or `Cancelled` when `cancel` fires.
    fn session_lost_within(
        &self,
        session: &Session,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Bounded<SessionLost>;
    /// [`Client::close_report`] as a future: releases what the client holds,
    /// destroys its sessions and joins its threads, within `timeout`.
    fn close_async(&self, timeout: Duration) -> Call<CloseReport>;
}

/// [`AsyncClient::session_lost_within`] through a client that may be gone (a language
/// binding's session object holds its client weakly, so that it never keeps it open). A gone
/// client was closed, and its sessions lost with it: the future then resolves at once, to
/// why. Not part of the Rust API.
#[doc(hidden)]
pub fn session_lost_weak(
    client: &WeakClient,
    session: &Session,
    timeout: Option<Duration>,
    cancel: &CancelToken,
) -> impl Future<Output = Result<LostReason>> + Send + 'static {
    let wait = client
        .upgrade()
        .map(|c| c.session_lost_within(session, timeout, cancel));
    let (session, cancel) = (session.clone(), cancel.clone());
    async move {
        match wait {
            Some(w) => w.await,
            None => session.wait_lost(Some(Duration::ZERO), Some(&cancel)),
        }
    }
}

/// Runs `work` with a clone of `client` on a step thread.
fn call<T: Send + 'static>(
    client: &Client,
    work: impl FnOnce(&Client) -> Result<T> + Send + 'static,
) -> Call<T> {
    Call::with(client, client.clone(), work)
}

impl AsyncClient for Client {
    fn get_async(&self, key: &str) -> Call<Option<KvPair>> {
        let key = key.to_string();
        call(self, move |c| c.kv().get(&key))
    }
    fn list_async(&self, prefix: &str) -> Call<Vec<KvPair>> {
        let prefix = prefix.to_string();
        call(self, move |c| c.kv().list(&prefix))
    }
    fn put_async(&self, key: &str, value: &[u8]) -> Call<bool> {
        let (key, value) = (key.to_string(), value.to_vec());
        call(self, move |c| c.kv().put(&key, &value))
    }
    fn delete_async(&self, key: &str) -> Call<bool> {
        let key = key.to_string();
        call(self, move |c| c.kv().delete(&key))
    }
    fn txn_async(&self, ops: Vec<KvOp>) -> Call<Vec<KvPair>> {
        call(self, move |c| c.txn(&ops))
    }
    fn guarded_txn_async(&self, seq: &Sequencer, ops: Vec<KvOp>) -> Call<Vec<KvPair>> {
        let seq = seq.clone();
        call(self, move |c| c.guarded_txn(&seq, &ops))
    }
    fn create_session_async(&self, options: &SessionOptions) -> Call<Session> {
        let (c, options) = (self.clone(), options.clone());
        Call::start(
            self,
            CancelToken::new(),
            move |_| c.create_session(&options),
            Some(Box::new(|s: Session| {
                if let Err(e) = s.destroy() {
                    log::debug!("baton: destroying a session nobody took: {e}");
                }
            })),
        )
    }
    fn destroy_session_async(&self, session: &Session) -> Call<()> {
        let s = session.clone();
        call(self, move |_| s.destroy())
    }
    fn destroy_session_id_async(&self, id: &str) -> Call<()> {
        let id = id.to_string();
        call(self, move |c| c.sessions().destroy(&id))
    }
    fn observe_leader_stream(&self, key: &str) -> Result<LeaderStream> {
        LeaderStream::new(self, key)
    }
    fn leader_async(&self, key: &str) -> Call<Option<Leader>> {
        let key = key.to_string();
        call(self, move |c| c.leader(&key))
    }
    fn check_sequencer_async(&self, seq: &Sequencer) -> Call<bool> {
        let seq = seq.clone();
        call(self, move |c| c.check_sequencer(&seq))
    }
    fn default_session_async(&self) -> Call<Session> {
        call(self, |c| c.default_session())
    }
    fn adopt_session_async(&self, id: &str) -> Call<Session> {
        let id = id.to_string();
        call(self, move |c| c.adopt_session(&id))
    }
    fn session_lost_async(&self, session: &Session) -> SessionLost {
        SessionLost::new(self, session)
    }
    fn session_lost_within(
        &self,
        session: &Session,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Bounded<SessionLost> {
        Bounded::new(
            self,
            SessionLost::new(self, session),
            timeout,
            Some(cancel),
            crate::runtime::lease::STILL_VALID,
            crate::runtime::lease::WAIT_CANCELLED,
        )
    }
    fn close_async(&self, timeout: Duration) -> Call<CloseReport> {
        if self.is_closed() {
            return Call::ready(self, Ok(self.close_report(timeout)));
        }
        call(self, move |c| Ok(c.close_report(timeout)))
    }
}
