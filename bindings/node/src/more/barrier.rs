//! The barrier and the double barrier for Node.

use super::*;

/// A barrier on one key (see `Barrier` in lib/barrier.js).
#[napi(js_name = "NativeBarrier")]
pub struct NativeBarrier {
    pub(super) inner: baton::Barrier,
}

#[napi]
impl NativeBarrier {
    /// The barrier's key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// Raises the barrier (bound to `session` when given); resolves whether this call raised it.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn hold<'e>(&self, env: &'e Env, session: Option<&NativeSession>) -> Result<Object<'e>> {
        let b = self.inner.clone();
        let s = session.map(|s| s.inner.clone());
        on_thread(env, move || match s {
            Some(s) => b.hold_with_session(&s),
            None => b.hold(),
        })
    }

    /// Lowers the barrier; resolves whether it was up.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn release<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let b = self.inner.clone();
        on_thread(env, move || b.release())
    }

    /// Whether the barrier is up (one read).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn is_held<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let b = self.inner.clone();
        on_thread(env, move || b.is_held())
    }

    /// Resolves true once the barrier is down, false when `timeoutMs` passes first; rejects
    /// with `BATON_CANCELLED` when `cancel` fires.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn wait<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        driven(env, self.inner.wait_async(t, &token_of(cancel)))
    }
}

/// A double barrier (see `DoubleBarrier` in lib/barrier.js).
#[napi(js_name = "NativeDoubleBarrier")]
pub struct NativeDoubleBarrier {
    pub(super) inner: OffThread<Arc<baton::DoubleBarrier>>,
}

#[napi]
impl NativeDoubleBarrier {
    /// The prefix (without a trailing `/`).
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// The number of participants a round waits for.
    #[napi(getter)]
    pub fn count(&self) -> u32 {
        u32::try_from(self.inner.count()).unwrap_or(u32::MAX)
    }

    /// Whether this handle has entered and not yet left.
    #[napi]
    pub fn is_entered(&self) -> bool {
        self.inner.is_entered()
    }

    /// Resolves true once a round that counts this participant opens, false at the timeout.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn enter<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        driven(env, self.inner.enter_async(t, &token_of(cancel)))
    }

    /// Leaves; resolves true once every participant of the round has left, false at the
    /// timeout (this one has left either way).
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn leave<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        driven(env, self.inner.leave_async(t, &token_of(cancel)))
    }
}
