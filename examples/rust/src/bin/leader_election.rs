//! Leader election with failover.
//!
//! Three candidates (separate clients, as if separate processes) campaign for one
//! key; an observer prints every leader change. Each leader works while it holds
//! leadership, watching its cancel token; then it "crashes" (its session is
//! destroyed without a release) and another candidate takes over once the
//! lock-delay has passed. The run ends after every candidate has led once.
//!
//! `cargo run -p baton-examples --bin leader_election` (uses `CONSUL_HTTP_ADDR`,
//! or starts a dev server).

use std::time::{Duration, Instant};

use baton::LeaderEvent;
use baton_examples::{run_prefix, Target};

fn main() -> Result<(), baton::Error> {
    let target = Target::from_env();
    let key = format!("{}/leader", run_prefix("leader-election"));
    let lock_delay = Duration::from_millis(500);
    let ttl = Duration::from_secs(10);

    // The observer: a separate client that only watches.
    let observer_client = target.client(ttl, lock_delay);
    let mut observer = observer_client.observe_leader(&key)?;
    let observed = std::thread::Builder::new()
        .name("observer".into())
        .spawn(move || {
            let mut leaders = Vec::new();
            while leaders.len() < 3 {
                match observer.next(Some(Duration::from_secs(60)), None) {
                    Ok(LeaderEvent::Leader(l)) => {
                        let who = String::from_utf8_lossy(&l.value).into_owned();
                        println!(
                            "observer: leader is {who} (LockIndex {}, fencing token {})",
                            l.lock_index, l.token
                        );
                        if !leaders.contains(&who) {
                            leaders.push(who);
                        }
                    }
                    Ok(LeaderEvent::NoLeader) => println!("observer: no leader"),
                    Err(e) => {
                        eprintln!("observer: {e}");
                        break;
                    }
                }
            }
            leaders
        })
        .expect("observer thread");

    let started = Instant::now();
    let candidates: Vec<_> = ["node-a", "node-b", "node-c"]
        .into_iter()
        .map(|name| {
            let client = target.client(ttl, lock_delay);
            let key = key.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || -> Result<(), baton::Error> {
                    let election = client.election(&key)?;
                    if !election.campaign(name.as_bytes(), Some(Duration::from_secs(60)), None)? {
                        eprintln!("{name}: not elected within 60 s");
                        return Ok(());
                    }
                    let seq = election.sequencer().expect("a leader has a sequencer");
                    println!("{name}: elected, fencing token {} ({seq})", seq.token);
                    // Work while leading; stop at once if leadership is lost.
                    let stop = election.cancel_token();
                    for step in 1..=3 {
                        if stop.wait_timeout(Duration::from_millis(100)) {
                            println!("{name}: lost leadership, stopping work");
                            return Ok(());
                        }
                        println!("{name}: working (step {step})");
                    }
                    // Crash: the session dies without a release, so the next
                    // leader waits out the lock-delay.
                    let session = client.default_session()?;
                    println!("{name}: crashing (session destroyed, no release)");
                    client.sessions().destroy(session.id())?;
                    let why = election.wait_lost(Some(Duration::from_secs(30)), None)?;
                    println!("{name}: leadership lost ({})", why.name());
                    Ok(())
                })
                .expect("candidate thread")
        })
        .collect();
    for c in candidates {
        c.join().expect("candidate thread")?;
    }
    let leaders = observed.join().expect("observer thread");
    println!(
        "done in {:.1} s: {} leaders observed in turn: {}",
        started.elapsed().as_secs_f64(),
        leaders.len(),
        leaders.join(", ")
    );
    if leaders.len() != 3 {
        eprintln!("expected every candidate to lead once");
        std::process::exit(1);
    }
    Ok(())
}
