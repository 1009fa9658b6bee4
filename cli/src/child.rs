//! The child process: starting it in its own process group, forwarding
//! signals to it, and stopping it (SIGTERM at once, SIGKILL after a grace
//! period) when the holding is lost.
//!
//! Signals are handled without `unsafe` signal handlers: `main` blocks the
//! signals below before any thread starts (every thread inherits the mask), and
//! one thread takes them with `sigwait`. The child gets an empty mask between
//! fork and exec (see `child_setup`).
//!
//! Nothing the command started may outlive `baton`, even a `baton` killed with
//! SIGKILL: the kernel kills the command's first process then (Linux's
//! parent-death signal), but what that process started (a shell's children)
//! would be reparented and run on. So each command has a guard: a small process
//! (`baton __guard`, in a process group of its own, so that signals to baton's
//! group do not reach it) that holds one end of a socket whose other end only
//! baton holds. It learns the command's process group from the command itself
//! (written between fork and exec), waits for the socket to close (baton
//! exited, however it died), and if the group still has processes then, sends
//! it SIGTERM, and SIGKILL after the kill grace. When baton ends normally it
//! has already emptied the group, and the guard exits at once.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baton::CancelToken;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use nix::sys::signal::{killpg, SigSet, Signal};
use nix::unistd::Pid;

use crate::exit;

/// Signals `baton` takes and passes on to the child's process group.
pub const FORWARDED: &[Signal] = &[
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// Whether a forwarded signal asks `baton` to stop (after the child).
pub fn is_terminating(s: Signal) -> bool {
    matches!(
        s,
        Signal::SIGINT | Signal::SIGTERM | Signal::SIGHUP | Signal::SIGQUIT
    )
}

/// Something the supervising loop reacts to.
#[derive(Debug)]
pub enum Event {
    /// The child exited.
    Child(ExitStatus),
    /// Holding number `generation` was lost, for the reason given.
    Lost {
        /// Which holding (an election campaigns more than once).
        generation: u64,
        /// Human-readable reason.
        why: String,
    },
    /// `baton` received a signal.
    Signal(Signal),
}

/// Blocks the forwarded signals in the calling thread; call it first thing in
/// `main`, before any thread exists, so that every thread inherits the mask.
pub fn block_signals() -> io::Result<SigSet> {
    let mut set = SigSet::empty();
    for s in FORWARDED {
        set.add(*s);
    }
    set.thread_block().map_err(io::Error::from)?;
    Ok(set)
}

/// Starts the thread that takes the blocked signals: each becomes an
/// [`Event::Signal`]; terminating ones also cancel `shutdown` (which interrupts
/// an acquisition in progress).
pub fn start_signal_thread(set: SigSet, tx: Sender<Event>, shutdown: CancelToken) {
    let spawned = std::thread::Builder::new()
        .name("baton-signals".into())
        .spawn(move || loop {
            match set.wait() {
                Ok(sig) => {
                    // The event first: whoever wakes on the cancel finds it queued.
                    let sent = tx.send(Event::Signal(sig)).is_ok();
                    if is_terminating(sig) {
                        shutdown.cancel();
                    }
                    if !sent {
                        return;
                    }
                }
                Err(e) => {
                    eprintln!("baton: sigwait failed: {e}");
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("baton: cannot start the signal thread: {e}");
    }
}

/// How to start the child.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// The command words.
    pub argv: Vec<String>,
    /// Run `$SHELL -c "<argv joined by spaces>"` (consul lock's default).
    pub shell: bool,
    /// Give the child our stdin (otherwise it reads from /dev/null).
    pub pass_stdin: bool,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
    /// Time between SIGTERM and SIGKILL, also for the guard (baton died).
    pub kill_grace: Duration,
}

/// A child that could not be started, with the exit code to report
/// (126: cannot execute, 127: not found, as shells do).
#[derive(Debug)]
pub struct SpawnError {
    /// Exit code for `baton`.
    pub code: i32,
    /// What went wrong.
    pub message: String,
}

/// A started child.
#[derive(Debug)]
pub struct Running {
    pgid: Pid,
    exited: Arc<AtomicBool>,
    /// Whether SIGTERM went to the group already.
    termed: bool,
    /// Whether SIGKILL went to the group already.
    killed: bool,
    /// Stops the group if baton dies; released (and reaped) when this is dropped.
    _guard: Option<Guard>,
}

/// The hidden command line of the guard process: `baton __guard GRACE_MS BATON_PID`.
pub const GUARD_COMMAND: &str = "__guard";

/// Baton's side of a command's guard process.
#[derive(Debug)]
struct Guard {
    /// Closing it (dropping it, or baton's death) tells the guard that baton is gone.
    end: Option<UnixStream>,
    process: Option<Child>,
}

impl Guard {
    /// Starts the guard of a command that will get SIGKILL `grace` after SIGTERM.
    fn start(grace: Duration) -> io::Result<Guard> {
        let (ours, theirs) = UnixStream::pair()?;
        let theirs = OwnedFd::from(theirs);
        let mut last = io::Error::from(io::ErrorKind::NotFound);
        for exe in guard_exes() {
            let mut cmd = Command::new(&exe);
            cmd.arg(GUARD_COMMAND)
                .arg(grace.as_millis().to_string())
                .arg(std::process::id().to_string())
                .stdin(Stdio::from(theirs.try_clone()?))
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                // Not in baton's process group: `kill -- -<baton's group>` or a
                // terminal's Ctrl-C must not take the guard with it.
                .process_group(0);
            match cmd.spawn() {
                Ok(process) => {
                    return Ok(Guard {
                        end: Some(ours),
                        process: Some(process),
                    })
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The fd the command writes its pid to (between fork and exec).
    fn fd(&self) -> Option<RawFd> {
        self.end.as_ref().map(|s| s.as_raw_fd())
    }

    /// Tells the guard the command's process group (also written by the
    /// command itself before exec, on Linux; the guard reads the first).
    fn announce(&self, pgid: Pid) {
        if let Some(mut s) = self.end.as_ref() {
            // A guard that is gone cannot be helped (baton ignores SIGPIPE).
            let _ = s.write_all(&pgid.as_raw().to_ne_bytes());
        }
    }
}

impl Drop for Guard {
    /// Closes baton's end (the guard then finds the group empty and exits) and
    /// reaps the guard without waiting for it here.
    fn drop(&mut self) {
        drop(self.end.take());
        if let Some(mut p) = self.process.take() {
            let reaped = std::thread::Builder::new()
                .name("baton-guard".into())
                .spawn(move || {
                    let _ = p.wait();
                });
            if reaped.is_err() {
                // A zombie until baton exits: harmless.
            }
        }
    }
}

/// Where baton's own executable is: the path it was started from, and on Linux
/// the kernel's link to it (which works even when the file was replaced or
/// deleted meanwhile, but names the process `exe`).
fn guard_exes() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Ok(p) = std::env::current_exe() {
        v.push(p);
    }
    if cfg!(target_os = "linux") {
        v.push(PathBuf::from("/proc/self/exe"));
    }
    v
}

/// `baton __guard GRACE_MS BATON_PID`: the guard process (see the module
/// docs). Reads the command's process group id (4 bytes, native order) from
/// stdin, then waits for end of file; if the group still has processes then,
/// SIGTERM to it, SIGKILL after the grace. Returns the exit code.
pub fn guard_main(args: &[String]) -> i32 {
    // Blocked, never delivered: the guard ends when baton is gone, not before
    // (`pkill baton` would otherwise stop it with baton). SIGKILL still works.
    let _ = block_signals();
    let grace = args
        .first()
        .and_then(|s| s.parse::<u64>().ok())
        .map_or(Duration::from_secs(5), Duration::from_millis);
    let baton_pid = args.get(1).map_or("?", String::as_str);
    let mut input = io::stdin().lock();
    let mut pid = [0u8; 4];
    if input.read_exact(&mut pid).is_err() {
        // Baton ended before it started a command.
        return exit::OK;
    }
    let pgid = i32::from_ne_bytes(pid);
    if pgid <= 1 {
        // Never a process group baton made (0 and 1 would be ours and init's).
        return exit::ERROR;
    }
    let pgid = Pid::from_raw(pgid);
    let mut rest = [0u8; 64];
    loop {
        match input.read(&mut rest) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let alive = || killpg(pgid, None).is_ok();
    if !alive() {
        return exit::OK;
    }
    eprintln!(
        "baton: baton (pid {baton_pid}) ended while the command's process group {pgid} was still \
         running: SIGTERM sent to it, SIGKILL in {}",
        baton::format_go_duration(grace)
    );
    let _ = killpg(pgid, Signal::SIGTERM);
    let deadline = Instant::now() + grace;
    while alive() && Instant::now() < deadline {
        std::thread::sleep(GROUP_POLL);
    }
    if alive() {
        eprintln!("baton: grace period over: sending SIGKILL to process group {pgid}");
        let _ = killpg(pgid, Signal::SIGKILL);
    }
    exit::OK
}

/// Starts the child in a process group of its own, with its guard, and a
/// thread that reports its exit as [`Event::Child`].
pub fn spawn(spec: &ChildSpec, tx: Sender<Event>) -> Result<Running, SpawnError> {
    let guard = match Guard::start(spec.kill_grace) {
        Ok(g) => Some(g),
        Err(e) => {
            eprintln!(
                "baton: warning: cannot start the guard process ({e}): if baton is killed, \
                 processes the command started may outlive it"
            );
            None
        }
    };
    let mut cmd = if spec.shell {
        let shell = std::env::var("SHELL")
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "/bin/sh".to_string());
        let mut c = Command::new(shell);
        c.arg("-c").arg(spec.argv.join(" "));
        c
    } else {
        let mut c = Command::new(&spec.argv[0]);
        c.args(&spec.argv[1..]);
        c
    };
    cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    cmd.stdin(if spec.pass_stdin {
        Stdio::inherit()
    } else {
        Stdio::null()
    });
    // Its own process group: a loss or a signal reaches everything the command
    // started (a shell's children too), and a terminal's Ctrl-C reaches it once
    // (from us), not twice.
    cmd.process_group(0);
    child_setup(&mut cmd, guard.as_ref().and_then(Guard::fd));
    let mut child = cmd.spawn().map_err(|e| {
        let what = if spec.shell {
            "the shell"
        } else {
            spec.argv[0].as_str()
        };
        let code = match e.kind() {
            io::ErrorKind::NotFound => 127,
            _ => 126,
        };
        SpawnError {
            code,
            message: format!("Error starting handler: cannot run {what:?}: {e}"),
        }
    })?;
    let pgid = Pid::from_raw(child.id() as i32);
    if let Some(g) = &guard {
        g.announce(pgid);
    }
    let exited = Arc::new(AtomicBool::new(false));
    let flag = exited.clone();
    let waiter = std::thread::Builder::new()
        .name("baton-child".into())
        .spawn(move || {
            let status = child
                .wait()
                .unwrap_or_else(|_| ExitStatus::from_raw(127 << 8));
            flag.store(true, Ordering::SeqCst);
            let _ = tx.send(Event::Child(status));
        });
    if let Err(e) = waiter {
        let _ = killpg(pgid, Signal::SIGKILL);
        return Err(SpawnError {
            code: 1,
            message: format!("cannot start a thread to wait for the child: {e}"),
        });
    }
    Ok(Running {
        pgid,
        exited,
        termed: false,
        killed: false,
        _guard: guard,
    })
}

/// Runs in the child between fork and exec: unblocks the signals `baton`
/// blocks for itself (a child inherits the mask, and the standard library
/// leaves it as it is), and on Linux asks the kernel to send the child SIGKILL
/// if `baton` itself dies (killed with SIGKILL, crashed): a command must never
/// run on without its supervisor, whose session would lapse while it ran. On
/// Linux it also tells the guard (`guard_fd`) its pid, its process group, before
/// it runs anything: then no window is left in which baton could die with the
/// guard not knowing the group.
#[allow(unsafe_code)]
fn child_setup(cmd: &mut Command, guard_fd: Option<RawFd>) {
    #[cfg(target_os = "linux")]
    let parent = nix::unistd::getpid();
    #[cfg(not(target_os = "linux"))]
    let _ = guard_fd;
    // SAFETY: the closure runs in the forked child before exec and only makes
    // raw system calls (sigprocmask, prctl, getppid, getpid, send), which are
    // async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            SigSet::empty()
                .thread_set_mask()
                .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
            #[cfg(target_os = "linux")]
            {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)
                    .map_err(|e| io::Error::from_raw_os_error(e as i32))?;
                if nix::unistd::getppid() != parent {
                    // baton died between fork and prctl: do not start at all.
                    return Err(io::Error::from_raw_os_error(nix::libc::ESRCH));
                }
                if let Some(fd) = guard_fd {
                    let pid = nix::unistd::getpid().as_raw().to_ne_bytes();
                    // SAFETY: `fd` is baton's end of the guard's socket, open
                    // in this child until exec (close-on-exec); `pid` is a
                    // live 4-byte buffer. MSG_NOSIGNAL: a guard that is gone
                    // gives EPIPE, not SIGPIPE. A failure only means the guard
                    // learns the group from baton instead.
                    let _ = nix::libc::send(
                        fd,
                        pid.as_ptr().cast(),
                        pid.len(),
                        nix::libc::MSG_NOSIGNAL,
                    );
                }
            }
            Ok(())
        });
    }
}

impl Running {
    /// The child's pid (also its process group id).
    pub fn pid(&self) -> i32 {
        self.pgid.as_raw()
    }

    /// Sends `sig` to the child's process group (not after it was reaped and
    /// its group is empty: the id could belong to someone else by then).
    pub fn signal(&self, sig: Signal) {
        if self.exited.load(Ordering::SeqCst) && !self.group_alive() {
            return;
        }
        let _ = killpg(self.pgid, sig);
    }

    fn group_alive(&self) -> bool {
        killpg(self.pgid, None).is_ok()
    }

    fn term(&mut self) {
        if !self.termed {
            self.termed = true;
            self.signal(Signal::SIGTERM);
        }
    }

    fn kill(&mut self) {
        if !self.killed {
            self.killed = true;
            self.signal(Signal::SIGKILL);
        }
    }
}

/// Why the supervision ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The child exited on its own.
    Exited,
    /// The holding was lost (the child was stopped).
    Lost(String),
    /// `baton` was asked to stop by this signal (forwarded to the child).
    Signal(Signal),
}

/// The end of one child's run.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// What ended it.
    pub ending: Ending,
    /// The child's exit status (`None` if it could not be waited for).
    pub status: Option<ExitStatus>,
}

/// How long to wait for a SIGKILLed child to be reaped before giving up.
const AFTER_KILL: Duration = Duration::from_secs(10);
/// Poll period while waiting for leftovers of the child's group to go.
const GROUP_POLL: Duration = Duration::from_millis(10);

/// Waits for the child's exit, the loss of holding `generation`, or a signal.
/// On loss: SIGTERM to the child's group at once, SIGKILL after `grace`. A
/// signal is passed on to the group; a terminating one also starts the
/// `grace` countdown to SIGKILL. Whatever the command left running in its
/// group when it exits is stopped the same way before this returns.
pub fn supervise(
    child: &mut Running,
    events: &Receiver<Event>,
    generation: u64,
    grace: Duration,
    log: &dyn Fn(&str),
) -> Outcome {
    let mut ending: Option<Ending> = None;
    let mut kill_at: Option<Instant> = None;
    let status = loop {
        let ev = match kill_at {
            Some(t) => match events.recv_deadline(t) {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => {
                    if child.killed {
                        log("the child did not exit after SIGKILL; giving up waiting for it");
                        break None;
                    }
                    log(&format!(
                        "the child did not exit within the grace period of {}; sending SIGKILL to process group {}",
                        baton::format_go_duration(grace),
                        child.pid()
                    ));
                    child.kill();
                    kill_at = Some(Instant::now() + AFTER_KILL);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break None,
            },
            None => match events.recv() {
                Ok(ev) => ev,
                Err(_) => break None,
            },
        };
        match ev {
            Event::Child(st) => break Some(st),
            Event::Lost { generation: g, why } if g == generation => {
                if ending.is_none() {
                    child.term();
                    log(&format!(
                        "lock lost ({why}): SIGTERM sent to process group {}",
                        child.pid()
                    ));
                    ending = Some(Ending::Lost(why));
                    kill_at = Some(Instant::now() + grace);
                }
            }
            Event::Lost { .. } => {}
            Event::Signal(sig) => {
                log(&format!("received {sig}: passing it on to the child"));
                child.signal(sig);
                if is_terminating(sig) && ending.is_none() {
                    child.termed = child.termed || sig == Signal::SIGTERM;
                    ending = Some(Ending::Signal(sig));
                    kill_at = Some(Instant::now() + grace);
                }
            }
        }
    };
    clear_group(child, kill_at, grace, log);
    Outcome {
        ending: ending.unwrap_or(Ending::Exited),
        status,
    }
}

/// Stops what is left of the child's process group after the child exited.
fn clear_group(child: &mut Running, kill_at: Option<Instant>, grace: Duration, log: &dyn Fn(&str)) {
    if child.killed || !child.group_alive() {
        return;
    }
    log(&format!(
        "processes the command started are still running in group {}: stopping them",
        child.pid()
    ));
    child.term();
    let deadline = kill_at.unwrap_or_else(|| Instant::now() + grace);
    while child.group_alive() && Instant::now() < deadline {
        reap_orphans();
        std::thread::sleep(GROUP_POLL);
    }
    reap_orphans();
    if child.group_alive() {
        log(&format!(
            "grace period over: sending SIGKILL to process group {}",
            child.pid()
        ));
        child.kill();
    }
}

/// Reaps exited processes the command left behind that were handed to us
/// (when baton runs as PID 1 of a container or as a subreaper), so they do not
/// linger as zombies that keep the group "alive". Called only after the
/// command itself was waited for, so it takes no status anyone else waits for.
fn reap_orphans() {
    use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
    while let Ok(st) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if st == WaitStatus::StillAlive {
            break;
        }
    }
}

/// A status as an exit code: its code, or 128 + the signal that killed it.
pub fn status_code(status: &ExitStatus) -> i32 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        (None, None) => 1,
    }
}
