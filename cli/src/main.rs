//! `baton`: run a process under a Consul lock, semaphore slot or leadership,
//! wire-compatible with `consul lock`, and stop it the moment the holding is
//! lost. Also: who leads, who holds, and session housekeeping.

mod args;
mod child;
mod connect;
mod exit;
mod gopath;
mod holding;
mod info;
mod run;
mod watch;

use args::Flag;

/// Prints core warnings (and with `-verbose`, core info) on stderr.
struct Ui {
    level: log::LevelFilter,
}

impl log::Log for Ui {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= self.level
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!("baton: {}: {}", r.level().as_str().to_lowercase(), r.args());
        }
    }

    fn flush(&self) {}
}

const EXIT_CODES: &str = "\
Exit codes:
  0      the command ran (with -child-exit-code: and exited 0)
  1      usage, configuration, connection or Consul error; a key in another format
  75     -timeout passed before the lock, slot or leadership was acquired
  76     the holding was lost while the command ran; the command was stopped
  126    the command could not be executed (-shell=false)
  127    the command was not found (-shell=false)
  128+N  baton got signal N before the command started
  other  with -child-exit-code: the command's own status (128+N if signal N killed it)
";

const TOP_HELP: &str = "\
Usage: baton <command> [options] [args]

Run a process under a Consul lock, semaphore slot or leadership, and stop it the
moment the holding is lost. Keys and formats are those of `consul lock`, so a
`consul lock` on one host and a `baton lock` on another exclude each other.

Commands:
  lock      Run a command holding a lock (or one of N semaphore slots) on a prefix
  elect     Run a command only while leader of a key; campaign again after a loss
  leader    Show the leader of an election key (-watch: follow changes)
  holders   Show who holds the lock or the semaphore slots at a prefix (-watch)
  sessions  List sessions, show one (-watch: follow changes), or destroy one

Configuration comes from the CONSUL_* environment variables (CONSUL_HTTP_ADDR,
CONSUL_HTTP_TOKEN, CONSUL_HTTP_TOKEN_FILE, CONSUL_HTTP_SSL, CONSUL_CACERT, ...)
and the consul CLI's flags (-http-addr, -token, ...).

Run `baton <command> -help` for a command's options.
";

const LOCK_HELP: &str = "\
Usage: baton lock [options] PREFIX [--] COMMAND [ARGS...]

  Acquires a lock or semaphore at PREFIX and runs COMMAND while it is held,
  exactly where and how `consul lock` does: with -n 1 (the default) the lock is
  the key PREFIX/.lock with Go's api.Lock flags; with -n N > 1 it is Go's
  api.Semaphore on PREFIX (contender keys PREFIX/<session>, holders in
  PREFIX/.lock). A `consul lock` elsewhere on the same PREFIX and -n excludes
  this one, and the other way round.

  The command runs in its own process group, with CONSUL_LOCK_HELD=true,
  BATON_SEQUENCER (<lock index>:<token>:<session>:<key>) and
  BATON_FENCING_TOKEN (a number that only grows from one holder to the next)
  in its environment. For a semaphore they describe our contender key.

  When the holding is lost - the session is invalidated, the key is deleted or
  taken, or no renew succeeded before the local lease deadline (last renew
  sent + TTL - min(TTL/10, 2s)) - the command's process group gets SIGTERM at
  once and SIGKILL after -kill-grace. SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
  SIGUSR2 and SIGWINCH sent to baton are passed on to the group; the first four
  also make baton stop, sending SIGKILL after -kill-grace if the command has not
  exited. When the command exits, whatever it left running in its group is
  stopped too, then the lock is released, PREFIX/.lock is removed if nobody
  uses it (as consul lock does) and the session is destroyed. If baton itself
  dies, even of SIGKILL, a small guard process it started with the command
  sends the command's process group SIGTERM, and SIGKILL after -kill-grace, so
  nothing the command started outlives baton by more than that (on Linux the
  kernel also kills the command's first process at once).

  With -shell (the default) the command runs as $SHELL -c \"...\". Shells that
  do not replace themselves with the command (dash, /bin/sh on Debian) die of a
  SIGUSR1 or SIGUSR2 passed on to the group; start the command with `exec`, or
  use -shell=false, when it takes those signals.

Options:
";

const ELECT_HELP: &str = "\
Usage: baton elect [options] KEY [--] COMMAND [ARGS...]

  Campaigns for leadership of KEY (Consul's leader-election recipe: the key is
  acquired with Go's api.Lock flags and holds the leader's -value) and runs
  COMMAND only while leader, with BATON_LEADER=true, BATON_SEQUENCER and
  BATON_FENCING_TOKEN in its environment. When leadership is lost the command
  is stopped (SIGTERM at once, SIGKILL after -kill-grace) and baton campaigns
  again, or exits 76 with -once. When the command exits, baton steps down
  (releasing the key, so no lock-delay applies) and exits.

Options:
";

const LEADER_HELP: &str = "\
Usage: baton leader [options] KEY

  Prints the current leader of the election on KEY (written by baton elect, by
  Go's api.Lock or by any client of Consul's leader-election recipe): its value,
  session, node, and the key's lock index and token. With -watch, keeps running
  and prints every change.

Options:
";

const HOLDERS_HELP: &str = "\
Usage: baton holders [options] PREFIX

  Shows who holds the lock (PREFIX/.lock, or PREFIX itself when it is a lock or
  election key) or the semaphore slots at PREFIX: each holder's session, name,
  node, TTL and lock-delay, and how long the slot could stay taken if the holder
  stopped renewing now (Consul keeps a session up to 2 x TTL after its last
  renew, then keeps its keys for the lock-delay). Semaphore holders whose
  contender key is gone are marked stale.

  With -watch, keeps running: prints the current state, then the new state
  after every change (blocking queries on PREFIX); each state starts with a
  line `=== <UTC time>, index <X-Consul-Index>`, or with -json is one JSON
  document per line. Connection errors are retried with backoff (said on
  stderr); SIGINT or SIGTERM ends it with exit 0.

Options:
";

const SESSIONS_HELP: &str = "\
Usage: baton sessions [options] [list]
       baton sessions [options] info ID
       baton sessions [options] destroy ID

  Lists the sessions Consul knows, shows one, or destroys one (releasing or
  deleting the keys it holds, per its behavior; lock-delay applies).

  With -watch (list and info), keeps running: prints the current state, then
  the new state after every change (blocking queries); each state starts with
  a line `=== <UTC time>, index <X-Consul-Index>`, or with -json is one JSON
  document per line. Connection errors are retried with backoff (said on
  stderr); SIGINT or SIGTERM ends it with exit 0.

Options:
";

fn help(text: &str, flags: &[Flag], codes: bool) -> String {
    let mut s = String::from(text);
    s.push_str(&args::flags_help(flags));
    if codes {
        s.push('\n');
        s.push_str(EXIT_CODES);
    }
    s
}

fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = argv.first() else {
        eprint!("{TOP_HELP}");
        std::process::exit(exit::ERROR);
    };
    let rest = &argv[1..];
    if cmd == child::GUARD_COMMAND {
        // The guard of a command baton runs (child.rs), started by baton itself.
        std::process::exit(child::guard_main(rest));
    }
    let (flags, text, positionals, wants_command, codes): (Vec<Flag>, &str, usize, bool, bool) =
        match cmd.as_str() {
            "lock" => (run::lock_flags(), LOCK_HELP, 1, true, true),
            "elect" => (run::elect_flags(), ELECT_HELP, 1, true, true),
            "leader" => (info::leader_flags(), LEADER_HELP, 0, false, false),
            "holders" => (info::json_flags(), HOLDERS_HELP, 0, false, false),
            "sessions" => (info::json_flags(), SESSIONS_HELP, 0, false, false),
            "-h" | "-help" | "--help" | "help" => {
                print!("{TOP_HELP}");
                std::process::exit(exit::OK);
            }
            "-version" | "--version" | "version" => {
                println!("baton {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(exit::OK);
            }
            other => {
                eprintln!("baton: unknown command {other:?}\n");
                eprint!("{TOP_HELP}");
                std::process::exit(exit::ERROR);
            }
        };
    let parsed = match args::parse(rest, &flags, positionals, wants_command) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("baton {cmd}: {e}\n");
            eprint!("{}", help(text, &flags, codes));
            std::process::exit(exit::ERROR);
        }
    };
    if parsed.help {
        print!("{}", help(text, &flags, codes));
        std::process::exit(exit::OK);
    }
    let level = if parsed.flag("verbose", false) {
        log::LevelFilter::Info
    } else {
        log::LevelFilter::Warn
    };
    static UI: std::sync::OnceLock<Ui> = std::sync::OnceLock::new();
    let ui = UI.get_or_init(|| Ui { level });
    if log::set_logger(ui).is_ok() {
        log::set_max_level(level);
    }
    let code = match cmd.as_str() {
        "lock" => run::lock(&parsed),
        "elect" => run::elect(&parsed),
        "leader" => info::leader(&parsed),
        "holders" => info::holders(&parsed),
        _ => info::sessions(&parsed),
    };
    std::process::exit(code);
}
