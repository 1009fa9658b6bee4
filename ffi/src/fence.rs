//! Fencing: check a sequencer, write only while it is current.

use std::ffi::c_char;

use baton::{KvOp, Sequencer};

use crate::client::baton_client;
use crate::error::{baton_result, Failure};
use crate::util::{boundary, bytes_arg, handle, null, str_arg};

/// Parses a sequencer string argument.
///
/// # Safety
/// As `str_arg`.
unsafe fn sequencer_arg(p: *const c_char) -> Result<Sequencer, Failure> {
    // SAFETY: forwarded caller guarantee.
    let s = unsafe { str_arg(p, "sequencer") }?;
    Ok(Sequencer::parse(s)?)
}

/// Whether `sequencer` (the string from `baton_lock_sequencer`) is still
/// current: its key exists, carries its session, and has its LockIndex (one
/// consistent read). Writes `*current_out`. `BATON_INVALID_ARGUMENT` for a
/// malformed sequencer.
#[no_mangle]
pub unsafe extern "C" fn baton_check_sequencer(
    client: *const baton_client,
    sequencer: *const c_char,
    current_out: *mut bool,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let seq = unsafe { sequencer_arg(sequencer) }?;
        if current_out.is_null() {
            return Err(null("current_out"));
        }
        let current = c.check_sequencer(&seq)?;
        // SAFETY: checked non-NULL; writable per the caller.
        unsafe { current_out.write(current) };
        Ok(())
    })
}

/// Runs `op` in one transaction behind a check that `sequencer`'s session still
/// holds its key.
///
/// # Safety
/// `client`, `sequencer` as their `str_arg`/`handle` rules.
unsafe fn guarded(
    client: *const baton_client,
    sequencer: *const c_char,
    op: impl FnOnce() -> Result<KvOp, Failure>,
) -> Result<(), Failure> {
    // SAFETY: forwarded caller guarantee.
    let c = unsafe { handle(client, "client") }?.get()?;
    // SAFETY: forwarded caller guarantee.
    let seq = unsafe { sequencer_arg(sequencer) }?;
    c.guarded_txn(&seq, &[op()?])?;
    Ok(())
}

/// Writes `value` (`value_len` bytes) to `key` only while `sequencer`'s session
/// still holds the lock: one transaction with a `check-session` first. A stale
/// holder gets `BATON_CONFLICT` (message `stale sequencer ...`) and nothing is
/// written.
#[no_mangle]
pub unsafe extern "C" fn baton_guarded_put(
    client: *const baton_client,
    sequencer: *const c_char,
    key: *const c_char,
    value: *const u8,
    value_len: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or valid pointers, alive during the call.
        unsafe {
            guarded(client, sequencer, || {
                let key = str_arg(key, "key")?;
                let v = bytes_arg(value, value_len, "value")?;
                Ok(KvOp::set(key, v, 0))
            })
        }
    })
}

/// Deletes `key` only while `sequencer`'s session still holds the lock; as
/// `baton_guarded_put`.
#[no_mangle]
pub unsafe extern "C" fn baton_guarded_delete(
    client: *const baton_client,
    sequencer: *const c_char,
    key: *const c_char,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or valid pointers, alive during the call.
        unsafe { guarded(client, sequencer, || Ok(KvOp::delete(str_arg(key, "key")?))) }
    })
}
