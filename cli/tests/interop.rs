//! `baton lock` against what `consul lock` writes: the lock-mode `.lock` key
//! with Go's lock flags, the semaphore contender keys and `.lock` document; the
//! semaphore limit across processes; and the acceptance check: two `baton lock`
//! processes and two `consul lock` emulations on one prefix never run their
//! children at the same time, judged from the children's own logs.

mod common;

use std::process::Command;
use std::time::Duration;

use baton::{Behavior, SessionOptions, WriteOptions, LOCK_FLAG_VALUE, SEMAPHORE_FLAG_VALUE};
use baton_devserver::DevServer;
use common::*;
use serde_json::Value;

/// Waits until a `baton` process (whose session is not in `foreign`) waits in a
/// blocking query on `prefix`: its acquire attempt has been evaluated.
fn wait_until_baton_blocks(dev: &DevServer, foreign: &[&str], prefix: &str) -> String {
    let c = client(dev);
    let sid = wait_for("baton's session", || {
        c.sessions()
            .list()
            .unwrap()
            .into_iter()
            .find(|s| !foreign.contains(&s.id.as_str()))
            .map(|s| s.id)
    });
    let first_segment = prefix.split('/').next().unwrap();
    wait_for("a blocking query by baton", || {
        dev.journal()
            .iter()
            .any(|e| {
                e.method == "GET"
                    && e.path.starts_with(&format!("/v1/kv/{first_segment}"))
                    && e.query.contains("index=")
            })
            .then_some(())
    });
    sid
}

#[test]
fn lock_mode_waits_for_a_consul_lock_holder_and_writes_what_consul_lock_reads() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("replay-lock");
    let script = child_script(&dir);
    let log = dir.join("log");
    let go = ConsulLock::new(client(&dev), "svc/replay", "cron-job");
    go.lock();
    let held = c.kv().get("svc/replay/.lock").unwrap().unwrap();
    assert_eq!(held.flags, 3304740253564472344, "Go's LockFlagValue");
    dev.record_requests(true);
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &["lock", "svc/replay", "--", script.to_str().unwrap()],
        &[
            ("LOG", log.to_str().unwrap()),
            ("ME", "a"),
            ("HOLD_MS", "300"),
        ],
    );
    let sid = wait_until_baton_blocks(&dev, &[go.session.as_str()], "svc/replay");
    assert!(
        read_log(&log).is_empty(),
        "the child must not start while consul lock holds"
    );
    go.unlock_and_clean();
    let start = wait_line(&log, "start", "a");
    assert_eq!(sequencer_session(&start), sid);
    // What consul lock reads: the key with Go's flag, held by baton's session.
    let p = c.kv().get("svc/replay/.lock").unwrap().unwrap();
    assert_eq!(p.flags, LOCK_FLAG_VALUE);
    assert_eq!(p.session.as_deref(), Some(sid.as_str()));
    assert_eq!(
        start.rest[0],
        p.modify_index.to_string(),
        "BATON_FENCING_TOKEN"
    );
    let info = c.sessions().info(&sid).unwrap().unwrap();
    assert_eq!(info.behavior, "release");
    assert_eq!(info.ttl, "15s");
    assert!(info.name.starts_with("baton lock for '"), "{}", info.name);
    wait_line(&log, "end", "a");
    assert_eq!(b.wait(), 0, "{}", b.stderr_text());
    assert!(
        c.kv().get("svc/replay/.lock").unwrap().is_none(),
        "cleaned up as consul lock does"
    );
    assert_eq!(session_count(&c), 0);
}

fn go_semaphore_holder(dev: &DevServer, prefix: &str) -> String {
    let c = client(dev);
    let sid = c
        .sessions()
        .create(
            &SessionOptions::new()
                .name(format!("Consul lock for 'x' at '{prefix}'"))
                .ttl(Duration::from_secs(15))
                .behavior(Behavior::Delete),
        )
        .unwrap();
    assert!(c
        .kv()
        .put_with(
            &format!("{prefix}/{sid}"),
            b"",
            &WriteOptions {
                flags: SEMAPHORE_FLAG_VALUE,
                acquire: Some(sid.clone()),
                ..Default::default()
            },
        )
        .unwrap());
    sid
}

fn lock_doc(dev: &DevServer, prefix: &str) -> (Value, u64) {
    let p = client(dev)
        .kv()
        .get(&format!("{prefix}/.lock"))
        .unwrap()
        .expect(".lock exists");
    assert_eq!(p.flags, SEMAPHORE_FLAG_VALUE, "Go's SemaphoreFlagValue");
    (
        serde_json::from_slice(&p.value.unwrap()).unwrap(),
        p.modify_index,
    )
}

#[test]
fn semaphore_mode_honours_the_slots_consul_lock_holds() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("replay-sem");
    let script = child_script(&dir);
    let log = dir.join("log");
    let prefix = "svc/sem";
    let (sa, sb) = (
        go_semaphore_holder(&dev, prefix),
        go_semaphore_holder(&dev, prefix),
    );
    let doc = format!(r#"{{"Limit":2,"Holders":{{"{sa}":true,"{sb}":true}}}}"#);
    assert!(c
        .kv()
        .put_with(
            &format!("{prefix}/.lock"),
            doc.as_bytes(),
            &WriteOptions {
                flags: SEMAPHORE_FLAG_VALUE,
                cas: Some(0),
                ..Default::default()
            },
        )
        .unwrap());
    dev.record_requests(true);
    let mut b = baton(
        &dev,
        &dir,
        "b",
        &["lock", "-n", "2", prefix, "--", script.to_str().unwrap()],
        &[
            ("LOG", log.to_str().unwrap()),
            ("ME", "a"),
            ("HOLD_MS", "300"),
        ],
    );
    let sid = wait_until_baton_blocks(&dev, &[&sa, &sb], prefix);
    let contender = c
        .kv()
        .get(&format!("{prefix}/{sid}"))
        .unwrap()
        .expect("contender key");
    assert_eq!(contender.flags, SEMAPHORE_FLAG_VALUE);
    assert_eq!(contender.session.as_deref(), Some(sid.as_str()));
    assert!(
        read_log(&log).is_empty(),
        "both slots are taken: the child must wait"
    );
    // consul lock's Release for holder A: CAS .lock without A, delete A's key.
    let (mut v, index) = lock_doc(&dev, prefix);
    v["Holders"].as_object_mut().unwrap().remove(&sa);
    assert!(c
        .kv()
        .put_with(
            &format!("{prefix}/.lock"),
            v.to_string().as_bytes(),
            &WriteOptions {
                flags: SEMAPHORE_FLAG_VALUE,
                cas: Some(index),
                ..Default::default()
            },
        )
        .unwrap());
    c.kv().delete(&format!("{prefix}/{sa}")).unwrap();
    c.sessions().destroy(&sa).unwrap();
    let start = wait_line(&log, "start", "a");
    assert_eq!(sequencer_session(&start), sid);
    let (v, _) = lock_doc(&dev, prefix);
    assert_eq!(v["Limit"], 2);
    let mut holders: Vec<&String> = v["Holders"].as_object().unwrap().keys().collect();
    holders.sort();
    let mut want = vec![&sb, &sid];
    want.sort();
    assert_eq!(
        holders, want,
        "baton took the freed slot in consul lock's document"
    );
    wait_line(&log, "end", "a");
    assert_eq!(b.wait(), 0, "{}", b.stderr_text());
    let (v, _) = lock_doc(&dev, prefix);
    let left: Vec<&String> = v["Holders"].as_object().unwrap().keys().collect();
    assert_eq!(
        left,
        vec![&sb],
        "baton gave its slot back; .lock stays while B holds"
    );
    assert_eq!(session_count(&c), 1, "only consul lock's B session is left");
}

#[test]
fn mixing_lock_and_semaphore_mode_on_one_prefix_is_a_conflict_as_in_consul_lock() {
    let dev = devserver();
    let go = ConsulLock::new(client(&dev), "svc/mix", "x");
    go.lock();
    let (code, _, err) = baton_output(&dev, &["lock", "-n", "2", "svc/mix", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not match semaphore use"), "{err}");
    go.unlock_and_clean();
    let sb = go_semaphore_holder(&dev, "svc/mix2");
    let c = client(&dev);
    let doc = format!(r#"{{"Limit":2,"Holders":{{"{sb}":true}}}}"#);
    c.kv()
        .put_with(
            "svc/mix2/.lock",
            doc.as_bytes(),
            &WriteOptions {
                flags: SEMAPHORE_FLAG_VALUE,
                cas: Some(0),
                ..Default::default()
            },
        )
        .unwrap();
    let (code, _, err) = baton_output(&dev, &["lock", "svc/mix2", "true"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not match lock use"), "{err}");
    assert_eq!(session_count(&c), 1, "baton's sessions are gone");
}

#[test]
fn at_most_n_children_run_across_baton_lock_n_processes() {
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("slots");
    let script = child_script(&dir);
    let log = dir.join("log");
    let mut procs: Vec<Baton> = (0..4)
        .map(|i| {
            let me = format!("p{i}");
            baton(
                &dev,
                &dir,
                &me,
                &[
                    "lock",
                    "-n",
                    "2",
                    "svc/slots",
                    "--",
                    script.to_str().unwrap(),
                ],
                &[
                    ("LOG", log.to_str().unwrap()),
                    ("ME", &me),
                    ("HOLD_MS", "300"),
                ],
            )
        })
        .collect();
    for p in procs.iter_mut() {
        assert_eq!(p.wait(), 0, "{}", p.stderr_text());
    }
    let lines = read_log(&log);
    let starts = lines.iter().filter(|l| l.kind == "start").count();
    let max = max_concurrency(&lines);
    println!("4 x `baton lock -n 2`: {starts} runs, at most {max} at once");
    assert_eq!(starts, 4);
    assert!(max <= 2, "{max} children ran at once with -n 2");
    assert_eq!(session_count(&c), 0);
    assert!(
        c.kv().list("svc/slots").unwrap().is_empty(),
        "prefix cleaned up"
    );
}

#[test]
fn two_baton_locks_and_two_consul_locks_never_run_children_at_once() {
    const ROUNDS: usize = 3;
    let dev = devserver();
    let c = client(&dev);
    let dir = workdir("accept");
    let script = child_script(&dir);
    let log = dir.join("log");
    std::thread::scope(|s| {
        for w in 0..2 {
            let (dev, dir, script, log) = (&dev, &dir, &script, &log);
            s.spawn(move || {
                for k in 0..ROUNDS {
                    let me = format!("baton{w}-{k}");
                    let mut b = baton(
                        dev,
                        dir,
                        &me,
                        &["lock", "svc/accept", "--", script.to_str().unwrap()],
                        &[
                            ("LOG", log.to_str().unwrap()),
                            ("ME", &me),
                            ("HOLD_MS", "100"),
                        ],
                    );
                    assert_eq!(b.wait(), 0, "{me}: {}", b.stderr_text());
                }
            });
        }
        for w in 0..2 {
            let (dev, script, log) = (&dev, &script, &log);
            s.spawn(move || {
                for k in 0..ROUNDS {
                    let me = format!("consul{w}-{k}");
                    let go = ConsulLock::new(client(dev), "svc/accept", "child.sh");
                    go.lock();
                    let st = Command::new("sh")
                        .arg(script)
                        .env("LOG", log)
                        .env("ME", &me)
                        .env("HOLD_MS", "100")
                        .status()
                        .unwrap();
                    assert!(st.success(), "{me}");
                    go.unlock_and_clean();
                }
            });
        }
    });
    let lines = read_log(&log);
    let starts = lines.iter().filter(|l| l.kind == "start").count();
    let max = max_concurrency(&lines);
    let mut last = 0.0;
    for l in &lines {
        assert!(l.at >= last, "log times go forward: {l:?}");
        last = l.at;
    }
    println!(
        "2 baton lock + 2 consul lock writers, {ROUNDS} rounds each: {starts} runs, at most {max} at once"
    );
    assert_eq!(starts, 4 * ROUNDS);
    assert_eq!(max, 1, "two children ran at once");
    assert_eq!(session_count(&c), 0);
}

#[test]
fn the_checker_sees_an_overlap() {
    let line = |kind: &str, who: &str| Line {
        kind: kind.into(),
        who: who.into(),
        at: 0.0,
        rest: vec![],
    };
    let ok = [
        line("start", "a"),
        line("end", "a"),
        line("start", "b"),
        line("term", "b"),
    ];
    assert_eq!(max_concurrency(&ok), 1);
    let overlap = [
        line("start", "a"),
        line("start", "b"),
        line("end", "a"),
        line("end", "b"),
    ];
    assert_eq!(max_concurrency(&overlap), 2);
    assert!(check_log(&[line("start", "a")]).is_err(), "never ended");
    assert!(check_log(&[line("end", "a")]).is_err(), "never started");
    assert!(check_log(&[line("start", "a"), line("start", "a")]).is_err());
}
