//! Where baton's log records go in a program that has no `log` logger of its
//! own: the C library and the Node addon (Python bridges to its `logging`
//! module instead, and Rust programs install whatever logger they like).
//!
//! Not part of the public API (hidden); the bindings call [`install`] once
//! when they load. Until a program chooses a sink, warnings and errors are
//! written to standard error, one line each, as Python's `logging` does for a
//! program that configured nothing: a wrong Consul address must not be a
//! silent wait. A sink set with [`set_sink`] receives records up to the level
//! it asked for, and is called without any lock of baton's held (it may call
//! back into baton or replace itself).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// A receiver of log records: level, target (`baton::...`) and message.
pub type Sink = Arc<dyn Fn(Level, &str, &str) + Send + Sync>;

struct Route {
    /// `None`: warnings and errors to standard error.
    sink: Option<Sink>,
    max: LevelFilter,
}

fn route() -> &'static Mutex<Route> {
    static ROUTE: OnceLock<Mutex<Route>> = OnceLock::new();
    ROUTE.get_or_init(|| {
        Mutex::new(Route {
            sink: None,
            max: LevelFilter::Warn,
        })
    })
}

struct Bridge;

impl Log for Bridge {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.target().starts_with("baton") && m.level() <= crate::foundations::sync::lock(route()).max
    }

    fn log(&self, r: &Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        // The sink is cloned out, so it runs with no lock held.
        let sink = crate::foundations::sync::lock(route()).sink.clone();
        let message = r.args().to_string();
        match sink {
            Some(s) => s(r.level(), r.target(), &message),
            None => {
                let line = format!("baton {}: {message}\n", r.level().as_str().to_lowercase());
                // Nothing to do if standard error is gone.
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }
        }
    }

    fn flush(&self) {}
}

/// Whether the bridge is the process's `log` logger (then it sets `log`'s
/// global level).
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Makes this bridge the process's `log` logger (once; a no-op when the
/// program already has another logger, which then gets the records).
///
/// `log`'s global level follows the level the bridge passes on (warnings by
/// default): a record above it is dropped where it is made, before it is
/// built or offered to the bridge. The HTTP stack makes several debug and
/// trace records per request; offered to the bridge, each cost a lock: about
/// 5k instructions per lock cycle in the Node addon (callgrind's per-function
/// counts).
pub fn install() {
    static BRIDGE: Bridge = Bridge;
    if log::set_logger(&BRIDGE).is_ok() {
        let r = crate::foundations::sync::lock(route());
        INSTALLED.store(true, Ordering::SeqCst);
        log::set_max_level(r.max);
    }
}

/// Sends records up to `max` to `sink` from now on; `None` restores the
/// default (warnings and errors to standard error). `LevelFilter::Off` with a
/// sink silences baton.
pub fn set_sink(sink: Option<Sink>, max: LevelFilter) {
    install();
    let mut r = crate::foundations::sync::lock(route());
    r.max = if sink.is_some() {
        max
    } else {
        LevelFilter::Warn
    };
    r.sink = sink;
    if INSTALLED.load(Ordering::SeqCst) {
        log::set_max_level(r.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sink_gets_records_up_to_its_level_and_none_restores_stderr() {
        let seen: Arc<Mutex<Vec<(Level, String)>>> = Arc::default();
        let s = seen.clone();
        set_sink(
            Some(Arc::new(move |l: Level, _: &str, m: &str| {
                crate::foundations::sync::lock(&s).push((l, m.to_string()))
            })),
            LevelFilter::Info,
        );
        log::warn!(target: "baton::x", "w");
        log::info!(target: "baton::x", "i");
        log::debug!(target: "baton::x", "d");
        log::warn!(target: "other", "not ours");
        assert_eq!(
            *crate::foundations::sync::lock(&seen),
            vec![
                (Level::Warn, "w".to_string()),
                (Level::Info, "i".to_string())
            ]
        );
        // The bridge is this test binary's logger: `log`'s level follows the sink's.
        assert_eq!(log::max_level(), LevelFilter::Info);
        set_sink(None, LevelFilter::Trace);
        assert_eq!(
            crate::foundations::sync::lock(route()).max,
            LevelFilter::Warn
        );
        assert_eq!(log::max_level(), LevelFilter::Warn);
    }
}
