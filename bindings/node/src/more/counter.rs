//! The counter and its watch for Node.

use super::*;

/// A counter in one key (see `Counter` in lib/counter.js); values are decimal strings.
#[napi(js_name = "NativeCounter")]
pub struct NativeCounter {
    pub(super) inner: baton::Counter,
}

#[napi]
impl NativeCounter {
    /// The key.
    #[napi(getter)]
    pub fn key(&self) -> String {
        self.inner.key().to_string()
    }

    /// The current value (0 for an absent key), decimal.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn get<'e>(&self, env: &'e Env) -> Result<Object<'e>> {
        let c = self.inner.clone();
        on_thread(env, move || c.get().map(|v| v.to_string()))
    }

    /// Writes `value` (decimal) whatever the key holds.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn set<'e>(&self, env: &'e Env, value: String) -> Result<Object<'e>> {
        let v = parse_i64("value", &value)?;
        let c = self.inner.clone();
        on_thread(env, move || c.set(v))
    }

    /// Adds `delta` (decimal) atomically; resolves with the new value, decimal.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn add<'e>(&self, env: &'e Env, delta: String) -> Result<Object<'e>> {
        let d = parse_i64("delta", &delta)?;
        let c = self.inner.clone();
        on_thread(env, move || c.add(d).map(|v| v.to_string()))
    }

    /// Writes `next` if the value is `expected` (both decimal); resolves whether it did.
    #[napi(ts_return_type = "Promise<boolean>")]
    pub fn compare_and_set<'e>(
        &self,
        env: &'e Env,
        expected: String,
        next: String,
    ) -> Result<Object<'e>> {
        let (e, n) = (parse_i64("expected", &expected)?, parse_i64("next", &next)?);
        let c = self.inner.clone();
        on_thread(env, move || c.compare_and_set(e, n))
    }

    /// A watch of the value.
    #[napi]
    pub fn watch(&self) -> Result<NativeCounterWatch> {
        let w = self.inner.watch().map_err(js_err)?;
        Ok(NativeCounterWatch {
            inner: OffThread::new(Arc::new(Mutex::new(Some(w)))),
        })
    }
}

/// A watch of a counter (see `CounterWatch` in lib/counter.js).
#[napi(js_name = "NativeCounterWatch")]
pub struct NativeCounterWatch {
    pub(super) inner: OffThread<SharedCounterWatch>,
}

#[napi]
impl NativeCounterWatch {
    /// Resolves with the next value that differs from the last one (the first call: the
    /// current value), decimal; null when `timeoutMs` passes without a change. Rejects with
    /// `BATON_CANCELLED` when `cancel` fires, `BATON_CLOSED` after `close()`.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn next<'e>(
        &self,
        env: &'e Env,
        timeout_ms: Option<f64>,
        cancel: Option<&NativeCancel>,
    ) -> Result<Object<'e>> {
        let t = millis("timeoutMs", timeout_ms)?;
        let next = baton::aio::counter_next_shared(&self.inner, t, &token_of(cancel));
        driven(env, async move { Ok(next.await?.map(|v| v.to_string())) })
    }

    /// Stops watching (the subscription is dropped off the JS thread).
    #[napi]
    pub fn close(&self) {
        close_shared(&self.inner);
    }
}
