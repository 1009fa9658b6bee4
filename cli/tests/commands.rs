//! `baton elect`, `baton leader`, `baton holders`, `baton sessions`, and what
//! the command line says about bad input.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use baton_devserver::{Config, DevServer};
use common::*;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

#[test]
fn elect_runs_the_child_only_while_leader_and_campaigns_again_after_a_loss() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("elect");
    let script = child_script(&dir);
    let log = dir.join("log");
    let key = "svc/leader";
    let elect = |tag: &str, value: &str| {
        baton(
            &dev,
            &dir,
            tag,
            &[
                "elect",
                "-lock-delay",
                "500ms",
                "-kill-grace",
                "300ms",
                "-value",
                value,
                key,
                "--",
                "exec",
                script.to_str().unwrap(),
            ],
            &[("LOG", log.to_str().unwrap()), ("ME", tag)],
        )
    };
    let starts = |who: &str| {
        read_log(&log)
            .into_iter()
            .filter(|l| l.kind == "start" && l.who == who)
            .collect::<Vec<_>>()
    };
    let mut a = elect("a", "alpha");
    let first = wait_line(&log, "start", "a");
    let (code, out, err) = baton_output(&dev, &["leader", "-json", key]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["leader"]["value"], "alpha");
    assert_eq!(v["leader"]["session"]["id"], sequencer_session(&first));
    assert_eq!(
        v["leader"]["token"].to_string(),
        first.rest[0],
        "the child's fencing token"
    );

    // A loses its session: its child stops, and A campaigns again (a new session).
    assert!(dev.invalidate_session(&sequencer_session(&first)));
    wait_line(&log, "term", "a");
    let second = wait_for("A leading again", || starts("a").get(1).cloned());
    assert_ne!(sequencer_session(&second), sequencer_session(&first));
    assert!(
        a.stderr_text().contains("campaigning again"),
        "{}",
        a.stderr_text()
    );

    // B waits while A leads; A stops: it steps down, and B leads.
    let mut b = elect("b", "beta");
    wait_for("B's session", || (session_count(&c) == 2).then_some(()));
    assert!(starts("b").is_empty(), "B must not run while A leads");
    a.signal("TERM");
    assert_eq!(a.wait(), 0, "{}", a.stderr_text());
    let b_start = wait_line(&log, "start", "b");
    let (_, out, _) = baton_output(&dev, &["leader", key]);
    assert!(out.contains("\"beta\""), "{out}");
    assert!(b_start.rest[0].parse::<u64>().unwrap() > second.rest[0].parse::<u64>().unwrap());
    b.signal("TERM");
    assert_eq!(b.wait(), 0, "{}", b.stderr_text());

    assert_eq!(
        max_concurrency(&read_log(&log)),
        1,
        "one leader's child at a time"
    );
    assert_eq!(session_count(&c), 0);
    let (_, out, _) = baton_output(&dev, &["leader", key]);
    assert!(out.contains("no leader"), "{out}");
}

#[test]
fn elect_once_exits_76_on_loss() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("elect-once");
    let script = child_script(&dir);
    let log = dir.join("log");
    let mut a = baton(
        &dev,
        &dir,
        "a",
        &["elect", "-once", "svc/once", "--", script.to_str().unwrap()],
        &[("LOG", log.to_str().unwrap()), ("ME", "a")],
    );
    wait_line(&log, "start", "a");
    c.kv().delete("svc/once").unwrap();
    assert_eq!(a.wait(), 76, "{}", a.stderr_text());
    assert_eq!(session_count(&c), 0);
}

#[test]
fn holders_and_sessions_show_who_holds_what() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("holders");
    let script = child_script(&dir);
    let log = dir.join("log");
    let _sem = baton(
        &dev,
        &dir,
        "s",
        &[
            "lock",
            "-n",
            "3",
            "-name",
            "nightly report",
            "svc/h",
            script.to_str().unwrap(),
        ],
        &[("LOG", log.to_str().unwrap()), ("ME", "s")],
    );
    let _lock = baton(
        &dev,
        &dir,
        "l",
        &["lock", "svc/l", script.to_str().unwrap()],
        &[("LOG", log.to_str().unwrap()), ("ME", "l")],
    );
    let s_start = wait_line(&log, "start", "s");
    let l_start = wait_line(&log, "start", "l");

    let (code, out, err) = baton_output(&dev, &["holders", "-json", "svc/h"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["kind"], "semaphore");
    assert_eq!(v["limit"], 3);
    assert_eq!(v["held"], 1);
    let h = &v["holders"][0];
    assert_eq!(h["id"], sequencer_session(&s_start));
    assert_eq!(h["name"], "nightly report");
    assert_eq!(h["ttl"], "15s");
    assert_eq!(h["behavior"], "delete");
    assert_eq!(h["max_until_free"], "45s");
    let (_, out, _) = baton_output(&dev, &["holders", "svc/h"]);
    assert!(
        out.contains("1 of 3 slots held") && out.contains("nightly report"),
        "{out}"
    );

    let (_, out, _) = baton_output(&dev, &["holders", "-json", "svc/l"]);
    let v = json(&out);
    assert_eq!(v["kind"], "lock");
    assert_eq!(v["key"], "svc/l/.lock");
    assert_eq!(v["holders"][0]["id"], sequencer_session(&l_start));
    assert_eq!(v["token"].to_string(), l_start.rest[0]);
    let (_, out, _) = baton_output(&dev, &["holders", "svc/nothing"]);
    assert!(out.contains("no lock or semaphore"), "{out}");

    let (_, out, _) = baton_output(&dev, &["sessions", "-json"]);
    let v = json(&out);
    assert_eq!(v.as_array().unwrap().len(), 2);
    let (_, out, _) = baton_output(&dev, &["sessions"]);
    assert!(
        out.contains("nightly report") && out.contains("BEHAVIOR"),
        "{out}"
    );

    // Destroying the lock holder's session stops its child.
    let sid = sequencer_session(&l_start);
    let (code, out, _) = baton_output(&dev, &["sessions", "destroy", &sid]);
    assert_eq!(code, 0);
    assert!(out.contains("destroyed"), "{out}");
    wait_line(&log, "term", "l");
    let (code, _, err) = baton_output(&dev, &["sessions", "destroy", &sid]);
    assert_eq!(code, 1);
    assert!(err.contains("no session"), "{err}");
    let (code, _, err) = baton_output(&dev, &["sessions", "frob"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown arguments"), "{err}");
    let _ = c;
}

#[test]
fn bad_input_gets_a_clear_error_and_help_is_real() {
    let dev = devserver();
    let cases: &[(&[&str], &str)] = &[
        (&["lock"], "Key prefix and child command must be specified"),
        (
            &["lock", "svc/x"],
            "Key prefix and child command must be specified",
        ),
        (
            &["lock", "-n", "0", "svc/x", "true"],
            "Lock holder limit must be positive",
        ),
        (
            &["lock", "-n", "two", "svc/x", "true"],
            "invalid value \"two\" for -n",
        ),
        (
            &["lock", "-bogus", "svc/x", "true"],
            "flag provided but not defined: -bogus",
        ),
        (
            &["lock", "svc/x", "-bogus", "true"],
            "put the command to run after `--`",
        ),
        (
            &["lock", "-timeout", "5", "svc/x", "true"],
            "expected a duration",
        ),
        (
            &["lock", "-shell=maybe", "svc/x", "true"],
            "invalid boolean value",
        ),
        (&["lock", "-timeout"], "flag needs an argument: -timeout"),
        (
            &["elect", "svc/x"],
            "Election key and child command must be specified",
        ),
        (&["leader"], "exactly one KEY"),
        (&["holders", "a", "b"], "exactly one PREFIX"),
        (&["frobnicate"], "unknown command"),
        (&[], "Usage: baton <command>"),
    ];
    for (args, want) in cases {
        let (code, _, err) = baton_output(&dev, args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: want {want:?} in {err:?}");
    }
    let (code, _, err) = baton_output(
        &dev,
        &["lock", "-shell=false", "svc/x", "/nonexistent/command"],
    );
    assert_eq!(code, 127, "{err}");
    assert!(err.contains("/nonexistent/command"), "{err}");
    for cmd in ["lock", "elect", "leader", "holders", "sessions"] {
        let (code, out, _) = baton_output(&dev, &[cmd, "-help"]);
        assert_eq!(code, 0);
        assert!(out.contains(&format!("Usage: baton {cmd}")), "{out}");
        assert!(out.contains("-http-addr"), "{out}");
    }
    let (_, out, _) = baton_output(&dev, &["lock", "--help"]);
    assert!(out.contains("Exit codes") && out.contains("76"), "{out}");
    // Nothing reachable: exit 1 with the reason.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["lock", "-http-addr", "127.0.0.1:1", "svc/x", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("Error creating session"), "{err}");
    assert_eq!(session_count(&client(&dev)), 0);
}

#[test]
fn leader_watch_prints_every_change() {
    let dev = devserver();
    let dir = workdir("watch");
    let script = child_script(&dir);
    let log = dir.join("log");
    let watcher = baton(
        &dev,
        &dir,
        "w",
        &["leader", "-watch", "-json", "svc/w"],
        &[],
    );
    let lines = |n: usize| {
        wait_for(&format!("{n} lines from leader -watch"), || {
            let out = watcher.stdout_text();
            let v: Vec<Value> = out.lines().map(json).collect();
            (v.len() >= n).then_some(v)
        })
    };
    assert_eq!(lines(1)[0]["leader"], Value::Null, "no leader yet");
    let mut a = baton(
        &dev,
        &dir,
        "a",
        &[
            "elect",
            "-value",
            "one",
            "svc/w",
            "--",
            script.to_str().unwrap(),
        ],
        &[
            ("LOG", log.to_str().unwrap()),
            ("ME", "a"),
            ("HOLD_MS", "200"),
        ],
    );
    assert_eq!(lines(2)[1]["leader"]["value"], "one");
    assert_eq!(a.wait(), 0, "{}", a.stderr_text());
    assert_eq!(lines(3)[2]["leader"], Value::Null, "stepped down");
}

#[test]
fn consul_http_addr_may_name_a_unix_socket() {
    let dir = workdir("unix");
    let socket = dir.join("consul.sock");
    let dev = DevServer::start(Config {
        session_ttl_min: Duration::from_millis(500),
        unix_socket: Some(socket.clone()),
        ..Config::default()
    })
    .expect("dev server starts");
    let c = client(&dev);
    let url = dev.unix_url().expect("a unix socket");
    assert_eq!(url, format!("unix://{}", socket.display()));
    // The child reads the lock's key while it runs: held by the command's session.
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["lock", "svc/unix", "echo running"])
        .env("SHELL", "/bin/sh")
        .env("CONSUL_HTTP_ADDR", &url)
        .env_remove("CONSUL_HTTP_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("baton runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("running"), "{stdout}");
    assert_eq!(session_count(&c), 0, "the command left its session");
    // A socket nobody serves: the error names it.
    let out = Command::new(env!("CARGO_BIN_EXE_baton"))
        .args(["sessions"])
        .env(
            "CONSUL_HTTP_ADDR",
            format!("unix://{}", dir.join("none.sock").display()),
        )
        .env_remove("CONSUL_HTTP_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("baton runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(stderr.contains("none.sock"), "{stderr}");
}
