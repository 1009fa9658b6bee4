//! The native halves of `baton.aio`'s waiting calls — acquire, campaign, `wait_lost`, the next
//! leader of an observed election — as
//! futures of `baton::aio` driven with no thread of their own ([`crate::aio::drive`]): ten
//! thousand pending acquires cost the client's few baton threads, not ten thousand. The
//! calls that never wait (a release, a KV read) stay on pooled threads (`aio.rs`), where a
//! thread bound to the loop makes back-to-back calls fast.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton::aio::{next_shared, AsyncClient, AsyncHold, Contend, SharedLeaderStream};
use baton::HoldLost;
use pyo3::prelude::*;

use crate::aio::{any, drive, leader_event, timeout, Pending};
use crate::args::value_bytes;
use crate::detached::Detached;
use crate::recipes::{Election, Lock, MultiLock, RwLock, Semaphore};
use crate::to_py;
use crate::Session;

/// An acquire of `hold` (or, with `value`, a campaign) for `timeout`, driven: its success is
/// armed to be given back if nobody takes it.
pub(crate) fn acquire<H: Contend + Send + Sync>(
    done: Py<PyAny>,
    hold: Arc<H>,
    t: Option<Duration>,
) -> PyResult<Pending> {
    drive(
        done,
        |token, unclaimed| {
            let (token, unclaimed) = (token.clone(), unclaimed.clone());
            async move {
                let held = hold.acquire_async_with(t, &token).await?;
                if held {
                    unclaimed.arm(hold);
                }
                Ok(held)
            }
        },
        any,
    )
}

/// A wait for the end of `hold`'s holding, bounded by `t` as the blocking `wait_lost` is,
/// driven; resolves to the reason's name.
fn wait_lost<H: Contend + Send + Sync>(
    done: Py<PyAny>,
    hold: Arc<H>,
    t: Option<Duration>,
) -> PyResult<Pending> {
    drive(
        done,
        |token, _| {
            let token = token.clone();
            async move { hold.lost_within(t, &token).await.map(HoldLost::name) }
        },
        any,
    )
}

#[pymethods]
impl Session {
    /// Native half of `baton.aio`'s `wait_session_lost`: driven, bounded by `timeout` as the
    /// blocking `wait_lost` is; resolves to the reason's name.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_wait_lost(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        drive(
            done,
            |token, _| {
                let wait = baton::aio::session_lost_weak(&self.client, &self.inner, t, token);
                async move { wait.await.map(|r| r.name()) }
            },
            any,
        )
    }
}

macro_rules! waiting_methods {
    ($($class:ident),+) => {$(
        #[pymethods]
        impl $class {
            /// Native half of `baton.aio`'s `wait_lost` of a lock, semaphore or election.
            #[pyo3(signature = (done, timeout=None))]
            fn _start_wait_lost(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
                wait_lost(done, self.inner.hold(), self::timeout(timeout)?)
            }
        }
    )+};
}

waiting_methods!(Lock, Semaphore, Election, RwLock, MultiLock);

macro_rules! acquire_methods {
    ($($class:ident),+) => {$(
        #[pymethods]
        impl $class {
            /// Native half of `baton.aio`'s acquire of a read-write or multi-key lock.
            #[pyo3(signature = (done, timeout=None))]
            fn _start_acquire(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
                acquire(done, self.inner.hold(), self::timeout(timeout)?)
            }
        }
    )+};
}

acquire_methods!(RwLock, MultiLock);

#[pymethods]
impl Lock {
    /// Native half of `baton.aio.Lock.acquire` when the warm path is not taken.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_acquire(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        acquire(done, self.inner.hold(), self::timeout(timeout)?)
    }
}

#[pymethods]
impl Semaphore {
    /// Native half of `baton.aio.Semaphore.acquire`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_acquire(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        acquire(done, self.inner.hold(), self::timeout(timeout)?)
    }
}

#[pymethods]
impl Election {
    /// Native half of `baton.aio.Election.campaign`: campaigns with `value`.
    #[pyo3(signature = (done, value, timeout=None))]
    fn _start_campaign(
        &self,
        done: Py<PyAny>,
        value: &Bound<'_, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Pending> {
        let v = value_bytes("value", value)?;
        let t = self::timeout(timeout)?;
        let e = self.inner.hold();
        e.lock().set_value(v);
        acquire(done, e, t)
    }
}

/// The native half of `baton.aio`'s `async for` over `Election.observe()`: a stream of the
/// core (`baton::aio::LeaderStream`: the current state first, then every change), whose
/// pending next holds no thread.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct LeaderEvents {
    stream: Detached<SharedLeaderStream>,
}

#[pymethods]
impl LeaderEvents {
    /// Starts the wait for the next state (`None`: "no leader"), reported to `done`.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_next(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let stream = Arc::clone(&self.stream);
        drive(
            done,
            |token, _| {
                let next = next_shared(&stream, t, token);
                async move { next?.await }
            },
            leader_event,
        )
    }
}

#[pymethods]
impl Election {
    /// Native half of `baton.aio.Election.observe`.
    fn _observe_stream(&self, py: Python<'_>) -> PyResult<LeaderEvents> {
        let stream = self
            .client
            .observe_leader_stream(self.inner.key())
            .map_err(|e| to_py(py, e))?;
        Ok(LeaderEvents {
            stream: Detached::new(Arc::new(Mutex::new(Some(stream)))),
        })
    }
}
