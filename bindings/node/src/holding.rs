//! The holding lifecycle of locks, semaphores and elections, written once for the three napi
//! classes, generic over the core's [`baton::Hold`].
//!
//! * [`watched`] keeps a recipe for its napi class with its losses posted to the client's loss
//!   function.
//! * [`holding_methods!`] gives a napi class (a struct with an `inner: OffThread<Arc<H>>`) the
//!   lifecycle's methods, each a call of a generic function here: `release`, `abandon`,
//!   `isHeld`, `lostReason`, `lostSessionReason`, `waitLost`, and for locks and semaphores
//!   `acquire` (an election's `campaign` calls [`acquire`] itself). `lib/holdable.js` is their one
//!   JavaScript user.
//!
//! Nothing here undoes an acquisition: "cancelled means nothing is held" is the core's (an
//! acquire whose token fired returns `Cancelled` with what it took given back). A success that
//! crosses to JavaScript while its signal aborts is handed back there with `abandon`.

use std::sync::Arc;
use std::time::Duration;

use baton::aio::{AsyncHold, Contend};
use baton::{Hold, HoldLost};
use napi::bindgen_prelude::Object;
use napi::{Env, Result};

use crate::{lost_notifier, millis, on_thread, LostFn, NativeCancel, OffThread};

/// `holder`, kept for a napi class, with its losses posted to `lost` as `(id, reason)`.
pub(crate) fn watched<H: Hold + 'static>(
    holder: H,
    lost: &Arc<LostFn>,
    id: u32,
) -> OffThread<Arc<H>> {
    holder.on_lost(Box::new(lost_notifier(lost, id, H::Lost::name)));
    OffThread::new(Arc::new(holder))
}

/// The core token behind `cancel` (a fresh one, never cancelled, without).
pub(crate) fn token_of(cancel: Option<&NativeCancel>) -> baton::CancelToken {
    cancel.map_or_else(baton::CancelToken::new, |c| c.inner.clone())
}

/// The core token behind `cancel`, if any: an acquire without one makes none (a pending
/// acquire keeps what it is given, and `make bench-scale` counts it).
pub(crate) fn token_if(cancel: Option<&NativeCancel>) -> Option<baton::CancelToken> {
    cancel.map(|c| c.inner.clone())
}

/// An acquire of `holder` (an election's campaign, its value set) for `timeout`, as a wait that
/// holds no thread. An acquisition whose token fires returns `BATON_CANCELLED` with nothing
/// held (the core's guarantee); `then` runs after a success, before the promise settles, on
/// the baton thread whose try succeeded (a lock opens its loop connection there if it has
/// none, so that the next calls can be warm: one connect, once per client).
pub(crate) fn acquire<'e, H: Contend + Send + Sync>(
    env: &'e Env,
    holder: &Arc<H>,
    timeout: Option<Duration>,
    token: Option<baton::CancelToken>,
    then: fn(&H),
) -> Result<Object<'e>> {
    let h = holder.clone();
    crate::driven(env, async move {
        let held = acquire_with(&*h, timeout, token).await;
        if matches!(held, Ok(true)) {
            then(&h);
        }
        held
    })
}

/// `holder`'s async acquire, with the caller's cancel token if it gave one (none is made
/// otherwise: a pending acquire keeps what it is given).
pub(crate) async fn acquire_with<H: Contend>(
    holder: &H,
    timeout: Option<Duration>,
    token: Option<baton::CancelToken>,
) -> baton::Result<bool> {
    match token {
        Some(token) => holder.acquire_async_with(timeout, &token).await,
        None => holder.acquire_async(timeout).await,
    }
}

/// Resolves with the name of why the current holding ends (at once if not held), as a wait
/// that holds no thread; rejects with `BATON_TIMEOUT` while still held at `timeoutMs`.
pub(crate) fn wait_lost<'e, H: Contend + Send + Sync>(
    env: &'e Env,
    holder: &Arc<H>,
    timeout_ms: Option<f64>,
    cancel: Option<&NativeCancel>,
) -> Result<Object<'e>> {
    let t = millis("timeoutMs", timeout_ms)?;
    let (h, token) = (holder.clone(), token_of(cancel));
    crate::driven(env, async move {
        h.lost_within(t, &token).await.map(HoldLost::name)
    })
}

/// Gives back a success nobody will take (see [`Hold::abandon`]) on one of baton's threads.
pub(crate) fn abandon<'e, H: Hold + 'static>(env: &'e Env, holder: &Arc<H>) -> Result<Object<'e>> {
    let h = holder.clone();
    on_thread(env, move || {
        h.abandon();
        Ok(())
    })
}

/// The name of why the last holding ended, or `None` while held and before the first one.
pub(crate) fn lost_reason<H: Hold>(holder: &H) -> Option<&'static str> {
    holder.last_lost().map(H::Lost::name)
}

/// With a `session_lost` last reason: the name of why the session was lost.
pub(crate) fn lost_session_reason<H: Hold>(holder: &H) -> Option<&'static str> {
    holder
        .last_lost()
        .and_then(H::Lost::session_reason)
        .map(|r| r.name())
}

/// The lifecycle methods of a napi class over a [`Hold`] kept in its `inner` field; with
/// `acquire` also `acquire(timeoutMs, cancel)` (locks and semaphores; an election campaigns
/// with a value instead).
macro_rules! holding_methods {
    ($class:ident) => {
        #[napi]
        impl $class {
            /// Gives the holding up (release, resign); resolves false if nothing was held.
            #[napi(ts_return_type = "Promise<boolean>")]
            pub fn release<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
                $crate::warm::release(env, &self.inner)
            }

            /// Gives back an acquisition whose caller went away meanwhile (an aborted signal).
            #[napi(ts_return_type = "Promise<void>")]
            pub fn abandon<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
                $crate::holding::abandon(env, &self.inner)
            }

            /// Whether held (local check, no network).
            #[napi]
            pub fn is_held(&self) -> bool {
                baton::Hold::is_held(&**self.inner)
            }

            /// Why the last holding ended (`released`, `key_changed`, `removed`, `session_lost`,
            /// `client_closed`), or null while held and before the first acquire.
            #[napi]
            pub fn lost_reason(&self) -> Option<&'static str> {
                $crate::holding::lost_reason(&**self.inner)
            }

            /// With `lost_reason` `session_lost`: why the session was lost, as it reports it.
            #[napi]
            pub fn lost_session_reason(&self) -> Option<&'static str> {
                $crate::holding::lost_session_reason(&**self.inner)
            }

            /// Resolves with why the current holding ended (at once if not held).
            #[napi(ts_return_type = "Promise<string>")]
            pub fn wait_lost<'e>(
                &self,
                env: &'e Env,
                timeout_ms: Option<f64>,
                cancel: Option<&NativeCancel>,
            ) -> Result<Object<'e>> {
                $crate::holding::wait_lost(env, &self.inner, timeout_ms, cancel)
            }
        }
    };
    ($class:ident, acquire) => {
        holding_methods!($class);

        #[napi]
        impl $class {
            /// Resolves true once held, false when `timeoutMs` passes first; rejects with
            /// `BATON_CANCELLED` when `cancel` fires (nothing is held then).
            #[napi(ts_return_type = "Promise<boolean>")]
            pub fn acquire<'e>(
                &self,
                env: &'e Env,
                timeout_ms: Option<f64>,
                cancel: Option<&NativeCancel>,
            ) -> Result<Object<'e>> {
                $crate::warm::acquire(
                    env,
                    &self.inner,
                    $crate::millis("timeoutMs", timeout_ms)?,
                    $crate::holding::token_if(cancel),
                )
            }
        }
    };
}

pub(crate) use holding_methods;
