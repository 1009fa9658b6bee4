//! A lock that follows the holder's health: a session bound to a TTL check.
//!
//! The worker registers a TTL check, binds its session to it and keeps the check
//! passing from a health function while it holds the lock. When the health
//! function starts failing (here: after a few rounds, as if a dependency went
//! away) it stops reporting; the check turns critical at the end of its TTL,
//! Consul invalidates the session, the lock is lost (the lost callback fires)
//! and a standby takes over. Exits non-zero if that does not happen.
//!
//! `cargo run -p baton-examples --bin health_checked_lock`

use std::time::{Duration, Instant};

use baton::{LockOptions, SessionOptions, TtlCheck};
use baton_examples::{run_prefix, Target};

/// Without a pass for this long the check turns critical.
const CHECK_TTL: Duration = Duration::from_secs(2);
/// The health function succeeds this many times, then fails.
const HEALTHY_ROUNDS: u32 = 6;

fn main() -> Result<(), baton::Error> {
    let target = Target::from_env();
    let key = format!("{}/leader", run_prefix("health-checked-lock"));
    let check = format!("worker-health-{}", std::process::id());
    let worker = target.client(Duration::from_secs(10), Duration::ZERO);
    let standby = target.client(Duration::from_secs(10), Duration::ZERO);
    let mut rounds = 0;
    // The application's own health function (here: healthy for HEALTHY_ROUNDS calls).
    let mut healthy = || {
        rounds += 1;
        rounds <= HEALTHY_ROUNDS
    };

    // 1. A TTL check, passing from the start (a TTL check starts critical, and
    //    Consul refuses to bind a session to a check that is not passing).
    worker.agent().check_register(
        &TtlCheck::new(&check, CHECK_TTL)
            .name("worker health")
            .status(baton::CheckStatus::Passing),
    )?;
    // 2. A session bound to it (and to the node's serfHealth, as by default);
    //    lock-delay 0 so the standby can take over as soon as the session ends.
    let session = worker.create_session(
        &SessionOptions::new()
            .name("health-checked worker")
            .ttl(Duration::from_secs(10))
            .lock_delay(Duration::ZERO)
            .node_checks(vec!["serfHealth".into(), check.clone()]),
    )?;
    let lock = worker.lock_with(&key, LockOptions::new().value("worker").session(session))?;
    assert!(lock.acquire(Some(Duration::from_secs(10)), None)?);
    let (lost_tx, lost_rx) = std::sync::mpsc::channel();
    lock.on_lost(move |why| {
        println!("worker: lock lost ({})", why.name());
        let _ = lost_tx.send(Instant::now());
    });
    println!("worker: holding {key}");
    let standby_key = key.clone();
    let takeover = std::thread::spawn(move || -> Result<bool, baton::Error> {
        let l = standby.lock_with(&standby_key, LockOptions::new().value("standby"))?;
        let got = l.acquire(Some(Duration::from_secs(30)), None)?;
        if got {
            println!("standby: took over the lock");
            l.release()?;
        }
        Ok(got)
    });

    // 3. Keep the check passing from the health function, more often than its TTL.
    let mut last_pass = Instant::now();
    loop {
        if !healthy() {
            println!("worker: health function failed: no more passes");
            break;
        }
        worker.agent().check_pass(&check, Some("ok"))?;
        last_pass = Instant::now();
        println!("worker: healthy, check passed");
        if lost_rx.recv_timeout(CHECK_TTL / 3).is_ok() {
            panic!("the lock was lost while the check was passing");
        }
    }

    // 4. The check turns critical after its TTL: the session and the lock are gone.
    let lost_at = lost_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the lock is lost after the health function failed");
    println!(
        "worker: lost {:.2?} after the last pass (check TTL {CHECK_TTL:?})",
        lost_at - last_pass
    );
    assert!(
        takeover.join().expect("standby thread")?,
        "the standby took over"
    );
    worker.agent().check_deregister(&check)?;
    worker.close(Duration::from_secs(5));
    Ok(())
}
