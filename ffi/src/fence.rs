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

/// `baton_txn_op.verb`: write `value` with `flags` (like `baton_kv_put`).
pub const BATON_TXN_SET: u32 = 1;
/// `baton_txn_op.verb`: write `value` with `flags` if the key's ModifyIndex is
/// `index`; `index` 0 writes only if the key does not exist.
pub const BATON_TXN_CAS: u32 = 2;
/// `baton_txn_op.verb`: acquire the key's lock with `session`, writing `value` and `flags`.
pub const BATON_TXN_LOCK: u32 = 3;
/// `baton_txn_op.verb`: release the key's lock held by `session`, writing `value` and `flags`.
pub const BATON_TXN_UNLOCK: u32 = 4;
/// `baton_txn_op.verb`: read the key; the transaction fails if it does not exist.
pub const BATON_TXN_GET: u32 = 5;
/// `baton_txn_op.verb`: read the key, or nothing if it does not exist (Consul 1.16+).
pub const BATON_TXN_GET_OR_EMPTY: u32 = 6;
/// `baton_txn_op.verb`: read every key under the prefix `key`.
pub const BATON_TXN_GET_TREE: u32 = 7;
/// `baton_txn_op.verb`: fail unless the key's lock is held by `session` (`""`: unless
/// it is not locked).
pub const BATON_TXN_CHECK_SESSION: u32 = 8;
/// `baton_txn_op.verb`: fail unless the key's ModifyIndex is `index`.
pub const BATON_TXN_CHECK_INDEX: u32 = 9;
/// `baton_txn_op.verb`: fail if the key exists.
pub const BATON_TXN_CHECK_NOT_EXISTS: u32 = 10;
/// `baton_txn_op.verb`: delete the key (a missing key is no error).
pub const BATON_TXN_DELETE: u32 = 11;
/// `baton_txn_op.verb`: delete the key if its ModifyIndex is `index` (a missing key succeeds).
pub const BATON_TXN_DELETE_CAS: u32 = 12;
/// `baton_txn_op.verb`: delete every key under the prefix `key`.
pub const BATON_TXN_DELETE_TREE: u32 = 13;

/// The most operations `baton_guarded_txn` takes: Consul's 128 per transaction,
/// less the check of the sequencer it adds in front.
pub const BATON_GUARDED_TXN_MAX_OPS: usize = 127;

/// One KV operation of `baton_guarded_txn`: Consul's transaction `KV` op. Fields a
/// verb does not use are ignored (Consul ignores them too). Strings are
/// NUL-terminated UTF-8, read only during the call.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct baton_txn_op {
    /// A `BATON_TXN_*` verb.
    pub verb: u32,
    /// The key (the prefix for `BATON_TXN_GET_TREE` / `BATON_TXN_DELETE_TREE`); required.
    /// One leading `/` is dropped, as everywhere in baton.
    pub key: *const c_char,
    /// The value of `SET`, `CAS`, `LOCK`, `UNLOCK` (`value_len` bytes; NULL only with 0).
    pub value: *const u8,
    /// The length of `value` in bytes.
    pub value_len: usize,
    /// The flags stored by `SET`, `CAS`, `LOCK`, `UNLOCK`.
    pub flags: u64,
    /// The ModifyIndex of `CAS`, `CHECK_INDEX`, `DELETE_CAS`.
    pub index: u64,
    /// The session of `LOCK`, `UNLOCK` (required, not empty) and `CHECK_SESSION`
    /// (required; `""` checks that the key is not locked).
    pub session: *const c_char,
}

/// The core's op for `ops[i]`.
///
/// # Safety
/// `op`'s pointers are as `baton_txn_op` documents, alive during the call.
unsafe fn core_op(op: &baton_txn_op, i: usize) -> Result<KvOp, Failure> {
    let name = |field: &str| format!("ops[{i}].{field}");
    // SAFETY: NULL or a NUL-terminated string, per the caller.
    let key = unsafe { str_arg(op.key, &name("key")) }?;
    // SAFETY: NULL only with 0, else `value_len` readable bytes, per the caller.
    let value = || unsafe { bytes_arg(op.value, op.value_len, &name("value")) };
    let session = |allow_empty: bool| -> Result<&str, Failure> {
        // SAFETY: NULL or a NUL-terminated string, per the caller.
        let s = unsafe { str_arg(op.session, &name("session")) }?;
        if s.is_empty() && !allow_empty {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!("{} must not be empty for this verb", name("session")),
            ));
        }
        Ok(s)
    };
    Ok(match op.verb {
        BATON_TXN_SET => KvOp::set(key, value()?, op.flags),
        BATON_TXN_CAS => KvOp::cas(key, value()?, op.flags, op.index),
        BATON_TXN_LOCK => KvOp::lock(key, value()?, op.flags, session(false)?),
        BATON_TXN_UNLOCK => KvOp::unlock(key, value()?, op.flags, session(false)?),
        BATON_TXN_GET => KvOp::get(key),
        BATON_TXN_GET_OR_EMPTY => KvOp::get_or_empty(key),
        BATON_TXN_GET_TREE => KvOp::get_tree(key),
        BATON_TXN_CHECK_SESSION => KvOp::check_session(key, session(true)?),
        BATON_TXN_CHECK_INDEX => KvOp::check_index(key, op.index),
        BATON_TXN_CHECK_NOT_EXISTS => KvOp::check_not_exists(key),
        BATON_TXN_DELETE => KvOp::delete(key),
        BATON_TXN_DELETE_CAS => KvOp::delete_cas(key, op.index),
        BATON_TXN_DELETE_TREE => KvOp::delete_tree(key),
        other => {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!(
                    "{} {other} is not a BATON_TXN_* verb (BATON_TXN_SET = 1 .. \
                     BATON_TXN_DELETE_TREE = 13)",
                    name("verb")
                ),
            ))
        }
    })
}

/// The failure of a guarded transaction whose own ops failed: Consul's per-op
/// texts renumbered to the caller's `ops[]` (the check of the sequencer is op 0
/// on the wire).
fn ops_failure(e: baton::Error, ops: &[KvOp]) -> Failure {
    let errors = e.txn_errors().to_vec();
    let mut f = Failure::from(e);
    if errors.is_empty() || errors.iter().any(|t| t.op_index == 0) {
        return f;
    }
    const SHOWN: usize = 8;
    let mut parts: Vec<String> = errors
        .iter()
        .take(SHOWN)
        .map(|t| {
            let i = t.op_index - 1;
            // Printable on one line: control characters escaped, bounded.
            let what: String = t
                .what
                .chars()
                .take(300)
                .flat_map(|ch| {
                    let esc: Vec<char> = if ch.is_control() {
                        ch.escape_default().collect()
                    } else {
                        vec![ch]
                    };
                    esc
                })
                .collect();
            match ops.get(i) {
                Some(op) => format!("ops[{i}] ({} {:?}): {what}", op.verb.as_str(), op.key),
                None => format!("ops[{i}]: {what}"),
            }
        })
        .collect();
    if errors.len() > SHOWN {
        parts.push(format!("and {} more", errors.len() - SHOWN));
    }
    f.message = format!(
        "guarded transaction not applied, nothing was written: {}",
        parts.join("; ")
    );
    f
}

/// Runs `ops` (`n_ops` of them, at most `BATON_GUARDED_TXN_MAX_OPS`; `ops` may be
/// NULL when `n_ops` is 0) in one Consul transaction behind a `check-session` of
/// `sequencer`'s key, so that they apply, all together, only while the sequencer's
/// session still holds the lock. The guarded form of Consul's `PUT /v1/txn`.
///
/// * A stale sequencer: `BATON_CONFLICT`, message `stale sequencer <sequencer>: ...`
///   with Consul's reason, and nothing is written.
/// * An op of `ops` that fails (a `CAS` on a stale index, a `GET` of a missing key,
///   a `CHECK_*` that does not hold): `BATON_CONFLICT` (`BATON_PERMISSION_DENIED`
///   for an ACL denial), nothing is written, and the message lists each failing op
///   as `ops[i] (verb "key"): Consul's text`, numbered as in `ops`.
/// * A bad op (unknown verb, NULL key, NULL value with a length, missing session)
///   is refused before anything is sent, naming `ops[i].field`.
///
/// Read results do not come back: `GET`, `GET_OR_EMPTY` and `GET_TREE` only take
/// part as conditions (a `GET` of a missing key fails the transaction). Values
/// would need a caller-sized buffer per entry for an unknown number of entries
/// (a `GET_TREE`); the same guarantee comes from reading with
/// `baton_kv_get_entry` first and adding a `BATON_TXN_CHECK_INDEX` op on the
/// ModifyIndex read, which refuses the transaction if the value changed since.
/// Does not wait: one request, bounded by the client's request timeout.
#[no_mangle]
pub unsafe extern "C" fn baton_guarded_txn(
    client: *const baton_client,
    sequencer: *const c_char,
    ops: *const baton_txn_op,
    n_ops: usize,
) -> baton_result {
    boundary(|| {
        // SAFETY: the caller passes NULL or a live handle.
        let c = unsafe { handle(client, "client") }?.get()?;
        // SAFETY: NULL or a NUL-terminated string alive during the call.
        let seq = unsafe { sequencer_arg(sequencer) }?;
        if n_ops > BATON_GUARDED_TXN_MAX_OPS {
            return Err(Failure::new(
                baton_result::BATON_INVALID_ARGUMENT,
                format!(
                    "a guarded transaction holds at most {BATON_GUARDED_TXN_MAX_OPS} operations \
                     (Consul's 128 less the sequencer check), got {n_ops}: split the work"
                ),
            ));
        }
        let slice: &[baton_txn_op] = if n_ops == 0 {
            &[]
        } else if ops.is_null() {
            return Err(Failure::new(
                baton_result::BATON_NULL_ARGUMENT,
                format!("argument `ops` is NULL but `n_ops` is {n_ops}"),
            ));
        } else {
            // SAFETY: non-NULL, and the caller guarantees `n_ops` readable structs
            // (at most 127, so the size cannot overflow).
            unsafe { std::slice::from_raw_parts(ops, n_ops) }
        };
        let core_ops = slice
            .iter()
            .enumerate()
            // SAFETY: each op's pointers are valid per the caller.
            .map(|(i, op)| unsafe { core_op(op, i) })
            .collect::<Result<Vec<_>, _>>()?;
        c.guarded_txn(&seq, &core_ops)
            .map_err(|e| ops_failure(e, &core_ops))?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton::KvVerb;

    /// Every `BATON_TXN_<NAME> <n>` of the committed header gives the core verb whose
    /// wire name is `<name>` in lower case with `-` for `_`, and every core verb has one.
    #[test]
    fn each_header_verb_is_the_core_verb_of_its_name() {
        let header =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../include/baton.h"))
                .unwrap();
        let mut seen = Vec::new();
        let key = c"k";
        let session = c"s";
        for line in header.lines() {
            let Some(rest) = line.strip_prefix("#define BATON_TXN_") else {
                continue;
            };
            let (name, n) = rest.split_once(' ').unwrap();
            let op = baton_txn_op {
                verb: n.trim().parse().unwrap(),
                key: key.as_ptr(),
                value: std::ptr::null(),
                value_len: 0,
                flags: 0,
                index: 0,
                session: session.as_ptr(),
            };
            // SAFETY: the op's strings are NUL-terminated and alive.
            let core = unsafe { core_op(&op, 0) }.unwrap();
            assert_eq!(
                core.verb.as_str(),
                name.to_lowercase().replace('_', "-"),
                "BATON_TXN_{name}"
            );
            seen.push(core.verb);
        }
        for v in KvVerb::ALL {
            assert!(seen.contains(&v), "no BATON_TXN_* for {}", v.as_str());
        }
        for bad in [0, 14, u32::MAX] {
            let op = baton_txn_op {
                verb: bad,
                key: key.as_ptr(),
                value: std::ptr::null(),
                value_len: 0,
                flags: 0,
                index: 0,
                session: std::ptr::null(),
            };
            // SAFETY: as above.
            let e = unsafe { core_op(&op, 3) }.unwrap_err();
            assert_eq!(e.code, baton_result::BATON_INVALID_ARGUMENT);
            assert!(
                e.message.starts_with(&format!("ops[3].verb {bad} ")),
                "{}",
                e.message
            );
        }
    }
}
