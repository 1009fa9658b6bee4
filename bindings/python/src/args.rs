//! Arguments shared by several methods: values written to Consul (`bytes` or `str`), session
//! options (`create_session` keywords and `Client(default_session={...})`), and the
//! `BATON_NOT_HELD` error of a release.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};

use crate::{agent, seconds};

/// A value written to Consul: `bytes`, `bytearray`, `memoryview` (any buffer of bytes), or a
/// `str`, stored UTF-8 encoded (as Node stores a string). Anything else is a `TypeError`
/// naming the parameter and the type it got.
pub(crate) fn value_bytes(name: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(b) = v.cast::<PyByteArray>() {
        return Ok(b.to_vec());
    }
    if let Ok(view) = v.py().import("builtins")?.getattr("memoryview") {
        if v.is_instance(&view)? {
            let raw = v.call_method0("tobytes")?;
            return Ok(raw.cast::<PyBytes>()?.as_bytes().to_vec());
        }
    }
    let type_name = v
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    Err(PyTypeError::new_err(format!(
        "{name} must be bytes or str (a str is stored UTF-8 encoded), got {type_name}"
    )))
}

/// An optional value argument (`None` = empty).
pub(crate) fn opt_value(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<u8>> {
    match v {
        Some(v) if !v.is_none() => value_bytes(name, v),
        _ => Ok(Vec::new()),
    }
}

/// The TTL of a session unless one is given: 15 s, as the client's default session and the C
/// API's `baton_session_create` have.
pub(crate) const DEFAULT_TTL: f64 = 15.0;

/// The session keywords of `create_session` / `Client(default_session=...)`, checked.
pub(crate) struct SessionArgs {
    /// `true` for `Client(default_session={...})`: errors name `default_session["ttl"]`.
    pub in_dict: bool,
    pub name: Option<String>,
    /// `None`: no TTL (asked for explicitly with `ttl=None`).
    pub ttl: Option<f64>,
    pub lock_delay: Option<f64>,
    pub behavior: String,
    pub node: Option<String>,
    pub node_checks: Option<Vec<String>>,
    pub service_checks: Option<Vec<String>>,
}

impl SessionArgs {
    /// The core's options.
    pub(crate) fn options(self, py: Python<'_>) -> PyResult<baton::SessionOptions> {
        let mut o = baton::SessionOptions::new();
        if let Some(n) = &self.name {
            o = o.name(n.clone());
        }
        let ttl = self.param("ttl");
        if let Some(t) = seconds(&ttl, self.ttl)? {
            if t.is_zero() {
                // As the core says it (one meaning in every language), caught before any
                // request: Consul would read 0 as "no TTL".
                let none = if self.in_dict {
                    r#"{"ttl": None}"#
                } else {
                    "ttl=None"
                };
                return Err(crate::to_py(
                    py,
                    baton::Error::new(
                        baton::ErrorKind::InvalidArgument,
                        format!(
                            "{ttl} must be a positive number of seconds, got 0 (Consul would \
                             create a session that never expires): {none} asks for a session \
                             without a TTL explicitly"
                        ),
                    ),
                ));
            }
            o = o.ttl(t);
        } else {
            o = o.without_ttl();
        }
        if let Some(d) = seconds(&self.param("lock_delay"), self.lock_delay)? {
            o = o.lock_delay(d);
        }
        o = o.behavior(match self.behavior.as_str() {
            "release" => baton::Behavior::Release,
            "delete" => baton::Behavior::Delete,
            other => {
                return Err(PyValueError::new_err(format!(
                    "{} must be 'release' or 'delete', got {other:?}",
                    self.param("behavior")
                )))
            }
        });
        agent::apply_checks(py, o, self.node, self.node_checks, self.service_checks)
    }

    /// The name of parameter `k` in messages: `ttl`, or `default_session["ttl"]`.
    fn param(&self, k: &str) -> String {
        if self.in_dict {
            format!("default_session[{k:?}]")
        } else {
            k.to_string()
        }
    }

    /// `Client(default_session={...})`: the same keys as `create_session`; a key left out
    /// keeps the default session's default (name "baton", TTL 15 s, Consul's lock-delay).
    /// The session keywords (`create_session`'s and `default_session`'s keys).
    pub(crate) const KEYS: [&str; 7] = [
        "name",
        "ttl",
        "lock_delay",
        "behavior",
        "node",
        "node_checks",
        "service_checks",
    ];

    pub(crate) fn from_dict(d: &Bound<'_, PyDict>) -> PyResult<SessionArgs> {
        const KEYS: [&str; 7] = SessionArgs::KEYS;
        for k in d.keys() {
            let k: String = k.extract().map_err(|_| {
                PyTypeError::new_err("default_session keys must be str (create_session keywords)")
            })?;
            if !KEYS.contains(&k.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "unknown default_session option {k:?}{} (known: {})",
                    did_you_mean(&k, &KEYS),
                    KEYS.join(", ")
                )));
            }
        }
        // Absent: `None`; present: `Some(None)` for Python's None, else the value.
        let item = |k: &str| -> PyResult<Option<Option<Bound<'_, PyAny>>>> {
            Ok(d.get_item(k)?
                .map(|v| if v.is_none() { None } else { Some(v) }))
        };
        let wrap = |k: &str, e: PyErr| {
            Python::attach(|py| {
                PyTypeError::new_err(format!("default_session[{k:?}]: {}", e.value(py)))
            })
        };
        let string = |k: &str| -> PyResult<Option<Option<String>>> {
            match item(k)? {
                None => Ok(None),
                Some(None) => Ok(Some(None)),
                Some(Some(v)) => v.extract().map(|s| Some(Some(s))).map_err(|e| wrap(k, e)),
            }
        };
        let number = |k: &str| -> PyResult<Option<Option<f64>>> {
            match item(k)? {
                None => Ok(None),
                Some(None) => Ok(Some(None)),
                Some(Some(v)) => v.extract().map(|s| Some(Some(s))).map_err(|e| wrap(k, e)),
            }
        };
        let list = |k: &str| -> PyResult<Option<Vec<String>>> {
            match item(k)? {
                None | Some(None) => Ok(None),
                Some(Some(v)) => v.extract().map(Some).map_err(|e| wrap(k, e)),
            }
        };
        Ok(SessionArgs {
            in_dict: true,
            name: string("name")?.unwrap_or(Some("baton".into())),
            ttl: number("ttl")?.unwrap_or(Some(DEFAULT_TTL)),
            lock_delay: number("lock_delay")?.flatten(),
            behavior: string("behavior")?
                .flatten()
                .unwrap_or_else(|| "release".into()),
            node: string("node")?.flatten(),
            node_checks: list("node_checks")?,
            service_checks: list("service_checks")?,
        })
    }
}

/// `baton.NotHeldError` (a `BatonError` and a `RuntimeError`, code `BATON_NOT_HELD`).
pub(crate) fn not_held(py: Python<'_>, msg: String) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let exc = py
            .import("consul_baton._errors")?
            .getattr("NotHeldError")?
            .call1((msg.clone(),))?;
        Ok(PyErr::from_value(exc))
    };
    build().unwrap_or_else(|e| e)
}

/// Refuses keyword arguments a call does not take, in the words Node's options check uses:
/// `unknown Client option "adress" (did you mean address?) (known: ...)`, a `TypeError`.
/// `unknown` is the call's `**kwargs` (only the names its signature does not list).
pub(crate) fn refuse_unknown(
    what: &str,
    unknown: Option<&Bound<'_, PyDict>>,
    known: &[&str],
) -> PyResult<()> {
    let Some(first) = unknown.and_then(|d| d.keys().iter().next()) else {
        return Ok(());
    };
    let name: String = first.extract()?;
    Err(PyTypeError::new_err(format!(
        "unknown {what} option {name:?}{} (known: {})",
        did_you_mean(&name, known),
        known.join(", ")
    )))
}

/// ` (did you mean NAME?)` for the known name nearest to `k` when it is close (the edit
/// distance with a swap of neighbours counting one, at most a third of the name's length),
/// else nothing: the same rule as Node's `options.js`.
fn did_you_mean(k: &str, known: &[&str]) -> String {
    // Durations are seconds here, with no unit in the name (Node's are `...Ms`).
    if let Some(base) = k.strip_suffix("_ms").or_else(|| k.strip_suffix("Ms")) {
        if let Some(n) = known.iter().find(|n| n.eq_ignore_ascii_case(base)) {
            return format!(" (did you mean {n}? durations are in seconds)");
        }
    }
    let best = known
        .iter()
        .map(|n| {
            let d = if n.eq_ignore_ascii_case(k) {
                0
            } else {
                distance(k, n)
            };
            (d, *n)
        })
        .min_by_key(|(d, _)| *d);
    match best {
        Some((d, n)) if d <= (n.chars().count() / 3).max(1) => format!(" (did you mean {n}?)"),
        _ => String::new(),
    }
}

/// Edit distance of two short strings, a swap of neighbours counting one.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}
