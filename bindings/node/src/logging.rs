//! baton's log records in Node, which has no `log` logger of its own: the core's bridge
//! (`baton::log_sink`) is installed when the addon loads, so warnings and errors (a Consul
//! that cannot be reached, a session lost, ...) reach standard error as `baton warn: ...`
//! lines by default, and `setLogger` (lib/logging.js) routes them to a JavaScript function instead.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use log::{Level, LevelFilter};
use napi::bindgen_prelude::FnArgs;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::{Env, Result, Status};
use napi_derive::napi;

use crate::invalid;

/// The function `setLogger` gives: called on the JS thread with `(level, target, message)`.
/// Weak (unref'd): a log record on its way never keeps the process alive.
pub(crate) type LogFn = ThreadsafeFunction<
    FnArgs<(String, String, String)>,
    (),
    FnArgs<(String, String, String)>,
    Status,
    false,
    true,
>;

/// The environment whose function is the sink (0: none, records go to standard error). When
/// that environment ends (a worker thread, the process), records go to standard error again.
static SINK_ENV: AtomicUsize = AtomicUsize::new(0);

/// Runs when the addon is loaded into an environment: installs the core's bridge (once per
/// process; a no-op if the process already has a `log` logger) and forgets this
/// environment's sink when the environment ends.
#[napi(module_exports)]
pub fn init(env: Env) -> Result<()> {
    baton::log_sink::install();
    let id = env.raw() as usize;
    env.add_env_cleanup_hook((), move |()| {
        if SINK_ENV
            .compare_exchange(id, 0, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            baton::log_sink::set_sink(None, LevelFilter::Warn);
        }
    })?;
    Ok(())
}

fn level_filter(name: &str) -> Result<LevelFilter> {
    Ok(match name {
        "off" => LevelFilter::Off,
        "error" => LevelFilter::Error,
        "warn" => LevelFilter::Warn,
        "info" => LevelFilter::Info,
        "debug" => LevelFilter::Debug,
        "trace" => LevelFilter::Trace,
        other => {
            return Err(invalid(format!(
                "level must be 'off', 'error', 'warn', 'info', 'debug' or 'trace', got {other:?}"
            )))
        }
    })
}

fn level_name(l: Level) -> &'static str {
    match l {
        Level::Error => "error",
        Level::Warn => "warn",
        Level::Info => "info",
        Level::Debug => "debug",
        Level::Trace => "trace",
    }
}

/// Sends baton's log records up to `level` (default `"warn"`) to `sink(level, target,
/// message)`, called on the JS thread (never blocking baton's threads; records queued when
/// the environment ends are dropped). `null`: back to the default, warnings and errors to
/// standard error. One sink per process: the last call wins.
#[napi]
pub fn set_logger(
    env: Env,
    #[napi(ts_arg_type = "((level: string, target: string, message: string) => void) | null")]
    sink: Option<LogFn>,
    level: Option<String>,
) -> Result<()> {
    let max = level_filter(level.as_deref().unwrap_or("warn"))?;
    match sink {
        None => {
            SINK_ENV.store(0, Ordering::SeqCst);
            baton::log_sink::set_sink(None, LevelFilter::Warn);
        }
        Some(f) => {
            let f = Arc::new(f);
            SINK_ENV.store(env.raw() as usize, Ordering::SeqCst);
            baton::log_sink::set_sink(
                Some(Arc::new(move |l: Level, target: &str, message: &str| {
                    // Non-blocking: a record never waits for the JS thread.
                    f.call(
                        (
                            level_name(l).to_string(),
                            target.to_string(),
                            message.to_string(),
                        )
                            .into(),
                        ThreadsafeFunctionCallMode::NonBlocking,
                    );
                })),
                max,
            );
        }
    }
    Ok(())
}
