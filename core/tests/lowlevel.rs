//! The low-level API against a running server: KV, sessions, txn, status, ACL errors.

mod common;

use std::time::Duration;

use baton::{Behavior, ErrorKind, KvOp, SessionOptions, WriteOptions};
use common::{unique, Fixture};

const LOCK_FLAG: u64 = 3304740253564472344;
const SEMAPHORE_FLAG: u64 = 16210313421097356768;

#[test]
fn kv_put_get_list_keys_and_delete() {
    let f = Fixture::start();
    let c = f.client();
    let p = unique("kv");
    let kv = c.kv();
    assert_eq!(kv.get(&format!("{p}/missing")).unwrap(), None);
    assert!(kv.put(&format!("{p}/a"), b"1").unwrap());
    assert!(kv
        .put_with(
            &format!("{p}/b/c"),
            b"2",
            &WriteOptions {
                flags: SEMAPHORE_FLAG,
                ..Default::default()
            }
        )
        .unwrap());
    let b = kv.get(&format!("{p}/b/c")).unwrap().unwrap();
    assert_eq!(b.flags, SEMAPHORE_FLAG);
    assert_eq!(b.value.as_deref(), Some(&b"2"[..]));
    // Empty values read back as None; a leading slash is stripped on reads.
    assert!(kv.put(&format!("{p}/empty"), b"").unwrap());
    assert_eq!(kv.get(&format!("/{p}/empty")).unwrap().unwrap().value, None);

    let list = kv.list(&format!("{p}/")).unwrap();
    let keys: Vec<_> = list.iter().map(|e| e.key.clone()).collect();
    assert_eq!(
        keys,
        vec![format!("{p}/a"), format!("{p}/b/c"), format!("{p}/empty")]
    );
    let shallow = kv.keys(&format!("{p}/"), Some("/")).unwrap();
    assert_eq!(
        shallow,
        vec![format!("{p}/a"), format!("{p}/b/"), format!("{p}/empty")]
    );
    assert!(kv.list(&format!("{p}/nothing/")).unwrap().is_empty());
    assert!(kv.keys(&format!("{p}/nothing/"), None).unwrap().is_empty());

    // Key rules (core/src/foundations/keys.rs, tested in keys.rs): '//' is refused, one '/' dropped.
    let e = kv.put("//leading", b"x").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);

    assert!(kv.delete(&format!("{p}/a")).unwrap());
    assert_eq!(kv.get(&format!("{p}/a")).unwrap(), None);
    assert!(kv.delete_tree(&format!("{p}/")).unwrap());
    assert!(kv.list(&format!("{p}/")).unwrap().is_empty());
}

#[test]
fn kv_cas_and_delete_cas() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("cas");
    let kv = c.kv();
    let create_only = WriteOptions {
        cas: Some(0),
        ..Default::default()
    };
    assert!(kv.put_with(&k, b"v1", &create_only).unwrap());
    assert!(!kv.put_with(&k, b"v2", &create_only).unwrap());
    let e = kv.get(&k).unwrap().unwrap();
    let stale = WriteOptions {
        cas: Some(e.modify_index + 1000),
        ..Default::default()
    };
    assert!(!kv.put_with(&k, b"v2", &stale).unwrap());
    let fresh = WriteOptions {
        cas: Some(e.modify_index),
        ..Default::default()
    };
    assert!(kv.put_with(&k, b"v2", &fresh).unwrap());
    let e2 = kv.get(&k).unwrap().unwrap();
    assert!(e2.modify_index > e.modify_index);
    assert!(!kv.delete_cas(&k, e.modify_index).unwrap());
    assert!(kv.delete_cas(&k, e2.modify_index).unwrap());
    assert!(kv.delete_cas(&k, 12345).unwrap(), "missing key: true");
}

#[test]
fn keys_with_special_characters_round_trip() {
    let f = Fixture::start();
    let c = f.client();
    let base = unique("enc");
    for suffix in [
        "sp ace",
        "q?x=1",
        "hash#frag",
        "pct%2Fslash",
        "ünicode",
        "plus+and&amp",
    ] {
        let k = format!("{base}/{suffix}");
        assert!(c.kv().put(&k, suffix.as_bytes()).unwrap(), "{k}");
        let e = c
            .kv()
            .get(&k)
            .unwrap()
            .unwrap_or_else(|| panic!("{k} missing"));
        assert_eq!(e.key, k);
        assert_eq!(e.value.as_deref(), Some(suffix.as_bytes()));
    }
    assert_eq!(c.kv().keys(&format!("{base}/"), None).unwrap().len(), 6);
}

#[test]
fn acquire_release_and_flags() {
    let f = Fixture::start();
    let c = f.client();
    let k = unique("lock");
    let api = c.sessions();
    let s1 = api.create(&SessionOptions::new().name("one")).unwrap();
    let s2 = api.create(&SessionOptions::new().name("two")).unwrap();
    let kv = c.kv();
    assert!(kv.acquire(&k, b"held", &s1, LOCK_FLAG).unwrap());
    let e = kv.get(&k).unwrap().unwrap();
    assert_eq!(e.session.as_deref(), Some(s1.as_str()));
    assert_eq!(e.lock_index, 1);
    assert_eq!(e.flags, LOCK_FLAG);
    assert!(!kv.acquire(&k, b"x", &s2, LOCK_FLAG).unwrap());
    assert!(!kv.release(&k, b"x", &s2, LOCK_FLAG).unwrap());
    assert!(kv.release(&k, b"held", &s1, LOCK_FLAG).unwrap());
    let e = kv.get(&k).unwrap().unwrap();
    assert_eq!(e.session, None);
    assert_eq!(e.value.as_deref(), Some(&b"held"[..]));
    assert_eq!(e.flags, LOCK_FLAG);
    // Acquire with an unknown session: Consul's 500 "invalid session".
    let err = kv
        .acquire(&k, b"", "00000000-0000-0000-0000-000000000000", 0)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SessionInvalidated, "{err}");
    assert_eq!(err.status(), Some(500));
    api.destroy(&s1).unwrap();
    api.destroy(&s2).unwrap();
}

#[test]
fn session_create_with_every_option_and_zero_lock_delay() {
    let f = Fixture::start();
    let c = f.client();
    let ttl = if f.short_ttls() {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(10)
    };
    let opts = SessionOptions::new()
        .name("every-option")
        .node(f.dev.as_ref().map(|d| d.node_name()).unwrap_or_default())
        .ttl(ttl)
        .lock_delay(Duration::ZERO)
        .behavior(Behavior::Delete)
        .node_checks(vec![]);
    let opts = if f.dev.is_none() {
        SessionOptions { node: None, ..opts }
    } else {
        opts
    };
    let id = c.sessions().create(&opts).unwrap();
    let info = c.sessions().info(&id).unwrap().expect("session exists");
    assert_eq!(info.id, id);
    assert_eq!(info.name, "every-option");
    assert_eq!(info.lock_delay_ns, 0, "LockDelay 0 must really be 0");
    assert_eq!(info.behavior, "delete");
    assert_eq!(info.ttl(), Some(ttl));
    assert!(info.bound_checks().is_empty(), "{info:?}");
    // Default lock-delay is 15 s.
    let id2 = c.sessions().create(&SessionOptions::new()).unwrap();
    let info2 = c.sessions().info(&id2).unwrap().unwrap();
    assert_eq!(info2.lock_delay(), Duration::from_secs(15));
    assert_eq!(info2.behavior, "release");
    assert_eq!(info2.ttl, "");
    assert!(c.sessions().list().unwrap().iter().any(|s| s.id == id2));
    assert!(c
        .sessions()
        .node(&info2.node)
        .unwrap()
        .iter()
        .any(|s| s.id == id2));
    let renewed = c.sessions().renew(&id).unwrap();
    assert_eq!(renewed.id, id);
    assert_eq!(renewed.ttl(), Some(ttl));
    c.sessions().destroy(&id).unwrap();
    c.sessions().destroy(&id2).unwrap();
    assert_eq!(c.sessions().info(&id).unwrap(), None);
    let err = c.sessions().renew(&id).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SessionInvalidated);
    assert!(err.to_string().contains("/v1/session/renew/"), "{err}");
    // Destroying an unknown session is fine, as in Consul.
    c.sessions().destroy(&id).unwrap();
}

#[test]
fn session_create_rejects_bad_ttl() {
    let f = Fixture::start();
    let c = f.client();
    let err = c
        .sessions()
        .create(&SessionOptions::new().ttl(Duration::from_secs(25 * 3600)))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(err.server_text().unwrap().contains("Invalid Session TTL"));
    // Said in the user's units, naming the bound (issue "One library in four
    // languages": Consul's text gives nanoseconds and a garbled range).
    assert!(
        err.message()
            .starts_with("session TTL 25h0m0s is above Consul's maximum of 24h0m0s"),
        "{err}"
    );
    if f.short_ttls() {
        // The test server's session_ttl_min is 500 ms.
        let err = c
            .sessions()
            .create(&SessionOptions::new().ttl(Duration::from_millis(100)))
            .unwrap_err();
        assert!(
            err.message()
                .starts_with("session TTL 100ms is below the server's session_ttl_min of 500ms"),
            "{err}"
        );
    }
}

#[test]
fn txn_applies_all_or_lists_every_failure() {
    let f = Fixture::start();
    let c = f.client();
    let p = unique("txn");
    let a = format!("{p}/a");
    let b = format!("{p}/b");
    let results = c
        .txn(&[
            KvOp::set(&a, b"1", 7),
            KvOp::cas(&b, b"2", 0, 0),
            KvOp::get(&a),
        ])
        .unwrap();
    assert_eq!(results.len(), 3);
    assert_eq!(results[2].value.as_deref(), Some(&b"1"[..]));
    assert_eq!(results[2].flags, 7);
    let ea = c.kv().get(&a).unwrap().unwrap();
    let err = c
        .txn(&[
            KvOp::check_index(&a, ea.modify_index + 100),
            KvOp::set(&format!("{p}/c"), b"never", 0),
            KvOp::check_not_exists(&b),
        ])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(err.status(), Some(409));
    let idx: Vec<usize> = err.txn_errors().iter().map(|e| e.op_index).collect();
    assert_eq!(idx, vec![0, 2], "{err:?}");
    assert!(err.txn_errors()[1].what.contains("exists"));
    assert_eq!(c.kv().get(&format!("{p}/c")).unwrap(), None, "atomic");
    // Lock and unlock through txn; check-session.
    let s = c.sessions().create(&SessionOptions::new()).unwrap();
    let locked = c.txn(&[KvOp::lock(&a, b"v", LOCK_FLAG, &s), KvOp::get(&a)]);
    if f.before("1.6.2") {
        // The server would round the flag: the client learns so before sending
        // (a probe that writes nothing) and refuses; nothing is written.
        assert_eq!(locked.unwrap_err().kind(), ErrorKind::Unsupported);
        assert_eq!(c.kv().get(&a).unwrap().unwrap().session, None);
        assert!(c.kv().acquire(&a, b"v", &s, LOCK_FLAG).unwrap());
    } else {
        let r = locked.unwrap();
        assert_eq!(r.last().unwrap().session.as_deref(), Some(s.as_str()));
    }
    assert_eq!(c.kv().get(&a).unwrap().unwrap().flags, LOCK_FLAG);
    let unlock = c.txn(&[
        KvOp::check_session(&a, &s),
        KvOp::unlock(&a, b"v", LOCK_FLAG, &s),
    ]);
    if f.before("1.6.2") {
        // Known to round txn numbers now: refused before sending (README, Consul versions).
        assert_eq!(unlock.unwrap_err().kind(), ErrorKind::Unsupported);
        assert!(c.kv().release(&a, b"v", &s, LOCK_FLAG).unwrap());
    } else {
        unlock.unwrap();
    }
    let eb = c.kv().get(&b).unwrap().unwrap();
    let mut reads = vec![
        KvOp::check_session(&a, ""),
        KvOp::get_tree(&format!("{p}/")),
        KvOp::delete_cas(&b, eb.modify_index),
        KvOp::delete(&format!("{p}/zz")),
    ];
    if !f.before("1.14.0") {
        reads.insert(1, KvOp::get_or_empty(&format!("{p}/zz")));
    }
    c.txn(&reads).unwrap();
    c.txn(&[KvOp::delete_tree(&format!("{p}/"))]).unwrap();
    assert!(c.kv().list(&format!("{p}/")).unwrap().is_empty());
    c.sessions().destroy(&s).unwrap();
    let too_many: Vec<KvOp> = (0..129).map(|i| KvOp::get(&format!("{p}/{i}"))).collect();
    assert_eq!(
        c.txn(&too_many).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn status_leader_is_an_address() {
    let f = Fixture::start();
    let c = f.client();
    let leader = c.status_leader().unwrap();
    assert!(leader.contains(':'), "{leader:?}");
}

#[test]
fn acl_wrong_token_is_permission_denied_naming_the_endpoint() {
    let f = Fixture::start_with(baton_devserver::Config {
        acl_token: Some("root-token".into()),
        ..Default::default()
    });
    let c = f.builder().token("wrong-token").build().unwrap();
    let err = c.kv().put("acl/x", b"1").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert_eq!(err.code(), "BATON_PERMISSION_DENIED");
    assert_eq!(err.endpoint(), Some("PUT /v1/kv/acl/x"));
    let text = format!("{err} {err:?}");
    assert!(text.contains("PUT /v1/kv/acl/x"), "{text}");
    assert!(!text.contains("wrong-token"), "token leaked: {text}");
    let anon = f.client();
    assert_eq!(
        anon.sessions()
            .create(&SessionOptions::new())
            .unwrap_err()
            .kind(),
        ErrorKind::PermissionDenied
    );
}

#[test]
fn token_file_is_read() {
    let f = Fixture::start_with(baton_devserver::Config {
        acl_token: Some("root-token".into()),
        ..Default::default()
    });
    let dir = std::env::temp_dir().join(format!("baton-tokfile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("token");
    std::fs::write(&path, "  root-token\n").unwrap();
    let c = f.builder().token_file(&path).build().unwrap();
    assert!(c.kv().put("acl/ok", b"1").unwrap());
    // The same through the environment variables.
    let addr = f.addr.clone();
    let p = path.to_str().unwrap().to_string();
    let c2 = baton::ClientBuilder::from_lookup(move |name| match name {
        "CONSUL_HTTP_ADDR" => Some(addr.clone()),
        "CONSUL_HTTP_TOKEN" => Some("wrong".into()),
        "CONSUL_HTTP_TOKEN_FILE" => Some(p.clone()),
        _ => None,
    })
    .build()
    .unwrap();
    assert!(c2.kv().put("acl/ok2", b"1").unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn connection_refused_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let c = baton::Client::builder()
        .address(format!("http://{addr}"))
        .build()
        .unwrap();
    let err = c.kv().get("x").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Connection, "{err}");
}

#[test]
fn env_address_with_scheme_and_prefix_reaches_the_server() {
    let f = Fixture::start();
    let addr = f.url();
    let c =
        baton::ClientBuilder::from_lookup(move |n| (n == "CONSUL_HTTP_ADDR").then(|| addr.clone()))
            .build()
            .unwrap();
    assert!(c.status_leader().is_ok());
    let bad = baton::ClientBuilder::from_lookup(|n| {
        (n == "CONSUL_HTTP_ADDR").then(|| "gopher://x:1".to_string())
    })
    .build()
    .unwrap_err();
    assert_eq!(bad.kind(), ErrorKind::InvalidArgument);
    assert!(bad.to_string().contains("Unknown protocol scheme: gopher"));
}
