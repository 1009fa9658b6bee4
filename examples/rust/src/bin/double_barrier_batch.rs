//! A batch computation on four workers that must start together and must not be
//! torn down before all have finished: a double barrier, on tokio, with baton's
//! futures (`baton::aio`), plus a shared counter of the items processed.
//!
//! Each worker (its own client, as if its own process) `enter`s the barrier —
//! nobody starts until all four are there — processes its share, adds what it did
//! to the counter, then `leave`s — nobody tears down until all four are done. A
//! fifth worker arrives late, after the round is open: it is not counted in, and
//! its `enter` times out with nothing left behind. The run checks that no worker
//! finished leaving before the last one was done, that the latecomer left no key
//! behind, and that the counter holds every item.
//!
//! `cargo run -p baton-examples --bin double_barrier_batch`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton::aio::{AsyncClient, AsyncCounter, AsyncDoubleBarrier};
use baton::CancelToken;
use baton_examples::{run_prefix, Target};

const WORKERS: usize = 4;
const ITEMS_EACH: i64 = 25;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), baton::Error> {
    let target = Target::from_env();
    let prefix = run_prefix("double-barrier-batch");
    let never = CancelToken::new();
    let entered = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for n in 0..WORKERS {
        let client = target.client(Duration::from_secs(10), Duration::from_secs(1));
        let barrier = client.double_barrier(&format!("{prefix}/round"), WORKERS)?;
        let counter = client.counter(&format!("{prefix}/processed"))?;
        let (entered, done, never) = (entered.clone(), done.clone(), never.clone());
        workers.push(tokio::spawn(async move {
            assert!(
                barrier
                    .enter_async(Some(Duration::from_secs(30)), &never)
                    .await?
            );
            let seen = entered.fetch_add(1, Ordering::SeqCst) + 1;
            println!("worker {n}: entered ({seen} in so far)");
            for _ in 0..ITEMS_EACH {
                counter.add_async(1).await?;
            }
            done.fetch_add(1, Ordering::SeqCst);
            println!("worker {n}: processed {ITEMS_EACH} items, leaving");
            assert!(
                barrier
                    .leave_async(Some(Duration::from_secs(30)), &never)
                    .await?
            );
            let finished = done.load(Ordering::SeqCst);
            assert_eq!(
                finished, WORKERS,
                "worker {n} left before everyone was done"
            );
            println!("worker {n}: left (all {finished} done)");
            let report = client.close_async(Duration::from_secs(10)).await?;
            assert!(report.is_complete(), "worker {n} closed with {report}");
            Ok::<_, baton::Error>(())
        }));
    }
    for w in workers {
        w.await.expect("worker task")?;
    }
    // A latecomer: the round is over and nobody else comes, so it times out, and
    // takes its participant key back with it.
    let late = target.client(Duration::from_secs(10), Duration::from_secs(1));
    let barrier = late.double_barrier(&format!("{prefix}/round"), WORKERS)?;
    let entered_late = barrier
        .enter_async(Some(Duration::from_millis(500)), &never)
        .await?;
    assert!(
        !entered_late,
        "a lone participant cannot complete a round of {WORKERS}"
    );
    let left_behind = late.kv().list(&format!("{prefix}/round/participants/"))?;
    assert!(
        left_behind.is_empty(),
        "the timed-out enter left {left_behind:?}"
    );
    let total = late
        .counter(&format!("{prefix}/processed"))?
        .get_async()
        .await?;
    assert_eq!(total, WORKERS as i64 * ITEMS_EACH);
    println!("latecomer: timed out with nothing left behind; {total} items processed in all");
    late.kv().delete_tree(&prefix)?;
    let report = late.close_async(Duration::from_secs(10)).await?;
    assert!(report.is_complete(), "latecomer closed with {report}");
    Ok(())
}
