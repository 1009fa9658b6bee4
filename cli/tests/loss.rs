//! `baton lock` stops its child when the holding is lost: the session is
//! invalidated, the lock key is deleted, or Consul stops answering past the
//! local lease deadline; and it passes signals on and leaves nothing behind.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// The margin the core subtracts from the TTL for the local deadline.
fn margin(ttl: Duration) -> Duration {
    (ttl / 10).min(Duration::from_secs(2))
}

#[test]
fn child_is_stopped_when_the_session_is_invalidated() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("invalidate");
    let script = child_script(&dir);
    let log = dir.join("log");
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &[
            "lock",
            "-kill-grace",
            "2s",
            "svc/inv",
            "--",
            script.to_str().unwrap(),
        ],
        &[("LOG", log.to_str().unwrap()), ("ME", "a")],
    );
    let start = wait_line(&log, "start", "a");
    let sid = sequencer_session(&start);
    let clock = Clock::new();
    let at = Instant::now();
    assert!(dev.invalidate_session(&sid), "the session exists");
    let term = wait_line(&log, "term", "a");
    println!(
        "session invalidated -> child SIGTERM: at most {:.0} ms (10 ms clock)",
        (term.at + 0.01 - clock.uptime_of(at)) * 1000.0
    );
    assert_eq!(
        b.wait(),
        76,
        "exit code for a lost lock; stderr:\n{}",
        b.stderr_text()
    );
    let err = b.stderr_text();
    assert!(
        err.contains("lock lost") && err.contains("invalidated"),
        "{err}"
    );
    assert_eq!(session_count(&c), 0, "no session left behind");
}

#[test]
fn child_is_stopped_when_the_lock_key_is_deleted() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("delete");
    let script = child_script(&dir);
    let log = dir.join("log");
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &["lock", "svc/del", script.to_str().unwrap()],
        &[("LOG", log.to_str().unwrap()), ("ME", "a")],
    );
    wait_line(&log, "start", "a");
    let clock = Clock::new();
    let at = Instant::now();
    assert!(c.kv().delete("svc/del/.lock").unwrap());
    let term = wait_line(&log, "term", "a");
    println!(
        "lock key deleted -> child SIGTERM: at most {:.0} ms (10 ms clock)",
        (term.at + 0.01 - clock.uptime_of(at)) * 1000.0
    );
    assert_eq!(b.wait(), 76, "stderr:\n{}", b.stderr_text());
    assert!(b.stderr_text().contains("no longer carries our session"));
    assert_eq!(session_count(&c), 0, "no session left behind");
}

#[test]
fn child_is_stopped_within_a_second_of_the_local_deadline_when_consul_stops_answering() {
    let dev = devserver();
    let dir = workdir("pause");
    let script = child_script(&dir);
    let log = dir.join("log");
    let ttl = Duration::from_secs(1);
    dev.record_requests(true);
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &[
            "lock",
            "-ttl",
            "1s",
            "-lock-delay",
            "1s",
            "-kill-grace",
            "500ms",
            "svc/pause",
            "--",
            script.to_str().unwrap(),
        ],
        &[("LOG", log.to_str().unwrap()), ("ME", "a")],
    );
    let start = wait_line(&log, "start", "a");
    let sid = sequencer_session(&start);
    // Pause between two renews (they come every TTL/3): TTL/6 after one arrived,
    // when its answer has long gone out and the next is not due yet.
    let seen = dev.journal().len();
    let renewed = wait_for("a renew after the child started", || {
        dev.journal()[seen..]
            .iter()
            .find(|e| e.path == format!("/v1/session/renew/{sid}"))
            .map(|e| e.at)
    });
    let clock = Clock::new();
    let pause_at = renewed + ttl / 6;
    std::thread::sleep(pause_at.saturating_duration_since(Instant::now()));
    dev.pause();
    let paused_at = Instant::now();
    let term = wait_line(&log, "term", "a");
    // Consul stays silent: baton still exits, after the grace (500 ms), the
    // bounded clean-up (5 s) and a short close (1 s).
    let exit_started = Instant::now();
    assert_eq!(b.wait(), 76, "stderr:\n{}", b.stderr_text());
    let took = exit_started.elapsed();
    println!("with Consul still silent, baton exited {took:?} after the SIGTERM");
    assert!(took < Duration::from_secs(9), "{took:?}");
    assert!(
        b.stderr_text().contains("expires on its own"),
        "{}",
        b.stderr_text()
    );
    // What close could not finish, in words (issue 31: it was a Rust debug struct,
    // `CloseReport { threads_not_joined: 0, ... }`).
    let err = b.stderr_text();
    let report = err
        .lines()
        .find(|l| l.contains("clean-up not confirmed by Consul"))
        .unwrap_or_else(|| panic!("no clean-up warning:\n{err}"));
    assert!(
        report.contains("session") && report.contains("not destroyed") && !report.contains('{'),
        "{report}"
    );
    dev.resume();
    // The local deadline is the *send* time of the last successful renew + TTL -
    // margin; the server saw each renew a request latency later. So:
    // * from the arrival of the last renew before the pause comes a deadline at
    //   or after baton's (what is printed first; a loaded machine makes baton's
    //   earlier by the latency);
    // * the renewer sends a renew only after the previous one was answered, so
    //   the arrival of the renew before it gives a deadline at or before
    //   baton's: SIGTERM minus that bounds the lateness from above.
    let journal = dev.journal();
    let renews: Vec<Instant> = journal
        .iter()
        .filter(|e| {
            e.path == format!("/v1/session/renew/{sid}")
                || (e.path == "/v1/session/create" && e.body.contains("svc/pause"))
        })
        .map(|e| e.at)
        .filter(|at| *at <= paused_at)
        .collect();
    assert!(renews.len() >= 2, "a create and a renew before the pause");
    let last = renews[renews.len() - 1];
    let before = renews[renews.len() - 2];
    let deadline_last = clock.uptime_of(last + ttl - margin(ttl));
    let deadline_earliest = clock.uptime_of(before + ttl - margin(ttl));
    let late_last = term.at - deadline_last;
    let late_bound = term.at + 0.01 - deadline_earliest;
    // The children's clock ticks every 10 ms and is read rounded down.
    println!(
        "server paused -> child SIGTERM: {:.0} ms after the pause; {:.0}..{:.0} ms after the local \
         deadline counted from the arrival of the last renew (+ TTL - TTL/10); at most {:.0} ms \
         after the earliest deadline baton could have computed; TTL {} ms",
        (term.at - clock.uptime_of(paused_at)) * 1000.0,
        late_last * 1000.0,
        late_last * 1000.0 + 10.0,
        late_bound * 1000.0,
        ttl.as_millis()
    );
    assert!(
        late_bound <= 1.0,
        "SIGTERM up to {late_bound:.3} s after the local deadline"
    );
    assert!(
        term.at + 0.01 >= clock.uptime_of(paused_at),
        "SIGTERM before Consul stopped answering"
    );
    assert!(
        b.stderr_text().contains("local lease deadline"),
        "{}",
        b.stderr_text()
    );
}

#[test]
fn signals_are_passed_on_and_a_terminating_one_ends_the_run_cleanly() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("signals");
    let script = child_script(&dir);
    let log = dir.join("log");
    let mut b = baton(
        &dev,
        &dir,
        "b",
        // `exec`: dash does not exec a `-c` command itself, and a wrapper shell
        // dies of the SIGUSR1 it is passed (see `baton lock -help`).
        &[
            "lock",
            "-child-exit-code",
            "svc/sig",
            "--",
            "exec",
            script.to_str().unwrap(),
        ],
        &[("LOG", log.to_str().unwrap()), ("ME", "a")],
    );
    wait_line(&log, "start", "a");
    b.signal("USR1");
    wait_line(&log, "usr1", "a");
    b.signal("TERM");
    wait_line(&log, "term", "a");
    assert_eq!(b.wait(), 143, "the child's status with -child-exit-code");
    assert_eq!(session_count(&c), 0, "session destroyed on a signal");
    assert!(
        c.kv().get("svc/sig/.lock").unwrap().is_none(),
        "free .lock removed, as consul lock does"
    );
}

#[test]
fn a_child_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("grace");
    let log = dir.join("log");
    let script = dir.join("stubborn.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ntrap 'echo term >> \"$LOG\"' TERM\necho start >> \"$LOG\"\nwhile :; do sleep 0.05; done\n",
    )
    .unwrap();
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &[
            "lock",
            "-kill-grace",
            "300ms",
            "-shell=false",
            "svc/grace",
            "--",
            "sh",
            script.to_str().unwrap(),
        ],
        &[("LOG", log.to_str().unwrap())],
    );
    wait_for("the child to start", || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|s| s.contains("start"))
    });
    let at = Instant::now();
    assert!(c.kv().delete("svc/grace/.lock").unwrap());
    assert_eq!(b.wait(), 76);
    let took = at.elapsed();
    println!("lock key deleted -> stubborn child killed and baton exited: {took:?}");
    assert!(
        took >= Duration::from_millis(300),
        "SIGKILL only after the grace period"
    );
    assert!(
        std::fs::read_to_string(&log).unwrap().contains("term"),
        "SIGTERM came first"
    );
    assert!(b.stderr_text().contains("SIGKILL"), "{}", b.stderr_text());
    assert_eq!(session_count(&c), 0);
}

#[test]
fn the_child_dies_with_baton() {
    let dev = devserver();
    let dir = workdir("sigkill");
    let script = child_script(&dir);
    let log = dir.join("log");
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &["lock", "svc/k9", "--", "exec", script.to_str().unwrap()],
        &[
            ("LOG", log.to_str().unwrap()),
            ("ME", "a"),
            ("HOLD_MS", "3000"),
        ],
    );
    wait_line(&log, "start", "a");
    let pgid = b.pid();
    let group = wait_for("the child's process group", || {
        let out = std::process::Command::new("pgrep")
            .arg("-P")
            .arg(pgid.to_string())
            .output()
            .ok()?;
        // baton's children: the command and its guard (`baton __guard ...`).
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .find(|p| !cmdline(*p).contains("__guard"))
    });
    b.signal("KILL");
    b.wait();
    wait_for("the child to be gone", || {
        let alive = std::process::Command::new("kill")
            .arg("-0")
            .arg(group.to_string())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap()
            .success();
        (!alive).then_some(())
    });
}

#[test]
fn a_timeout_exits_75_and_leaves_nothing() {
    let dev = devserver();
    let c = client(&dev);
    let holder = ConsulLock::new(client(&dev), "svc/busy", "sleep 100");
    holder.lock();
    let (code, _, err) = baton_output(&dev, &["lock", "-timeout", "300ms", "svc/busy", "true"]);
    assert_eq!(code, 75, "{err}");
    assert!(err.contains("timeout"), "{err}");
    assert_eq!(session_count(&c), 1, "only the holder's session is left");
    holder.unlock_and_clean();
}

#[test]
fn a_signal_while_waiting_ends_the_wait_and_leaves_nothing() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("wait-signal");
    let holder = ConsulLock::new(client(&dev), "svc/waiting", "sleep 100");
    holder.lock();
    let mut b = baton(&dev, &dir, "b", &["lock", "svc/waiting", "--", "true"], &[]);
    wait_for("baton's session", || (session_count(&c) == 2).then_some(()));
    b.signal("INT");
    assert_eq!(b.wait(), 130, "128 + SIGINT; stderr:\n{}", b.stderr_text());
    assert!(
        b.stderr_text().contains("during lock acquisition"),
        "{}",
        b.stderr_text()
    );
    assert_eq!(session_count(&c), 1, "only the holder's session is left");
    holder.unlock_and_clean();
}

#[test]
fn a_semaphore_child_is_stopped_when_its_slot_is_taken_away() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("slot-lost");
    let script = child_script(&dir);
    let log = dir.join("log");
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &[
            "lock",
            "-n",
            "2",
            "svc/slot",
            "--",
            script.to_str().unwrap(),
        ],
        &[("LOG", log.to_str().unwrap()), ("ME", "a")],
    );
    let start = wait_line(&log, "start", "a");
    let sid = sequencer_session(&start);
    // The contender key, as a `consul lock -n 2` operator might delete it.
    assert!(c.kv().delete(&format!("svc/slot/{sid}")).unwrap());
    wait_line(&log, "term", "a");
    assert_eq!(b.wait(), 76, "stderr:\n{}", b.stderr_text());
    assert!(
        b.stderr_text().contains("our slot is gone"),
        "{}",
        b.stderr_text()
    );
    assert_eq!(session_count(&c), 0);
}

#[test]
fn a_consul_leader_election_shorter_than_the_deadline_is_ridden_out() {
    // consul lock kills its child when a leader election surfaces as a monitor
    // error (hashicorp/consul#1162); baton keeps the holding until the deadline.
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("no-leader");
    let script = child_script(&dir);
    let log = dir.join("log");
    dev.record_requests(true);
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &[
            "lock",
            "-ttl",
            "2s",
            "svc/election",
            "--",
            script.to_str().unwrap(),
        ],
        &[("LOG", log.to_str().unwrap()), ("ME", "a")],
    );
    let start = wait_line(&log, "start", "a");
    let sid = sequencer_session(&start);
    let seen = dev.journal().len();
    wait_for("a renew", || {
        dev.journal()[seen..]
            .iter()
            .any(|e| e.path == format!("/v1/session/renew/{sid}"))
            .then_some(())
    });
    // No leader for 1 s (the local deadline is 1.8 s after that renew): the
    // renews in between fail with Consul's 500.
    let before = dev.journal().len();
    dev.set_leader(false);
    std::thread::sleep(Duration::from_secs(1));
    dev.set_leader(true);
    let failed = dev.journal()[before..]
        .iter()
        .filter(|e| e.path == format!("/v1/session/renew/{sid}"))
        .count();
    assert!(failed >= 1, "a renew was refused during the election");
    // A renew succeeds again, and the command is still running.
    let seen = dev.journal().len();
    wait_for("a renew after the election", || {
        dev.journal()[seen..]
            .iter()
            .any(|e| e.path == format!("/v1/session/renew/{sid}"))
            .then_some(())
    });
    assert!(
        read_log(&log).iter().all(|l| l.kind == "start"),
        "the command was stopped: {:?}\n{}",
        read_log(&log),
        b.stderr_text()
    );
    let p = c.kv().get("svc/election/.lock").unwrap().unwrap();
    assert_eq!(p.session.as_deref(), Some(sid.as_str()), "still the holder");
    b.signal("TERM");
    assert_eq!(b.wait(), 0, "{}", b.stderr_text());
    assert_eq!(session_count(&c), 0);
}

/// A process's command line, its arguments joined by spaces ("" once it is gone).
fn cmdline(pid: i32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

/// Whether `pid` is a process that still runs: not gone, not a zombie (an
/// orphan's zombie stays until init reaps it, which some container inits never do).
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the state follows the last ')'.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next());
    !matches!(state, Some("Z") | Some("X") | None)
}

/// The guard processes (`baton __guard GRACE BATON_PID`) of baton `pid` still running.
fn guards_of(pid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|p| {
            let words: Vec<String> = cmdline(*p).split(' ').map(String::from).collect();
            words.get(1).is_some_and(|w| w == "__guard")
                && words.get(3).is_some_and(|w| *w == pid.to_string())
        })
        .filter(|p| running(*p))
        .collect()
}

/// Issue 31: what the command started outlives a `baton` killed with SIGKILL by
/// no more than the kill grace, for `lock` and `elect`. The command (a compound
/// shell command, as `consul lock` users write them) starts two grandchildren:
/// a `sleep` that stops on SIGTERM and one that ignores it. Both used to run on,
/// reparented to init, while the next holder started.
#[test]
fn nothing_the_command_started_outlives_a_baton_killed_with_sigkill() {
    let grace = Duration::from_secs(1);
    // The bound: the grace, plus time for a loaded machine to deliver SIGKILL.
    let bound = grace + Duration::from_secs(3);
    let dev = devserver();
    for mode in ["lock", "elect"] {
        let dir = workdir(&format!("sigkill-tree-{mode}"));
        let (polite, stubborn) = (dir.join("polite.pid"), dir.join("stubborn.pid"));
        let command = "sleep 30 & echo $! > \"$POLITE\"; \
                       (trap '' TERM; exec sleep 31) & echo $! > \"$STUBBORN\"; wait";
        let key = format!("svc/tree-{mode}");
        let mut b = baton(
            &dev,
            &dir,
            "b",
            &[
                mode,
                "-ttl",
                "2s",
                "-lock-delay",
                "1s",
                "-kill-grace",
                "1s",
                &key,
                command,
            ],
            &[
                ("POLITE", polite.to_str().unwrap()),
                ("STUBBORN", stubborn.to_str().unwrap()),
            ],
        );
        let pid_in = |f: &std::path::Path| {
            std::fs::read_to_string(f)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
        };
        let polite_pid = wait_for("the first grandchild", || pid_in(&polite));
        let stubborn_pid = wait_for("the second grandchild", || pid_in(&stubborn));
        assert!(running(polite_pid) && running(stubborn_pid));
        let baton_pid = b.pid();
        let killed = Instant::now();
        b.signal("KILL");
        b.wait();
        let end = killed + bound;
        let mut gone = [None, None];
        while Instant::now() < end && gone.iter().any(Option::is_none) {
            for (i, pid) in [polite_pid, stubborn_pid].into_iter().enumerate() {
                if gone[i].is_none() && !running(pid) {
                    gone[i] = Some(killed.elapsed());
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        println!(
            "{mode}: baton SIGKILLed -> grandchild on SIGTERM gone after {:?}, ignoring SIGTERM \
             gone after {:?} (kill grace {grace:?})",
            gone[0], gone[1]
        );
        for (i, pid) in [polite_pid, stubborn_pid].into_iter().enumerate() {
            if gone[i].is_none() {
                // Do not leave it running for the other tests.
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
        }
        assert!(
            gone.iter().all(Option::is_some),
            "{mode}: grandchildren still running {bound:?} after baton was SIGKILLed: {gone:?}; \
             stderr:\n{}",
            b.stderr_text()
        );
        // The guard said what it did, and is gone too.
        wait_for("the guard to exit", || {
            guards_of(baton_pid).is_empty().then_some(())
        });
        assert!(
            b.stderr_text().contains("SIGTERM sent to it"),
            "{}",
            b.stderr_text()
        );
    }
}

/// The guard of a command ends with a baton that ends normally, and says nothing.
#[test]
fn the_guard_ends_with_baton() {
    let dev = devserver();
    let dir = workdir("guard-ends");
    let mut b = baton(&dev, &dir, "b", &["lock", "svc/guard-ends", "true"], &[]);
    let pid = b.pid();
    assert_eq!(b.wait(), 0, "stderr:\n{}", b.stderr_text());
    wait_for("the guard to exit", || {
        guards_of(pid).is_empty().then_some(())
    });
    assert!(!b.stderr_text().contains("SIGTERM"), "{}", b.stderr_text());
}
