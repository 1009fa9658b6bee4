//! A leader-elected service on tokio, with baton's futures (`baton::aio`).
//!
//! Three candidates (each its own client, as if its own process) campaign for
//! one key. The leader works in ticks and `select!`s between its work and the
//! end of its leadership: the first leader has its session destroyed (as an
//! operator, or a failed health check, might) and steps down the moment it
//! learns it — within the session's lock-delay, before anyone else can lead;
//! the others lead for a few ticks and resign. An observer follows the leaders
//! as a stream. The run checks that there was never more than one leader at a
//! time, that every candidate led once, and that the first leadership ended by
//! loss.
//!
//! The examples build baton with its `tokio` feature: a lock call's socket is waited on by
//! this runtime's own reactor rather than by a readiness thread of the client's.
//!
//! `cargo run -p baton-examples --bin async_tokio`

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton::aio::{AsyncClient, AsyncElection, AsyncHold};
use baton::{LeaderEvent, LockLost};
use baton_examples::{run_prefix, Target};
use futures_core::Stream;

const CANDIDATES: usize = 3;
const WORK_TICKS: u32 = 5;

/// How one leadership ended.
#[derive(Debug, PartialEq)]
enum Ended {
    Resigned,
    Lost(LockLost),
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), baton::Error> {
    let target = Target::from_env();
    let key = format!("{}/leader", run_prefix("async-tokio"));
    let leading = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));

    // The observer prints every leader it sees until the client closes.
    let watcher = target.client(Duration::from_secs(10), Duration::from_millis(100));
    let mut leaders = watcher.observe_leader_stream(&key)?;
    let observer = tokio::spawn(async move {
        while let Some(event) = poll_fn(|cx| Pin::new(&mut leaders).poll_next(cx)).await {
            match event {
                Ok(LeaderEvent::Leader(l)) => {
                    println!("observer: {} leads", String::from_utf8_lossy(&l.value))
                }
                Ok(LeaderEvent::NoLeader) => println!("observer: no leader"),
                Err(_closed) => break,
            }
        }
    });
    // Chaos: the first candidate to say it leads has its session destroyed.
    let (elected_tx, mut elected_rx) = tokio::sync::mpsc::unbounded_channel::<(String, String)>();
    let chaos = {
        let watcher = watcher.clone();
        tokio::spawn(async move {
            if let Some((name, session)) = elected_rx.recv().await {
                watcher.destroy_session_id_async(&session).await?;
                println!("chaos: destroyed {name}'s session");
            }
            Ok::<(), baton::Error>(())
        })
    };

    let candidates: Vec<_> = (1..=CANDIDATES)
        .map(|n| {
            // A lock-delay: after a leader's session is lost, nobody else may lead
            // for this long (Consul enforces it), time for it to step down.
            let client = target.client(Duration::from_secs(10), Duration::from_millis(500));
            let (key, leading, most) = (key.clone(), leading.clone(), most.clone());
            let elected_tx = elected_tx.clone();
            tokio::spawn(async move {
                let election = client.election(&key)?;
                let name = format!("candidate-{n}");
                while !election
                    .campaign_async(name.as_bytes(), Some(Duration::from_secs(30)))
                    .await?
                {
                    println!("{name}: not elected within 30 s, campaigning again");
                }
                let now = leading.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                println!("{name}: elected");
                if let Some(seq) = election.sequencer() {
                    let _ = elected_tx.send((name.clone(), seq.session));
                }
                let mut ticks = 0;
                let lost = election.lost();
                tokio::pin!(lost);
                let ended = loop {
                    tokio::select! {
                        why = &mut lost => {
                            // Step down at once: someone else may lead already.
                            leading.fetch_sub(1, Ordering::SeqCst);
                            let why = why?;
                            println!("{name}: lost the leadership ({why}), stepping down");
                            break Ended::Lost(why);
                        }
                        _ = tokio::time::sleep(Duration::from_millis(100)) => {
                            ticks += 1;
                            println!("{name}: work tick {ticks}");
                            if ticks == WORK_TICKS {
                                leading.fetch_sub(1, Ordering::SeqCst);
                                election.resign_async().await?;
                                println!("{name}: done, resigned");
                                break Ended::Resigned;
                            }
                        }
                    }
                };
                client.close_async(Duration::from_secs(10)).await?;
                Ok::<Ended, baton::Error>(ended)
            })
        })
        .collect();

    drop(elected_tx);
    let mut ends = Vec::new();
    for c in candidates {
        ends.push(c.await.expect("candidate task")?);
    }
    chaos.await.expect("chaos task")?;
    watcher.close_async(Duration::from_secs(10)).await?;
    observer.await.expect("observer task");
    let most = most.load(Ordering::SeqCst);
    let lost = ends.iter().filter(|e| matches!(e, Ended::Lost(_))).count();
    println!(
        "done: {} leaderships in turn, at most {most} at once, {lost} ended by loss",
        ends.len()
    );
    if most != 1 || ends.len() != CANDIDATES || lost != 1 {
        std::process::exit(1);
    }
    Ok(())
}
