//! The native half of the `baton` npm package. Every call that can wait returns a Promise that
//! is settled from a thread of baton's own, never from libuv's small thread pool, so waiting
//! calls cannot starve `fs` or `dns` work. `index.js` wraps these classes with the JavaScript
//! surface (errors with `code`, AbortSignal).

use std::time::Duration;

use napi::bindgen_prelude::{Buffer, Object, ToNapiValue};
use napi::{Env, Error, Result, Status};
use napi_derive::napi;

/// Maps a core error to a JS error whose message starts with the stable code, e.g.
/// `BATON_TIMEOUT: ...`; `index.js` moves the code into `err.code`.
fn js_err(e: baton::Error) -> Error {
    Error::new(Status::GenericFailure, format!("{}: {}", e.code(), e))
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, msg.into())
}

/// Runs `work` on a new named thread and settles the returned promise with its result.
fn on_thread<'e, T, F>(env: &'e Env, what: &str, work: F) -> Result<Object<'e>>
where
    T: ToNapiValue + Send + 'static,
    F: FnOnce() -> std::result::Result<T, baton::Error> + Send + 'static,
{
    let (deferred, promise) = env.create_deferred::<T, _>()?;
    std::thread::Builder::new()
        .name(format!("baton-node-{what}"))
        .spawn(move || match work() {
            Ok(v) => deferred.resolve(move |_| Ok(v)),
            Err(e) => deferred.reject(js_err(e)),
        })
        .map_err(|e| Error::from_reason(format!("cannot start a thread: {e}")))?;
    Ok(promise)
}

fn millis(name: &str, v: Option<f64>) -> Result<Option<Duration>> {
    match v {
        None => Ok(None),
        Some(ms) if ms.is_finite() && ms >= 0.0 => Ok(Some(Duration::from_secs_f64(ms / 1000.0))),
        Some(ms) => Err(invalid(format!(
            "{name} must be a non-negative number of milliseconds, got {ms}"
        ))),
    }
}

fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(invalid("key must not be empty"));
    }
    if key.starts_with('/') {
        return Err(invalid(format!("key must not start with '/': {key:?}")));
    }
    Ok(())
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
}

/// Options for a session.
#[napi(object)]
pub struct SessionOptions {
    /// Human-readable name.
    pub name: Option<String>,
    /// TTL in milliseconds (omit for no TTL).
    pub ttl_ms: Option<f64>,
    /// Lock-delay in milliseconds; 0 really means none (Consul's default is 15 s).
    pub lock_delay_ms: Option<f64>,
    /// `"release"` (default) or `"delete"`.
    pub behavior: Option<String>,
}

/// A connection to Consul (or the dev server).
#[napi(js_name = "NativeClient")]
pub struct NativeClient {
    inner: baton::Client,
}

#[napi]
impl NativeClient {
    /// Creates a client from the environment, overridden by `options`.
    #[napi(constructor)]
    pub fn new(options: Option<ClientOptions>) -> Result<NativeClient> {
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
        }
        Ok(NativeClient {
            inner: b.build().map_err(js_err)?,
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
        check_key(&key)?;
        let c = self.inner.clone();
        on_thread(env, "kv", move || {
            Ok(c.kv()
                .get(&key)?
                .map(|p| Buffer::from(p.value.unwrap_or_default())))
        })
    }

    /// Writes `value` at `key` (plain PUT).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn kv_put<'e>(&self, env: &'e Env, key: String, value: Buffer) -> Result<Object<'e>> {
        check_key(&key)?;
        let (c, v) = (self.inner.clone(), value.to_vec());
        on_thread(env, "kv", move || c.kv().put(&key, &v))
    }

    /// Creates a session renewed in the background.
    #[napi(ts_return_type = "Promise<NativeSession>")]
    pub fn create_session<'e>(
        &self,
        env: &'e Env,
        options: Option<SessionOptions>,
    ) -> Result<Object<'e>> {
        let mut o = baton::SessionOptions::new();
        if let Some(s) = options {
            if let Some(n) = s.name {
                o = o.name(n);
            }
            if let Some(t) = millis("ttlMs", s.ttl_ms)? {
                if t.is_zero() {
                    return Err(invalid("ttlMs must be positive (omit it for no TTL)"));
                }
                o = o.ttl(t);
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
        }
        let c = self.inner.clone();
        on_thread(env, "session", move || {
            c.create_session(&o).map(|inner| NativeSession { inner })
        })
    }

    /// Destroys the sessions this client created and joins its threads.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn close<'e>(&self, env: &'e Env, timeout_ms: Option<f64>) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?.unwrap_or(Duration::from_secs(5));
        let c = self.inner.clone();
        on_thread(env, "close", move || Ok(c.close(t)))
    }
}

/// A session renewed in the background.
#[napi(js_name = "NativeSession")]
pub struct NativeSession {
    inner: baton::Session,
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
        let s = self.inner.clone();
        let token = cancel.map(|c| c.inner.clone());
        on_thread(env, "wait", move || {
            s.wait_lost(t, token.as_ref()).map(baton::LostReason::name)
        })
    }

    /// Destroys the session now.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn destroy<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let s = self.inner.clone();
        on_thread(env, "destroy", move || s.destroy())
    }
}

/// A cancel token that `index.js` ties to an `AbortSignal`.
#[napi(js_name = "NativeCancel")]
pub struct NativeCancel {
    inner: baton::CancelToken,
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
