//! The native halves of `baton.aio`'s barriers, counters, groups and leader tasks: their
//! waits (a barrier's wait, a double barrier's enter and leave, a watch's next, a member's
//! loss, a leader task's campaign and term) are futures of `baton::aio` driven with no
//! thread of their own ([`drive`]); their quick calls (a hold, an add, a join) run on the
//! pooled threads of the calls that do not wait ([`start`]), as a release does.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use baton::aio::{
    counter_next_shared, members_next_shared, AsyncBarrier, AsyncDoubleBarrier, AsyncLeaderTask,
    AsyncMember, Bounded,
};
use pyo3::prelude::*;

use crate::aio::{any, drive, start, timeout, Abandon, Pending};
use crate::args::{opt_value, value_bytes};
use crate::cancel::{user_token, CancelToken};
use crate::recipes::{
    Barrier, Counter, CounterWatch, DoubleBarrier, Group, LeaderTask, Member, MemberInfo,
    MembersWatch, MembershipEvent,
};
use crate::{to_py, Detached, Session};

#[pymethods]
impl Barrier {
    /// Native half of `baton.aio.Barrier.hold`.
    #[pyo3(signature = (done, session=None))]
    fn _start_hold(
        &self,
        done: Py<PyAny>,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Pending> {
        let b = self.inner.clone();
        let s = session.map(|s| (*s.inner).clone());
        start(
            done,
            move |_| match s {
                Some(s) => b.hold_with_session(&s),
                None => b.hold(),
            },
            any,
        )
    }

    /// Native half of `baton.aio.Barrier.release`.
    fn _start_release(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let b = self.inner.clone();
        start(done, move |_| b.release(), any)
    }

    /// Native half of `baton.aio.Barrier.is_held`.
    fn _start_is_held(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let b = self.inner.clone();
        start(done, move |_| b.is_held(), any)
    }

    /// Native half of `baton.aio.Barrier.wait`: driven, no thread of its own.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_wait(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let b = self.inner.clone();
        drive(done, |token, _| b.wait_async(t, token), any)
    }
}

/// An entered double barrier nobody will take (the awaiting task was cancelled as the enter
/// succeeded): given back by leaving at once, without waiting for the others.
struct Entered(Arc<baton::DoubleBarrier>);

impl Abandon for Entered {
    fn abandon(&self) {
        if self.0.is_entered() {
            let _ = self.0.leave(Some(Duration::ZERO), None);
        }
    }
}

#[pymethods]
impl DoubleBarrier {
    /// Native half of `baton.aio.DoubleBarrier.enter`: driven; a success nobody takes leaves
    /// again.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_enter(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let b = Arc::clone(&self.inner);
        drive(
            done,
            |token, unclaimed| {
                let wait = b.enter_async(t, token);
                let unclaimed = unclaimed.clone();
                async move {
                    let entered = wait.await?;
                    if entered {
                        unclaimed.arm(Arc::new(Entered(b)));
                    }
                    Ok(entered)
                }
            },
            any,
        )
    }

    /// Native half of `baton.aio.DoubleBarrier.leave`: driven.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_leave(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let b = self.inner.clone();
        drive(done, |token, _| b.leave_async(t, token), any)
    }
}

#[pymethods]
impl Counter {
    /// Native half of `baton.aio.Counter.get`.
    fn _start_get(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let c = self.inner.clone();
        start(done, move |_| c.get(), any)
    }

    /// Native half of `baton.aio.Counter.get_with_index`.
    fn _start_get_with_index(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let c = self.inner.clone();
        start(done, move |_| c.get_with_index(), any)
    }

    /// Native half of `baton.aio.Counter.set`.
    fn _start_set(&self, done: Py<PyAny>, value: i64) -> PyResult<Pending> {
        let c = self.inner.clone();
        start(done, move |_| c.set(value), any)
    }

    /// Native half of `baton.aio.Counter.add` (and `increment`, `decrement`).
    fn _start_add(&self, done: Py<PyAny>, delta: i64) -> PyResult<Pending> {
        let c = self.inner.clone();
        start(done, move |_| c.add(delta), any)
    }

    /// Native half of `baton.aio.Counter.compare_and_set`.
    fn _start_compare_and_set(
        &self,
        done: Py<PyAny>,
        expected: i64,
        new: i64,
    ) -> PyResult<Pending> {
        let c = self.inner.clone();
        start(done, move |_| c.compare_and_set(expected, new), any)
    }
}

#[pymethods]
impl Group {
    /// Native half of `baton.aio.Group.join`.
    #[pyo3(signature = (done, id, value=None, session=None))]
    fn _start_join(
        &self,
        done: Py<PyAny>,
        id: &str,
        value: Option<&Bound<'_, PyAny>>,
        session: Option<PyRef<'_, Session>>,
    ) -> PyResult<Pending> {
        let v = opt_value("value", value)?;
        let (g, id, client) = (self.inner.clone(), id.to_string(), self.client.clone());
        let s = session.map(|s| (*s.inner).clone());
        start(
            done,
            move |_| {
                match s {
                    Some(s) => g.join_with_session(&id, &v, &s),
                    None => g.join(&id, &v),
                }
                .map(|m| (m, client))
            },
            member,
        )
    }

    /// Native half of `baton.aio.Group.members`.
    fn _start_members(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let g = self.inner.clone();
        start(done, move |_| g.members(), member_infos)
    }
}

#[pymethods]
impl Member {
    /// Native half of `baton.aio.Member.leave`.
    fn _start_leave(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let m = self.inner.clone();
        start(done, move |_| m.leave(), any)
    }

    /// Native half of `baton.aio.Member.update_value`.
    fn _start_update_value(&self, done: Py<PyAny>, value: &Bound<'_, PyAny>) -> PyResult<Pending> {
        let v = value_bytes("value", value)?;
        let m = self.inner.clone();
        start(done, move |_| m.update_value(&v), any)
    }
}

fn member(py: Python<'_>, (m, client): (baton::Member, baton::WeakClient)) -> PyResult<Py<PyAny>> {
    any(py, Member::new(m, client))
}

fn member_infos(py: Python<'_>, all: Vec<baton::MemberInfo>) -> PyResult<Py<PyAny>> {
    any(
        py,
        all.into_iter()
            .map(|inner| MemberInfo { inner })
            .collect::<Vec<_>>(),
    )
}

/// `fut`, also ended (with kind `Cancelled`, the future dropped) when `token` fires: how a
/// driven call that takes no cancel token of its own is cancelled by its `Pending`.
fn cancelled_by<T, F>(
    client: &baton::Client,
    fut: F,
    token: &baton::CancelToken,
    what: &str,
) -> Bounded<F>
where
    F: std::future::Future<Output = baton::Result<T>>,
{
    Bounded::new(
        client,
        fut,
        None,
        Some(token),
        "",
        format!("{what} cancelled"),
    )
}

#[pymethods]
impl CounterWatch {
    /// Native half of `baton.aio.CounterWatch.next`: driven, no thread of its own.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_next(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let w = Arc::clone(&self.inner);
        drive(done, |token, _| counter_next_shared(&w, t, token), any)
    }
}

#[pymethods]
impl MembersWatch {
    /// Native half of `baton.aio.MembersWatch.next`: driven, no thread of its own.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_next(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let w = Arc::clone(&self.inner);
        drive(done, |token, _| members_next_shared(&w, t, token), event)
    }
}

#[pymethods]
impl Member {
    /// Native half of `baton.aio.Member.wait_lost`: driven; resolves to the reason's name.
    #[pyo3(signature = (done, timeout=None))]
    fn _start_wait_lost(&self, done: Py<PyAny>, timeout: Option<f64>) -> PyResult<Pending> {
        let t = self::timeout(timeout)?;
        let m = Arc::clone(&self.inner);
        drive(
            done,
            |token, _| {
                let lost = m.lost_within(t, token);
                async move { lost.await.map(baton::MemberLost::name) }
            },
            any,
        )
    }
}

fn event(py: Python<'_>, ev: Option<baton::MembershipEvent>) -> PyResult<Py<PyAny>> {
    match ev {
        Some(ev) => any(py, MembershipEvent::new(ev)),
        None => Ok(py.None()),
    }
}

/// A run of a leader task for `baton.aio`, one term at a time (`LeaderTask._terms`): the
/// campaign and the hand-over wait are driven futures; the term's task is the caller's
/// coroutine. Dropping it ends the run (a leadership still held is given back).
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct LeaderTerms {
    terms: Detached<Arc<baton::aio::LeaderTerms>>,
    client: Detached<baton::Client>,
}

/// One term of a `LeaderTerms` run: `token` fires when leadership ends (or `stop` fires);
/// `_start_finish` ends it.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Term {
    term: Detached<Mutex<Option<baton::aio::Term>>>,
    token: baton::CancelToken,
    client: Detached<baton::Client>,
}

#[pymethods]
impl LeaderTask {
    /// Starts a run for `baton.aio.LeaderTask.run`, stopped by `stop` (a
    /// `baton.CancelToken`). `baton.ConflictError` while another run of this task is under way.
    #[pyo3(signature = (stop=None))]
    fn _terms(
        &self,
        py: Python<'_>,
        stop: Option<PyRef<'_, CancelToken>>,
    ) -> PyResult<LeaderTerms> {
        let stop = user_token(stop).unwrap_or_default();
        let terms = self.inner.terms(&stop).map_err(|e| to_py(py, e))?;
        Ok(LeaderTerms {
            terms: Detached::new(Arc::new(terms)),
            client: Detached::new((*self.client).clone()),
        })
    }
}

#[pymethods]
impl LeaderTerms {
    /// Waits for the next term (driven): a `Term` once leading, None once the run is over.
    fn _start_next_term(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let terms = Arc::clone(&self.terms);
        let client = (*self.client).clone();
        drive(
            done,
            |token, _| {
                let next = cancelled_by(&client, terms.next_term(), token, "campaign");
                async move {
                    Ok(next.await?.map(|t| Term {
                        token: t.token(),
                        term: Detached::new(Mutex::new(Some(t))),
                        client: Detached::new(client),
                    }))
                }
            },
            any,
        )
    }
}

#[pymethods]
impl Term {
    /// A `baton.CancelToken` cancelled the moment leadership ends or the run's `stop` fires.
    #[getter]
    fn token(&self) -> CancelToken {
        CancelToken::watch_only(self.token.clone(), "leadership term")
    }

    /// Resolves (driven, no thread of its own) once the term's token fires.
    fn _start_wait_end(&self, done: Py<PyAny>) -> PyResult<Pending> {
        let client = (*self.client).clone();
        let end = self.token.clone();
        drive(
            done,
            |token, _| {
                let never = std::future::pending::<baton::Result<()>>();
                let ended = Bounded::new(&client, never, None, Some(&end), "", "");
                let ended = async move {
                    match ended.await {
                        Err(e) if e.kind() == baton::ErrorKind::Cancelled => Ok(()),
                        other => other,
                    }
                };
                cancelled_by(&client, ended, token, "wait for the end of the term")
            },
            any,
        )
    }

    /// Ends the term (driven): `failure` is None when the task returned, the failure's text
    /// when it raised. Resolves to whether the run goes on; a failure with requeue off comes
    /// back as an error.
    #[pyo3(signature = (done, failure=None))]
    fn _start_finish(&self, done: Py<PyAny>, failure: Option<String>) -> PyResult<Pending> {
        let term = self.term.lock().unwrap_or_else(|p| p.into_inner()).take();
        let result = match failure {
            None => Ok(()),
            Some(msg) => Err(baton::Error::new(baton::ErrorKind::Server, msg)),
        };
        drive(
            done,
            |_, _| async move {
                match term {
                    Some(t) => t.finish(result).await,
                    None => Ok(false),
                }
            },
            any,
        )
    }
}
