//! "Cancelled means nothing is held", guaranteed by the core for every recipe
//! (issue 32): a cancel that fires after Consul granted an acquire but before
//! the acquire returned ends it with kind `Cancelled`, the grant given back —
//! so no binding has to undo an acquire that raced its cancel.
//!
//! The race is made certain, not hoped for: the acquiring client talks to
//! Consul through a fault proxy that delays every byte, and a second client,
//! talking to Consul directly, cancels the token the moment it sees the grant
//! — while the answer is still on its way.

mod common;

use std::thread;
use std::time::Duration;

use baton::{CancelToken, Client, ErrorKind, Hold, KvPair, SemaphoreOptions};
use common::{unique, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);
/// Each way, per chunk: the grant's answer arrives this long after Consul
/// applied it, far longer than the direct watcher takes to see it.
const DELAY: Duration = Duration::from_millis(400);

/// Whether an entry shows the grant to session `sid`.
type Granted = fn(&KvPair, &str) -> bool;

/// A lock or election key carrying the session.
fn carries(p: &KvPair, sid: &str) -> bool {
    p.session.as_deref() == Some(sid)
}

/// A semaphore's `.lock` listing the session among its holders.
fn lists(p: &KvPair, sid: &str) -> bool {
    let doc: serde_json::Value =
        serde_json::from_slice(p.value.as_deref().unwrap_or(b"{}")).unwrap_or_default();
    doc["Holders"].get(sid).is_some()
}

/// Cancels `token` once `key` shows the grant to `sid` (seen directly).
fn cancel_when_granted(
    observer: Client,
    key: String,
    sid: String,
    granted: Granted,
    token: CancelToken,
) {
    let mut watch = observer.watch_key(&key).unwrap();
    loop {
        let ev = watch.next(Some(PATIENCE), None).expect("the grant is seen");
        if ev.entries.iter().any(|p| granted(p, &sid)) {
            token.cancel();
            return;
        }
    }
}

/// Waits (blocking queries) until `key` no longer shows the grant to `sid`.
fn wait_given_back(observer: &Client, key: &str, sid: &str, granted: Granted) {
    let mut watch = observer.watch_key(key).unwrap();
    loop {
        let ev = watch
            .next(Some(PATIENCE), None)
            .expect("the key is given back");
        if !ev.entries.iter().any(|p| granted(p, sid)) {
            return;
        }
    }
}

/// Acquires `h` with a token cancelled as soon as `key` shows the grant to
/// `sid`; checks the acquire says `Cancelled` and the grant is given back.
fn cancel_races_the_grant(
    f: &Fixture,
    h: &dyn Fn() -> Box<dyn HoldDyn>,
    key: &str,
    sid: &str,
    granted: Granted,
) {
    let observer = f.client();
    let token = CancelToken::new();
    let canceller = {
        let (o, k, s, t) = (f.client(), key.to_string(), sid.to_string(), token.clone());
        thread::spawn(move || cancel_when_granted(o, k, s, granted, t))
    };
    let held = h();
    let e = held
        .acquire(Some(PATIENCE), Some(&token))
        .expect_err("a grant that raced the cancel is not reported");
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{e}");
    canceller.join().unwrap();
    assert!(
        !held.is_held(),
        "{} still held after a cancelled acquire",
        held.describe()
    );
    wait_given_back(&observer, key, sid, granted);
    // Acquirable again at once: nothing is left behind.
    assert!(held.acquire(Some(PATIENCE), None).unwrap());
    assert!(held.release().unwrap());
}

/// [`Hold`] with its loss type erased, to write the scenario once for the three.
trait HoldDyn {
    fn acquire(&self, t: Option<Duration>, c: Option<&CancelToken>) -> baton::Result<bool>;
    fn release(&self) -> baton::Result<bool>;
    fn is_held(&self) -> bool;
    fn describe(&self) -> String;
}

impl<H: Hold> HoldDyn for H {
    fn acquire(&self, t: Option<Duration>, c: Option<&CancelToken>) -> baton::Result<bool> {
        Hold::acquire(self, t, c)
    }
    fn release(&self) -> baton::Result<bool> {
        Hold::release(self)
    }
    fn is_held(&self) -> bool {
        Hold::is_held(self)
    }
    fn describe(&self) -> String {
        Hold::describe(self)
    }
}

/// A client that talks to Consul through a fault proxy, which the test then
/// slows down by [`DELAY`] (`None` against a real Consul).
fn slowed(f: &Fixture) -> Option<(Client, baton_devserver::FaultProxy)> {
    let (builder, proxy) = f.proxied()?;
    Some((builder.build().unwrap(), proxy))
}

#[test]
fn a_lock_granted_after_its_cancel_is_given_back() {
    let f = Fixture::start();
    let Some((c, proxy)) = slowed(&f) else { return };
    let key = unique("cancel-race-lock");
    let sid = c.default_session().unwrap().id().to_string();
    proxy.delay(DELAY);
    cancel_races_the_grant(&f, &|| Box::new(c.lock(&key).unwrap()), &key, &sid, carries);
    proxy.delay(Duration::ZERO);
    c.close(PATIENCE);
}

#[test]
fn an_election_won_after_its_cancel_is_given_back() {
    let f = Fixture::start();
    let Some((c, proxy)) = slowed(&f) else { return };
    let key = unique("cancel-race-election");
    let sid = c.default_session().unwrap().id().to_string();
    proxy.delay(DELAY);
    cancel_races_the_grant(
        &f,
        &|| Box::new(c.election(&key).unwrap()),
        &key,
        &sid,
        carries,
    );
    proxy.delay(Duration::ZERO);
    c.close(PATIENCE);
}

#[test]
fn a_semaphore_slot_taken_after_its_cancel_is_given_back() {
    let f = Fixture::start();
    let Some((c, proxy)) = slowed(&f) else { return };
    let prefix = unique("cancel-race-sem");
    let session = c
        .create_session(&baton::SessionOptions::new().ttl(Duration::from_secs(30)))
        .unwrap();
    let sid = session.id().to_string();
    // The slot is granted when `.lock` lists the session.
    let lock_key = format!("{prefix}/.lock");
    proxy.delay(DELAY);
    cancel_races_the_grant(
        &f,
        &|| {
            Box::new(
                c.semaphore_with(&prefix, 1, SemaphoreOptions::new().session(session.clone()))
                    .unwrap(),
            )
        },
        &lock_key,
        &sid,
        lists,
    );
    proxy.delay(Duration::ZERO);
    session.destroy().unwrap();
    c.close(PATIENCE);
}
