//! `-watch` of `baton holders` and `baton sessions`: a blocking-query loop that
//! prints the current state, then every change of it.
//!
//! Each round sends the read with `?index=<last X-Consul-Index>&wait=5m`
//! (consul-semantics §6.5); Consul holds it until something under the watched
//! path changes. The index fed back follows Consul's rule
//! ([`baton::next_index`]): if it went backwards (a server restarted with its
//! state lost, a snapshot restore) the next read starts over with 0, a
//! non-blocking read. A state is printed only when its rendering differs from
//! the one printed last (Consul may wake a blocking query for changes that do
//! not show). Connection errors, timeouts and 5xx answers are retried with
//! backoff (100 ms doubling to 5 s), said once on stderr, and said again when
//! Consul answers; other errors (a denied token, a key in another format) end
//! the command with exit 1. SIGINT, SIGTERM, SIGHUP and SIGQUIT end it with
//! exit 0, at once, even while a read is blocked; so does a closed stdout.

use std::io::Write;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baton::{CancelToken, ErrorKind, QueryOptions};

use crate::{child, exit};

/// How long Consul may hold one read (its own default, `default_query_time`).
pub const WAIT: Duration = Duration::from_secs(300);

/// Why a round of the watch failed.
#[derive(Debug)]
pub enum Fail {
    /// A Consul call failed while `doing` what it says; retried when
    /// [`retryable`].
    Consul {
        /// What was being done (`reading svc/x`).
        doing: String,
        /// The error (boxed: `Fail` travels in every round's `Result`).
        error: Box<baton::Error>,
    },
    /// What was read cannot be shown (a key in another format): not retried.
    Format(String),
}

impl Fail {
    /// A failed Consul call, `doing` what it says.
    pub fn consul(doing: impl Into<String>) -> impl FnOnce(baton::Error) -> Fail {
        let doing = doing.into();
        move |error| Fail::Consul {
            doing,
            error: Box::new(error),
        }
    }
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Consul { doing, error } => write!(f, "{doing}: {error}"),
            Fail::Format(m) => f.write_str(m),
        }
    }
}

/// One round's result: the rendered state (without a trailing newline) and
/// the `X-Consul-Index` of the blocking read it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The state, as printed.
    pub doc: String,
    /// The index of the answer (0 if it had none).
    pub index: u64,
}

/// Whether retrying may help: the server was unreachable or slow, or said it
/// cannot answer now (no cluster leader, a restart in progress: the core's
/// [`baton::Error::is_transient`]). Refusals (403, 400, an answer that cannot
/// be understood) are not retried.
pub fn retryable(e: &baton::Error) -> bool {
    e.is_transient() || matches!(e.kind(), ErrorKind::Connection | ErrorKind::Timeout)
}

/// Pauses between failed rounds: 100 ms doubling to 5 s.
#[derive(Debug, Default)]
struct Backoff(Option<Duration>);

impl Backoff {
    fn next(&mut self) -> Duration {
        let d = match self.0 {
            None => Duration::from_millis(100),
            Some(d) => (d * 2).min(Duration::from_secs(5)),
        };
        self.0 = Some(d);
        d
    }
}

/// Paces answers that made no progress early (a proxy or server that does
/// not block): the first such answer in a row costs nothing, later ones pause
/// with [`Backoff`]; an answer with progress, or one that took half the wait,
/// resets it. Against a real Consul it never pauses.
#[derive(Debug, Default)]
struct Pacer {
    early: u32,
    backoff: Backoff,
}

impl Pacer {
    /// The pause before the next read, after a read sent with index `sent`
    /// answered `got` after `took`.
    fn after(&mut self, sent: u64, got: u64, took: Duration) -> Duration {
        if got == 0 || (sent != 0 && got <= sent && took < WAIT / 2) {
            self.early += 1;
            if self.early > 1 {
                return self.backoff.next();
            }
        } else {
            self.early = 0;
            self.backoff = Backoff::default();
        }
        Duration::ZERO
    }
}

/// Blocks the terminating signals and starts the thread that takes them:
/// the token it returns is cancelled on SIGINT, SIGTERM, SIGHUP or SIGQUIT.
/// Call it before anything starts a thread (before the client is built), so
/// every thread inherits the mask.
pub fn stop_on_signals() -> Result<CancelToken, String> {
    let set = child::block_signals().map_err(|e| format!("cannot block signals: {e}"))?;
    let stop = CancelToken::new();
    let (tx, rx) = crossbeam_channel::unbounded();
    // The receiver lives as long as the program: the signal thread stops at its
    // first failed send, and a later SIGINT would then go untaken.
    std::mem::forget(rx);
    child::start_signal_thread(set, tx, stop.clone());
    Ok(stop)
}

/// The read options of a round: blocking on `index` unless it is 0.
pub fn options(index: u64, stop: &CancelToken) -> QueryOptions {
    let o = if index == 0 {
        QueryOptions::default()
    } else {
        QueryOptions::blocking(index, WAIT)
    };
    o.with_cancel(stop.clone())
}

/// `YYYY-MM-DDTHH:MM:SSZ` of a time (UTC; the civil calendar from days since
/// the epoch, Howard Hinnant's algorithm).
fn utc(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

/// The text printed for one state: with `-json` the document on one line;
/// otherwise a separator line (`=== <UTC time>, index N`) then the state.
fn block(fetched: &Fetched, as_json: bool, now: SystemTime) -> String {
    if as_json {
        format!("{}\n", fetched.doc)
    } else {
        format!(
            "=== {}, index {}\n{}\n",
            utc(now),
            fetched.index,
            fetched.doc
        )
    }
}

/// Runs the loop until a signal (exit 0), a closed stdout (exit 0) or an
/// error that retrying will not fix (exit 1). `what` names the watched thing
/// in messages; `fetch` does one round with the options it is given.
pub fn run(
    what: &str,
    as_json: bool,
    stop: &CancelToken,
    mut fetch: impl FnMut(&QueryOptions) -> Result<Fetched, Fail>,
) -> i32 {
    let mut index = 0u64;
    let mut last: Option<String> = None;
    let mut failing: Option<String> = None;
    let mut backoff = Backoff::default();
    let mut pacer = Pacer::default();
    let stdout = std::io::stdout();
    loop {
        if stop.is_cancelled() {
            return exit::OK;
        }
        let sent = Instant::now();
        let result = fetch(&options(index, stop));
        if stop.is_cancelled() {
            return exit::OK;
        }
        match result {
            Ok(f) => {
                if failing.take().is_some() {
                    eprintln!("baton: watching {what}: Consul answers again");
                }
                backoff = Backoff::default();
                let pause = pacer.after(index, f.index, sent.elapsed());
                index = baton::next_index(index, f.index);
                if last.as_deref() != Some(f.doc.as_str()) {
                    let text = block(&f, as_json, SystemTime::now());
                    let mut out = stdout.lock();
                    if out.write_all(text.as_bytes()).is_err() || out.flush().is_err() {
                        // Nobody reads any more (`| head -1`): done.
                        return exit::OK;
                    }
                    last = Some(f.doc);
                }
                if !pause.is_zero() && stop.wait_timeout(pause) {
                    return exit::OK;
                }
            }
            Err(Fail::Consul { error, .. }) if error.kind() == ErrorKind::Cancelled => {
                return exit::OK
            }
            Err(Fail::Consul { doing, error }) if retryable(&error) => {
                index = 0;
                let wait = backoff.next();
                let msg = format!("{doing}: {error}");
                if failing.as_deref() != Some(msg.as_str()) {
                    eprintln!(
                        "baton: watching {what}: {msg}; retrying with backoff (up to 5s apart)"
                    );
                    failing = Some(msg);
                }
                if stop.wait_timeout(wait) {
                    return exit::OK;
                }
            }
            Err(e) => {
                eprintln!("baton: watching {what}: {e}");
                return exit::ERROR;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400 + 3_661);
        assert_eq!(utc(t), "2000-02-29T01:01:01Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_798_761_599);
        assert_eq!(utc(t), "2026-12-31T23:59:59Z");
    }

    #[test]
    fn text_states_are_separated_and_json_is_one_line_each() {
        let f = Fetched {
            doc: "svc/x: lock, free".into(),
            index: 42,
        };
        assert_eq!(
            block(&f, false, UNIX_EPOCH),
            "=== 1970-01-01T00:00:00Z, index 42\nsvc/x: lock, free\n"
        );
        let f = Fetched {
            doc: r#"{"a":1}"#.into(),
            index: 42,
        };
        assert_eq!(block(&f, true, UNIX_EPOCH), "{\"a\":1}\n");
    }

    #[test]
    fn reads_block_on_the_last_index_and_start_over_at_zero() {
        let stop = CancelToken::new();
        let o = options(0, &stop);
        assert_eq!((o.index, o.wait), (0, None), "index 0 does not block");
        let o = options(17, &stop);
        assert_eq!((o.index, o.wait), (17, Some(WAIT)));
        assert!(o.cancel.is_some(), "a signal cuts a blocked read");
    }

    #[test]
    fn the_pacer_pauses_only_on_repeated_early_answers_without_progress() {
        let quick = Duration::from_millis(5);
        let mut p = Pacer::default();
        assert_eq!(p.after(0, 5, quick), Duration::ZERO);
        assert_eq!(p.after(5, 9, quick), Duration::ZERO);
        assert_eq!(p.after(9, 9, WAIT), Duration::ZERO, "a plain timeout");
        assert_eq!(p.after(9, 9, quick), Duration::ZERO, "the first is free");
        assert_eq!(p.after(9, 9, quick), Duration::from_millis(100));
        assert_eq!(p.after(9, 3, quick), Duration::from_millis(200));
        assert_eq!(p.after(0, 0, quick), Duration::from_millis(400));
        assert_eq!(p.after(9, 10, quick), Duration::ZERO, "progress resets");
        assert_eq!(p.after(10, 10, quick), Duration::ZERO);
    }

    #[test]
    fn backoff_doubles_to_five_seconds() {
        let mut b = Backoff::default();
        assert_eq!(b.next(), Duration::from_millis(100));
        assert_eq!(b.next(), Duration::from_millis(200));
        for _ in 0..10 {
            b.next();
        }
        assert_eq!(b.next(), Duration::from_secs(5));
    }
}
