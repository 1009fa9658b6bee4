//! A semaphore-limited worker pool on smol, with baton's futures (`baton::aio`).
//!
//! Eight workers share one client (one process) and a semaphore of three
//! slots. Each takes a slot without blocking a thread, works while racing its
//! job against the loss of the slot, and gives the slot back. Waiting workers
//! hold no thread: the whole pool runs on one executor thread plus baton's few
//! own. The run checks the limit was never exceeded and every job ran.
//!
//! `cargo run -p baton-examples --bin async_smol`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton::aio::{AsyncClient, AsyncHold};
use baton_examples::{run_prefix, Target};
use smol::future::FutureExt;

const LIMIT: u64 = 3;
const WORKERS: usize = 8;
const JOBS: usize = 2;

/// How one job ended.
enum Job {
    Done,
    SlotLost(String),
}

fn main() -> Result<(), baton::Error> {
    let target = Target::from_env();
    let prefix = format!("{}/slots", run_prefix("async-smol"));
    let client = target.client(Duration::from_secs(10), Duration::from_secs(1));
    let working = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let executor = smol::LocalExecutor::new();
    smol::block_on(executor.run(async {
        let workers: Vec<_> = (1..=WORKERS)
            .map(|n| {
                let (client, prefix) = (client.clone(), prefix.clone());
                let (working, most, done) = (working.clone(), most.clone(), done.clone());
                executor.spawn(async move {
                    let slots = client.semaphore(&prefix, LIMIT)?;
                    for job in 1..=JOBS {
                        if !slots.acquire_async(Some(Duration::from_secs(60))).await? {
                            eprintln!("worker {n}: no slot within 60 s");
                            continue;
                        }
                        let now = working.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        println!("worker {n}: job {job} started ({now} at work)");
                        let work = async {
                            smol::Timer::after(Duration::from_millis(120)).await;
                            Job::Done
                        };
                        let lost = async {
                            match slots.lost().await {
                                Ok(why) => Job::SlotLost(why.to_string()),
                                Err(e) => Job::SlotLost(e.to_string()),
                            }
                        };
                        let outcome = work.or(lost).await;
                        working.fetch_sub(1, Ordering::SeqCst);
                        match outcome {
                            Job::Done => {
                                done.fetch_add(1, Ordering::SeqCst);
                                println!("worker {n}: job {job} done");
                            }
                            Job::SlotLost(why) => {
                                println!("worker {n}: slot lost ({why}), job {job} abandoned")
                            }
                        }
                        slots.release_async().await?;
                    }
                    Ok::<(), baton::Error>(())
                })
            })
            .collect();
        for w in workers {
            w.await?;
        }
        client.close_async(Duration::from_secs(10)).await?;
        Ok::<(), baton::Error>(())
    }))?;
    let (most, done) = (most.load(Ordering::SeqCst), done.load(Ordering::SeqCst));
    println!("done: {done} jobs, at most {most} workers at once (limit {LIMIT})");
    if most as u64 > LIMIT || most == 0 || done != WORKERS * JOBS {
        std::process::exit(1);
    }
    Ok(())
}
