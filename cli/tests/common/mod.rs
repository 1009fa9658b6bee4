//! Shared pieces of the `baton` command tests: an in-process dev server, the
//! built `baton` binary run as a child process, child scripts that log to
//! files, a checker over those logs, and a `consul lock` emulation.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use baton::{Client, KvPair, QueryOptions, SessionOptions, WriteOptions, LOCK_FLAG_VALUE};
use baton_devserver::{Config, DevServer};

/// Upper bound of every wait in these tests.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A dev server accepting short TTLs.
pub fn devserver() -> DevServer {
    DevServer::start(Config {
        session_ttl_min: Duration::from_millis(500),
        ..Config::default()
    })
    .expect("dev server starts")
}

pub fn client(dev: &DevServer) -> Client {
    Client::builder()
        .address(dev.http_addr())
        .build()
        .expect("client builds")
}

/// A fresh directory for one test's scripts and logs.
pub fn workdir(name: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "baton-cli-{}-{}-{}",
        std::process::id(),
        name,
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// The child every test runs: appends `start NAME UPTIME TOKEN SEQUENCER` to
/// `$LOG`, holds for `$HOLD_MS` milliseconds, then appends `end NAME UPTIME`; on SIGTERM
/// it appends `term NAME UPTIME` and exits 143. UPTIME is `/proc/uptime`, a
/// monotonic clock every process shares, read without forking. Lines are
/// appended (O_APPEND), so the file's line order is the real order of events.
pub const CHILD: &str = r#"#!/bin/sh
trap 'read up _ < /proc/uptime; echo "term $ME $up" >> "$LOG"; exit 143' TERM
trap 'echo "usr1 $ME" >> "$LOG"' USR1
read up _ < /proc/uptime
echo "start $ME $up $BATON_FENCING_TOKEN $BATON_SEQUENCER" >> "$LOG"
# Short sleeps: a signal sent to the whole group ends the current one at once.
i=0
while [ $i -lt $(( ${HOLD_MS:-30000} / 20 )) ]; do sleep 0.02; i=$((i + 1)); done
read up _ < /proc/uptime
echo "end $ME $up" >> "$LOG"
"#;

/// Writes [`CHILD`] into `dir` and returns its path.
pub fn child_script(dir: &Path) -> PathBuf {
    let p = dir.join("child.sh");
    fs::write(&p, CHILD).unwrap();
    let _ = Command::new("chmod").arg("+x").arg(&p).status();
    p
}

/// A running `baton` process with its stdout and stderr in files.
pub struct Baton {
    pub child: Child,
    pub stderr: PathBuf,
    pub stdout: PathBuf,
    status: Option<ExitStatus>,
}

/// Starts `baton ARGS` against `dev`, the child environment given by `env`.
pub fn baton(dev: &DevServer, dir: &Path, tag: &str, args: &[&str], env: &[(&str, &str)]) -> Baton {
    let stdout = dir.join(format!("{tag}.out"));
    let stderr = dir.join(format!("{tag}.err"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_baton"));
    cmd.args(args)
        .env("CONSUL_HTTP_ADDR", dev.http_addr())
        .env_remove("CONSUL_HTTP_TOKEN")
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::null())
        .stdout(fs::File::create(&stdout).unwrap())
        .stderr(fs::File::create(&stderr).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    Baton {
        child: cmd.spawn().expect("baton starts"),
        stderr,
        stdout,
        status: None,
    }
}

/// Runs `baton ARGS` to its end and returns (exit code, stdout, stderr).
pub fn baton_output(dev: &DevServer, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(args)
        .env("CONSUL_HTTP_ADDR", dev.http_addr())
        .env_remove("CONSUL_HTTP_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("baton runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Baton {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Waits (bounded) for the process to exit; returns its exit code.
    pub fn wait(&mut self) -> i32 {
        let end = Instant::now() + PATIENCE;
        loop {
            if let Some(st) = self.status {
                return st.code().unwrap_or(-1);
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                self.status = Some(st);
                continue;
            }
            assert!(
                Instant::now() < end,
                "baton did not exit within {PATIENCE:?}; stderr:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn stderr_text(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn stdout_text(&self) -> String {
        fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -{sig} {}", self.pid());
    }
}

impl Drop for Baton {
    /// Stops a `baton` still running as a user would (SIGTERM: it stops its
    /// child and gives everything back), with SIGKILL as the last resort.
    fn drop(&mut self) {
        if self.status.is_some() || self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Polls `cond` every 5 ms until it holds; panics with `what` after [`PATIENCE`].
pub fn wait_for<T>(what: &str, mut cond: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// One line of a child log.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub kind: String,
    pub who: String,
    /// `/proc/uptime` seconds.
    pub at: f64,
    pub rest: Vec<String>,
}

pub fn read_log(path: &Path) -> Vec<Line> {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            Line {
                kind: w[0].to_string(),
                who: w.get(1).unwrap_or(&"").to_string(),
                at: w.get(2).and_then(|s| s.parse().ok()).unwrap_or(0.0),
                rest: w.iter().skip(3).map(|s| s.to_string()).collect(),
            }
        })
        .collect()
}

/// Waits for a line of `kind` by `who` in the log.
pub fn wait_line(log: &Path, kind: &str, who: &str) -> Line {
    wait_for(&format!("{kind} {who} in {}", log.display()), || {
        read_log(log)
            .into_iter()
            .find(|l| l.kind == kind && l.who == who)
    })
}

/// The external checker: walks the log in file order (the real order of the
/// appends) and returns the largest number of children running at once, or
/// what is wrong with the log (a child started twice, ended without starting,
/// or never ended).
pub fn check_log(lines: &[Line]) -> Result<usize, String> {
    let mut running: Vec<&str> = Vec::new();
    let mut max = 0;
    for l in lines {
        match l.kind.as_str() {
            "start" => {
                if running.contains(&l.who.as_str()) {
                    return Err(format!("{} started twice", l.who));
                }
                running.push(&l.who);
                max = max.max(running.len());
            }
            "end" | "term" => match running.iter().position(|r| *r == l.who) {
                Some(i) => {
                    running.remove(i);
                }
                None => return Err(format!("{} ended without starting", l.who)),
            },
            _ => {}
        }
    }
    if !running.is_empty() {
        return Err(format!("still running at the end: {running:?}"));
    }
    Ok(max)
}

/// [`check_log`], panicking on a malformed log.
pub fn max_concurrency(lines: &[Line]) -> usize {
    check_log(lines).unwrap_or_else(|e| panic!("{e}: {lines:?}"))
}

/// `/proc/uptime` now, in seconds (10 ms resolution).
pub fn uptime() -> f64 {
    let s = fs::read_to_string("/proc/uptime").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

/// Maps `Instant`s onto the `/proc/uptime` clock the children log with: waits
/// for the uptime counter to tick, so the pairing is exact to a fraction of a ms.
pub struct Clock {
    instant: Instant,
    uptime: f64,
}

impl Clock {
    pub fn new() -> Clock {
        let first = uptime();
        loop {
            let now = Instant::now();
            let u = uptime();
            if u != first {
                return Clock {
                    instant: now,
                    uptime: u,
                };
            }
        }
    }

    /// `at` on the uptime clock.
    pub fn uptime_of(&self, at: Instant) -> f64 {
        if at >= self.instant {
            self.uptime + (at - self.instant).as_secs_f64()
        } else {
            self.uptime - (self.instant - at).as_secs_f64()
        }
    }
}

/// The session id in a child's `BATON_SEQUENCER` (`lock_index:token:session:key`).
pub fn sequencer_session(line: &Line) -> String {
    let seq = line.rest.get(1).expect("a sequencer in the start line");
    seq.split(':')
        .nth(2)
        .expect("session in the sequencer")
        .to_string()
}

/// `consul lock` in lock mode, request by request as Go's `api.Lock` does it
/// (consul-semantics §7, §10): session "Consul lock for '<cmd>' at '<prefix>'",
/// TTL 15 s; wait with blocking GETs; acquire with `LockFlagValue`; release
/// resending flags and value; destroy the session; then `Destroy` the key
/// (delete by CAS when nobody holds it).
pub struct ConsulLock {
    pub client: Client,
    pub key: String,
    pub session: String,
}

impl ConsulLock {
    pub fn new(client: Client, prefix: &str, cmd: &str) -> ConsulLock {
        let session = client
            .sessions()
            .create(
                &SessionOptions::new()
                    .name(format!("Consul lock for '{cmd}' at '{prefix}'"))
                    .ttl(Duration::from_secs(15)),
            )
            .unwrap();
        ConsulLock {
            client,
            key: format!("{prefix}/.lock"),
            session,
        }
    }

    fn get(&self, index: u64) -> (Option<KvPair>, u64) {
        let opts = if index == 0 {
            QueryOptions::default()
        } else {
            QueryOptions::blocking(index, Duration::from_secs(15))
        };
        let (p, meta) = self.client.kv().get_with(&self.key, &opts).unwrap();
        (p, meta.index)
    }

    /// Go's `Lock()`: blocks until held. Panics on a flags conflict.
    pub fn lock(&self) {
        let mut wait_index = 0;
        loop {
            let (pair, index) = self.get(wait_index);
            if let Some(p) = &pair {
                assert_eq!(
                    p.flags, LOCK_FLAG_VALUE,
                    "Existing key does not match lock use"
                );
                match p.session.as_deref() {
                    Some(s) if s == self.session => return,
                    Some(_) => {
                        wait_index = index;
                        continue;
                    }
                    None => {}
                }
            }
            let ok = self
                .client
                .kv()
                .put_with(
                    &self.key,
                    b"",
                    &WriteOptions {
                        flags: LOCK_FLAG_VALUE,
                        acquire: Some(self.session.clone()),
                        ..Default::default()
                    },
                )
                .unwrap();
            if ok {
                return;
            }
            let (pair, index) = self.get(0);
            if pair.and_then(|p| p.session).is_some() {
                wait_index = index;
            } else {
                // Go sleeps its fixed 5 s retry here (lock-delay in effect); no
                // session is ever invalidated in these tests.
                std::thread::sleep(Duration::from_millis(100));
                wait_index = 0;
            }
        }
    }

    /// Go's `Unlock()`, the renewer's session destroy, then `Destroy()`.
    pub fn unlock_and_clean(&self) {
        self.client
            .kv()
            .release(&self.key, b"", &self.session, LOCK_FLAG_VALUE)
            .unwrap();
        self.client.sessions().destroy(&self.session).unwrap();
        if let Some(p) = self.client.kv().get(&self.key).unwrap() {
            if p.flags == LOCK_FLAG_VALUE && p.session.is_none() {
                let _ = self.client.kv().delete_cas(&self.key, p.modify_index);
            }
        }
    }
}

/// The sessions the server still has.
pub fn session_count(c: &Client) -> usize {
    c.sessions().list().unwrap().len()
}
