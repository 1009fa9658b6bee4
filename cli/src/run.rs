//! `baton lock` and `baton elect`: run a command while holding a lock, a
//! semaphore slot or leadership, and stop it when the holding is lost.

use std::sync::Arc;
use std::time::Duration;

use baton::{
    Behavior, CancelToken, Client, ElectionOptions, ErrorKind, LockOptions, SemaphoreOptions,
    Session, SessionOptions,
};
use crossbeam_channel::{Receiver, Sender};
use nix::sys::signal::Signal;

use crate::args::{self, Flag, Kind, Parsed};
use crate::child::{self, ChildSpec, Ending, Event, Outcome};
use crate::holding::Holding;
use crate::{connect, exit, gopath};

/// How long the clean-up after a run may take before baton exits anyway.
const GIVE_BACK_TIMEOUT: Duration = Duration::from_secs(5);

/// How long closing the client may take: short when Consul just failed to
/// answer the clean-up (it would not answer the close either).
fn close_timeout(answered: bool) -> Duration {
    if answered {
        GIVE_BACK_TIMEOUT
    } else {
        Duration::from_secs(1)
    }
}

/// Flags shared by `lock` and `elect`.
const RUN_FLAGS: &[Flag] = &[
    Flag {
        name: "timeout",
        kind: Kind::Value,
        value_name: "DURATION",
        help: "Give up if the lock (or, for elect, each campaign) does not succeed within\nthis time (exit 75). 0, the default, waits for ever.",
    },
    Flag {
        name: "try",
        kind: Kind::Value,
        value_name: "DURATION",
        help: "Deprecated alias of -timeout (as in consul lock).",
    },
    Flag {
        name: "name",
        kind: Kind::Value,
        value_name: "NAME",
        help: "Session name (default: \"baton <lock|elect> for '<command>' at '<key>'\").",
    },
    Flag {
        name: "shell",
        kind: Kind::Bool,
        value_name: "",
        help: "Run the command as $SHELL -c \"<words joined by spaces>\" (default true, as\nconsul lock); -shell=false runs the words directly.",
    },
    Flag {
        name: "pass-stdin",
        kind: Kind::Bool,
        value_name: "",
        help: "Give the command baton's stdin (default: /dev/null).",
    },
    Flag {
        name: "child-exit-code",
        kind: Kind::Bool,
        value_name: "",
        help: "Exit with the command's own status (128+N if signal N killed it).\nWithout it baton exits 0 when the command ran to its end, as consul lock does.",
    },
    Flag {
        name: "kill-grace",
        kind: Kind::Value,
        value_name: "DURATION",
        help: "Time between SIGTERM and SIGKILL when the holding is lost or baton is\nasked to stop (default 5s; keep it below -lock-delay).",
    },
    Flag {
        name: "ttl",
        kind: Kind::Value,
        value_name: "DURATION",
        help: "Session TTL (default 15s, as consul lock). The child is stopped at once when\nno renew has succeeded for TTL - min(TTL/10, 2s).",
    },
    Flag {
        name: "lock-delay",
        kind: Kind::Value,
        value_name: "DURATION",
        help: "Session lock-delay (default 15s, Consul's default): after the session is\ninvalidated nobody can take the key for this long.",
    },
    Flag {
        name: "monitor-retry",
        kind: Kind::Value,
        value_name: "N",
        help: "Accepted for compatibility with consul lock and ignored: baton keeps the\nholding through Consul errors until the local lease deadline, whatever N is.",
    },
    Flag {
        name: "verbose",
        kind: Kind::Bool,
        value_name: "",
        help: "Print progress messages on stderr.",
    },
];

const LOCK_ONLY: &[Flag] = &[Flag {
    name: "n",
    kind: Kind::Value,
    value_name: "N",
    help: "Number of holders allowed at once (default 1: a lock on PREFIX/.lock;\nmore: a semaphore on PREFIX, as consul lock -n).",
}];

const ELECT_ONLY: &[Flag] = &[
    Flag {
        name: "value",
        kind: Kind::Value,
        value_name: "VALUE",
        help: "The value written to KEY while leading (default: \"<hostname> pid <pid>\").",
    },
    Flag {
        name: "once",
        kind: Kind::Bool,
        value_name: "",
        help: "Exit (76) when leadership is lost instead of campaigning again.",
    },
];

/// All flags of `baton lock`.
pub fn lock_flags() -> Vec<Flag> {
    let own: Vec<Flag> = LOCK_ONLY.iter().chain(RUN_FLAGS.iter()).copied().collect();
    connect::with_http(&own)
}

/// All flags of `baton elect`.
pub fn elect_flags() -> Vec<Flag> {
    let own: Vec<Flag> = ELECT_ONLY.iter().chain(RUN_FLAGS.iter()).copied().collect();
    connect::with_http(&own)
}

/// Settings common to lock and elect, validated.
struct RunSettings {
    timeout: Option<Duration>,
    grace: Duration,
    ttl: Duration,
    lock_delay: Duration,
    shell: bool,
    pass_stdin: bool,
    child_exit_code: bool,
    verbose: bool,
}

fn run_settings(p: &Parsed) -> Result<RunSettings, args::UsageError> {
    let timeout = match p.get("timeout") {
        Some(_) => p.duration("timeout", Duration::ZERO)?,
        None => p.duration("try", Duration::ZERO)?,
    };
    p.uint("monitor-retry", 3)?;
    let s = RunSettings {
        timeout: (!timeout.is_zero()).then_some(timeout),
        grace: p.duration("kill-grace", Duration::from_secs(5))?,
        ttl: p.duration("ttl", Duration::from_secs(15))?,
        lock_delay: p.duration("lock-delay", Duration::from_secs(15))?,
        shell: p.flag("shell", true),
        pass_stdin: p.flag("pass-stdin", false),
        child_exit_code: p.flag("child-exit-code", false),
        verbose: p.flag("verbose", false),
    };
    if s.ttl.is_zero() {
        return Err(args::UsageError(
            "-ttl must be positive: a session without TTL would never let the lock go if baton died"
                .into(),
        ));
    }
    if s.grace >= s.lock_delay {
        eprintln!(
            "baton: warning: -kill-grace {} is not below -lock-delay {}: after a session invalidation the next holder may start before this command is killed",
            baton::format_go_duration(s.grace),
            baton::format_go_duration(s.lock_delay)
        );
    }
    Ok(s)
}

/// What one run of the supervisor needs.
struct Ctx {
    client: Client,
    events: Receiver<Event>,
    tx: Sender<Event>,
    shutdown: CancelToken,
    settings: RunSettings,
}

impl Ctx {
    fn say(&self, m: &str) {
        eprintln!("baton: {m}");
    }

    fn debug(&self, m: &str) {
        if self.settings.verbose {
            eprintln!("baton: {m}");
        }
    }

    /// The signal that interrupted us, if any (drains queued events).
    fn pending_stop(&self) -> Option<Signal> {
        let mut stop = None;
        while let Ok(ev) = self.events.try_recv() {
            if let Event::Signal(s) = ev {
                if child::is_terminating(s) && stop.is_none() {
                    stop = Some(s);
                }
            }
        }
        stop
    }

    fn create_session(&self, name: &str, behavior: Behavior) -> Result<Session, String> {
        let opts = SessionOptions::new()
            .name(name)
            .ttl(self.settings.ttl)
            .lock_delay(self.settings.lock_delay)
            .behavior(behavior);
        let s = self
            .client
            .create_session(&opts)
            .map_err(|e| format!("Error creating session: {e}"))?;
        self.debug(&format!(
            "session {} created (TTL {}, lock-delay {})",
            s.id(),
            baton::format_go_duration(self.settings.ttl),
            baton::format_go_duration(self.settings.lock_delay)
        ));
        Ok(s)
    }

    /// Releases the holding, removes the coordination key when free (`cleanup`,
    /// consul lock's `Destroy` step) and destroys the session, in that order (a
    /// release before the destroy means no lock-delay for the next holder).
    /// Bounded: when Consul does not answer (the loss may have come from that),
    /// baton does not hang on it; the session then expires on its own.
    /// Returns whether Consul answered in time.
    fn give_back(&self, holding: &Holding, session: &Session, cleanup: bool) -> bool {
        let (h, s, verbose) = (holding.clone(), session.clone(), self.settings.verbose);
        let (tx, rx) = crossbeam_channel::bounded(1);
        let spawned = std::thread::Builder::new()
            .name("baton-give-back".into())
            .spawn(move || {
                let problem = h.release_and_clean(cleanup);
                if let Err(e) = s.destroy() {
                    if verbose {
                        eprintln!("baton: session destroy: {e}");
                    }
                }
                let _ = tx.send(problem);
            });
        if spawned.is_err() {
            self.say("warning: cannot start the clean-up thread");
            return false;
        }
        match rx.recv_timeout(GIVE_BACK_TIMEOUT) {
            Ok(Some(problem)) => self.say(&problem),
            Ok(None) => self.debug("released; session destroyed"),
            Err(_) => {
                self.say(&format!(
                    "warning: Consul did not confirm the release within {}; the session {} expires on its own",
                    baton::format_go_duration(GIVE_BACK_TIMEOUT),
                    session.id()
                ));
                return false;
            }
        }
        true
    }

    /// Ends the program: closes the client (which destroys the sessions it
    /// created and retries unconfirmed releases) and returns `code`.
    fn finish(&self, code: i32) -> i32 {
        self.finish_within(code, GIVE_BACK_TIMEOUT)
    }

    /// [`Ctx::finish`] with a bound for the close.
    fn finish_within(&self, code: i32, timeout: Duration) -> i32 {
        let report = self.client.close_report(timeout);
        if !report.is_complete() {
            // In words (the report's Display), not a debug struct.
            self.say(&format!(
                "warning: clean-up not confirmed by Consul: {report}"
            ));
        }
        code
    }
}

/// Starts everything a run needs: blocks signals (first, before any thread),
/// the signal thread, and the client.
fn start(p: &Parsed, settings: RunSettings) -> Result<Ctx, i32> {
    let set = match child::block_signals() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baton: cannot block signals: {e}");
            return Err(exit::ERROR);
        }
    };
    let (tx, events) = crossbeam_channel::unbounded();
    let shutdown = CancelToken::new();
    child::start_signal_thread(set, tx.clone(), shutdown.clone());
    let client = connect::client(p).map_err(|e| {
        eprintln!("baton: {e}");
        exit::ERROR
    })?;
    Ok(Ctx {
        client,
        events,
        tx,
        shutdown,
        settings,
    })
}

/// Starts a thread that turns the end of `holding` into an [`Event::Lost`].
fn watch(holding: &Holding, generation: u64, tx: &Sender<Event>) -> CancelToken {
    let stop = CancelToken::new();
    let (h, s, tx) = (holding.clone(), stop.clone(), tx.clone());
    let spawned = std::thread::Builder::new()
        .name("baton-loss".into())
        .spawn(move || {
            if let Some(why) = h.wait_lost(&s) {
                let _ = tx.send(Event::Lost { generation, why });
            }
        });
    if let Err(e) = spawned {
        eprintln!("baton: cannot start the loss watcher: {e}");
    }
    stop
}

/// Runs the child under `holding` and returns how it ended.
fn run_child(
    ctx: &Ctx,
    holding: &Holding,
    generation: u64,
    argv: &[String],
    contender: Option<&str>,
    extra_env: &[(&str, String)],
) -> Result<Outcome, child::SpawnError> {
    if !holding.is_held() {
        // Lost between the acquisition and now: never start the command.
        return Ok(Outcome {
            ending: Ending::Lost("lost before the command started".into()),
            status: None,
        });
    }
    let stop = watch(holding, generation, &ctx.tx);
    let mut env = vec![("CONSUL_LOCK_HELD".to_string(), "true".to_string())];
    if let Some(seq) = holding.sequencer(&ctx.client, contender) {
        env.push(("BATON_SEQUENCER".into(), seq.to_string()));
        env.push(("BATON_FENCING_TOKEN".into(), seq.token.to_string()));
        ctx.debug(&format!("holding: sequencer {seq}"));
    }
    env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.clone())));
    let spec = ChildSpec {
        argv: argv.to_vec(),
        shell: ctx.settings.shell,
        pass_stdin: ctx.settings.pass_stdin,
        env,
        kill_grace: ctx.settings.grace,
    };
    let mut running = match child::spawn(&spec, ctx.tx.clone()) {
        Ok(r) => r,
        Err(e) => {
            stop.cancel();
            return Err(e);
        }
    };
    ctx.debug(&format!("child started: pid {}", running.pid()));
    let say = |m: &str| ctx.say(m);
    let outcome = child::supervise(
        &mut running,
        &ctx.events,
        generation,
        ctx.settings.grace,
        &say,
    );
    stop.cancel();
    ctx.debug(&format!(
        "child ended ({:?}), status {:?}",
        outcome.ending, outcome.status
    ));
    Ok(outcome)
}

/// The exit code for an outcome.
fn exit_code(ctx: &Ctx, outcome: &Outcome) -> i32 {
    match &outcome.ending {
        Ending::Lost(_) => exit::LOST,
        Ending::Exited | Ending::Signal(_) => {
            if ctx.settings.child_exit_code {
                outcome
                    .status
                    .as_ref()
                    .map_or(exit::ERROR, child::status_code)
            } else {
                exit::OK
            }
        }
    }
}

/// Which acquisitions failed how.
enum Acquired {
    Yes,
    TimedOut,
    Interrupted(Signal),
    Failed(String),
}

fn acquired(ctx: &Ctx, r: baton::Result<bool>) -> Acquired {
    match r {
        Ok(true) => match ctx.pending_stop() {
            // Shut down while the acquisition completed: give it back at once.
            Some(sig) => Acquired::Interrupted(sig),
            None => Acquired::Yes,
        },
        Ok(false) => Acquired::TimedOut,
        Err(e) if e.kind() == ErrorKind::Cancelled || ctx.shutdown.is_cancelled() => {
            Acquired::Interrupted(ctx.pending_stop().unwrap_or(Signal::SIGTERM))
        }
        Err(e) => Acquired::Failed(format!("Lock acquisition failed: {e}")),
    }
}

/// `baton lock`.
pub fn lock(p: &Parsed) -> i32 {
    if p.positionals.is_empty() || p.command.is_empty() {
        eprintln!("baton: Key prefix and child command must be specified");
        return exit::ERROR;
    }
    let n = match p.uint("n", 1) {
        Ok(0) => {
            eprintln!("baton: Lock holder limit must be positive");
            return exit::ERROR;
        }
        Ok(n) => n,
        Err(e) => {
            eprintln!("baton: {e}");
            return exit::ERROR;
        }
    };
    let prefix = p.positionals[0].trim_start_matches('/').to_string();
    if prefix.is_empty() {
        eprintln!("baton: the key prefix is empty");
        return exit::ERROR;
    }
    let settings = match run_settings(p) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baton: {e}");
            return exit::ERROR;
        }
    };
    let name = p
        .get("name")
        .map(String::from)
        .unwrap_or_else(|| format!("baton lock for '{}' at '{}'", p.command.join(" "), prefix));
    let ctx = match start(p, settings) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let behavior = if n == 1 {
        Behavior::Release
    } else {
        Behavior::Delete
    };
    let session = match ctx.create_session(&name, behavior) {
        Ok(s) => s,
        Err(e) => {
            ctx.say(&e);
            return ctx.finish(exit::ERROR);
        }
    };
    let lock_key = gopath::join(&prefix, ".lock");
    let (holding, contender) = if n == 1 {
        ctx.debug(&format!("setting up lock at path: {lock_key}"));
        match ctx
            .client
            .lock_with(&lock_key, LockOptions::new().session(session.clone()))
        {
            Ok(l) => (Holding::Lock(Arc::new(l)), None),
            Err(e) => {
                ctx.say(&format!("Lock setup failed: {e}"));
                return ctx.finish(exit::ERROR);
            }
        }
    } else {
        ctx.debug(&format!(
            "setting up semaphore (limit {n}) at prefix: {prefix}"
        ));
        match ctx.client.semaphore_with(
            &prefix,
            n,
            SemaphoreOptions::new().session(session.clone()),
        ) {
            Ok(s) => (
                Holding::Semaphore(Arc::new(s)),
                Some(gopath::join(&prefix, session.id())),
            ),
            Err(e) => {
                ctx.say(&format!("Lock setup failed: {e}"));
                return ctx.finish(exit::ERROR);
            }
        }
    };
    ctx.debug("attempting lock acquisition");
    let r = match &holding {
        Holding::Lock(l) => l.acquire(ctx.settings.timeout, Some(&ctx.shutdown)),
        Holding::Semaphore(s) => s.acquire(ctx.settings.timeout, Some(&ctx.shutdown)),
        Holding::Election(_) => unreachable!("lock mode holds a lock or a semaphore"),
    };
    let code = match acquired(&ctx, r) {
        Acquired::Yes => {
            ctx.debug("lock acquired");
            let outcome = run_child(&ctx, &holding, 1, &p.command, contender.as_deref(), &[]);
            match outcome {
                Ok(o) => exit_code(&ctx, &o),
                Err(e) => {
                    ctx.say(&e.message);
                    e.code
                }
            }
        }
        Acquired::TimedOut => {
            ctx.say(&format!(
                "timeout: the lock on {prefix} was not acquired within {}",
                baton::format_go_duration(ctx.settings.timeout.unwrap_or_default())
            ));
            exit::TIMEOUT
        }
        Acquired::Interrupted(sig) => {
            ctx.say(&format!(
                "Shutdown triggered ({sig}) during lock acquisition"
            ));
            128 + sig as i32
        }
        Acquired::Failed(msg) => {
            ctx.say(&msg);
            exit::ERROR
        }
    };
    let answered = ctx.give_back(&holding, &session, true);
    ctx.finish_within(code, close_timeout(answered))
}

fn default_value() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "unknown-host".into());
    format!("{host} pid {}", std::process::id())
}

/// `baton elect`.
pub fn elect(p: &Parsed) -> i32 {
    if p.positionals.is_empty() || p.command.is_empty() {
        eprintln!("baton: Election key and child command must be specified");
        return exit::ERROR;
    }
    let key = p.positionals[0].trim_start_matches('/').to_string();
    if key.is_empty() {
        eprintln!("baton: the election key is empty");
        return exit::ERROR;
    }
    let settings = match run_settings(p) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("baton: {e}");
            return exit::ERROR;
        }
    };
    let once = p.flag("once", false);
    let value = p
        .get("value")
        .map(String::from)
        .unwrap_or_else(default_value);
    let name = p
        .get("name")
        .map(String::from)
        .unwrap_or_else(|| format!("baton elect for '{}' at '{}'", p.command.join(" "), key));
    let ctx = match start(p, settings) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let mut generation = 0;
    let mut session: Option<Session> = None;
    loop {
        generation += 1;
        // A new session when the last one was lost (or for the first campaign).
        let s = match session.take() {
            Some(s) if s.is_valid() => s,
            old => {
                if let Some(o) = old {
                    let _ = o.destroy();
                }
                match ctx.create_session(&name, Behavior::Release) {
                    Ok(s) => s,
                    Err(e) => {
                        ctx.say(&e);
                        return ctx.finish(exit::ERROR);
                    }
                }
            }
        };
        session = Some(s.clone());
        let election = match ctx
            .client
            .election_with(&key, ElectionOptions::new().session(s.clone()))
        {
            Ok(e) => Arc::new(e),
            Err(e) => {
                ctx.say(&format!("Election setup failed: {e}"));
                return ctx.finish(exit::ERROR);
            }
        };
        let timeout = ctx.settings.timeout;
        ctx.debug(&format!("campaigning on {key} as {value:?}"));
        let r = election.campaign(value.as_bytes(), timeout, Some(&ctx.shutdown));
        let holding = Holding::Election(election.clone());
        let code = match acquired(&ctx, r) {
            Acquired::Yes => {
                ctx.debug("elected");
                let env = [("BATON_LEADER", "true".to_string())];
                match run_child(&ctx, &holding, generation, &p.command, None, &env) {
                    Ok(o) => match &o.ending {
                        Ending::Lost(_) if !once && !ctx.shutdown.is_cancelled() => {
                            let _ = holding.release_and_clean(false);
                            ctx.say("leadership lost: campaigning again");
                            continue;
                        }
                        _ => exit_code(&ctx, &o),
                    },
                    Err(e) => {
                        ctx.say(&e.message);
                        e.code
                    }
                }
            }
            Acquired::TimedOut => {
                ctx.say(&format!(
                    "timeout: not elected on {key} within {}",
                    baton::format_go_duration(ctx.settings.timeout.unwrap_or_default())
                ));
                exit::TIMEOUT
            }
            Acquired::Interrupted(sig) => {
                ctx.say(&format!("Shutdown triggered ({sig}) during the campaign"));
                128 + sig as i32
            }
            Acquired::Failed(msg) => {
                ctx.say(&msg);
                exit::ERROR
            }
        };
        let answered = ctx.give_back(&holding, &s, false);
        return ctx.finish_within(code, close_timeout(answered));
    }
}
