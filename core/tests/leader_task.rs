//! The leader task against the dev server: one task at a time, hand-over and
//! requeue, the loss ordering rule (the lost leader's token fires before the
//! next leader's task starts), `stop` in both phases, and the callbacks.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use baton::{CancelToken, Client, Error, ErrorKind, LeaderTask, SessionOptions};
use common::{unique, Fixture};
use crossbeam_channel::{select, unbounded, Receiver, Sender};

/// An upper bound for conditions that should come about; never a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// A client whose default session holds its keys back for `lock_delay` after
/// it is invalidated (Consul's default is 15 s; shorter keeps the test short).
fn client_with_lock_delay(f: &Fixture, lock_delay: Duration) -> Client {
    f.builder()
        .default_session(SessionOptions::default_for_client().lock_delay(lock_delay))
        .build()
        .unwrap()
}

fn recv<T>(rx: &Receiver<T>, what: &str) -> T {
    rx.recv_timeout(PATIENCE)
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Runs `lt` on a thread named after it; the thread returns `run`'s result and the task.
fn spawn_run(
    name: &str,
    lt: LeaderTask,
    stop: CancelToken,
    task: impl FnMut(&CancelToken) -> baton::Result<()> + Send + 'static,
) -> thread::JoinHandle<(baton::Result<()>, LeaderTask)> {
    thread::Builder::new()
        .name(format!("test-leader-{name}"))
        .spawn(move || {
            let r = lt.run(task, &stop);
            (r, lt)
        })
        .unwrap()
}

#[test]
fn two_candidates_take_turns_one_task_at_a_time_and_requeue() {
    let f = Fixture::start();
    let key = unique("leader-task-turns");
    let (ca, cb) = (f.client(), f.client());
    let running = Arc::new(AtomicUsize::new(0));
    let overlap = Arc::new(AtomicBool::new(false));
    let (started_tx, started_rx) = unbounded::<&'static str>();
    let (release_tx, release_rx) = unbounded::<()>();
    let mut handles = Vec::new();
    let mut stops: Vec<(&str, CancelToken)> = Vec::new();
    // a's requeue is long enough for b to take over whatever the load; b's is longer still, so
    // that the third term is a's whatever the load: b's term ends a few ms after a's, and with
    // equal delays the two requeues would end a few ms apart (under load, b's first).
    for (name, client, requeue) in [("a", &ca, 10), ("b", &cb, 60)] {
        let lt = client
            .leader_task(&key, name)
            .unwrap()
            .requeue_delay(Duration::from_secs(requeue));
        let (running, overlap) = (running.clone(), overlap.clone());
        let (started_tx, release_rx) = (started_tx.clone(), release_rx.clone());
        let stop = CancelToken::new();
        stops.push((name, stop.clone()));
        handles.push(spawn_run(name, lt, stop, move |token| {
            if running.fetch_add(1, Ordering::SeqCst) != 0 {
                overlap.store(true, Ordering::SeqCst);
            }
            started_tx.send(name).unwrap();
            select! {
                recv(release_rx) -> _ => {}
                recv(token.receiver()) -> _ => {}
            }
            running.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }));
    }
    let first = recv(&started_rx, "a first leader");
    release_tx.send(()).unwrap();
    let second = recv(&started_rx, "the other candidate's term");
    assert_ne!(
        first, second,
        "the task returned: the other candidate leads next"
    );
    release_tx.send(()).unwrap();
    let third = recv(&started_rx, "the first candidate's second term");
    assert_eq!(
        third, first,
        "with requeue the first candidate campaigned again"
    );
    // The candidate waiting for its turn stops first: stopping the leader first would free
    // the key for it, and it could begin a term before its own stop.
    stops.sort_by_key(|(name, _)| *name == third);
    for (_, s) in &stops {
        s.cancel();
    }
    for h in handles {
        let (r, lt) = h.join().unwrap();
        r.unwrap();
        assert!(!lt.is_leader());
    }
    assert!(!overlap.load(Ordering::SeqCst), "two tasks ran at once");
    assert_eq!(running.load(Ordering::SeqCst), 0);
    assert!(started_rx.try_recv().is_err(), "no term after stop");
    assert_eq!(f.client().leader(&key).unwrap(), None, "nothing held");
}

/// The ordering rule: when the leader's session is destroyed under it, its
/// task's token fires strictly before the next leader's task starts (on one
/// monotonic clock), because the key is held back for the session's
/// lock-delay while the holder learns of the loss at once.
#[test]
fn a_lost_leader_s_token_fires_before_the_next_leader_s_task_starts() {
    let f = Fixture::start();
    for round in 0..5 {
        let key = unique("leader-task-order");
        let lock_delay = Duration::from_secs(1);
        let (ca, cb) = (
            client_with_lock_delay(&f, lock_delay),
            client_with_lock_delay(&f, lock_delay),
        );
        let (tx, rx) = unbounded::<(&'static str, Instant)>();
        let (a_stopped_tx, a_stopped_rx) = unbounded::<String>();
        let (b_sees_tx, b_sees_rx) = unbounded::<Option<Vec<u8>>>();

        // A runs one term: with requeue it would campaign again at once and
        // could win the key back when the lock-delay ends, as B may.
        let a = ca
            .leader_task(&key, "a")
            .unwrap()
            .requeue(false)
            .on_stopped_leading(move |why| a_stopped_tx.send(why.to_string()).unwrap());
        let stop_a = CancelToken::new();
        let a_tx = tx.clone();
        let a_thread = spawn_run("a", a, stop_a.clone(), move |token| {
            a_tx.send(("a started", Instant::now())).unwrap();
            let _ = token.receiver().recv(); // disconnects when the token fires
            a_tx.send(("a token fired", Instant::now())).unwrap();
            Ok(())
        });
        assert_eq!(recv(&rx, "a leads").0, "a started");
        let sid_a = ca.default_session().unwrap().id().to_string();

        let b = cb
            .leader_task(&key, "b")
            .unwrap()
            .on_new_leader(move |l| b_sees_tx.send(l.map(|l| l.value)).unwrap());
        let stop_b = CancelToken::new();
        let b_tx = tx.clone();
        let b_thread = spawn_run("b", b, stop_b.clone(), move |token| {
            b_tx.send(("b started", Instant::now())).unwrap();
            let _ = token.receiver().recv();
            Ok(())
        });
        // B runs (its feed reports A), so it is campaigning or about to.
        assert_eq!(recv(&b_sees_rx, "b observes a"), Some(b"a".to_vec()));

        // A "crashes": its session is destroyed from a third client.
        f.client().sessions().destroy(&sid_a).unwrap();
        let mut a_fired = None;
        let mut b_started = None;
        while a_fired.is_none() || b_started.is_none() {
            let (what, at) = recv(&rx, "a's loss and b's term");
            match what {
                "a token fired" => a_fired = Some(at),
                "b started" => b_started = Some(at),
                other => panic!("round {round}: unexpected {other}"),
            }
        }
        let (a_fired, b_started) = (a_fired.unwrap(), b_started.unwrap());
        assert!(
            a_fired < b_started,
            "round {round}: a's token fired {:?} after b's task started",
            a_fired - b_started
        );
        eprintln!(
            "round {round}: a's token fired {:?} before b's task started",
            b_started - a_fired
        );
        let why = recv(&a_stopped_rx, "a's term ended");
        assert!(why.starts_with("lost: session_lost"), "{why}");

        // A's one term ended with the loss: `run` returned Ok, nothing held.
        let (r, a) = a_thread.join().unwrap();
        r.unwrap();
        assert!(!stop_a.is_cancelled());
        assert!(!a.is_leader());
        stop_b.cancel();
        let (r, b) = b_thread.join().unwrap();
        r.unwrap();
        assert!(!b.is_leader());
        assert_eq!(f.client().leader(&key).unwrap(), None, "nothing held");
        assert!(rx.try_recv().is_err(), "no other term: {:?}", rx.try_recv());
    }
}

#[test]
fn stop_while_campaigning_returns_with_nothing_held() {
    let f = Fixture::start();
    let key = unique("leader-task-stop-campaign");
    let (ca, cb) = (f.client(), f.client());
    let holder = ca.election(&key).unwrap();
    assert!(holder.campaign(b"holder", Some(PATIENCE), None).unwrap());

    let (sees_tx, sees_rx) = unbounded::<Option<Vec<u8>>>();
    let stopped_called = Arc::new(AtomicBool::new(false));
    let called = stopped_called.clone();
    let lt = cb
        .leader_task(&key, "waiter")
        .unwrap()
        .on_new_leader(move |l| sees_tx.send(l.map(|l| l.value)).unwrap())
        .on_stopped_leading(move |_| called.store(true, Ordering::SeqCst));
    let ran = Arc::new(AtomicBool::new(false));
    let ran2 = ran.clone();
    let stop = CancelToken::new();
    let (done_tx, done_rx) = unbounded();
    let t = spawn_run("waiter", lt, stop.clone(), move |_| {
        ran2.store(true, Ordering::SeqCst);
        Ok(())
    });
    assert_eq!(recv(&sees_rx, "the waiter runs"), Some(b"holder".to_vec()));
    stop.cancel();
    thread::spawn(move || done_tx.send(t.join().unwrap()).unwrap());
    let (r, lt) = recv(&done_rx, "run returns after stop");
    r.unwrap();
    assert!(!lt.is_leader());
    assert!(!ran.load(Ordering::SeqCst), "the task never ran");
    assert!(!stopped_called.load(Ordering::SeqCst), "it never led");
    let leader = f.client().leader(&key).unwrap().expect("the holder leads");
    assert_eq!(leader.value, b"holder");
    assert!(holder.is_leader());
    holder.resign().unwrap();
}

#[test]
fn stop_while_leading_fires_the_token_resigns_and_calls_back_in_order() {
    let f = Fixture::start();
    let key = unique("leader-task-stop-leading");
    let client = f.client();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let (l1, l2, l3) = (log.clone(), log.clone(), log.clone());
    let (sees_tx, sees_rx) = unbounded::<Option<Vec<u8>>>();
    let (returned, late) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (returned2, late2) = (returned.clone(), late.clone());
    let lt = client
        .leader_task(&key, "me")
        .unwrap()
        .on_started_leading(move || l1.lock().unwrap().push("started".into()))
        .on_stopped_leading(move |why| l2.lock().unwrap().push(format!("stopped: {why}")))
        .on_new_leader(move |l| {
            if returned2.load(Ordering::SeqCst) {
                late2.store(true, Ordering::SeqCst);
            }
            let _ = sees_tx.send(l.map(|l| l.value));
        });
    let stop = CancelToken::new();
    let (started_tx, started_rx) = unbounded();
    let t = spawn_run("me", lt, stop.clone(), move |token| {
        l3.lock().unwrap().push("task".into());
        started_tx.send(()).unwrap();
        let _ = token.receiver().recv();
        l3.lock().unwrap().push("token fired".into());
        Ok(())
    });
    recv(&started_rx, "the task starts");
    // The feed reports this candidate's term (maybe after an earlier "nobody").
    loop {
        if recv(&sees_rx, "the new leader is reported") == Some(b"me".to_vec()) {
            break;
        }
    }
    stop.cancel();
    let (r, lt) = t.join().unwrap();
    r.unwrap();
    assert!(!lt.is_leader());
    assert_eq!(f.client().leader(&key).unwrap(), None, "resigned");
    assert_eq!(
        *log.lock().unwrap(),
        ["started", "task", "token fired", "stopped: stopped"]
    );
    returned.store(true, Ordering::SeqCst);
    drop(lt);
    // The callback (and its sender) is gone once `lt` and every drain queued
    // for it are: none of them called it after `run` returned.
    loop {
        match sees_rx.recv_timeout(PATIENCE) {
            Ok(_) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
            Err(e) => panic!("the on_new_leader callback outlives its task: {e}"),
        }
    }
    assert!(
        !late.load(Ordering::SeqCst),
        "on_new_leader was called after run returned"
    );
}

#[test]
fn run_once_returns_the_task_s_error_after_resigning() {
    let f = Fixture::start();
    let key = unique("leader-task-once");
    let client = f.client();
    let reasons: Arc<Mutex<Vec<String>>> = Arc::default();
    let r2 = reasons.clone();
    let lt = client
        .leader_task(&key, "once")
        .unwrap()
        .requeue(false)
        .on_stopped_leading(move |why| r2.lock().unwrap().push(why.name().to_string()));
    let runs = AtomicUsize::new(0);
    let err = lt
        .run(
            |_| {
                runs.fetch_add(1, Ordering::SeqCst);
                Err(Error::new(ErrorKind::InvalidArgument, "the task gave up"))
            },
            &CancelToken::new(),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("the task gave up"), "{err}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(*reasons.lock().unwrap(), ["failed"]);
    assert!(!lt.is_leader());
    assert_eq!(f.client().leader(&key).unwrap(), None, "resigned");

    // Run once, returning Ok: one term, then `run` returns Ok.
    let lt = lt.requeue(false);
    lt.run(|_| Ok(()), &CancelToken::new()).unwrap();
    assert_eq!(*reasons.lock().unwrap(), ["failed", "returned"]);
    assert_eq!(f.client().leader(&key).unwrap(), None);
}

#[test]
fn with_requeue_a_failed_task_is_retried_and_reported() {
    let f = Fixture::start();
    let key = unique("leader-task-retry");
    let client = f.client();
    let (why_tx, why_rx): (Sender<String>, _) = unbounded();
    let lt = client
        .leader_task(&key, "retry")
        .unwrap()
        .requeue_delay(Duration::from_millis(10))
        .on_stopped_leading(move |why| why_tx.send(why.to_string()).unwrap());
    let stop = CancelToken::new();
    let mut terms = 0;
    lt.run(
        |_| {
            terms += 1;
            if terms == 3 {
                stop.cancel();
                return Ok(());
            }
            Err(Error::new(ErrorKind::Server, "flaky"))
        },
        &stop,
    )
    .unwrap();
    assert_eq!(terms, 3);
    let reasons: Vec<String> = why_rx.try_iter().collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].starts_with("failed: ") && reasons[0].contains("flaky"));
    assert!(reasons[1].starts_with("failed: "));
    assert_eq!(reasons[2], "stopped");
    assert_eq!(f.client().leader(&key).unwrap(), None);
}
