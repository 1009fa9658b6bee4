//! The async API (`baton::aio`) for every row of the capabilities table that
//! `aio.rs` does not already cover: session options, adoption, the default
//! session, releases of nothing, several slots in one process, reading the
//! leader, fencing, loss reasons and callbacks, a session's loss, and a cancel
//! token. Each runs on a current-thread tokio runtime.

mod common;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use baton::aio::{AsyncClient, AsyncElection, AsyncHold};
use baton::{
    Behavior, CancelToken, CheckStatus, ErrorKind, KvOp, LockLost, LostReason, ServiceRegistration,
    SessionOptions, TtlCheck,
};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

fn block_on<F: Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn session_options_reach_consul_through_the_async_create() {
    let f = Fixture::start();
    let c = f.client();
    block_on(async {
        // A TTL of zero is refused; the client's defaults have 15 s; none only
        // when asked.
        let e = c
            .create_session_async(&SessionOptions::new().ttl(Duration::ZERO))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        let plain = c
            .create_session_async(&SessionOptions::default_for_client())
            .await
            .unwrap();
        let info = c.sessions().info(plain.id()).unwrap().expect("exists");
        assert_eq!(info.ttl(), Some(Duration::from_secs(15)));
        assert_eq!(info.lock_delay(), Duration::from_secs(15));
        assert_eq!(info.behavior, "release");
        let s = c
            .create_session_async(
                &SessionOptions::new()
                    .without_ttl()
                    .lock_delay(Duration::from_millis(1500))
                    .behavior(Behavior::Delete),
            )
            .await
            .unwrap();
        let info = c.sessions().info(s.id()).unwrap().expect("exists");
        assert_eq!(info.ttl(), None);
        assert_eq!(info.lock_delay(), Duration::from_millis(1500));
        assert_eq!(info.behavior, "delete");
        // The node option is sent: Consul refuses one it does not know.
        let e = c
            .create_session_async(&SessionOptions::new().node("baton-no-such-node"))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("Missing node registration"), "{e}");
        c.destroy_session_async(&plain).await.unwrap();
        c.destroy_session_async(&s).await.unwrap();
    });
}

#[test]
fn an_async_session_bound_to_a_service_check_ends_when_it_fails() {
    let f = Fixture::start();
    let c = f.client();
    let service = unique("aio-svc").replace('/', "-");
    let check = format!("{service}:ttl");
    c.agent()
        .service_register(&ServiceRegistration::new(&service).port(8080))
        .unwrap();
    c.agent()
        .check_register(&TtlCheck::new(&check, Duration::from_secs(30)).service_id(&service))
        .unwrap();
    c.agent()
        .check_update(&check, CheckStatus::Passing, None)
        .unwrap();
    block_on(async {
        let s = c
            .create_session_async(
                &SessionOptions::new()
                    .lock_delay(Duration::ZERO)
                    .service_check(&check),
            )
            .await
            .unwrap();
        let info = c.sessions().info(s.id()).unwrap().expect("exists");
        assert!(info.bound_checks().contains(&check), "{info:?}");
        let fail = {
            let c = c.clone();
            let check = check.clone();
            tokio::task::spawn_blocking(move || c.agent().check_fail(&check, Some("broken")))
        };
        let why = c.session_lost_async(&s).await.unwrap();
        fail.await.unwrap().unwrap();
        assert_eq!(why, LostReason::Invalidated);
    });
    c.agent().service_deregister(&service).unwrap();
}

#[test]
fn adoption_and_the_default_session_through_the_async_api() {
    let f = Fixture::start();
    let owner = f.client();
    let id = owner
        .sessions()
        .create(&SessionOptions::new().lock_delay(Duration::ZERO))
        .unwrap();
    let c = f
        .builder()
        .default_session(SessionOptions::default_for_client().lock_delay(Duration::from_secs(2)))
        .build()
        .unwrap();
    block_on(async {
        let adopted = c.adopt_session_async(&id.to_uppercase()).await.unwrap();
        assert_eq!(adopted.id(), id);
        assert!(adopted.is_valid());
        let default = c.default_session_async().await.unwrap();
        assert_eq!(default.id(), c.default_session_async().await.unwrap().id());
        let info = c.sessions().info(default.id()).unwrap().expect("exists");
        assert_eq!(
            info.lock_delay(),
            Duration::from_secs(2),
            "the configured default"
        );
    });
    // The adopted session survives its adopter's close.
    assert!(c.close_report(PATIENCE).is_complete());
    assert!(owner.sessions().info(&id).unwrap().is_some());
    owner.sessions().destroy(&id).unwrap();
}

#[test]
fn an_async_release_of_nothing_held_is_false_and_says_why() {
    let f = Fixture::start();
    let c = f.client();
    let lock = c.lock(&unique("aio-not-held")).unwrap();
    block_on(async {
        assert!(!lock.release_async().await.unwrap());
        assert!(
            lock.not_held_message().contains("never acquired"),
            "{}",
            lock.not_held_message()
        );
        assert!(lock.acquire_async(Some(PATIENCE)).await.unwrap());
        assert!(lock.release_async().await.unwrap());
        assert!(!lock.release_async().await.unwrap());
        assert!(
            lock.not_held_message().contains("released"),
            "{}",
            lock.not_held_message()
        );
    });
}

#[test]
fn async_semaphores_of_one_client_hold_several_slots_at_once() {
    let f = Fixture::start();
    let c = f.client();
    let prefix = unique("aio-slots");
    let sems: Vec<_> = (0..3).map(|_| c.semaphore(&prefix, 2).unwrap()).collect();
    assert_eq!(sems[0].limit(), 2);
    block_on(async {
        assert!(sems[0].acquire_async(Some(PATIENCE)).await.unwrap());
        assert!(sems[1].acquire_async(Some(PATIENCE)).await.unwrap());
        assert!(!sems[2].try_acquire_async().await.unwrap());
        assert!(sems[0].release_async().await.unwrap());
        assert!(sems[2].acquire_async(Some(PATIENCE)).await.unwrap());
        assert!(sems[1].release_async().await.unwrap());
        assert!(sems[2].release_async().await.unwrap());
    });
}

#[test]
fn reading_the_leader_and_fencing_through_the_async_api() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-fence");
    let data = unique("aio-fenced-data");
    let (ea, eb) = (a.election(&key).unwrap(), b.election(&key).unwrap());
    block_on(async {
        assert_eq!(b.leader_async(&key).await.unwrap(), None);
        assert!(ea.campaign_async(b"a", Some(PATIENCE)).await.unwrap());
        let seq = ea.sequencer().expect("the leader has a sequencer");
        assert_eq!(seq.key, key);
        let leader = b.leader_async(&key).await.unwrap().expect("a leads");
        assert_eq!(leader.value, b"a");
        assert_eq!(leader.lock_index, seq.lock_index);
        assert!(b.check_sequencer_async(&seq).await.unwrap());
        // A guarded put and a guarded transaction while the sequencer is current.
        b.guarded_txn_async(&seq, vec![KvOp::set(&data, b"1", 0)])
            .await
            .unwrap();
        b.guarded_txn_async(&seq, vec![KvOp::set(&data, b"2", 0), KvOp::get(&data)])
            .await
            .unwrap();
        // A new leader makes it stale: the check fails and so do the writes.
        let (resigned, won) =
            tokio::join!(ea.resign_async(), eb.campaign_async(b"b", Some(PATIENCE)));
        assert!(resigned.unwrap());
        assert!(won.unwrap());
        assert!(!b.check_sequencer_async(&seq).await.unwrap());
        let e = b
            .guarded_txn_async(&seq, vec![KvOp::set(&data, b"3", 0)])
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Conflict, "{e}");
        let now = b.get_async(&data).await.unwrap().expect("written");
        assert_eq!(now.value.as_deref(), Some(&b"2"[..]));
        assert!(eb.resign_async().await.unwrap());
    });
}

#[test]
fn a_holding_lost_with_its_session_says_why_to_callbacks_tokens_and_the_future() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-loss");
    let session = a
        .create_session(&SessionOptions::new().lock_delay(Duration::ZERO))
        .unwrap();
    let lock = a
        .lock_with(&key, baton::LockOptions::new().session(session.clone()))
        .unwrap();
    let (called_tx, called) = std::sync::mpsc::channel::<LockLost>();
    let removed = Arc::new(AtomicUsize::new(0));
    block_on(async {
        assert!(lock.acquire_async(Some(PATIENCE)).await.unwrap());
        assert!(lock.is_held());
        let token = lock.cancel_token();
        let tx = std::sync::Mutex::new(called_tx);
        lock.on_lost(move |why| {
            let _ = tx.lock().unwrap().send(why);
        });
        let r = removed.clone();
        let id = lock.on_lost(move |_| {
            r.fetch_add(1, Ordering::SeqCst);
        });
        lock.remove_callback(id);
        let (why, destroyed) = tokio::join!(lock.lost(), b.destroy_session_id_async(session.id()));
        destroyed.unwrap();
        let why = why.unwrap();
        // Destroyed by another client: to this one, Consul invalidated it.
        assert_eq!(why, LockLost::SessionLost(LostReason::Invalidated));
        assert_eq!(why.session_reason(), Some(LostReason::Invalidated));
        assert!(token.is_cancelled());
        assert!(!lock.is_held());
        // The session's own signals: its future, callback and token.
        assert_eq!(
            a.session_lost_async(&session).await.unwrap(),
            LostReason::Invalidated
        );
        assert!(!session.is_valid());
        assert!(session.cancel_token().is_cancelled());
        assert!(session
            .valid_until()
            .is_none_or(|t| t <= std::time::Instant::now()));
    });
    // Callbacks run on the dispatcher, once per loss.
    let why = called
        .recv_timeout(PATIENCE)
        .expect("the loss callback ran");
    assert_eq!(why.session_reason(), Some(LostReason::Invalidated));
    drop(lock);
    assert!(a.close_report(PATIENCE).is_complete());
    assert!(called.recv_timeout(Duration::ZERO).is_err(), "called once");
    assert_eq!(removed.load(Ordering::SeqCst), 0);
}

#[test]
fn a_session_callback_and_deadline_through_the_async_api() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let (seen_tx, seen) = std::sync::mpsc::channel::<LostReason>();
    block_on(async {
        let s = a
            .create_session_async(&SessionOptions::new().ttl(Duration::from_secs(10)))
            .await
            .unwrap();
        let left =
            s.valid_until().expect("a TTL session has a deadline") - std::time::Instant::now();
        assert!(left <= Duration::from_secs(10), "{left:?}");
        let tx = std::sync::Mutex::new(seen_tx);
        s.on_lost(move |why| {
            let _ = tx.lock().unwrap().send(why);
        });
        let (why, destroyed) =
            tokio::join!(a.session_lost_async(&s), b.destroy_session_id_async(s.id()));
        destroyed.unwrap();
        assert_eq!(why.unwrap(), LostReason::Invalidated);
        assert!(s.cancel_token().is_cancelled());
    });
    let why = seen
        .recv_timeout(PATIENCE)
        .expect("the session callback ran");
    assert_eq!(why, LostReason::Invalidated);
}

#[test]
fn a_cancel_token_ends_an_async_acquire_with_nothing_held() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let key = unique("aio-cancel");
    let (la, lb) = (a.lock(&key).unwrap(), b.lock(&key).unwrap());
    assert!(la.acquire(Some(PATIENCE), None).unwrap());
    let token = CancelToken::new();
    block_on(async {
        let canceller = {
            let t = token.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                t.cancel();
            }
        };
        let (r, ()) = tokio::join!(lb.acquire_async_with(None, &token), canceller);
        let e = r.expect_err("cancelled");
        assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    });
    assert!(!lb.is_held());
    assert!(la.release().unwrap());
    // Nothing was left waiting: the key stays free for the next taker.
    assert!(a.lock(&key).unwrap().try_acquire().unwrap());
}
