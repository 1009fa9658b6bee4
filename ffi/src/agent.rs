//! Sessions bound to health checks: session checks (`baton_session_create_with_checks`),
//! adopting an existing session (`baton_session_adopt`) and the agent's check and
//! service endpoints (`baton_agent_*`).
//!
//! `baton_session_options` keeps its layout (programs built against an earlier header pass
//! it by value and by pointer); the checks travel in a struct of their own through a new
//! entry point.

use std::ffi::c_char;

use baton::{CheckStatus, ServiceRegistration, SessionOptions, TtlCheck};

use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::session::{baton_session, baton_session_options, core_options, new_handle};
use crate::util::{boundary, handle, null, opt_str_arg, str_arg, timeout_ms};

/// The check bindings of a session, for `baton_session_create_with_checks`. Start
/// from `baton_session_checks_default()`. Every string is NUL-terminated UTF-8 and
/// read only during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_session_checks {
    /// The node the session belongs to; NULL: the agent's node.
    pub node: *const c_char,
    /// IDs of node checks (`node_checks_len` of them). NULL: Consul's default, the
    /// node's `"serfHealth"`; non-NULL with `node_checks_len` 0: no node check at all.
    /// To keep `serfHealth` beside your own checks, list it.
    pub node_checks: *const *const c_char,
    /// The number of entries in `node_checks`.
    pub node_checks_len: usize,
    /// IDs of service checks (`service_checks_len` of them; NULL only with 0).
    pub service_checks: *const *const c_char,
    /// The number of entries in `service_checks`.
    pub service_checks_len: usize,
}

/// No check bindings beyond Consul's defaults: the agent's node, `serfHealth`.
#[no_mangle]
pub extern "C" fn baton_session_checks_default() -> baton_session_checks {
    baton_session_checks {
        node: std::ptr::null(),
        node_checks: std::ptr::null(),
        node_checks_len: 0,
        service_checks: std::ptr::null(),
        service_checks_len: 0,
    }
}

/// The strings of a C array of `len` strings named `name`.
///
/// # Safety
/// `list` is NULL or valid for `len` reads of NUL-terminated string pointers (each NULL
/// or valid) alive during the call.
pub(crate) unsafe fn str_list(
    list: *const *const c_char,
    len: usize,
    name: &str,
) -> Result<Vec<String>, Failure> {
    if len == 0 {
        return Ok(Vec::new());
    }
    if list.is_null() {
        return Err(Failure::new(
            baton_result::BATON_NULL_ARGUMENT,
            format!("argument `{name}` is NULL but its length is {len}"),
        ));
    }
    // A slice of more than isize::MAX bytes is undefined behaviour (a debug build
    // aborts on it), and no array can be that long.
    if len > isize::MAX as usize / std::mem::size_of::<*const c_char>() {
        return Err(crate::util::too_long(name, len));
    }
    // SAFETY: non-NULL, within isize::MAX bytes, and the caller guarantees `len`
    // readable pointers.
    let ptrs = unsafe { std::slice::from_raw_parts(list, len) };
    let mut out = Vec::with_capacity(len);
    for (i, p) in ptrs.iter().enumerate() {
        let what = format!("{name}[{i}]");
        // SAFETY: each entry is NULL or a NUL-terminated string, per the caller.
        let s = unsafe { str_arg(*p, &what) }?;
        if s.is_empty() {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!("{what} must not be empty"),
            ));
        }
        out.push(s.to_string());
    }
    Ok(out)
}

/// `so` bound to the checks of `checks` (NULL: `baton_session_checks_default()`);
/// messages name the fields `<prefix>.node`, `<prefix>.node_checks`, ...
///
/// # Safety
/// `checks` is NULL or points to a valid `baton_session_checks` whose strings and
/// arrays are valid as its field docs say, all alive during the call.
pub(crate) unsafe fn apply_checks(
    mut so: SessionOptions,
    checks: *const baton_session_checks,
    prefix: &str,
) -> Result<SessionOptions, Failure> {
    // SAFETY: the caller passes NULL or a valid checks struct.
    let k = match unsafe { checks.as_ref() } {
        Some(k) => *k,
        None => baton_session_checks_default(),
    };
    // SAFETY: NULL or a NUL-terminated string alive during the call.
    if let Some(n) = unsafe { opt_str_arg(k.node, &format!("{prefix}.node")) }? {
        if n.is_empty() {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!("{prefix}.node must not be empty (NULL for the agent's node)"),
            ));
        }
        so = so.node(n);
    }
    if !k.node_checks.is_null() {
        // SAFETY: a valid array of `node_checks_len` strings, per the caller.
        let list = unsafe {
            str_list(
                k.node_checks,
                k.node_checks_len,
                &format!("{prefix}.node_checks"),
            )
        }?;
        so = so.node_checks(list);
    } else if k.node_checks_len != 0 {
        return Err(Failure::new(
            baton_result::BATON_NULL_ARGUMENT,
            format!(
                "argument `{prefix}.node_checks` is NULL but its length is {}",
                k.node_checks_len
            ),
        ));
    }
    // SAFETY: NULL with 0, or a valid array of `service_checks_len` strings.
    let services = unsafe {
        str_list(
            k.service_checks,
            k.service_checks_len,
            &format!("{prefix}.service_checks"),
        )
    }?;
    for s in services {
        so = so.service_check(s);
    }
    Ok(so)
}

/// Like `baton_session_create`, bound to health checks: the session is invalidated
/// (its locks released, or their keys deleted) as soon as one of them turns critical.
/// `checks` NULL: `baton_session_checks_default()`. Consul refuses a check that does
/// not exist or is not passing (`BATON_SERVER` or `BATON_INVALID_ARGUMENT`, Consul's
/// text in the last error message). For a lock another process must get right after
/// the check fails, set `options.lock_delay_ms` to 0.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_session_create_with_checks(
    client: *const baton_client,
    options: *const baton_session_options,
    checks: *const baton_session_checks,
    session_out: *mut *mut baton_session,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        if session_out.is_null() {
            return Err(null("session_out"));
        }
        // SAFETY: the caller passes NULL or a valid options struct.
        let so = unsafe { core_options(options) }?;
        // SAFETY: the caller passes NULL or a valid checks struct.
        let so = unsafe { apply_checks(so, checks, "checks") }?;
        let s = c.create_session(&so)?;
        new_handle(s, session_out);
        Ok(())
    })
}

/// Manages a session that already exists at Consul, created by someone else (another
/// process sharing it, the `consul` CLI). `session_id` must be a UUID
/// (`BATON_INVALID_ARGUMENT`) of a session Consul knows (`BATON_NOT_FOUND`). A session
/// with a TTL is renewed once right away (that renew starts the local lease deadline) and
/// then in the background like a created one: renewing another process's session only
/// extends it, and whoever stops renewing last decides when it expires; a session without
/// a TTL is only watched for invalidation. `baton_client_close` releases the locks this
/// client holds with it but never destroys it; `baton_session_destroy` does. Adopting a
/// session the client already manages gives a handle to that session.
#[no_mangle]
#[must_use]
pub unsafe extern "C" fn baton_session_adopt(
    client: *const baton_client,
    session_id: *const c_char,
    session_out: *mut *mut baton_session,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let id = unsafe { str_arg(session_id, "session_id") }?;
        if session_out.is_null() {
            return Err(null("session_out"));
        }
        let s = c.adopt_session(id)?;
        new_handle(s, session_out);
        Ok(())
    })
}

/// A check status: Consul's default for the call (`baton_ttl_check.status`: critical).
pub const BATON_CHECK_DEFAULT: u32 = 0;
/// A check status: passing. Sessions may be bound to the check.
pub const BATON_CHECK_PASSING: u32 = 1;
/// A check status: warning. Bound sessions stay valid.
pub const BATON_CHECK_WARNING: u32 = 2;
/// A check status: critical. Bound sessions are invalidated.
pub const BATON_CHECK_CRITICAL: u32 = 3;

fn status(value: u32, what: &str, allow_default: bool) -> Result<Option<CheckStatus>, Failure> {
    match value {
        BATON_CHECK_DEFAULT if allow_default => Ok(None),
        BATON_CHECK_PASSING => Ok(Some(CheckStatus::Passing)),
        BATON_CHECK_WARNING => Ok(Some(CheckStatus::Warning)),
        BATON_CHECK_CRITICAL => Ok(Some(CheckStatus::Critical)),
        other => Err(Failure::new(
            baton_result::BATON_INVALID_ARGUMENT,
            format!("{what} {other} is not a BATON_CHECK_* status"),
        )),
    }
}

/// A TTL check for `baton_agent_check_register`. Start from
/// `baton_ttl_check_default()`; strings are NUL-terminated UTF-8 read during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_ttl_check {
    /// The check ID (required; unique on the agent).
    pub id: *const c_char,
    /// Human-readable name; NULL: the ID.
    pub name: *const c_char,
    /// Without a report for this many milliseconds the check turns critical (required,
    /// positive).
    pub ttl_ms: u64,
    /// The service the check belongs to (registered before); NULL: a check of the node.
    pub service_id: *const c_char,
    /// Free-form notes; NULL: none.
    pub notes: *const c_char,
    /// Initial status, a `BATON_CHECK_*` value; `BATON_CHECK_DEFAULT`: critical, Consul's
    /// default for TTL checks (report it passing before binding a session to it).
    pub status: u32,
}

/// An empty TTL check: set `id` and `ttl_ms`.
#[no_mangle]
pub extern "C" fn baton_ttl_check_default() -> baton_ttl_check {
    baton_ttl_check {
        id: std::ptr::null(),
        name: std::ptr::null(),
        ttl_ms: 0,
        service_id: std::ptr::null(),
        notes: std::ptr::null(),
        status: BATON_CHECK_DEFAULT,
    }
}

/// `PUT /v1/agent/check/register`: registers (or replaces) a TTL check on the agent.
/// `BATON_INVALID_ARGUMENT` for an empty ID, a zero TTL or an unknown status.
#[no_mangle]
pub unsafe extern "C" fn baton_agent_check_register(
    client: *const baton_client,
    check: *const baton_ttl_check,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: the caller passes NULL or a valid check struct.
        let k = unsafe { check.as_ref() }.ok_or_else(|| null("check"))?;
        // SAFETY: NULL or a NUL-terminated string alive during the call (likewise below).
        let id = unsafe { str_arg(k.id, "check.id") }?;
        let ttl = timeout_ms(k.ttl_ms).ok_or_else(|| {
            Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                "check.ttl_ms is too large",
            )
        })?;
        let mut t = TtlCheck::new(id, ttl);
        // SAFETY: as above.
        if let Some(n) = unsafe { opt_str_arg(k.name, "check.name") }? {
            t = t.name(n);
        }
        // SAFETY: as above.
        if let Some(s) = unsafe { opt_str_arg(k.service_id, "check.service_id") }? {
            t = t.service_id(s);
        }
        // SAFETY: as above.
        if let Some(n) = unsafe { opt_str_arg(k.notes, "check.notes") }? {
            t = t.notes(n);
        }
        if let Some(s) = status(k.status, "check.status", true)? {
            t = t.status(s);
        }
        c.agent().check_register(&t)?;
        Ok(())
    })
}

/// `PUT /v1/agent/check/deregister/<check_id>`: removes a check; sessions bound to it
/// are invalidated.
#[no_mangle]
pub unsafe extern "C" fn baton_agent_check_deregister(
    client: *const baton_client,
    check_id: *const c_char,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let id = unsafe { str_arg(check_id, "check_id") }?;
        c.agent().check_deregister(id)?;
        Ok(())
    })
}

/// Reports a TTL check's status with an optional note (`/v1/agent/check/pass|warn|fail`).
///
/// # Safety
/// As the entry points calling it.
unsafe fn report(
    client: *const baton_client,
    check_id: *const c_char,
    note: *const c_char,
    status: CheckStatus,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let id = unsafe { str_arg(check_id, "check_id") }?;
        // SAFETY: as above.
        let note = unsafe { opt_str_arg(note, "note") }?;
        let a = c.agent();
        match status {
            CheckStatus::Passing => a.check_pass(id, note)?,
            CheckStatus::Warning => a.check_warn(id, note)?,
            CheckStatus::Critical => a.check_fail(id, note)?,
        }
        Ok(())
    })
}

/// `PUT /v1/agent/check/pass/<check_id>`: reports the TTL check passing (its TTL starts
/// again); `note` (may be NULL) becomes its output. Call it more often than the TTL
/// while your process is healthy.
#[no_mangle]
pub unsafe extern "C" fn baton_agent_check_pass(
    client: *const baton_client,
    check_id: *const c_char,
    note: *const c_char,
) -> baton_result {
    // SAFETY: forwarded caller guarantees.
    unsafe { report(client, check_id, note, CheckStatus::Passing) }
}

/// `PUT /v1/agent/check/warn/<check_id>`: reports the TTL check warning (bound sessions
/// stay valid).
#[no_mangle]
pub unsafe extern "C" fn baton_agent_check_warn(
    client: *const baton_client,
    check_id: *const c_char,
    note: *const c_char,
) -> baton_result {
    // SAFETY: forwarded caller guarantees.
    unsafe { report(client, check_id, note, CheckStatus::Warning) }
}

/// `PUT /v1/agent/check/fail/<check_id>`: reports the TTL check critical; sessions bound
/// to it are invalidated.
#[no_mangle]
pub unsafe extern "C" fn baton_agent_check_fail(
    client: *const baton_client,
    check_id: *const c_char,
    note: *const c_char,
) -> baton_result {
    // SAFETY: forwarded caller guarantees.
    unsafe { report(client, check_id, note, CheckStatus::Critical) }
}

/// `PUT /v1/agent/check/update/<check_id>`: sets the TTL check's status (a
/// `BATON_CHECK_*` value other than `BATON_CHECK_DEFAULT`) and output (may be NULL).
#[no_mangle]
pub unsafe extern "C" fn baton_agent_check_update(
    client: *const baton_client,
    check_id: *const c_char,
    status_: u32,
    output: *const c_char,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let id = unsafe { str_arg(check_id, "check_id") }?;
        // SAFETY: as above.
        let output = unsafe { opt_str_arg(output, "output") }?;
        let s = status(status_, "status", false)?.expect("not the default");
        c.agent().check_update(id, s, output)?;
        Ok(())
    })
}

/// A service for `baton_agent_service_register`. Start from `baton_service_default()`;
/// strings are NUL-terminated UTF-8 read during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_service {
    /// The service name (required).
    pub name: *const c_char,
    /// The instance ID; NULL: the name.
    pub id: *const c_char,
    /// Tags (`tags_len` of them; NULL only with 0).
    pub tags: *const *const c_char,
    /// The number of entries in `tags`.
    pub tags_len: usize,
    /// Address; NULL: the node's.
    pub address: *const c_char,
    /// Port; 0: none.
    pub port: u16,
}

/// An empty service: set `name`.
#[no_mangle]
pub extern "C" fn baton_service_default() -> baton_service {
    baton_service {
        name: std::ptr::null(),
        id: std::ptr::null(),
        tags: std::ptr::null(),
        tags_len: 0,
        address: std::ptr::null(),
        port: 0,
    }
}

/// `PUT /v1/agent/service/register`: registers (or replaces) a service on the agent.
#[no_mangle]
pub unsafe extern "C" fn baton_agent_service_register(
    client: *const baton_client,
    service: *const baton_service,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: the caller passes NULL or a valid service struct.
        let s = unsafe { service.as_ref() }.ok_or_else(|| null("service"))?;
        // SAFETY: NULL or a NUL-terminated string alive during the call (likewise below).
        let mut r = ServiceRegistration::new(unsafe { str_arg(s.name, "service.name") }?);
        // SAFETY: as above.
        if let Some(id) = unsafe { opt_str_arg(s.id, "service.id") }? {
            r = r.id(id);
        }
        // SAFETY: NULL with 0, or a valid array of `tags_len` strings.
        for t in unsafe { str_list(s.tags, s.tags_len, "service.tags") }? {
            r = r.tag(t);
        }
        // SAFETY: as above.
        if let Some(a) = unsafe { opt_str_arg(s.address, "service.address") }? {
            r = r.address(a);
        }
        if s.port != 0 {
            r = r.port(s.port);
        }
        c.agent().service_register(&r)?;
        Ok(())
    })
}

/// `PUT /v1/agent/service/deregister/<service_id>`: removes a service and its checks.
#[no_mangle]
pub unsafe extern "C" fn baton_agent_service_deregister(
    client: *const baton_client,
    service_id: *const c_char,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let id = unsafe { str_arg(service_id, "service_id") }?;
        c.agent().service_deregister(id)?;
        Ok(())
    })
}
