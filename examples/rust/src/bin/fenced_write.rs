//! A fenced write: a stale leader's late write is refused by Consul.
//!
//! Leader A writes a record behind its sequencer, then stalls (think: a long GC
//! pause). Meanwhile its session dies and B is elected. When A wakes and writes
//! again with its old sequencer, the `check-session` in front of its transaction
//! fails and nothing is written; B's write goes through. The sequencer's `token`
//! (a raft index) also grows, so storage outside Consul can fence on it.
//!
//! `cargo run -p baton-examples --bin fenced_write`

use std::time::Duration;

use baton::KvOp;
use baton_examples::{run_prefix, Target};

fn main() -> Result<(), baton::Error> {
    let target = Target::from_env();
    let prefix = run_prefix("fenced-write");
    let (key, record) = (format!("{prefix}/leader"), format!("{prefix}/record"));
    let ttl = Duration::from_secs(10);
    let a_client = target.client(ttl, Duration::ZERO);
    let b_client = target.client(ttl, Duration::ZERO);

    let a = a_client.election(&key)?;
    assert!(a.campaign(b"A", Some(Duration::from_secs(30)), None)?);
    let seq_a = a.sequencer().expect("leader");
    a_client.guarded_txn(&seq_a, &[KvOp::set(&record, b"written by A", 0)])?;
    println!("A: leader with sequencer {seq_a}; wrote the record");

    // A stalls; its session expires (destroyed here, to keep the example short).
    let a_session = a_client.default_session()?;
    b_client.sessions().destroy(a_session.id())?;
    let b = b_client.election(&key)?;
    assert!(b.campaign(b"B", Some(Duration::from_secs(30)), None)?);
    let seq_b = b.sequencer().expect("leader");
    println!("B: leader with sequencer {seq_b}");

    // A wakes up and, unaware, writes with its old sequencer.
    println!(
        "A: is my sequencer still current? {}",
        a_client.check_sequencer(&seq_a)?
    );
    match a_client.guarded_txn(&seq_a, &[KvOp::set(&record, b"late write by A", 0)]) {
        Ok(_) => {
            eprintln!("A's stale write was applied: fencing failed");
            std::process::exit(1);
        }
        Err(e) => println!("A: write refused: {e}"),
    }
    b_client.guarded_txn(&seq_b, &[KvOp::set(&record, b"written by B", 0)])?;
    let value = b_client
        .kv()
        .get(&record)?
        .and_then(|p| p.value)
        .unwrap_or_default();
    println!(
        "record = {:?}; tokens: A {} < B {}",
        String::from_utf8_lossy(&value),
        seq_a.token,
        seq_b.token
    );
    if value != b"written by B" || seq_b.token <= seq_a.token {
        std::process::exit(1);
    }
    Ok(())
}
