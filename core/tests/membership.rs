//! Group membership against the dev server: join, list, conflict, watch,
//! loss by session destruction, leave on drop.

mod common;

use std::time::Duration;

use baton::{ErrorKind, MemberInfo, MemberLost, MembershipEvent, MEMBER_FLAG_VALUE};
use common::{unique, wait_for_entries, Fixture};

const PATIENCE: Duration = Duration::from_secs(20);

fn ids(members: &[MemberInfo]) -> Vec<&str> {
    members.iter().map(|m| m.id.as_str()).collect()
}

#[test]
fn two_members_listed_with_values_then_one_leaves() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("group-list");
    let ga = a.group(&prefix).unwrap();
    let gb = b.group(&format!("{prefix}/")).unwrap();
    let ma = ga.join("alpha", b"10.0.0.1:80").unwrap();
    let mb = gb.join("beta", b"10.0.0.2:80").unwrap();
    assert!(ma.is_member() && mb.is_member());

    let members = gb.members().unwrap();
    assert_eq!(ids(&members), ["alpha", "beta"]);
    assert_eq!(members[0].value, b"10.0.0.1:80");
    assert_eq!(members[1].value, b"10.0.0.2:80");
    assert_eq!(members[0].session, ma.session().id());
    assert_eq!(members[1].session, mb.session().id());
    let raw = a.kv().get(&format!("{prefix}/alpha")).unwrap().unwrap();
    assert_eq!(raw.flags, MEMBER_FLAG_VALUE);

    mb.update_value(b"10.0.0.2:81").unwrap();
    assert_eq!(ga.members().unwrap()[1].value, b"10.0.0.2:81");

    assert!(mb.leave().unwrap());
    assert!(!mb.is_member());
    assert_eq!(mb.lost(), Some(MemberLost::Left));
    assert!(mb.cancel_token().is_cancelled());
    assert!(!mb.leave().unwrap(), "a second leave has nothing to do");
    assert_eq!(
        mb.update_value(b"x").unwrap_err().kind(),
        ErrorKind::Conflict
    );
    let members = ga.members().unwrap();
    assert_eq!(ids(&members), ["alpha"]);
    assert!(a.kv().get(&format!("{prefix}/beta")).unwrap().is_none());
    assert!(ma.is_member(), "another member's leave leaves us alone");
    drop(ma);
    a.close(PATIENCE);
    b.close(PATIENCE);
}

#[test]
fn a_taken_id_is_a_conflict_and_bad_ids_are_refused() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("group-conflict");
    let ga = a.group(&prefix).unwrap();
    let gb = b.group(&prefix).unwrap();
    let m = ga.join("w1", b"a").unwrap();
    let err = gb.join("w1", b"b").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(
        err.to_string().contains(m.session().id()),
        "the error names the holder: {err}"
    );
    // One session is one member per id.
    let err = ga.join("w1", b"again").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    // The refused joins changed nothing.
    let members = gb.members().unwrap();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0].value, b"a");
    assert!(m.is_member());
    for bad in ["", "a/b", "..", "x\ny"] {
        assert_eq!(
            ga.join(bad, b"").unwrap_err().kind(),
            ErrorKind::InvalidArgument,
            "{bad:?}"
        );
    }
    assert_eq!(a.group("").unwrap_err().kind(), ErrorKind::InvalidArgument);
    drop(m);
    a.close(PATIENCE);
    b.close(PATIENCE);
}

#[test]
fn watch_shows_snapshot_then_joins_and_leaves_in_order() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("group-watch");
    let ga = a.group(&prefix).unwrap();
    let first = ga.join("first", b"1").unwrap();
    // Not members: a key with other flags, a deeper key.
    a.kv().put(&format!("{prefix}/plain"), b"x").unwrap();

    let mut w = ga.watch().unwrap();
    match w.next(Some(PATIENCE), None).unwrap() {
        Some(MembershipEvent::Snapshot(m)) => assert_eq!(ids(&m), ["first"]),
        other => panic!("expected the snapshot, got {other:?}"),
    }
    assert_eq!(
        w.next(Some(Duration::from_millis(200)), None).unwrap(),
        None,
        "nothing changed"
    );

    let gb = b.group(&prefix).unwrap();
    let second = gb.join("second", b"2").unwrap();
    match w.next(Some(PATIENCE), None).unwrap() {
        Some(MembershipEvent::Joined(m)) => {
            assert_eq!((m.id.as_str(), m.value.as_slice()), ("second", &b"2"[..]));
            assert_eq!(m.session, second.session().id());
        }
        other => panic!("expected second's join, got {other:?}"),
    }
    second.update_value(b"2b").unwrap();
    match w.next(Some(PATIENCE), None).unwrap() {
        Some(MembershipEvent::Updated(m)) => assert_eq!(m.value, b"2b"),
        other => panic!("expected second's update, got {other:?}"),
    }
    assert!(second.leave().unwrap());
    match w.next(Some(PATIENCE), None).unwrap() {
        Some(MembershipEvent::Left(id)) => assert_eq!(id, "second"),
        other => panic!("expected second's leave, got {other:?}"),
    }
    assert_eq!(ids(&w.members().unwrap()), ["first"]);

    let cancel = baton::CancelToken::new();
    cancel.cancel();
    assert_eq!(
        w.next(None, Some(&cancel)).unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    drop(first);
    a.close(PATIENCE);
    b.close(PATIENCE);
}

#[test]
fn a_member_whose_session_is_destroyed_is_lost_and_unlisted() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("group-lost");
    let ga = a.group(&prefix).unwrap();
    let m = ga.join("doomed", b"v").unwrap();
    let sid = m.session().id().to_string();
    assert_eq!(
        m.wait_lost(Some(Duration::from_millis(100)), None)
            .unwrap_err()
            .kind(),
        ErrorKind::Timeout
    );
    let token = m.cancel_token();
    assert!(!token.is_cancelled());

    // Another client ends the member's session.
    b.sessions().destroy(&sid).unwrap();
    assert_eq!(
        m.wait_lost(Some(PATIENCE), None).unwrap(),
        MemberLost::SessionLost(baton::LostReason::Invalidated)
    );
    assert!(token.is_cancelled());
    assert!(!m.is_member());
    // Released (the default behaviour): the key stays, without a session, and is no member.
    let gb = b.group(&prefix).unwrap();
    assert!(gb.members().unwrap().is_empty());
    assert_eq!(
        m.update_value(b"w").unwrap_err().kind(),
        ErrorKind::Conflict
    );
    drop(m);
    a.close(PATIENCE);
    b.close(PATIENCE);
}

#[test]
fn dropping_a_member_leaves_the_group() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("group-drop");
    let m = a.group(&prefix).unwrap().join("gone-soon", b"v").unwrap();
    let key = m.key().to_string();
    let token = m.cancel_token();
    assert!(b.kv().get(&key).unwrap().is_some());
    drop(m);
    assert!(token.is_cancelled());
    wait_for_entries(&b, &key, PATIENCE, "the member key deleted", |e| {
        e.is_empty()
    });
    assert!(b.group(&prefix).unwrap().members().unwrap().is_empty());
    a.close(PATIENCE);
    b.close(PATIENCE);
}

#[test]
fn a_member_whose_key_is_deleted_by_someone_else_is_lost() {
    let f = Fixture::start();
    let (a, b) = (f.client(), f.client());
    let prefix = unique("group-deleted");
    let m = a.group(&prefix).unwrap().join("victim", b"v").unwrap();
    assert!(b.kv().delete(m.key()).unwrap());
    assert_eq!(
        m.wait_lost(Some(PATIENCE), None).unwrap(),
        MemberLost::KeyChanged
    );
    assert!(m.cancel_token().is_cancelled());
    assert!(m.session().is_valid(), "the session itself lives on");
    assert!(!m.is_member());
    // A lost member neither re-creates its key nor deletes someone else's.
    assert_eq!(
        m.update_value(b"w").unwrap_err().kind(),
        ErrorKind::Conflict
    );
    assert!(b.kv().get(m.key()).unwrap().is_none());
    let theirs = b.group(&prefix).unwrap().join("victim", b"theirs").unwrap();
    assert!(!m.leave().unwrap());
    drop(m);
    assert_eq!(
        b.kv().get(theirs.key()).unwrap().unwrap().value.as_deref(),
        Some(&b"theirs"[..])
    );
    drop(theirs);
    a.close(PATIENCE);
    b.close(PATIENCE);
}
