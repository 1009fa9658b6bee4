//! Sessions bound to health checks: `Client.agent` (TTL checks and services),
//! `Client.adopt_session`, and the check options of `Client.create_session`.

use pyo3::prelude::*;

use crate::detached::Detached;
use crate::{seconds, to_py, Session};

/// An `InvalidArgumentError` naming the problem.
fn invalid(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    to_py(
        py,
        baton::Error::new(baton::ErrorKind::InvalidArgument, msg.into()),
    )
}

/// `"passing"`, `"warning"` or `"critical"` → the core's status.
fn status(py: Python<'_>, name: &str, what: &str) -> PyResult<baton::CheckStatus> {
    baton::CheckStatus::parse(name).ok_or_else(|| {
        invalid(
            py,
            format!("{what} must be 'passing', 'warning' or 'critical', got {name:?}"),
        )
    })
}

/// Applies `node`, `node_checks` and `service_checks` of `create_session` to `o`.
pub(crate) fn apply_checks(
    py: Python<'_>,
    mut o: baton::SessionOptions,
    node: Option<String>,
    node_checks: Option<Vec<String>>,
    service_checks: Option<Vec<String>>,
) -> PyResult<baton::SessionOptions> {
    if let Some(n) = node {
        if n.is_empty() {
            return Err(invalid(
                py,
                "node must not be empty (omit it for the agent's node)",
            ));
        }
        o = o.node(n);
    }
    if let Some(list) = node_checks {
        if let Some(i) = list.iter().position(|c| c.is_empty()) {
            return Err(invalid(py, format!("node_checks[{i}] must not be empty")));
        }
        o = o.node_checks(list);
    }
    for (i, c) in service_checks.into_iter().flatten().enumerate() {
        if c.is_empty() {
            return Err(invalid(
                py,
                format!("service_checks[{i}] must not be empty"),
            ));
        }
        o = o.service_check(c);
    }
    Ok(o)
}

/// The agent's check and service endpoints, for binding sessions to a process's health.
#[pyclass(frozen, module = "consul_baton._native")]
pub(crate) struct Agent {
    client: Detached<baton::Client>,
}

impl Agent {
    /// Runs one agent call detached from the interpreter.
    fn run(
        &self,
        py: Python<'_>,
        f: impl FnOnce(baton::Agent<'_>) -> baton::Result<()> + Send,
    ) -> PyResult<()> {
        let c: baton::Client = (*self.client).clone();
        py.detach(move || f(c.agent())).map_err(|e| to_py(py, e))
    }
}

#[pymethods]
impl Agent {
    /// Registers (or replaces) a TTL check `check_id`: without a report for `ttl` seconds
    /// it turns critical, and sessions bound to it are invalidated.
    #[pyo3(signature = (check_id, ttl, *, name=None, service_id=None, notes=None, status=None))]
    #[allow(clippy::too_many_arguments)]
    fn check_register(
        &self,
        py: Python<'_>,
        check_id: String,
        ttl: f64,
        name: Option<String>,
        service_id: Option<String>,
        notes: Option<String>,
        status: Option<&str>,
    ) -> PyResult<()> {
        let ttl = seconds("ttl", Some(ttl))?.unwrap_or_default();
        let mut c = baton::TtlCheck::new(check_id, ttl);
        if let Some(n) = name {
            c = c.name(n);
        }
        if let Some(s) = service_id {
            c = c.service_id(s);
        }
        if let Some(n) = notes {
            c = c.notes(n);
        }
        if let Some(s) = status {
            c = c.status(self::status(py, s, "status")?);
        }
        self.run(py, move |a| a.check_register(&c))
    }

    /// Removes a check; sessions bound to it are invalidated.
    fn check_deregister(&self, py: Python<'_>, check_id: String) -> PyResult<()> {
        self.run(py, move |a| a.check_deregister(&check_id))
    }

    /// Reports a TTL check passing (its TTL starts again).
    #[pyo3(signature = (check_id, note=None))]
    fn check_pass(&self, py: Python<'_>, check_id: String, note: Option<String>) -> PyResult<()> {
        self.run(py, move |a| a.check_pass(&check_id, note.as_deref()))
    }

    /// Reports a TTL check warning (bound sessions stay valid).
    #[pyo3(signature = (check_id, note=None))]
    fn check_warn(&self, py: Python<'_>, check_id: String, note: Option<String>) -> PyResult<()> {
        self.run(py, move |a| a.check_warn(&check_id, note.as_deref()))
    }

    /// Reports a TTL check critical: sessions bound to it are invalidated.
    #[pyo3(signature = (check_id, note=None))]
    fn check_fail(&self, py: Python<'_>, check_id: String, note: Option<String>) -> PyResult<()> {
        self.run(py, move |a| a.check_fail(&check_id, note.as_deref()))
    }

    /// Sets a TTL check's status (`'passing'`, `'warning'`, `'critical'`) and output.
    #[pyo3(signature = (check_id, status, output=None))]
    fn check_update(
        &self,
        py: Python<'_>,
        check_id: String,
        status: &str,
        output: Option<String>,
    ) -> PyResult<()> {
        let s = self::status(py, status, "status")?;
        self.run(py, move |a| a.check_update(&check_id, s, output.as_deref()))
    }

    /// Registers (or replaces) a service.
    #[pyo3(signature = (name, *, service_id=None, tags=None, address=None, port=None))]
    fn service_register(
        &self,
        py: Python<'_>,
        name: String,
        service_id: Option<String>,
        tags: Option<Vec<String>>,
        address: Option<String>,
        port: Option<u16>,
    ) -> PyResult<()> {
        let mut s = baton::ServiceRegistration::new(name);
        if let Some(id) = service_id {
            s = s.id(id);
        }
        for t in tags.into_iter().flatten() {
            s = s.tag(t);
        }
        if let Some(a) = address {
            s = s.address(a);
        }
        if let Some(p) = port {
            s = s.port(p);
        }
        self.run(py, move |a| a.service_register(&s))
    }

    /// Removes a service and its checks.
    fn service_deregister(&self, py: Python<'_>, service_id: String) -> PyResult<()> {
        self.run(py, move |a| a.service_deregister(&service_id))
    }

    fn __repr__(&self) -> String {
        format!("baton.Agent(address={:?})", self.client.address())
    }
}

#[pymethods]
impl crate::Client {
    /// The agent's check and service endpoints.
    #[getter]
    fn agent(&self) -> Agent {
        Agent {
            client: Detached::new((*self.inner).clone()),
        }
    }

    /// Manages a session created elsewhere (another process, or `consul`): renewed if it
    /// has a TTL, watched for invalidation, never destroyed by `close()`.
    fn adopt_session(&self, py: Python<'_>, session_id: String) -> PyResult<Session> {
        let c = (*self.inner).clone();
        let s = py
            .detach(|| c.adopt_session(&session_id))
            .map_err(|e| to_py(py, e))?;
        Ok(Session::new(s, c.downgrade()))
    }
}
