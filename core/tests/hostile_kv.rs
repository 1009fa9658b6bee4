//! Hostile values in the KV store itself: a semaphore's `.lock` document is
//! written by every holder (any Go or baton process, or a buggy one), so baton
//! reads it as untrusted input. Against the dev server (or `BATON_TEST_CONSUL`).

mod common;

use std::time::Duration;

use baton::{ErrorKind, WriteOptions, SEMAPHORE_FLAG_VALUE};
use common::{unique, Fixture};

#[test]
fn a_broken_lock_document_is_a_bad_response_naming_the_key() {
    let f = Fixture::start();
    let client = f.client();
    for (value, want) in [
        (&b"{not json"[..], "no JSON document"),
        (b"[1,2]", "[1,2], not a JSON object"),
        (
            br#"{"Limit":-1,"Holders":{}}"#,
            "Limit -1, not a non-negative integer",
        ),
        (
            br#"{"Limit":"2","Holders":{}}"#,
            "Limit \"2\", not a number",
        ),
        (
            br#"{"Limit":2,"Holders":["a"]}"#,
            "Holders [\"a\"], not an object",
        ),
        (
            br#"{"Limit":2,"Holders":{"x":1}}"#,
            "Holders[x] = 1, not true or false",
        ),
        (b"\xff\xfe{}", "no JSON document"),
        (
            b"{\"Limit\":2,\"Holders\":{\"\\u001b[2J\":7}}",
            "Holders[\\u{1b}[2J] = 7",
        ),
    ] {
        let prefix = unique("hostile-lockdoc");
        let lock_key = format!("{prefix}/.lock");
        let written = client
            .kv()
            .put_with(
                &lock_key,
                value,
                &WriteOptions {
                    flags: SEMAPHORE_FLAG_VALUE,
                    ..WriteOptions::default()
                },
            )
            .unwrap();
        assert!(written);
        let sem = client.semaphore(&prefix, 2).unwrap();
        let e = sem.acquire(Some(Duration::from_secs(5)), None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadResponse, "{e}");
        let text = e.to_string();
        assert!(
            text.starts_with(&format!(
                "lock decoding failed: the semaphore's {lock_key} holds "
            )),
            "{text}"
        );
        assert!(text.contains(want), "{want}: {text}");
        assert!(!text.chars().any(char::is_control), "{text:?}");
        assert!(!sem.is_held());
        // Go's Destroy reads the document too.
        let e = sem.destroy().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::BadResponse, "{e}");
        drop(sem);
        client.kv().delete_tree(&prefix).unwrap();
    }
    client.close(Duration::from_secs(10));
}
