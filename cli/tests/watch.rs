//! `baton holders -watch` and `baton sessions -watch`: the current state, then
//! every change, one JSON document per line with `-json`; through a server
//! restart and a server that is not there yet; ended cleanly by signals.

mod common;

use std::time::Duration;

use baton::{SessionOptions, WriteOptions, LOCK_FLAG_VALUE};
use baton_devserver::{Config, DevServer};
use common::*;
use serde_json::Value;

/// The complete lines of a watcher's stdout, each parsed as JSON.
fn json_lines(w: &Baton) -> Vec<Value> {
    let out = w.stdout_text();
    let complete = out.rfind('\n').map_or("", |i| &out[..i]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?} in {out:?}")))
        .collect()
}

/// Waits for the watcher's `n`th JSON line (1-based) and returns it.
fn line(w: &Baton, n: usize) -> Value {
    wait_for(&format!("line {n} of {}", w.stdout.display()), || {
        json_lines(w).get(n - 1).cloned()
    })
}

/// Takes `PREFIX/.lock` as `consul lock` would, for a new session; returns it.
fn take_lock(c: &baton::Client, prefix: &str) -> String {
    let s = c
        .sessions()
        .create(
            &SessionOptions::new()
                .name("watched")
                .lock_delay(Duration::ZERO),
        )
        .unwrap();
    let ok = c
        .kv()
        .put_with(
            &format!("{prefix}/.lock"),
            b"",
            &WriteOptions {
                flags: LOCK_FLAG_VALUE,
                acquire: Some(s.clone()),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(ok, "the lock is free");
    s
}

fn holder_ids(v: &Value) -> Vec<String> {
    v["holders"]
        .as_array()
        .unwrap_or_else(|| panic!("no holders in {v}"))
        .iter()
        .map(|h| h["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn holders_watch_prints_each_change_as_a_json_line_and_survives_a_restart() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("holders-watch");
    let mut w = baton(
        &dev,
        &dir,
        "w",
        &["holders", "-watch", "-json", "svc/hw"],
        &[],
    );
    let first = line(&w, 1);
    assert_eq!(first["kind"], Value::Null, "nothing there yet: {first}");

    let s = take_lock(&c, "svc/hw");
    let held = line(&w, 2);
    assert_eq!(held["kind"], "lock", "{held}");
    assert_eq!(holder_ids(&held), vec![s.clone()]);

    c.sessions().destroy(&s).unwrap();
    let freed = line(&w, 3);
    assert_eq!(holder_ids(&freed), Vec::<String>::new(), "{freed}");

    // A restart drops every connection, the blocked read's too, and loses every
    // key: the watcher reads again and shows what the new server has.
    dev.restart();
    let s2 = take_lock(&c, "svc/hw");
    let again = wait_for("the holder after the restart", || {
        json_lines(&w)
            .into_iter()
            .skip(3)
            .find(|v| holder_ids(v) == vec![s2.clone()])
    });
    assert_eq!(again["kind"], "lock", "{again}");
    assert!(w.child.try_wait().unwrap().is_none(), "still watching");

    w.signal("INT");
    assert_eq!(
        w.wait(),
        0,
        "SIGINT ends the watch cleanly: {}",
        w.stderr_text()
    );
}

#[test]
fn holders_watch_in_text_separates_the_states() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("holders-watch-text");
    let mut w = baton(&dev, &dir, "w", &["holders", "-watch", "svc/ht"], &[]);
    wait_for("the first state", || {
        w.stdout_text()
            .contains("svc/ht: no lock or semaphore here")
            .then_some(())
    });
    let s = take_lock(&c, "svc/ht");
    let out = wait_for("the held state", || {
        let out = w.stdout_text();
        out.contains(&format!("session {s}")).then_some(out)
    });
    let separators: Vec<&str> = out.lines().filter(|l| l.starts_with("=== ")).collect();
    assert_eq!(separators.len(), 2, "one separator per state: {out}");
    assert!(separators.iter().all(|l| l.contains(", index ")), "{out}");
    assert!(out.contains("svc/ht/.lock: lock, held"), "{out}");
    w.signal("TERM");
    assert_eq!(w.wait(), 0, "{}", w.stderr_text());
}

#[test]
fn sessions_watch_prints_each_change_as_a_json_line() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("sessions-watch");
    let mut w = baton(&dev, &dir, "w", &["sessions", "-watch", "-json"], &[]);
    assert_eq!(line(&w, 1), Value::Array(vec![]), "no sessions yet");
    let s = c
        .sessions()
        .create(&SessionOptions::new().name("watched session"))
        .unwrap();
    let listed = line(&w, 2);
    assert_eq!(listed[0]["id"], s.as_str(), "{listed}");
    assert_eq!(listed[0]["name"], "watched session", "{listed}");

    let mut info = baton(
        &dev,
        &dir,
        "i",
        &["sessions", "info", &s, "-watch", "-json"],
        &[],
    );
    assert_eq!(line(&info, 1)["exists"], true);

    c.sessions().destroy(&s).unwrap();
    assert_eq!(line(&w, 3), Value::Array(vec![]), "destroyed");
    assert_eq!(line(&info, 2)["exists"], false, "the info watch sees it go");

    w.signal("TERM");
    assert_eq!(w.wait(), 0, "{}", w.stderr_text());
    info.signal("INT");
    assert_eq!(info.wait(), 0, "{}", info.stderr_text());
}

#[test]
fn a_watch_waits_for_a_server_that_is_not_there_yet() {
    // A free port, closed again: nothing answers there until the server starts.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let placeholder = devserver();
    let dir = workdir("watch-no-server");
    let addr = format!("127.0.0.1:{port}");
    let w = baton(
        &placeholder,
        &dir,
        "w",
        &[
            "holders",
            "-watch",
            "-json",
            "-http-addr",
            &addr,
            "svc/late",
        ],
        &[],
    );
    wait_for("the retry message", || {
        w.stderr_text().contains("retrying").then_some(())
    });
    assert!(
        w.stderr_text().contains(&addr),
        "names the address: {}",
        w.stderr_text()
    );
    let dev = DevServer::start(Config {
        addr: addr.parse().unwrap(),
        session_ttl_min: Duration::from_millis(500),
        ..Config::default()
    })
    .expect("dev server starts on the free port");
    let c = client(&dev);
    let s = take_lock(&c, "svc/late");
    wait_for("the holder once the server is up", || {
        json_lines(&w)
            .into_iter()
            .find(|v| v["kind"] == "lock" && holder_ids(v) == vec![s.clone()])
    });
    assert!(
        w.stderr_text().contains("Consul answers again"),
        "{}",
        w.stderr_text()
    );
}

#[test]
fn watch_is_in_the_help_and_goes_only_with_reads() {
    let dev = devserver();
    for cmd in ["holders", "sessions"] {
        let (code, out, _) = baton_output(&dev, &[cmd, "-help"]);
        assert_eq!(code, 0);
        assert!(out.contains("  -watch\n"), "{cmd}: {out}");
        assert!(out.contains("with -watch, one per line"), "{cmd}: {out}");
    }
    let (code, _, err) = baton_output(&dev, &["sessions", "-watch", "destroy", "x"]);
    assert_eq!(code, 1);
    assert!(err.contains("-watch goes with"), "{err}");
}

/// One answer of the scripted server: the `X-Consul-Index` and the lock's
/// `ModifyIndex` (what `holders` shows as its token).
fn free_lock_answer(index: u64, modify: u64) -> String {
    let body = format!(
        r#"[{{"LockIndex":0,"Key":"svc/fake/.lock","Flags":{LOCK_FLAG_VALUE},"Value":null,"CreateIndex":1,"ModifyIndex":{modify}}}]"#
    );
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Consul-Index: {index}\r\n\
         X-Consul-Knownleader: true\r\nX-Consul-Lastcontact: 0\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[test]
fn an_index_that_goes_backwards_starts_the_next_read_over_at_zero() {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};

    // A server that answers index 100, then 5 (gone backwards, as after a
    // snapshot restore), then 7, and then holds the next read open.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    std::thread::Builder::new()
        .name("scripted-consul".into())
        .spawn(move || {
            let script = [(100, 100), (5, 5), (7, 7)];
            let mut held = Vec::new();
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        break;
                    }
                    let mut header = String::new();
                    while reader.read_line(&mut header).unwrap_or(0) > 2 {
                        header.clear();
                    }
                    let n = {
                        let mut l = log.lock().unwrap();
                        l.push(request_line.trim().to_string());
                        l.len()
                    };
                    match script.get(n - 1) {
                        Some((index, modify)) => {
                            let _ = conn.write_all(free_lock_answer(*index, *modify).as_bytes());
                        }
                        None => {
                            // Held open, unanswered, until the test ends.
                            held.push(conn);
                            break;
                        }
                    }
                }
            }
        })
        .unwrap();

    let placeholder = devserver();
    let dir = workdir("watch-backwards");
    let w = baton(
        &placeholder,
        &dir,
        "w",
        &[
            "holders",
            "-watch",
            "-json",
            "-http-addr",
            &addr,
            "svc/fake",
        ],
        &[],
    );
    assert_eq!(line(&w, 1)["token"], 100);
    assert_eq!(line(&w, 2)["token"], 5);
    assert_eq!(line(&w, 3)["token"], 7);
    let requests = wait_for("the fourth read", || {
        let r = seen.lock().unwrap().clone();
        (r.len() >= 4).then_some(r)
    });
    let index_of = |r: &str| {
        r.split(['?', '&', ' '])
            .find_map(|p| p.strip_prefix("index="))
            .map_or(0, |v| v.parse::<u64>().unwrap())
    };
    let indexes: Vec<u64> = requests.iter().map(|r| index_of(r)).collect();
    assert_eq!(
        indexes,
        vec![0, 100, 0, 7],
        "after 100 then 5, the next read starts over at 0: {requests:?}"
    );
    assert!(
        requests[1].contains("wait=5m") || requests[1].contains("wait=300"),
        "a blocking read names its wait: {requests:?}"
    );
}

#[test]
fn leader_watch_ends_cleanly_on_sigterm() {
    let dev = devserver();
    let dir = workdir("leader-watch-term");
    let mut w = baton(
        &dev,
        &dir,
        "w",
        &["leader", "-watch", "-json", "svc/lw"],
        &[],
    );
    assert_eq!(line(&w, 1)["leader"], Value::Null);
    w.signal("TERM");
    assert_eq!(w.wait(), 0, "{}", w.stderr_text());
}
