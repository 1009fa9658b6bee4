//! The native half of the `baton` npm package. Every call that can wait returns a Promise that
//! is settled from a thread of baton's own, never from libuv's small thread pool, so waiting
//! calls cannot starve `fs` or `dns` work; a call that waits long (an acquire of a held key, a
//! wait for a loss) holds no thread at all while it waits ([`driven`]). The modules under `lib/` (behind `index.js`) wrap
//! these classes with the JavaScript surface (errors with `code`, AbortSignal, events, BigInt).

// napi-derive registers what it exports only outside `cfg(test)`: in the unit-test build the
// exported functions of private modules (`setLogger`, `parseSequencer`, ...) look unused.
#![cfg_attr(test, allow(dead_code))]

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{Buffer, FnArgs, Object, ToNapiValue};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;

mod agent;
mod holding;
mod logging;
mod metrics;
mod more;
mod recipes;
mod settle;
mod warm;
mod warm_conn;

/// Separates the message of a native error from its JSON details (see [`js_err`]).
const DETAILS_SEPARATOR: char = '\u{1f}';

/// Maps a core error to a JS error whose message is `<CODE>: <text>`, optionally followed by
/// [`DETAILS_SEPARATOR`] and a JSON object `{status, serverText, endpoint, txnErrors}`;
/// `lib/errors.js` turns the code into `err.code` and the details into properties.
pub(crate) fn js_err(e: baton::Error) -> Error {
    let mut details = serde_json::Map::new();
    if let Some(s) = e.status() {
        details.insert("status".into(), s.into());
    }
    if let Some(t) = e.server_text() {
        details.insert("serverText".into(), t.into());
    }
    if let Some(ep) = e.endpoint() {
        details.insert("endpoint".into(), ep.into());
    }
    if let Some(url) = e.url() {
        details.insert("url".into(), url.into());
    }
    if e.is_transient() {
        details.insert("transient".into(), true.into());
    }
    if !e.txn_errors().is_empty() {
        let list = e
            .txn_errors()
            .iter()
            .map(|t| serde_json::json!({ "opIndex": t.op_index, "what": t.what }))
            .collect();
        details.insert("txnErrors".into(), serde_json::Value::Array(list));
    }
    let mut reason = format!("{}: {}", e.code(), e);
    if !details.is_empty() {
        reason.push(DETAILS_SEPARATOR);
        reason.push_str(&serde_json::Value::Object(details).to_string());
    }
    Error::new(Status::GenericFailure, reason)
}

/// Owns a value whose drop can wait on the network (releasing a held lock, closing the last
/// clone of a client) and drops it on a thread of its own, so a garbage-collected object never
/// blocks the JS thread.
pub(crate) struct OffThread<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> OffThread<T> {
    pub(crate) fn new(value: T) -> OffThread<T> {
        OffThread(Some(value))
    }
}

impl<T: Send + 'static> std::ops::Deref for OffThread<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0.as_ref().expect("present until dropped")
    }
}

impl<T: Send + 'static> Drop for OffThread<T> {
    fn drop(&mut self) {
        if let Some(v) = self.0.take() {
            // If no thread can be started, the closure (and `v`) is dropped right here.
            let _ = std::thread::Builder::new()
                .name("baton-node-drop".into())
                .spawn(move || drop(v));
        }
    }
}

/// The function `lib/client.js` gives each client: called with `(id, reason)` on the JS thread
/// when the holding of the lock, semaphore or election registered under `id` is lost. Weak
/// (unref'd): a pending loss notification never keeps the process alive.
pub(crate) type LostFn =
    ThreadsafeFunction<FnArgs<(u32, String)>, (), FnArgs<(u32, String)>, Status, false, true>;

/// A loss callback for the core: posts `(id, reason)` to JS without blocking the dispatcher.
pub(crate) fn lost_notifier<R: Copy + 'static>(
    lost: &Arc<LostFn>,
    id: u32,
    name: fn(R) -> &'static str,
) -> impl Fn(R) + Send + Sync + 'static {
    let lost = lost.clone();
    move |reason: R| {
        lost.call(
            (id, name(reason).to_string()).into(),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    }
}

pub(crate) fn invalid(msg: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, msg.into())
}

/// The threads the addon's calls that do not wait run on (reused, at most
/// [`baton::pool::CALL_THREADS`]; see `pool.rs`). The waits are driven futures ([`driven`]).
static CALLS: baton::pool::Pool =
    baton::pool::Pool::bounded("baton-node-call", baton::pool::CALL_THREADS);

/// The threads of the rare acquire that goes on on a thread (a warm acquire whose request may
/// have been applied, see `warm.rs`): it may wait as long as its timeout, so it has a pool of
/// its own, unbounded, never in the way of the bounded calls.
pub(crate) static WAITS: baton::pool::Pool = baton::pool::Pool::new("baton-node-wait");

/// Ends the idle threads of [`CALLS`] when the (first) environment that made a client ends.
fn stop_calls_at_exit(env: &Env) {
    static HOOKED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !HOOKED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        let _ = env.add_env_cleanup_hook((), |()| {
            let deadline = std::time::Instant::now() + Duration::from_secs(1);
            CALLS.stop(deadline);
            WAITS.stop(deadline);
        });
    }
}

/// Ends the idle call threads of the addon ([`CALLS`]), waiting for them at most 100 ms:
/// `lib/client.js` calls it once a client's `close()` has settled, so no baton thread outlives
/// `close()` (a later call of another client starts a thread again).
#[napi]
pub fn end_idle_threads() {
    let deadline = std::time::Instant::now() + Duration::from_millis(100);
    CALLS.stop(deadline);
    WAITS.stop(deadline);
}

/// Runs `work` on one of baton's threads and settles the returned promise with its result
/// (see `settle.rs`).
pub(crate) fn on_thread<'e, T, F>(env: &'e Env, work: F) -> Result<Object<'e>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> std::result::Result<T, baton::Error> + Send + 'static,
{
    let (deferred, promise) = settle::promise(env)?;
    run_settling(deferred, work)?;
    Ok(promise)
}

/// Settles the returned promise with the outcome of `future`, a call that may wait long (an
/// acquire, a wait for a loss) driven to its end with no thread of its own
/// (`baton::drive`): first polled here (a poll never blocks), then by the baton thread that
/// wakes it, which queues the settlement for the JavaScript thread.
pub(crate) fn driven<'e, T, F>(env: &'e Env, future: F) -> Result<Object<'e>>
where
    T: ToNapiValue + Send + 'static,
    F: std::future::Future<Output = std::result::Result<T, baton::Error>> + Send + 'static,
{
    let (deferred, promise) = settle::promise(env)?;
    drive_settling(deferred, future);
    Ok(promise)
}

/// [`driven`] for a promise made already (a warm call that goes on as a wait).
pub(crate) fn drive_settling<T, F>(deferred: settle::Deferred, future: F)
where
    T: ToNapiValue + Send + 'static,
    F: std::future::Future<Output = std::result::Result<T, baton::Error>> + Send + 'static,
{
    baton::drive::drive(future, move |outcome| {
        deferred.settle(None, outcome.map_err(js_err))
    });
}

/// Runs `work` on one of baton's threads and settles `deferred` with its result (from any
/// thread: a warm call that goes on on a thread hands its promise over here).
pub(crate) fn run_settling<T, F>(deferred: settle::Deferred, work: F) -> Result<()>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> std::result::Result<T, baton::Error> + Send + 'static,
{
    run_settling_on(&CALLS, deferred, work)
}

/// [`run_settling`] on `pool`.
pub(crate) fn run_settling_on<T, F>(
    pool: &'static baton::pool::Pool,
    deferred: settle::Deferred,
    work: F,
) -> Result<()>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> std::result::Result<T, baton::Error> + Send + 'static,
{
    let turns = deferred.turns().clone();
    pool.run_for(&turns, move || {
        let outcome = work().map_err(js_err);
        move |ticket| deferred.settle(Some(ticket), outcome)
    })
    .map_err(|e| Error::from_reason(format!("cannot start a thread: {e}")))
}

pub(crate) fn millis(name: &str, v: Option<f64>) -> Result<Option<Duration>> {
    match v {
        None => Ok(None),
        // `try_from`: a value too large for a Duration is an error, never a panic (a panic
        // here aborts the Node process).
        Some(ms) if ms.is_finite() && ms >= 0.0 => Duration::try_from_secs_f64(ms / 1000.0)
            .map(Some)
            .map_err(|_| invalid(format!("{name} is too large: {ms} ms"))),
        Some(ms) => Err(invalid(format!(
            "{name} must be a non-negative number of milliseconds, got {ms}"
        ))),
    }
}

/// Options for a client; unset fields come from the `CONSUL_*` environment variables.
#[napi(object)]
pub struct ClientOptions {
    /// `host:port` or `http(s)://host:port`.
    pub address: Option<String>,
    /// ACL token (sent as `X-Consul-Token`).
    pub token: Option<String>,
    /// Datacenter.
    pub datacenter: Option<String>,
    /// Timeout of each request, in milliseconds.
    pub request_timeout_ms: Option<f64>,
    /// Options of the session the client's locks and elections share by default (TTL 15 s
    /// and Consul's lock-delay unless set here).
    pub default_session: Option<SessionOptions>,
}

/// Options for a session.
#[napi(object)]
pub struct SessionOptions {
    /// Human-readable name.
    pub name: Option<String>,
    /// TTL in milliseconds, positive; omitted: 15000 (15 s, the default session's and C's).
    /// Consul accepts 10 s to 24 h (its `session_ttl_min` may differ). `0` is refused (Consul
    /// would read it as "no TTL"); `ttlMs: null` in lib/checks.js asks for no TTL (`noTtl`).
    pub ttl_ms: Option<f64>,
    /// A session without a TTL (what `lib/checks.js` sends for `ttlMs: null`): it lives until
    /// destroyed or its node fails, so a crashed process keeps its locks while its node lives.
    pub no_ttl: Option<bool>,
    /// Lock-delay in milliseconds; omitted: Consul's default (15 s); 0 really means none.
    pub lock_delay_ms: Option<f64>,
    /// `"release"` (default) or `"delete"`.
    pub behavior: Option<String>,
    /// The node the session belongs to (default: the agent's).
    pub node: Option<String>,
    /// IDs of node checks the session is bound to (default Consul's `["serfHealth"]`; `[]`
    /// for none).
    pub node_checks: Option<Vec<String>>,
    /// IDs of service checks the session is bound to.
    pub service_checks: Option<Vec<String>>,
    /// Consul's older combined list (node and service check IDs alike), treated as
    /// `nodeChecks` as Consul does; not together with `nodeChecks`.
    pub checks: Option<Vec<String>>,
}

/// Why `ttlMs: 0` is refused, and what to write instead.
pub(crate) const TTL_ZERO: &str = "ttlMs must be positive: 0 would create a session that never \
     expires (a crashed process would keep its locks while its node lives); pass ttlMs: null \
     to ask for a session without a TTL";

/// What `createSession` starts from: no name, the TTL of the client's default session
/// (15 s, as in C), Consul's lock-delay.
fn session_defaults() -> baton::SessionOptions {
    let mut o = baton::SessionOptions::new();
    o.ttl = baton::SessionOptions::default_for_client().ttl;
    o
}

/// Applies the JS session options to `o`.
fn session_options(
    mut o: baton::SessionOptions,
    s: SessionOptions,
) -> Result<baton::SessionOptions> {
    if let Some(n) = s.name {
        o = o.name(n);
    }
    // Omitted: the TTL of `o` (15 s); `noTtl` (JS `ttlMs: null`): none, asked for explicitly.
    match (millis("ttlMs", s.ttl_ms)?, s.no_ttl.unwrap_or(false)) {
        (Some(_), true) => return Err(invalid("give ttlMs or noTtl, not both")),
        (Some(t), false) if t.is_zero() => return Err(invalid(TTL_ZERO)),
        (Some(t), false) => o = o.ttl(t),
        (None, true) => o = o.without_ttl(),
        (None, false) => {}
    }
    if let Some(d) = millis("lockDelayMs", s.lock_delay_ms)? {
        o = o.lock_delay(d);
    }
    match s.behavior.as_deref() {
        None | Some("release") => {}
        Some("delete") => o = o.behavior(baton::Behavior::Delete),
        Some(other) => {
            return Err(invalid(format!(
                "behavior must be 'release' or 'delete', got {other:?}"
            )))
        }
    }
    if let Some(n) = s.node {
        if n.is_empty() {
            return Err(invalid(
                "node must not be empty (omit it for the agent's node)",
            ));
        }
        o = o.node(n);
    }
    let node_checks = match (s.node_checks, s.checks) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "give nodeChecks or checks (Consul's older name for them), not both",
            ))
        }
        (Some(list), None) => Some(("nodeChecks", list)),
        (None, Some(list)) => Some(("checks", list)),
        (None, None) => None,
    };
    if let Some((what, list)) = node_checks {
        if let Some(i) = list.iter().position(|c| c.is_empty()) {
            return Err(invalid(format!("{what}[{i}] must not be empty")));
        }
        o = o.node_checks(list);
    }
    for (i, c) in s.service_checks.into_iter().flatten().enumerate() {
        if c.is_empty() {
            return Err(invalid(format!("serviceChecks[{i}] must not be empty")));
        }
        o = o.service_check(c);
    }
    Ok(o)
}

/// A connection to Consul (or the dev server).
#[napi(js_name = "NativeClient")]
pub struct NativeClient {
    pub(crate) inner: OffThread<baton::Client>,
    pub(crate) lost: Arc<LostFn>,
}

#[napi]
impl NativeClient {
    /// Creates a client from the environment, overridden by `options`. `onLost(id, reason)`
    /// receives the loss notifications of the locks, semaphores and elections it makes.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        options: Option<ClientOptions>,
        #[napi(ts_arg_type = "(id: number, reason: string) => void")] on_lost: LostFn,
    ) -> Result<NativeClient> {
        stop_calls_at_exit(&env);
        let mut b = baton::ClientBuilder::from_env();
        if let Some(o) = options {
            if let Some(a) = o.address {
                if a.is_empty() {
                    return Err(invalid("address must not be empty"));
                }
                b = b.address(a);
            }
            if let Some(t) = o.token {
                b = b.token(t);
            }
            if let Some(dc) = o.datacenter {
                b = b.datacenter(dc);
            }
            if let Some(t) = millis("requestTimeoutMs", o.request_timeout_ms)? {
                b = b.request_timeout(t);
            }
            if let Some(s) = o.default_session {
                b = b.default_session(session_options(
                    baton::SessionOptions::default_for_client(),
                    s,
                )?);
            }
        }
        Ok(NativeClient {
            inner: OffThread::new(b.build().map_err(js_err)?),
            lost: Arc::new(on_lost),
        })
    }

    /// The address requests go to.
    #[napi(getter)]
    pub fn address(&self) -> String {
        self.inner.address().to_string()
    }

    /// The value at `key`, or null.
    #[napi(ts_return_type = "Promise<Buffer | null>")]
    pub fn kv_get<'e>(&self, env: &'e Env, key: String) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || {
            Ok(c.kv()
                .get(&key)?
                .map(|p| Buffer::from(p.value.unwrap_or_default())))
        })
    }

    /// Writes `value` at `key` (plain PUT).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn kv_put<'e>(&self, env: &'e Env, key: String, value: Buffer) -> Result<Object<'e>> {
        let (c, v) = (self.inner.clone(), value.to_vec());
        on_thread(env, move || c.kv().put(&key, &v))
    }

    /// Creates a session renewed in the background.
    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn create_session<'e>(
        &self,
        env: &'e Env,
        options: Option<SessionOptions>,
    ) -> Result<Object<'e>> {
        let o = match options {
            Some(s) => session_options(session_defaults(), s)?,
            None => session_defaults(),
        };
        let c = self.inner.clone();
        on_thread(env, move || {
            c.create_session(&o)
                .map(|inner| NativeSession::new(inner, &c))
        })
    }

    /// Destroys the sessions this client created and joins its threads.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn close<'e>(&self, env: &'e Env, timeout_ms: Option<f64>) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?.unwrap_or(Duration::from_secs(5));
        let c = self.inner.clone();
        on_thread(env, move || Ok(c.close(t)))
    }
}

/// A session renewed in the background.
#[napi(js_name = "NativeSession")]
pub struct NativeSession {
    pub(crate) inner: baton::Session,
    /// The client that made or adopted it, whose timer wakes `waitLost` (weak: a session
    /// object does not keep its client open).
    client: baton::WeakClient,
}

impl NativeSession {
    pub(crate) fn new(inner: baton::Session, client: &baton::Client) -> NativeSession {
        NativeSession {
            inner,
            client: client.downgrade(),
        }
    }
}

#[napi]
impl NativeSession {
    /// The session ID.
    #[napi(getter)]
    pub fn id(&self) -> String {
        self.inner.id().to_string()
    }

    /// True while the session is held.
    #[napi]
    pub fn is_valid(&self) -> bool {
        self.inner.is_valid()
    }

    /// Why the session was lost (`invalidated`, `deadline_exceeded`, ...), or null while it is
    /// valid. Known as soon as `isValid()` turns false, before the 'lost' notification arrives.
    #[napi]
    pub fn lost_reason(&self) -> Option<&'static str> {
        match self.inner.state() {
            baton::SessionState::Lost(r) => Some(r.name()),
            _ => None,
        }
    }

    /// Milliseconds (fractional) left until the session's local lease deadline; 0 once lost
    /// or past it; null for a session without a TTL.
    #[napi]
    pub fn time_left_ms(&self) -> Option<f64> {
        // The deadline first: a renew landing in between only makes the answer smaller.
        let until = self.inner.valid_until();
        if !self.inner.is_valid() {
            return Some(0.0);
        }
        until.map(|u| {
            u.saturating_duration_since(std::time::Instant::now())
                .as_secs_f64()
                * 1000.0
        })
    }

    /// Resolves with the loss reason once the session is lost; rejects with `BATON_TIMEOUT`
    /// after `timeoutMs`, or `BATON_CANCELLED` when `cancel()` is called.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn wait_lost<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        let token = cancel.map_or_else(baton::CancelToken::new, |c| c.inner.clone());
        let wait = baton::aio::session_lost_weak(&self.client, &self.inner, t, &token);
        driven(env, async move { wait.await.map(baton::LostReason::name) })
    }

    /// Destroys the session now.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn destroy<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let s = self.inner.clone();
        on_thread(env, move || s.destroy())
    }
}

/// A cancel token that `lib/cancel.js` ties to an `AbortSignal`.
#[napi(js_name = "NativeCancel")]
pub struct NativeCancel {
    pub(crate) inner: baton::CancelToken,
}

#[napi]
impl NativeCancel {
    /// A new, uncancelled token.
    #[napi(constructor)]
    pub fn new() -> NativeCancel {
        NativeCancel {
            inner: baton::CancelToken::new(),
        }
    }

    /// Cancels every call waiting on this token.
    #[napi]
    pub fn cancel(&self) {
        self.inner.cancel();
    }
}

impl Default for NativeCancel {
    fn default() -> Self {
        Self::new()
    }
}

/// How many warm calls (a lock's acquire or release whose one request this loop writes and
/// reads itself, see `warm.rs`) are in flight on this thread's loop. For the tests.
#[napi]
pub fn warm_in_flight() -> u32 {
    warm::in_flight()
}

/// `[watched, made]`: the agent connections this thread's loop watches for warm calls now
/// (kept between calls, see `warm_conn.rs`), and how many it ever made. For the tests.
#[napi]
pub fn warm_conn_stats() -> Vec<u32> {
    let (watched, made) = warm_conn::stats();
    vec![watched, made]
}

/// Gives the CPU to another runnable thread, if any (`spin.js` calls it between polls, so a
/// baton thread it just woke is not kept waiting behind the spinning event loop).
#[napi]
pub fn yield_cpu() {
    std::thread::yield_now();
}

/// Whether this loop turn took the outcome of a baton call and is not over yet: a call made
/// now goes to the baton thread that delivered that outcome, which is still awake for it (see
/// `settle.rs`). `spin.js` polls the loop only for such calls.
#[napi]
pub fn in_turn(env: &Env) -> Result<bool> {
    Ok(settle::turns(env)?.in_turn())
}
