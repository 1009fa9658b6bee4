//! # baton-ffi
//!
//! The C ABI of baton: `libbaton.so` / `libbaton.a` and the generated header
//! `include/baton.h`. Every item here is an `extern "C"` function, a `#[repr(C)]`
//! type or a constant of that header; the doc comments become the header's docs.
//!
//! Conventions (see `ffi/README.md`):
//!
//! * Opaque handles (`baton_client`, `baton_session`, `baton_lock`,
//!   `baton_semaphore`, `baton_election`, `baton_observer`, `baton_cancel`, and the
//!   recipes' `baton_rwlock`, `baton_multilock`, `baton_leader_task`, `baton_group`,
//!   `baton_member`, `baton_members_watch`, `baton_barrier`, `baton_double_barrier`,
//!   `baton_counter`, `baton_counter_watch`); constructors
//!   return a `baton_result` and write their out-parameter only on success;
//!   `_free(NULL)` is a no-op.
//! * Every entry point checks for NULL, validates UTF-8 and catches panics
//!   (`BATON_PANIC`); every non-OK result sets the calling thread's last error
//!   message (`baton_last_error_message`).
//! * Durations are milliseconds; `BATON_WAIT_FOREVER` waits without limit.
//! * Callbacks run on the library's dispatcher thread, may call back into the
//!   library, and never run after the handle's `_free` returns.
//! * Log records (warnings and errors) go to standard error until the program
//!   routes them with `baton_set_log_callback`.
// This crate is the C ABI: every unsafe block says why it is sound.
#![allow(unsafe_code)]
// C type names.
#![allow(non_camel_case_types)]
// The pointer rules are the same for every function; the header and README state them once.
#![allow(clippy::missing_safety_doc)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod agent;
mod barrier;
mod callback;
mod cancel;
mod client;
mod counter;
mod election;
mod error;
mod fence;
mod hold;
mod kv;
mod leader_task;
mod lock;
mod logging;
mod membership;
mod metrics;
mod multilock;
mod rwlock;
mod semaphore;
mod session;
mod util;

pub use agent::*;
pub use barrier::*;
pub use callback::baton_userdata_free;
pub use cancel::*;
pub use client::*;
pub use counter::*;
pub use election::*;
pub use error::*;
pub use fence::*;
pub use hold::{baton_hold_lost, baton_hold_lost_name, baton_lost_callback};
pub use kv::*;
pub use leader_task::*;
pub use lock::*;
pub use logging::*;
pub use membership::*;
pub use metrics::*;
pub use multilock::*;
pub use rwlock::*;
pub use semaphore::*;
pub use session::*;

use std::ffi::c_char;

/// Pass as a timeout to wait without limit. Any timeout of ten years or more is
/// treated the same way.
pub const BATON_WAIT_FOREVER: u64 = u64::MAX;

/// The library version, e.g. `"0.1.0"`: a static NUL-terminated string, never freed.
/// Equal to `BATON_VERSION_STRING` of the header the program was compiled with
/// when header and library match.
#[no_mangle]
pub extern "C" fn baton_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
