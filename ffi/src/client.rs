//! `baton_client`: configuration, close and free.

use std::ffi::c_char;
use std::time::Duration;

use baton::{Client, ClientBuilder, SessionOptions, TlsSettings};

use crate::agent::{apply_checks, baton_session_checks};
use crate::election::BATON_SESSION_ID_SIZE;
use crate::error::{baton_result, Failure};
use crate::session::{baton_session_options, core_options_named};
use crate::util::{boundary, check_pid, handle, null, opt_str_arg, str_arg};

/// A Consul client: one connection pool and the background threads of its
/// sessions (renewer, monitor, callback dispatcher). Thread-safe: any function
/// may be called on one client from several threads at once.
pub struct baton_client {
    pub(crate) client: Client,
    pub(crate) pid: u32,
}

impl baton_client {
    /// The client, if this process created it.
    pub(crate) fn get(&self) -> Result<&Client, Failure> {
        check_pid(self.pid)?;
        Ok(&self.client)
    }
}

/// Options for `baton_client_new`. Start from `baton_client_options_default()`
/// and set what you need; NULL strings and 0 numbers mean "not set".
/// Strings are NUL-terminated UTF-8 and only read during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_client_options {
    /// `host:port`, `http://host:port`, `https://host:port` or `unix:///path`
    /// (default `127.0.0.1:8500`).
    pub address: *const c_char,
    /// The ACL token sent as `X-Consul-Token`.
    pub token: *const c_char,
    /// A file holding the ACL token (used when `token` is NULL).
    pub token_file: *const c_char,
    /// A PEM file of CA certificates to verify the server with.
    pub ca_file: *const c_char,
    /// A PEM client certificate, for mutual TLS (with `client_key_file`).
    pub client_cert_file: *const c_char,
    /// The PEM private key of `client_cert_file`.
    pub client_key_file: *const c_char,
    /// The datacenter to send requests to (default: the agent's).
    pub datacenter: *const c_char,
    /// The timeout of each HTTP request in milliseconds (0: the library default).
    pub request_timeout_ms: u64,
}

/// The options with nothing set: every field NULL or 0.
#[no_mangle]
pub extern "C" fn baton_client_options_default() -> baton_client_options {
    baton_client_options {
        address: std::ptr::null(),
        token: std::ptr::null(),
        token_file: std::ptr::null(),
        ca_file: std::ptr::null(),
        client_cert_file: std::ptr::null(),
        client_key_file: std::ptr::null(),
        datacenter: std::ptr::null(),
        request_timeout_ms: 0,
    }
}

fn finish(b: ClientBuilder, client_out: *mut *mut baton_client) -> Result<(), Failure> {
    // Warnings reach standard error from the first client on, unless the program
    // routes them with `baton_set_log_callback` (or has a Rust logger of its own).
    baton::log_sink::install();
    let client = b.build()?;
    let h = Box::new(baton_client {
        client,
        pid: std::process::id(),
    });
    // SAFETY: the callers checked `client_out` for NULL; the C caller guarantees it is writable.
    unsafe { client_out.write(Box::into_raw(h)) };
    Ok(())
}

/// Creates a client configured from the standard `CONSUL_*` environment
/// variables (`CONSUL_HTTP_ADDR`, `CONSUL_HTTP_TOKEN`, `CONSUL_CACERT`, ...),
/// like the Go client's `api.DefaultConfig()`. No request is made. Writes
/// `*client_out` on success; free it with `baton_client_free`.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_client_new_from_env(
    client_out: *mut *mut baton_client,
) -> baton_result {
    boundary(|| {
        if client_out.is_null() {
            return Err(null("client_out"));
        }
        finish(ClientBuilder::from_env(), client_out)
    })
}

/// The builder for `options` (NULL: all defaults; the environment is not read).
///
/// # Safety
/// `options` is NULL or points to a valid `baton_client_options` whose strings are
/// NULL or NUL-terminated, all alive during the call.
unsafe fn builder(options: *const baton_client_options) -> Result<ClientBuilder, Failure> {
    let mut b = ClientBuilder::new();
    // SAFETY: the caller passes NULL or a valid options struct.
    if let Some(o) = unsafe { options.as_ref() } {
        // SAFETY: each string field is NULL or a NUL-terminated string the
        // caller keeps alive during the call (same for the calls below).
        if let Some(a) = unsafe { opt_str_arg(o.address, "options.address") }? {
            b = b.address(a);
        }
        // SAFETY: as above.
        if let Some(t) = unsafe { opt_str_arg(o.token, "options.token") }? {
            b = b.token(t);
        }
        // SAFETY: as above.
        if let Some(f) = unsafe { opt_str_arg(o.token_file, "options.token_file") }? {
            b = b.token_file(f);
        }
        let mut tls = TlsSettings::default();
        let mut any_tls = false;
        // SAFETY: as above.
        if let Some(f) = unsafe { opt_str_arg(o.ca_file, "options.ca_file") }? {
            tls.ca_file = Some(f.into());
            any_tls = true;
        }
        // SAFETY: as above.
        if let Some(f) = unsafe { opt_str_arg(o.client_cert_file, "options.client_cert_file") }? {
            tls.cert_file = Some(f.into());
            any_tls = true;
        }
        // SAFETY: as above.
        if let Some(f) = unsafe { opt_str_arg(o.client_key_file, "options.client_key_file") }? {
            tls.key_file = Some(f.into());
            any_tls = true;
        }
        if any_tls {
            b = b.tls(tls);
        }
        // SAFETY: as above.
        if let Some(dc) = unsafe { opt_str_arg(o.datacenter, "options.datacenter") }? {
            b = b.datacenter(dc);
        }
        if o.request_timeout_ms != 0 {
            let t = crate::util::timeout_ms(o.request_timeout_ms).ok_or_else(|| {
                Failure::new(
                    baton_result::BATON_INVALID_ARGUMENT,
                    "options.request_timeout_ms must be less than ten years",
                )
            })?;
            b = b.request_timeout(t);
        }
    }
    Ok(b)
}

/// Creates a client from `options` (NULL: all defaults); the environment is not
/// read. No request is made. Writes `*client_out` on success; free it with
/// `baton_client_free`. `BATON_INVALID_ARGUMENT` for a bad address or TLS file.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_client_new(
    options: *const baton_client_options,
    client_out: *mut *mut baton_client,
) -> baton_result {
    boundary(|| {
        if client_out.is_null() {
            return Err(null("client_out"));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let b = unsafe { builder(options) }?;
        finish(b, client_out)
    })
}

/// Like `baton_client_new`, and configures the client's shared default session
/// (the one `baton_client_default_session`, and locks and elections created
/// without a session, use), as Rust's `ClientBuilder::default_session`, Python's
/// `Client(default_session=...)` and Node's `defaultSession` do.
///
/// `default_session` NULL keeps the default session's defaults: name `"baton"`,
/// TTL 15 s, Consul's lock-delay of 15 s, `BATON_BEHAVIOR_RELEASE`. Otherwise its
/// fields are used as `baton_session_create` uses them (start from
/// `baton_session_options_default()`; `ttl_ms` 0 is refused, `BATON_NO_TTL`
/// asks for no TTL), except that a NULL `name` keeps `"baton"`.
/// `default_session_checks` (NULL: Consul's default, the
/// node's `serfHealth`) binds it to health checks as in
/// `baton_session_create_with_checks`. Both are read only during the call.
/// Semaphores made without a session take their own sessions from these options
/// too (TTL, lock-delay, checks), named `"baton semaphore"`, behaviour delete.
///
/// Fields are checked here (`BATON_INVALID_ARGUMENT` naming
/// `default_session.behavior`, `default_session.ttl_ms`, ...); what only Consul
/// can judge, such as a TTL outside the server's `session_ttl_min`..24 h, is refused
/// when the default session is first created (by `baton_client_default_session`
/// or the first lock that uses it), with the range in the message. No request is
/// made here. A separate function, not a member of `baton_client_options`, so that
/// programs built against an earlier header keep working with this library.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_client_new_with_default_session(
    options: *const baton_client_options,
    default_session: *const baton_session_options,
    default_session_checks: *const baton_session_checks,
    client_out: *mut *mut baton_client,
) -> baton_result {
    boundary(|| {
        if client_out.is_null() {
            return Err(null("client_out"));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let b = unsafe { builder(options) }?;
        // SAFETY: the caller passes NULL or valid structs, alive during the call.
        let so = unsafe { default_session_options(default_session, default_session_checks) }?;
        finish(b.default_session(so), client_out)
    })
}

/// `baton_client_new_from_env` with the default session's options, as
/// `baton_client_new_with_default_session` takes them (NULL: its defaults). The
/// `CONSUL_*` variables configure the client; no request is made.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_client_new_from_env_with_default_session(
    default_session: *const baton_session_options,
    default_session_checks: *const baton_session_checks,
    client_out: *mut *mut baton_client,
) -> baton_result {
    boundary(|| {
        if client_out.is_null() {
            return Err(null("client_out"));
        }
        // SAFETY: the caller passes NULL or valid structs, alive during the call.
        let so = unsafe { default_session_options(default_session, default_session_checks) }?;
        finish(ClientBuilder::from_env().default_session(so), client_out)
    })
}

/// The default session's options from the C structs (NULL: its defaults).
///
/// # Safety
/// Each is NULL or a valid struct whose strings and arrays are valid, alive during the call.
unsafe fn default_session_options(
    default_session: *const baton_session_options,
    default_session_checks: *const baton_session_checks,
) -> Result<SessionOptions, Failure> {
    let so = if default_session.is_null() {
        SessionOptions::default_for_client()
    } else {
        // SAFETY: non-NULL; a valid options struct per the caller.
        unsafe {
            core_options_named(
                default_session,
                "default_session",
                SessionOptions::new().name("baton"),
            )
        }?
    };
    // SAFETY: the caller passes NULL or a valid checks struct.
    unsafe { apply_checks(so, default_session_checks, "default_session_checks") }
}

/// Copies the agent's address (no credentials): the base URL requests go to,
/// e.g. `http://127.0.0.1:8500`, or `unix:///path` for an agent on a unix
/// socket; NUL-terminated into `buf` of `len` bytes.
/// `*len_out` (if not NULL) gets the length without the NUL, also when the
/// result is `BATON_BUFFER_TOO_SMALL`; `buf = NULL, len = 0` asks only for
/// the length (`BATON_BUFFER_TOO_SMALL`, as `baton_kv_get` does).
#[no_mangle]
pub unsafe extern "C" fn baton_client_address(
    client: *const baton_client,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: the caller guarantees `buf`/`len` and `len_out`.
        unsafe { crate::util::copy_str_out(c.address().as_bytes(), buf, len, len_out) }
    })
}

/// Closes the client: stops and joins its threads (interrupting long polls),
/// releases its locks (also those whose release failed earlier and is still
/// being retried), destroys the sessions it created (also the own sessions of
/// semaphores freed before), and guarantees that no callback runs after it
/// returns. A Consul briefly unavailable (no raft
/// leader) is waited out within `timeout_ms`. `BATON_TIMEOUT` if something
/// could not be finished by then; the message says what (a release Consul did
/// not confirm, a session not destroyed, threads still stopping). Afterwards
/// every call that would reach Consul through the client or its handles
/// returns `BATON_CLOSED`; local queries answer from the closed state (not
/// held, not valid, 0 ms left) and callbacks registered then never run.
/// Idempotent. Do not call it from a callback.
/// The handle must still be freed with `baton_client_free`.
#[no_mangle]
pub unsafe extern "C" fn baton_client_close(
    client: *const baton_client,
    timeout_ms: u64,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // Cap "forever" at a day: close itself never waits without limit.
        let t = crate::util::timeout_ms(timeout_ms)
            .unwrap_or(Duration::from_secs(86_400))
            .min(Duration::from_secs(86_400));
        let report = c.close_report(t);
        if report.is_complete() {
            return Ok(());
        }
        Err(Failure::new(
            baton_result::BATON_TIMEOUT,
            format!("client close did not finish within {timeout_ms} ms: {report}"),
        ))
    })
}

/// Frees a client handle, closing the client first (like `baton_client_close`
/// with a few seconds' timeout) if that has not been done. Handles created from
/// it then behave as after `baton_client_close` and must still be freed. NULL
/// is a no-op.
/// Do not call it from a callback. In a forked child the memory is
/// deliberately leaked: the threads it refers to do not exist there.
#[no_mangle]
pub unsafe extern "C" fn baton_client_free(client: *mut baton_client) {
    crate::util::boundary_value((), || {
        if client.is_null() {
            return;
        }
        // SAFETY: the caller passes a pointer from a baton_client constructor, freed once.
        let b = unsafe { Box::from_raw(client) };
        if b.pid != std::process::id() {
            std::mem::forget(b);
            return;
        }
        // Close now, as documented: the session, lock, semaphore and election handles
        // made from this client hold clones of it, so dropping this one alone would
        // leave the client (its sessions, locks and threads) running until the last
        // of them is freed, and their calls would still succeed.
        b.client.close(baton::DROP_CLOSE_TIMEOUT);
    })
}

/// Lists the sessions Consul has in the client's datacenter
/// (`GET /v1/session/list`): the low-level call, for every session, including
/// those of other clients and processes (Go's `Session().List()`). Copies their
/// IDs into `buf` of `len` bytes, each followed by `'\n'`, then a NUL (`""`
/// when there is none); `*count_out` (if not NULL) gets the number of sessions
/// and `*len_out` (if not NULL) the length without the NUL, both also with
/// `BATON_BUFFER_TOO_SMALL`; `buf = NULL, len = 0` asks only for them. Sessions
/// come and go between a size query and the next call: allow for some more
/// (each line is `BATON_SESSION_ID_SIZE` bytes).
#[no_mangle]
pub unsafe extern "C" fn baton_client_session_ids(
    client: *const baton_client,
    buf: *mut c_char,
    len: usize,
    len_out: *mut usize,
    count_out: *mut usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        let sessions = c.sessions().list()?;
        let mut ids = String::with_capacity(sessions.len() * BATON_SESSION_ID_SIZE);
        for s in &sessions {
            ids.push_str(&s.id);
            ids.push('\n');
        }
        // SAFETY: NULL or writable, per the caller.
        unsafe { crate::util::write_opt(count_out, sessions.len()) };
        // SAFETY: the caller guarantees `buf`/`len` and `len_out`.
        unsafe { crate::util::copy_str_out(ids.as_bytes(), buf, len, len_out) }
    })
}

/// Destroys a session by ID at Consul (`PUT /v1/session/destroy/<id>`): the low
/// level call, for any session, including ones of other clients or processes.
/// Locks it holds are released and its holders see it invalidated.
#[no_mangle]
pub unsafe extern "C" fn baton_client_destroy_session_id(
    client: *const baton_client,
    session_id: *const c_char,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let id = unsafe { str_arg(session_id, "session_id") }?;
        c.sessions().destroy(id)?;
        Ok(())
    })
}
