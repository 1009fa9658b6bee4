//! `KvEntry`, transaction ops from Python values, and the client's KV and fencing calls.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{opt_value, value_bytes};
use crate::{to_py, Detached, Session};

use super::holding::Holding;
use super::*;

/// One KV entry, as read or as a transaction returned it.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct KvEntry {
    inner: baton::KvPair,
}

#[pymethods]
impl KvEntry {
    /// The key.
    #[getter]
    fn key(&self) -> String {
        self.inner.key.clone()
    }
    /// The value (None for writes: Consul returns values only for reads).
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.inner.value.as_deref().map(|v| PyBytes::new(py, v))
    }
    /// The flags (uint64).
    #[getter]
    fn flags(&self) -> u64 {
        self.inner.flags
    }
    /// The session holding the key's lock, or None.
    #[getter]
    fn session(&self) -> Option<String> {
        self.inner.session.clone()
    }
    /// LockIndex.
    #[getter]
    fn lock_index(&self) -> u64 {
        self.inner.lock_index
    }
    /// CreateIndex.
    #[getter]
    fn create_index(&self) -> u64 {
        self.inner.create_index
    }
    /// ModifyIndex.
    #[getter]
    fn modify_index(&self) -> u64 {
        self.inner.modify_index
    }
    fn __repr__(&self) -> String {
        format!(
            "baton.KvEntry(key={:?}, modify_index={})",
            self.inner.key, self.inner.modify_index
        )
    }
}

/// One operation of `guarded_txn`: a dict `{"verb": "set", "key": ..., "value": ...,
/// "flags": 0, "index": 0, "session": ...}` (Node's `TxnOp`; verbs as Consul's).
pub(crate) fn txn_op(i: usize, op: &Bound<'_, PyAny>) -> PyResult<baton::KvOp> {
    let d = op
        .cast::<pyo3::types::PyDict>()
        .map_err(|_| PyTypeError::new_err(format!("ops[{i}] must be a dict")))?;
    const KEYS: [&str; 6] = ["verb", "key", "value", "flags", "index", "session"];
    for k in d.keys() {
        let k: String = k.extract()?;
        if !KEYS.contains(&k.as_str()) {
            return Err(PyTypeError::new_err(format!(
                "ops[{i}] has an unknown key {k:?} (known: {})",
                KEYS.join(", ")
            )));
        }
    }
    let field = |k: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        Ok(d.get_item(k)?.filter(|v| !v.is_none()))
    };
    let verb: String = field("verb")?
        .ok_or_else(|| PyValueError::new_err(format!("ops[{i}] needs a \"verb\"")))?
        .extract()?;
    let verb = baton::KvVerb::parse(&verb).ok_or_else(|| {
        let all: Vec<_> = baton::KvVerb::ALL.iter().map(|v| v.as_str()).collect();
        PyValueError::new_err(format!(
            "ops[{i}]: unknown verb {verb:?} (one of {})",
            all.join(", ")
        ))
    })?;
    let key: String = field("key")?
        .ok_or_else(|| PyValueError::new_err(format!("ops[{i}] needs a \"key\"")))?
        .extract()?;
    let value = match field("value")? {
        Some(v) => Some(value_bytes(&format!("ops[{i}][\"value\"]"), &v)?),
        None => None,
    };
    Ok(baton::KvOp {
        verb,
        key,
        value,
        flags: field("flags")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(0),
        index: field("index")?
            .map(|v| v.extract())
            .transpose()?
            .unwrap_or(0),
        session: field("session")?.map(|v| v.extract()).transpose()?,
    })
}

#[pymethods]
impl crate::Client {
    /// A lock on `key`; `value` (bytes, or str stored UTF-8 encoded) is written on acquire;
    /// `session` defaults to the client's.
    #[pyo3(signature = (key, *, value=None, session=None, **unknown))]
    fn lock(
        &self,
        py: Python<'_>,
        key: &str,
        value: Option<&Bound<'_, PyAny>>,
        session: Option<PyRef<'_, Session>>,
        unknown: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Lock> {
        crate::args::refuse_unknown("lock", unknown, &["value", "session"])?;
        let mut o = baton::LockOptions::new().value(opt_value("value", value)?);
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let l = self.inner.lock_with(key, o).map_err(|e| to_py(py, e))?;
        Ok(Lock {
            inner: Holding::new(l),
        })
    }

    /// A semaphore with `limit` slots on `prefix`; `value` as for `lock`.
    #[pyo3(signature = (prefix, limit, *, value=None, session=None, **unknown))]
    fn semaphore(
        &self,
        py: Python<'_>,
        prefix: &str,
        limit: i64,
        value: Option<&Bound<'_, PyAny>>,
        session: Option<PyRef<'_, Session>>,
        unknown: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Semaphore> {
        crate::args::refuse_unknown("semaphore", unknown, &["value", "session"])?;
        if limit <= 0 {
            return Err(PyValueError::new_err(format!(
                "limit must be a positive integer, got {limit}"
            )));
        }
        let mut o = baton::SemaphoreOptions::new().value(opt_value("value", value)?);
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        let s = self
            .inner
            .semaphore_with(prefix, limit as u64, o)
            .map_err(|e| to_py(py, e))?;
        Ok(Semaphore {
            inner: Holding::new(s),
        })
    }

    /// An election on `key`; `flags` as Consul's guide writes the key (0) to
    /// campaign alongside such clients (default: Go's api.Lock flag).
    #[pyo3(signature = (key, *, session=None, flags=None, **unknown))]
    fn election(
        &self,
        py: Python<'_>,
        key: &str,
        session: Option<PyRef<'_, Session>>,
        flags: Option<u64>,
        unknown: Option<&Bound<'_, pyo3::types::PyDict>>,
    ) -> PyResult<Election> {
        crate::args::refuse_unknown("election", unknown, &["session", "flags"])?;
        let mut o = baton::ElectionOptions::new();
        if let Some(s) = session {
            o = o.session(s.inner.clone());
        }
        if let Some(f) = flags {
            o = o.flags(f);
        }
        let e = self.inner.election_with(key, o).map_err(|e| to_py(py, e))?;
        Ok(Election {
            inner: Holding::new(e),
            client: Detached::new((*self.inner).clone()),
        })
    }

    /// The current leader of the election on `key` (one consistent read), or None.
    fn leader(&self, py: Python<'_>, key: &str) -> PyResult<Option<Leader>> {
        let (c, k) = (self.inner.clone(), key.to_string());
        py.detach(move || c.leader(&k))
            .map(|l| l.map(|inner| Leader { inner }))
            .map_err(|e| to_py(py, e))
    }

    /// Whether `sequencer` is still current (one consistent read).
    fn check_sequencer(&self, py: Python<'_>, sequencer: PyRef<'_, Sequencer>) -> PyResult<bool> {
        let (c, s) = (self.inner.clone(), sequencer.inner.clone());
        py.detach(move || c.check_sequencer(&s))
            .map_err(|e| to_py(py, e))
    }

    /// Writes `value` (bytes or str) to `key` only while `sequencer`'s session still holds its
    /// lock (a transaction behind `check-session`); a stale holder gets `ConflictError`.
    fn guarded_put(
        &self,
        py: Python<'_>,
        sequencer: PyRef<'_, Sequencer>,
        key: &str,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let value = value_bytes("value", value)?;
        let (c, s, k) = (self.inner.clone(), sequencer.inner.clone(), key.to_string());
        py.detach(move || c.guarded_txn(&s, &[baton::KvOp::set(&k, &value, 0)]))
            .map(|_| ())
            .map_err(|e| to_py(py, e))
    }

    /// Runs `ops` (dicts: `verb`, `key`, optional `value`, `flags`, `index`, `session`) in one
    /// transaction behind a `check-session` of `sequencer`'s key: a stale holder gets
    /// `ConflictError` (message `stale sequencer ...`) and nothing is written. Returns the
    /// entries Consul reported, as `KvEntry`s.
    fn guarded_txn(
        &self,
        py: Python<'_>,
        sequencer: PyRef<'_, Sequencer>,
        ops: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<KvEntry>> {
        let ops = ops
            .iter()
            .enumerate()
            .map(|(i, op)| txn_op(i, op))
            .collect::<PyResult<Vec<_>>>()?;
        let (c, s) = (self.inner.clone(), sequencer.inner.clone());
        py.detach(move || c.guarded_txn(&s, &ops))
            .map(|v| v.into_iter().map(|inner| KvEntry { inner }).collect())
            .map_err(|e| to_py(py, e))
    }
}

/// Public constructors for `aio.rs`.
impl KvEntry {
    pub(crate) fn new(inner: baton::KvPair) -> KvEntry {
        KvEntry { inner }
    }
}
