//! Locks, elections, fencing and the low-level API on the Consul versions whose
//! answers differ (the README's compatibility table), against dev servers
//! emulating them. Against a real Consul (`BATON_TEST_CONSUL`) only the
//! version-independent checks run, on that server.

mod common;

use std::time::Duration;

use baton::{Client, ErrorKind, KvOp, LockOptions, Sequencer, SessionOptions, LOCK_FLAG_VALUE};
use baton_devserver::{Config, ConsulVersion, DevServer};
use common::{unique, Fixture, TTL_MIN};

/// What Consul before 1.6.2 stores for Go's lock flag sent in a txn body.
const ROUNDED_LOCK_FLAG: u64 = 3304740253564472320;

/// A dev server emulating `version`, or the real Consul of `BATON_TEST_CONSUL`
/// (then `None` for the version: checks that need a known version skip).
fn server(version: &str) -> (Fixture, Option<ConsulVersion>) {
    let v: ConsulVersion = version.parse().expect("a version");
    let f = Fixture::start_with(Config {
        session_ttl_min: TTL_MIN,
        consul_version: v,
        ..Config::default()
    });
    let known = f.dev.is_some().then_some(v);
    (f, known)
}

/// The key's JSON exactly as the server sends it (flags parsed as u64 from the
/// JSON text, not through a float).
fn raw_entry(f: &Fixture, key: &str) -> Option<serde_json::Value> {
    let url = format!("{}/v1/kv/{}", f.url(), baton::encode_key(key));
    let mut resp = match ureq::get(&url).call() {
        Ok(r) => r,
        Err(ureq::Error::StatusCode(404)) => return None,
        Err(e) => panic!("GET {url}: {e}"),
    };
    let body = resp.body_mut().read_to_string().expect("body");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    v.as_array().and_then(|a| a.first()).cloned()
}

fn raw_flags(f: &Fixture, key: &str) -> u64 {
    raw_entry(f, key).expect("key exists")["Flags"]
        .as_u64()
        .expect("Flags is a u64")
}

const VERSIONS: [&str; 4] = ["1.0.8", "1.6.1", "1.6.2", "current"];

/// Issue 13: on a `< 1.6.2` server the lock txn stores a rounded flag; baton
/// repairs it while holding, so what stays on the key is always Go's flag, and
/// the sequencer names the stored entry.
#[test]
fn every_version_keeps_go_s_exact_lock_flag() {
    for version in VERSIONS {
        let (f, _) = server(version);
        let c = f.client();
        let key = unique(&format!("flag-{version}"));
        let lock = c
            .lock_with(&key, LockOptions::new().value(b"me".to_vec()))
            .unwrap();
        for round in 0..3 {
            assert!(lock.try_acquire().unwrap(), "{version} round {round}");
            assert_eq!(
                raw_flags(&f, &key),
                LOCK_FLAG_VALUE,
                "{version} round {round}"
            );
            let seq = lock.sequencer().expect("held");
            let entry = raw_entry(&f, &key).unwrap();
            assert_eq!(
                entry["LockIndex"].as_u64(),
                Some(seq.lock_index),
                "{version}"
            );
            assert!(
                entry["ModifyIndex"].as_u64().unwrap() >= seq.token,
                "{version}: token {} is not an index the key had",
                seq.token
            );
            assert!(c.check_sequencer(&seq).unwrap(), "{version}");
            assert!(lock.release().unwrap(), "{version}");
            let entry = raw_entry(&f, &key).unwrap();
            assert_eq!(entry["Flags"].as_u64(), Some(LOCK_FLAG_VALUE), "{version}");
            assert!(
                entry.get("Session").is_none_or(|s| s.is_null()),
                "{version}"
            );
        }
        c.close(Duration::from_secs(5));
    }
}

/// A lock key a `< 1.6.2` server stored with the rounded flag (its holder died
/// before the repair) is still a lock key to baton: an election reads its
/// leader, and the next acquire writes the exact flag.
#[test]
fn a_key_left_with_the_rounded_flag_is_taken_and_repaired() {
    let (f, _) = server("1.0.8");
    let c = f.client();
    let key = unique("rounded");
    let s = c
        .sessions()
        .create(&SessionOptions::new().lock_delay(Duration::ZERO))
        .unwrap();
    assert!(c.kv().acquire(&key, b"old", &s, ROUNDED_LOCK_FLAG).unwrap());
    let leader = c.leader(&key).unwrap().expect("a leader");
    assert_eq!(leader.session, s);
    c.sessions().destroy(&s).unwrap();
    let lock = c.lock(&key).unwrap();
    assert!(lock.acquire(Some(Duration::from_secs(10)), None).unwrap());
    assert_eq!(raw_flags(&f, &key), LOCK_FLAG_VALUE);
    lock.release().unwrap();
    assert_eq!(raw_flags(&f, &key), LOCK_FLAG_VALUE);
}

/// Go's replay sees a baton lock as a lock (exact flag) on every version, and
/// baton sees a Go-held key as held.
#[test]
fn a_go_style_acquire_and_baton_exclude_each_other_on_every_version() {
    for version in VERSIONS {
        let (f, _) = server(version);
        let c = f.client();
        let key = unique(&format!("go-{version}"));
        let lock = c.lock(&key).unwrap();
        assert!(lock.try_acquire().unwrap());
        // Go's Lock: GET, then refuse a key whose flags are not LockFlagValue.
        let p = c.kv().get(&key).unwrap().unwrap();
        assert_eq!(
            p.flags, LOCK_FLAG_VALUE,
            "{version}: Go would see a foreign key"
        );
        lock.release().unwrap();
        // Go acquires (flags in the query string); baton must see it held.
        let go = c.sessions().create(&SessionOptions::new()).unwrap();
        assert!(c.kv().acquire(&key, b"go", &go, LOCK_FLAG_VALUE).unwrap());
        let other = f.client();
        assert!(
            !other.lock(&key).unwrap().try_acquire().unwrap(),
            "{version}"
        );
        assert!(c.kv().release(&key, b"go", &go, LOCK_FLAG_VALUE).unwrap());
        c.sessions().destroy(&go).unwrap();
        assert!(
            other.lock(&key).unwrap().try_acquire().unwrap(),
            "{version}"
        );
        other.close(Duration::from_secs(5));
    }
}

/// Guarded writes with flags a float64 cannot hold: refused before sending,
/// once the server is known to round them, which a client learns before its
/// first such write.
#[test]
fn guarded_writes_with_big_flags_are_repaired_then_refused_on_old_servers() {
    let (f, version) = server("1.0.8");
    let c = f.client();
    let key = unique("guard");
    let data = format!("{key}-data");
    let lock = c.lock(&key).unwrap();
    assert!(lock.try_acquire().unwrap());
    let seq: Sequencer = lock.sequencer().unwrap();
    let big = (1u64 << 60) + 1;
    if version.is_none() && !f.before("1.6.2") {
        // A real Consul that stores txn numbers exactly (or will not say its version).
        c.guarded_txn(&seq, &[KvOp::set(&data, b"1", big)]).unwrap();
        assert_eq!(raw_flags(&f, &data), big);
        return;
    }
    // The lock's own first acquire taught this client that the server rounds.
    let e = c
        .guarded_txn(&seq, &[KvOp::set(&data, b"1", big)])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("1.6.2"), "{e}");
    assert!(raw_entry(&f, &data).is_none(), "nothing may be written");
    // A fresh client learns it before its first such write (issue 31 item 7):
    // refused, and nothing written either.
    let fresh = f.client();
    let e = fresh
        .guarded_txn(&seq, &[KvOp::set(&data, b"2", big)])
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(raw_entry(&f, &data).is_none(), "nothing may be written");
    // Written through the KV path (flags in the query string), they are exact.
    assert!(fresh
        .kv()
        .put_with(
            &data,
            b"2",
            &baton::WriteOptions {
                flags: big,
                ..Default::default()
            }
        )
        .unwrap());
    assert_eq!(raw_flags(&f, &data), big);
    // Small flags are exact on every version.
    fresh
        .guarded_txn(&seq, &[KvOp::set(&data, b"3", 7)])
        .unwrap();
    assert_eq!(raw_flags(&f, &data), 7);
}

/// `get-or-empty` and more than 64 ops need Consul 1.14.0: before, the error
/// names the version, and the same call is refused without a request after.
#[test]
fn verbs_and_op_caps_of_newer_versions_name_the_version() {
    let (f, version) = server("1.13.7");
    let Some(_) = version else {
        eprintln!("skipped against real Consul: needs a known version");
        return;
    };
    let dev = f.dev.as_ref().unwrap();
    let c = f.client();
    let p = unique("verbs");
    let e = c.txn(&[KvOp::get_or_empty(&format!("{p}/x"))]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("1.14.0"), "{e}");
    let before = dev.request_counts().total;
    let e = c.txn(&[KvOp::get_or_empty(&format!("{p}/x"))]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert_eq!(
        dev.request_counts().total,
        before,
        "refused without a request"
    );
    let ops = |n: usize| -> Vec<KvOp> {
        (0..n)
            .map(|i| KvOp::check_not_exists(&format!("{p}/{i}")))
            .collect()
    };
    c.txn(&ops(64)).unwrap();
    let e = c.txn(&ops(65)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(
        e.to_string().contains("64") && e.to_string().contains("1.14.0"),
        "{e}"
    );
    let before = dev.request_counts().total;
    assert_eq!(c.txn(&ops(65)).unwrap_err().kind(), ErrorKind::Unsupported);
    assert_eq!(dev.request_counts().total, before);

    let (f, _) = server("1.14.0");
    let c = f.client();
    c.txn(&[KvOp::get_or_empty(&format!("{p}/x"))]).unwrap();
    c.txn(&ops(128)).unwrap();
    assert_eq!(
        c.txn(&ops(129)).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

/// "No checks" and "these checks" take effect before 1.7.0 (`Checks`) and
/// after (`NodeChecks`/`ServiceChecks`): a failed node invalidates only the
/// sessions bound to its serfHealth.
#[test]
fn session_checks_take_effect_on_every_version() {
    for version in ["1.0.8", "1.6.1", "1.7.2", "current"] {
        let (f, known) = server(version);
        let c = f.client();
        let none = c
            .sessions()
            .create(&SessionOptions::new().node_checks(vec![]))
            .unwrap();
        let serf = c
            .sessions()
            .create(&SessionOptions::new().node_checks(vec!["serfHealth".into()]))
            .unwrap();
        let default = c.sessions().create(&SessionOptions::new()).unwrap();
        let info = |id: &str| c.sessions().info(id).unwrap();
        assert!(info(&none).unwrap().bound_checks().is_empty(), "{version}");
        assert_eq!(
            info(&serf).unwrap().bound_checks(),
            vec!["serfHealth"],
            "{version}"
        );
        assert_eq!(
            info(&default).unwrap().bound_checks(),
            vec!["serfHealth"],
            "{version}"
        );
        let Some(_) = known else { continue };
        f.dev.as_ref().unwrap().fail_node();
        assert!(
            info(&none).is_some(),
            "{version}: a session without checks survives"
        );
        assert!(info(&serf).is_none(), "{version}");
        assert!(info(&default).is_none(), "{version}");
        f.dev.as_ref().unwrap().heal_node();
        c.sessions().destroy(&none).unwrap();
    }
}

/// The library starts the dev server's emulation from its config, and the
/// agent reports the version it emulates.
#[test]
fn the_dev_server_reports_the_version_it_emulates() {
    let dev = DevServer::start(Config {
        consul_version: "1.6.1".parse().unwrap(),
        ..Config::default()
    })
    .unwrap();
    let c = Client::builder().address(dev.http_addr()).build().unwrap();
    let mut resp = ureq::get(&format!("{}/v1/agent/self", dev.url()))
        .call()
        .unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["Config"]["Version"], "1.6.1");
    c.close(Duration::from_secs(5));
}

/// On a `< 1.6.2` server a fresh client's first campaign writes the rounded flag
/// and then the exact one: observers see one leader, with the index the
/// leader's sequencer carries, not the transient entry too.
#[test]
fn observers_see_one_leader_per_campaign_on_old_servers() {
    let (f, _) = server("1.0.8");
    let watcher = f.client();
    let key = unique("observe-old");
    let mut obs = watcher.observe_leader(&key).unwrap();
    let wait = Some(Duration::from_secs(10));
    assert_eq!(obs.next(wait, None).unwrap(), baton::LeaderEvent::NoLeader);
    for round in 0..5 {
        let c = f.client();
        let e = c.election(&key).unwrap();
        assert!(e.campaign(b"one", wait, None).unwrap());
        let seq = e.sequencer().unwrap();
        match obs.next(wait, None).unwrap() {
            baton::LeaderEvent::Leader(l) => {
                assert_eq!(l.token, seq.token, "round {round}");
                assert_eq!(l.lock_index, seq.lock_index, "round {round}");
            }
            other => panic!("round {round}: {other:?}"),
        }
        assert!(e.resign().unwrap());
        assert_eq!(
            obs.next(wait, None).unwrap(),
            baton::LeaderEvent::NoLeader,
            "round {round}"
        );
        c.close(Duration::from_secs(5));
    }
}

/// Issue 31 item 7: on a Consul before 1.6.2 a new client's first lock write
/// went out as a txn, and its rounded flag stood on the shared key until the
/// repair: a Go `api.Lock` reading then failed with "Existing key does not
/// match lock use". Now the client learns how the server stores txn numbers
/// first (a probe that writes nothing), so no rounded flag ever lands: the
/// server's journal shows no txn write of the lock flag, and a Go-format
/// reader polling the key never sees another flag.
#[test]
fn new_clients_never_land_a_rounded_lock_flag_on_an_old_server() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    for version in ["1.0.8", "1.6.1"] {
        let (f, known) = server(version);
        if known.is_none() {
            eprintln!("skipped against real Consul: needs an emulated {version}");
            return;
        }
        let dev = f.dev.as_ref().unwrap();
        let key = unique(&format!("first-write-{version}"));
        dev.record_requests(true);
        let stop = Arc::new(AtomicBool::new(false));
        let reader = {
            let (url, stop) = (
                format!("{}/v1/kv/{}", f.url(), baton::encode_key(&key)),
                stop.clone(),
            );
            // Go's api.Lock: GET the key, and refuse flags other than LockFlagValue.
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut reads = 0u32;
                while !stop.load(Ordering::SeqCst) || reads == 0 {
                    reads += 1;
                    if let Ok(mut r) = ureq::get(&url).call() {
                        let body = r.body_mut().read_to_string().unwrap();
                        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                        let flags = v[0]["Flags"].as_u64().unwrap();
                        if flags != LOCK_FLAG_VALUE {
                            seen.push(flags);
                        }
                    }
                }
                seen
            })
        };
        // A new client per holding, as `baton lock` is a new client every run.
        for round in 0..10 {
            let c = f.client();
            let lock = c.lock(&key).unwrap();
            assert!(
                lock.acquire(Some(Duration::from_secs(10)), None).unwrap(),
                "{version} round {round}"
            );
            assert!(lock.release().unwrap(), "{version} round {round}");
            assert!(c.close(Duration::from_secs(5)), "{version} round {round}");
        }
        stop.store(true, Ordering::SeqCst);
        let seen = reader.join().unwrap();
        assert!(seen.is_empty(), "{version}: a Go reader saw flags {seen:?}");
        let flag = LOCK_FLAG_VALUE.to_string();
        let txn_writes: Vec<String> = dev
            .journal()
            .into_iter()
            .filter(|e| e.path == "/v1/txn" && e.body.contains(&flag))
            .map(|e| e.body)
            .collect();
        assert!(
            txn_writes.is_empty(),
            "{version}: the lock flag went out in a txn body: {txn_writes:?}"
        );
        assert_eq!(raw_flags(&f, &key), LOCK_FLAG_VALUE, "{version}");
    }
}
