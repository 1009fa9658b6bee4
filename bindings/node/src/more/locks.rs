//! The read-write lock and the multi-key lock for Node.

use super::*;

/// One side (reader or writer) of a read-write lock (see `RwLock` in lib/rwlock.js).
#[napi(js_name = "NativeRwLock")]
pub struct NativeRwLock {
    pub(super) inner: OffThread<Arc<baton::RwLock>>,
}

holding_methods!(NativeRwLock, acquire);

#[napi]
impl NativeRwLock {
    /// The prefix (without a trailing `/`).
    #[napi(getter)]
    pub fn prefix(&self) -> String {
        self.inner.prefix().to_string()
    }

    /// `read` or `write`.
    #[napi(getter)]
    pub fn mode(&self) -> &'static str {
        self.inner.mode().as_str()
    }

    /// The contender key of the current holding, or null.
    #[napi]
    pub fn key(&self) -> Option<String> {
        self.inner.key()
    }

    /// The sequencer of the current holding, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.sequencer().map(NativeSequencer::from)
    }
}

/// A lock on several keys at once (see `MultiLock` in lib/multilock.js).
#[napi(js_name = "NativeMultiLock")]
pub struct NativeMultiLock {
    pub(super) inner: OffThread<Arc<baton::MultiLock>>,
}

holding_methods!(NativeMultiLock, acquire);

#[napi]
impl NativeMultiLock {
    /// The keys, sorted, without duplicates.
    #[napi(getter)]
    pub fn keys(&self) -> Vec<String> {
        self.inner.keys().to_vec()
    }

    /// The value written to every key on acquire.
    #[napi]
    pub fn value(&self) -> Buffer {
        Buffer::from(self.inner.value())
    }

    /// The sequencer of the first key's holding, or null.
    #[napi]
    pub fn sequencer(&self) -> Option<NativeSequencer> {
        self.inner.sequencer().map(NativeSequencer::from)
    }

    /// One sequencer per key (in `keys` order) while held, else empty.
    #[napi]
    pub fn sequencers(&self) -> Vec<NativeSequencer> {
        self.inner
            .sequencers()
            .into_iter()
            .map(NativeSequencer::from)
            .collect()
    }
}
