//! Semaphore-limited workers: six workers, at most two at work at any moment.
//!
//! Each worker is its own client (as if its own process), takes a slot of the
//! semaphore, does a job while watching the slot's cancel token, and releases.
//! The run prints who works when and checks the limit was never exceeded.
//!
//! `cargo run -p baton-examples --bin semaphore_workers`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton_examples::{run_prefix, Target};

const LIMIT: u64 = 2;

fn main() -> Result<(), baton::Error> {
    let target = Target::from_env();
    let prefix = format!("{}/slots", run_prefix("semaphore-workers"));
    let working = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (1..=6)
        .map(|n| {
            let client = target.client(Duration::from_secs(10), Duration::from_secs(1));
            let (prefix, working, most) = (prefix.clone(), working.clone(), most.clone());
            std::thread::Builder::new()
                .name(format!("worker-{n}"))
                .spawn(move || -> Result<(), baton::Error> {
                    let slots = client.semaphore(&prefix, LIMIT)?;
                    for job in 1..=2 {
                        if !slots.acquire(Some(Duration::from_secs(60)), None)? {
                            eprintln!("worker {n}: no slot within 60 s");
                            continue;
                        }
                        let now = working.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        println!("worker {n}: job {job} started ({now} at work)");
                        let lost = slots.cancel_token();
                        if lost.wait_timeout(Duration::from_millis(150)) {
                            println!("worker {n}: slot lost, abandoning job {job}");
                        }
                        working.fetch_sub(1, Ordering::SeqCst);
                        slots.release()?;
                        println!("worker {n}: job {job} done");
                    }
                    Ok(())
                })
                .expect("worker thread")
        })
        .collect();
    for w in workers {
        w.join().expect("worker thread")?;
    }
    let most = most.load(Ordering::SeqCst);
    println!("done: at most {most} workers at once (limit {LIMIT})");
    if most as u64 > LIMIT || most == 0 {
        std::process::exit(1);
    }
    Ok(())
}
