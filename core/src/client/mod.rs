//! `Client`: configuration, HTTP, and the background machinery (renewer,
//! session monitor, watches, dispatcher) it starts on demand and joins on close.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

mod close;
pub(crate) mod metrics;

pub use close::CloseReport;

use crate::api::agent::Agent;
use crate::api::kv::{Kv, KvPair};
use crate::api::session_api::{SessionApi, SessionOptions};
use crate::api::txn::KvOp;
use crate::foundations::config::ClientBuilder;
use crate::foundations::error::{Error, ErrorKind, Result};
use crate::foundations::sync::lock;
use crate::foundations::threads::Worker;
use crate::runtime::cleanup::{Cleanup, Next, Task};
use crate::runtime::dispatcher::{Dispatcher, Job};
use crate::runtime::keyhub::KeyHub;
use crate::runtime::lease::{Session, SessionHost, SessionShared};
use crate::runtime::renewer::Renewer;
use crate::runtime::steps::{Alarm, AlarmGuard, StepJob, Steps};
use crate::runtime::watch::{Watch, WatchTarget, Watches};
use crate::transport::conn::Conn;
use crate::transport::http::{Request, Response, Transport};

fn spawn_err(e: std::io::Error) -> Error {
    Error::new(ErrorKind::Connection, format!("cannot start a thread: {e}"))
}

/// How long `Drop` of the last `Client` clone waits for cleanup.
pub const DROP_CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// A key held by a lock: (key, session ID, value and flags to resend on release).
pub(crate) type HeldKey = (String, String, Vec<u8>, u64);

#[derive(Default)]
struct Runtime {
    renewer: Option<Renewer>,
    monitor: Option<Worker>,
    dispatcher: Option<Dispatcher>,
    cleanup: Option<Cleanup>,
    /// The threads behind the async API (`baton::aio`), started on first use.
    steps: Option<Steps>,
}

/// Everything a client and its threads share.
pub(crate) struct Core {
    /// The connection (transport, closing token, checks, what was learnt);
    /// `Core` derefs to it.
    pub(crate) conn: Arc<Conn>,
    default_options: SessionOptions,
    runtime: Mutex<Runtime>,
    sessions: Mutex<HashMap<String, Arc<SessionShared>>>,
    default_session: Mutex<Option<Session>>,
    /// Keys held by this client's locks (holding id → key, session, value), released
    /// by `close` before their sessions are destroyed, so a clean exit costs the
    /// next holder no lock-delay.
    pub(crate) held_keys: Mutex<HashMap<u64, HeldKey>>,
    pub(crate) watches: Arc<Watches>,
    /// Single-key interests (locks, elections) multiplexed over a few long polls.
    pub(crate) keyhub: KeyHub,
    /// Work a drop, a failed release or a loss left owed to Consul (an
    /// unlock, a semaphore slot to give back) and not yet confirmed: the
    /// clean-up thread makes it, and `close` makes what is still owed, or
    /// reports it — one list for every recipe.
    owed: Mutex<HashMap<u64, OwedItem>>,
    /// The client handle, for clean-ups queued by the core itself.
    handle: OnceLock<Weak<Handle>>,
    /// Set once a tokio runtime without I/O polled one of the client's futures: its warm
    /// calls then wait on the readiness thread (`aio::socket_wait`).
    #[cfg(all(feature = "tokio", unix))]
    pub(crate) tokio_io_off: std::sync::atomic::AtomicBool,
}

impl SessionHost for Core {
    fn conn(&self) -> &Conn {
        &self.conn
    }
    fn post(&self, job: Job) {
        Core::post(self, job)
    }
    fn forget_session(&self, id: &str) {
        self.unregister_session(id)
    }
    fn destroy_later(&self, id: &str) {
        Core::destroy_later(self, id)
    }
}

impl std::ops::Deref for Core {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.conn
    }
}

impl Core {
    pub(crate) fn session_api(&self) -> SessionApiCore<'_> {
        SessionApiCore { core: self }
    }

    /// Queues a callback on the dispatcher (started on first use).
    pub(crate) fn post(&self, job: Job) {
        if self.closing.is_cancelled() {
            return;
        }
        let mut rt = lock(&self.runtime);
        if rt.dispatcher.is_none() {
            match Dispatcher::start(self.closing.clone()) {
                Ok(d) => rt.dispatcher = Some(d),
                Err(e) => {
                    log::error!("baton: cannot start the dispatcher thread: {e}");
                    return;
                }
            }
        }
        if let Some(d) = &rt.dispatcher {
            d.post(job);
        }
    }

    /// Runs `job` on a step thread (started on first use): the blocking piece of
    /// an async call. Fails once the client is closing; a job queued as it
    /// closes is dropped unrun.
    pub(crate) fn step(&self, job: StepJob) -> Result<()> {
        self.with_steps(|steps| steps.run(job).map_err(spawn_err))
    }

    /// Runs `f` with the step threads, started on first use.
    fn with_steps<T>(&self, f: impl FnOnce(&mut Steps) -> Result<T>) -> Result<T> {
        let mut rt = lock(&self.runtime);
        // Checked under the runtime lock, which `close` takes after marking the
        // client closed: threads started here are always joined by it.
        self.check_usable()?;
        let steps = match &mut rt.steps {
            Some(s) => s,
            None => rt
                .steps
                .insert(Steps::start(self.closing.clone()).map_err(spawn_err)?),
        };
        f(steps)
    }

    /// The readiness thread of the futures that drive their own requests (started on first
    /// use, joined by `close` with the step threads).
    pub(crate) fn reactor(&self) -> Result<crate::runtime::reactor::ReactorHandle> {
        self.with_steps(|steps| steps.reactor().map_err(spawn_err))
    }

    /// Calls `alarm` on the client's timer thread at `at` (see [`Core::step`]),
    /// unless the guard drops first.
    pub(crate) fn alarm(&self, at: Instant, alarm: Alarm) -> Result<AlarmGuard> {
        self.with_steps(|steps| Ok(steps.alarm(at, alarm)))
    }

    /// Queues a clean-up task on the clean-up thread (started on first use):
    /// it runs with `client` while that client lives.
    fn clean_up(&self, client: WeakClient, mut task: impl FnMut(&Client) -> Next + Send + 'static) {
        let task: Task = Box::new(move || {
            let live = client.upgrade()?;
            let next = task(&live);
            drop(live);
            Some(next)
        });
        if self.closing.is_cancelled() {
            return;
        }
        let mut rt = lock(&self.runtime);
        if rt.cleanup.is_none() {
            match Cleanup::start(self.closing.clone()) {
                Ok(c) => rt.cleanup = Some(c),
                Err(e) => {
                    log::error!("baton: cannot start the clean-up thread: {e}");
                    return;
                }
            }
        }
        if let Some(c) = &rt.cleanup {
            c.post(task);
        }
    }

    /// The options of the default session (the builder's), also the base of
    /// each semaphore's own session.
    pub(crate) fn default_session_options(&self) -> SessionOptions {
        self.default_options.clone()
    }

    /// Records work owed to Consul until the returned guard drops (the
    /// clean-up task that makes it holds the guard).
    pub(crate) fn owe(self: &Arc<Self>, item: OwedItem) -> OwedGuard {
        let id = NEXT_OWED.fetch_add(1, Ordering::Relaxed);
        lock(&self.owed).insert(id, item);
        OwedGuard {
            core: Arc::downgrade(self),
            id,
        }
    }

    /// Destroys session `id`, which this client declared lost while Consul may
    /// still have it, once Consul answers and the clean-ups owed on its behalf
    /// (unlocks first: a destroy would impose lock-delay on keys it still
    /// holds) are done; then forgets it. Best effort, on the clean-up thread.
    pub(crate) fn destroy_later(&self, id: &str) {
        let Some(client) = self.handle.get().map(|h| WeakClient { handle: h.clone() }) else {
            return;
        };
        let id = id.to_string();
        self.clean_up(
            client,
            Box::new(move |c: &Client| {
                let core = c.core();
                let owed = lock(&core.sessions)
                    .get(&id)
                    .map_or(0, |s| s.owed.load(Ordering::SeqCst));
                if owed > 0 {
                    return Next::Wait(Duration::from_millis(50));
                }
                match c.sessions().destroy(&id) {
                    Ok(()) => {
                        log::debug!("baton session {id}: destroyed after its loss");
                        core.unregister_session(&id);
                        Next::Done
                    }
                    Err(e) if e.is_transient() => Next::Unavailable,
                    Err(e) => {
                        // Consul refused (e.g. an ACL): it expires by its TTL; close
                        // tries once more.
                        log::debug!("baton session {id}: destroy after loss failed: {e}");
                        Next::Done
                    }
                }
            }),
        );
    }

    /// Sessions that are still tracked and not lost.
    pub(crate) fn live_sessions(&self) -> Vec<Arc<SessionShared>> {
        lock(&self.sessions)
            .values()
            .filter(|s| !s.is_lost())
            .cloned()
            .collect()
    }

    pub(crate) fn unregister_session(&self, id: &str) {
        lock(&self.sessions).remove(id);
    }

    /// The tracked, not lost session with this ID (for adopting a session twice).
    pub(crate) fn tracked_session(&self, id: &str) -> Option<Arc<SessionShared>> {
        lock(&self.sessions)
            .get(id)
            .filter(|s| !s.is_lost())
            .cloned()
    }

    pub(crate) fn register_session(self: &Arc<Self>, s: Arc<SessionShared>) -> Result<()> {
        let mut rt = lock(&self.runtime);
        self.check_usable()?;
        if rt.renewer.is_none() {
            rt.renewer = Some(Renewer::start(self.conn.clone()).map_err(spawn_err)?);
        }
        if rt.monitor.is_none() {
            let core = self.clone();
            let live = Box::new(move || core.live_sessions());
            rt.monitor =
                Some(crate::runtime::monitor::start(self.conn.clone(), live).map_err(spawn_err)?);
        }
        lock(&self.sessions).insert(s.id.clone(), s.clone());
        if s.ttl().is_some() {
            rt.renewer.as_ref().expect("started").add(s);
        }
        Ok(())
    }
}

static NEXT_OWED: AtomicU64 = AtomicU64::new(0);

/// Work owed to Consul, as `close` makes it.
pub(crate) enum OwedItem {
    /// Unlock a key (merged by `close` with the keys still held).
    Unlock(HeldKey),
    /// Anything else, made by the same API calls the clean-up thread makes;
    /// `key` names it in [`CloseReport::unconfirmed_releases`] if it fails.
    Work { key: String, run: OwedRun },
}

/// Owed work, made by the same API calls wherever it runs.
pub(crate) type OwedRun = Arc<dyn Fn(&Conn) -> Result<()> + Send + Sync>;

/// An entry of `Core::owed`, removed when dropped.
pub(crate) struct OwedGuard {
    core: Weak<Core>,
    id: u64,
}

impl Drop for OwedGuard {
    fn drop(&mut self) {
        if let Some(core) = self.core.upgrade() {
            lock(&core.owed).remove(&self.id);
        }
    }
}

/// Session calls made by the library itself (bypassing the closed check).
pub(crate) struct SessionApiCore<'a> {
    core: &'a Core,
}

impl SessionApiCore<'_> {
    pub(crate) fn destroy(&self, id: &str) -> Result<()> {
        self.core
            .transport
            .call(&crate::api::session_api::session_request("destroy", id))?;
        Ok(())
    }
}

struct Handle {
    core: Arc<Core>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.core.in_own_process() {
            self.core.close(DROP_CLOSE_TIMEOUT);
        }
    }
}

/// A Consul client. Cheap to clone (all clones share one connection pool and
/// one set of background threads).
///
/// Threads are started on demand, not at creation: a renewer, a lease
/// timer, a session monitor and a callback dispatcher once a managed session exists, one
/// thread per watched key, and a clean-up thread once a loss leaves a request to make
/// (an unlock owed after a lost lease, a semaphore slot to give back). [`Client::close`] (or dropping the last clone)
/// destroys the sessions it created and joins them all.
#[derive(Clone)]
pub struct Client {
    handle: Arc<Handle>,
}

/// A client reference that does not keep it open (for queued clean-ups, and the language
/// bindings' session objects). Not part of the Rust API.
#[doc(hidden)]
#[derive(Clone)]
pub struct WeakClient {
    handle: std::sync::Weak<Handle>,
}

impl WeakClient {
    /// The client, unless every [`Client`] handle to it has been dropped.
    pub fn upgrade(&self) -> Option<Client> {
        self.handle.upgrade().map(|handle| Client { handle })
    }
}

impl ClientBuilder {
    /// Builds the client.
    pub fn build(self) -> Result<Client> {
        self.default_session.validate()?;
        Client::from_builder(self)
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("address", &self.handle.core.transport.base())
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A builder with Go's defaults (the environment is not read).
    pub fn builder() -> ClientBuilder {
        ClientBuilder::new()
    }

    /// A client configured from the `CONSUL_*` environment variables, like the
    /// Go client's `api.DefaultConfig()`.
    pub fn from_env() -> Result<Client> {
        ClientBuilder::from_env().build()
    }

    pub(crate) fn from_builder(b: ClientBuilder) -> Result<Client> {
        let transport = Transport::new(&b)?;
        let core = Arc::new(Core {
            conn: Arc::new(Conn::new(transport, b.request_timeout)),
            default_options: b.default_session.clone(),
            runtime: Mutex::new(Runtime::default()),
            sessions: Mutex::new(HashMap::new()),
            default_session: Mutex::new(None),
            held_keys: Mutex::new(HashMap::new()),
            watches: Arc::default(),
            keyhub: KeyHub::default(),
            owed: Mutex::new(HashMap::new()),
            handle: OnceLock::new(),
            #[cfg(all(feature = "tokio", unix))]
            tokio_io_off: std::sync::atomic::AtomicBool::new(false),
        });
        let handle = Arc::new(Handle { core: core.clone() });
        let _ = core.handle.set(Arc::downgrade(&handle));
        Ok(Client { handle })
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.handle.core
    }

    /// The agent's address (no credentials): the base URL requests go to, e.g.
    /// `http://127.0.0.1:8500`, or `unix:///path` for an agent on a unix socket.
    pub fn address(&self) -> &str {
        self.core().transport.shown()
    }

    /// Sends a request, bounded by the calling thread's call scope (see [`Conn::send`]).
    pub(crate) fn send(&self, req: &Request) -> Result<Response> {
        self.core().conn.send(req)
    }

    /// A handle that does not keep the client open. For the language bindings.
    #[doc(hidden)]
    pub fn downgrade(&self) -> WeakClient {
        WeakClient {
            handle: Arc::downgrade(&self.handle),
        }
    }

    /// Queues best-effort clean-up work (see `cleanup`): it runs on the
    /// client's clean-up thread, never on the caller's or a signal's path.
    pub(crate) fn clean_up(
        &self,
        task: impl FnMut(&Client) -> crate::runtime::cleanup::Next + Send + 'static,
    ) {
        self.core().clean_up(self.downgrade(), task);
    }

    /// Makes `run` on the clean-up thread, retried for `session` as
    /// [`Owed`](crate::runtime::cleanup::Owed) says until Consul confirms it; owed to Consul
    /// meanwhile (named `key` in a close report), so `close` makes it too. `keep` lives as
    /// long as the task (a claim freed when the work is done); `what` names the work in logs.
    pub(crate) fn owe_work(
        &self,
        session: &crate::runtime::lease::Session,
        key: String,
        run: OwedRun,
        what: String,
        keep: impl Send + 'static,
    ) {
        use crate::runtime::cleanup::{Next, Owed};
        let entry = self.core().owe(OwedItem::Work {
            key,
            run: run.clone(),
        });
        let mut owed = Owed::new(session);
        self.clean_up(move |c| {
            let _kept = (&keep, &entry);
            match run(c.conn()) {
                Ok(()) => Next::Done,
                Err(e) if e.kind() == ErrorKind::Closed || owed_work_refused(&e) => Next::Done,
                Err(e) => {
                    log::debug!("baton {what}: {e}");
                    owed.failed(&e)
                }
            }
        });
    }

    pub(crate) fn call(&self, req: &Request) -> Result<Response> {
        self.core().conn.call(req)
    }

    /// The connection every API module talks through.
    pub(crate) fn conn(&self) -> &Conn {
        &self.core().conn
    }

    /// The low-level KV API.
    pub fn kv(&self) -> Kv<'_> {
        Kv { conn: self.conn() }
    }

    /// Runs KV operations atomically (`PUT /v1/txn`). On success returns the
    /// entries Consul reported (ops without an entry contribute none). When any
    /// op fails nothing is applied and the error (kind
    /// [`ErrorKind::Conflict`], or `PermissionDenied` for ACL denials) lists
    /// every failing op in [`Error::txn_errors`].
    ///
    /// Differences between Consul versions are handled here (see the README's
    /// compatibility table): a server before 1.6.2 rounds every number of a txn
    /// body through a float64, so flags above 2^53 would be stored wrongly. A
    /// client learns which before its first such write (a probe that writes
    /// nothing), and on such a server refuses them with
    /// [`ErrorKind::Unsupported`] before anything is sent. Should the probe not
    /// tell, the write goes out, and keys it wrote rounded are repaired at once
    /// (`set`/`cas` by a CAS on the index just written, `lock` by a re-acquire
    /// with the same session); an `unlock` cannot be repaired without resetting
    /// the key's LockIndex and is an `Unsupported` error naming the key. A verb or an op count the
    /// server does not support is also `Unsupported`, naming the version that
    /// added it.
    ///
    /// Keys follow the one key rule of every API (`core/src/foundations/keys.rs`): one leading `/`
    /// is dropped, and a bad key is refused before anything is sent.
    pub fn txn(&self, ops: &[KvOp]) -> Result<Vec<KvPair>> {
        self.conn().txn(ops)
    }

    /// Watches one key. The first [`Watch::next`] returns the current state.
    pub fn watch_key(&self, key: &str) -> Result<Watch> {
        self.watch(WatchTarget::Key(
            crate::foundations::keys::key(key)?.to_string(),
        ))
    }

    /// Watches every key starting with `prefix`.
    pub fn watch_prefix(&self, prefix: &str) -> Result<Watch> {
        self.watch(WatchTarget::Prefix(
            crate::foundations::keys::prefix(prefix)?.to_string(),
        ))
    }

    /// The latest state this client's watch of `prefix` has seen, when it is
    /// watched (no request: a recipe judging a queue it already watches).
    pub(crate) fn watched_prefix(&self, prefix: &str) -> Option<crate::runtime::watch::WatchEvent> {
        let target = WatchTarget::Prefix(prefix.to_string());
        crate::runtime::watch::watched(&self.core().watches, &target)
    }

    /// Watches a target; subscribers of the same target share one subscription, and every
    /// watch of the client is read by the key hub's few long polls (no thread or
    /// connection of its own).
    pub fn watch(&self, target: WatchTarget) -> Result<Watch> {
        let core = self.core();
        crate::runtime::watch::subscribe(&core.conn, &core.keyhub, &core.watches, target)
    }

    /// The agent's check and service endpoints (see [`Agent`] for the recipe
    /// binding sessions to health checks).
    pub fn agent(&self) -> Agent<'_> {
        Agent { conn: self.conn() }
    }

    /// The low-level session API (unmanaged sessions).
    pub fn sessions(&self) -> SessionApi<'_> {
        SessionApi { conn: self.conn() }
    }

    /// `GET /v1/status/leader`: the leader's raft address, `""` with no leader.
    pub fn status_leader(&self) -> Result<String> {
        let req = Request::new("GET", "/v1/status/leader");
        let resp = self.call(&req)?;
        resp.json(&req)
    }

    /// Creates a managed session: renewed in the background at about TTL/3
    /// (if it has a TTL), watched for invalidation, destroyed by [`Client::close`].
    pub fn create_session(&self, options: &SessionOptions) -> Result<Session> {
        self.core().check_usable()?;
        let sent = Instant::now();
        let id = self.sessions().create(options)?;
        let shared = Arc::new(SessionShared::new(
            self.core().clone(),
            id.clone(),
            options.ttl.filter(|t| !t.is_zero()),
            sent,
            true,
        ));
        if let Err(e) = self.core().register_session(shared.clone()) {
            let _ = self.core().session_api().destroy(&id);
            return Err(e);
        }
        Ok(Session { shared })
    }

    /// The client's shared default session, created on first use (options from
    /// [`ClientBuilder::default_session`]) and replaced once it is lost.
    pub fn default_session(&self) -> Result<Session> {
        self.core().check_usable()?;
        self.session_in(
            &self.core().default_session,
            self.core().default_options.clone(),
        )
    }

    /// How many lock acquires and releases were settled by their one request on the direct
    /// path: written and read by the calling thread on an idle connection (see
    /// `lock::direct`), or by a future in its own poll (`aio::warm`). For tests and benches.
    #[doc(hidden)]
    pub fn direct_calls(&self) -> u64 {
        self.core().direct_calls.load(Ordering::Relaxed)
    }

    /// Opens the connection an event loop's warm calls use (see `lock::warm`), if this
    /// client can have one (no proxy) and it is not open. Blocking: for a baton
    /// thread, never the loop's. For the language bindings.
    #[doc(hidden)]
    pub fn open_loop_conn(&self) -> Result<()> {
        self.conn().transport.open_loop_conn()
    }

    /// The default session if it exists and is valid, without waiting for the slot or
    /// creating one (an event loop's warm call, see `lock::warm`).
    pub(crate) fn current_default_session(&self) -> Option<Session> {
        let slot = self.core().default_session.try_lock().ok()?;
        slot.as_ref().filter(|s| s.is_valid()).cloned()
    }

    /// The valid session in `slot`, or a new one made with `options` (created
    /// on first use, replaced once lost): the default session's and each
    /// semaphore's own.
    pub(crate) fn session_in(
        &self,
        slot: &Mutex<Option<Session>>,
        options: SessionOptions,
    ) -> Result<Session> {
        let mut slot = lock(slot);
        if let Some(s) = &*slot {
            if s.is_valid() {
                return Ok(s.clone());
            }
        }
        let s = self.create_session(&options)?;
        *slot = Some(s.clone());
        Ok(s)
    }

    /// Closes the client: stops and joins its threads (interrupting long polls),
    /// releases the locks it holds and those whose release failed earlier and
    /// is still being retried, destroys the sessions it created, and
    /// guarantees that no callback runs after it returns. Consul being
    /// unavailable for a moment (no raft leader, a restarting agent) is waited
    /// out within `timeout`. Returns whether everything finished within
    /// `timeout` ([`Client::close_report`] says what did not). Later calls on
    /// any clone fail with [`ErrorKind::Closed`]. Idempotent.
    pub fn close(&self, timeout: Duration) -> bool {
        self.close_report(timeout).is_complete()
    }

    /// [`Client::close`], reporting what could not be finished within
    /// `timeout`: threads still running, releases Consul did not confirm,
    /// sessions it was not seen to destroy. A second close reports nothing.
    pub fn close_report(&self, timeout: Duration) -> CloseReport {
        self.core().close(timeout)
    }

    /// Number of threads the client runs to watch lock and election keys: one for all
    /// of them, or one per group of keys (see [`Client::key_watch_polls`]) behind an HTTP
    /// proxy. For tests and benches.
    pub fn key_watch_threads(&self) -> usize {
        self.core().keyhub.threads()
    }

    /// Number of long polls (each on a connection of its own) the client holds to watch
    /// lock and election keys: one per group of keys sharing a first path segment, at
    /// most 8 whatever the keys are called. For tests and benches.
    pub fn key_watch_polls(&self) -> usize {
        self.core().keyhub.polls()
    }

    /// How many times a call with time left (an acquire, a campaign, a
    /// semaphore wait) met a transient failure — Consul without a raft leader,
    /// a refused connection, a 429 — and tried again instead of failing (see
    /// [`Error::is_transient`]). Each retry is also logged at debug level. For
    /// monitoring and benches.
    pub fn transient_retries(&self) -> u64 {
        self.core().transient_retries.load(Ordering::Relaxed)
    }

    /// Whether [`Client::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.core().is_closed()
    }
}

/// Whether Consul's answer to owed work means it can never be made, so retrying is
/// pointless: denied by the ACLs, or refused as malformed (a key too long for Consul
/// was never written, so there is nothing of it to delete).
pub(crate) fn owed_work_refused(e: &crate::foundations::error::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::PermissionDenied | ErrorKind::InvalidArgument
    )
}
