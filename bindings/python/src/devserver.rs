//! `consul_baton._native.devserver_main`: the `baton-devserver` command inside the wheel (its
//! console entry point and the pytest plugin start `python -m consul_baton.devserver`), so the
//! wheel and the sdist carry the dev server without a second binary to build or ship.

use pyo3::prelude::*;

/// Runs the `baton-devserver` command line (`args` without the program name) until SIGINT or
/// SIGTERM, detached from the interpreter, and returns its exit status.
#[pyfunction]
#[pyo3(signature = (args, argv0=None))]
pub(crate) fn devserver_main(py: Python<'_>, args: Vec<String>, argv0: Option<String>) -> u8 {
    py.detach(move || baton_devserver::cli::run(argv0.as_deref(), args))
}
