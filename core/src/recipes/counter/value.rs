//! The counter's wire format: the decimal ASCII text of an `i64` in the key's value.
//!
//! Kept apart from the requests so the rule can be read (and tested) in one place: what
//! baton writes, what it accepts, and how a value that is not a counter is reported.

use crate::api::kv::KvPair;
use crate::foundations::error::{printable, Error, ErrorKind, Result};

/// Most bytes of a foreign value an error message shows (escaped), before `… (N bytes)`.
const SHOWN_VALUE_MAX: usize = 64;

/// The bytes baton writes for `value`: its canonical decimal text (`42`, `-7`, `0`),
/// exactly what `consul kv get` prints and `consul kv put key 42` stores.
pub(super) fn encode(value: i64) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// The counter's value and the ModifyIndex to send as `?cas=` for a write that must
/// follow this read: `(0, 0)` when the key is absent (an absent counter is 0, and
/// `cas=0` writes only if the key still does not exist).
///
/// A present key must hold a decimal `i64`; anything else (empty, not a number, out of
/// range) is a `BadResponse` error naming the key and showing the value, never read as 0:
/// a counter that silently restarted from 0 over someone else's data would be worse than
/// one that stops.
pub(super) fn decode(key: &str, entry: Option<&KvPair>) -> Result<(i64, u64)> {
    match entry {
        None => Ok((0, 0)),
        Some(p) => Ok((parse(key, p.value.as_deref())?, p.modify_index)),
    }
}

/// The value of a present key (`None`: Consul's `null`, an empty value).
///
/// Accepted: optional ASCII whitespace around an optional sign (`-` or `+`) and decimal
/// digits, in the `i64` range. The whitespace is tolerated because a value written from a
/// shell (`echo 42 | consul kv put key -`) ends in a newline; baton itself always writes
/// the canonical form of [`encode`].
pub(super) fn parse(key: &str, raw: Option<&[u8]>) -> Result<i64> {
    let raw = raw.unwrap_or_default();
    if raw.is_empty() {
        return Err(not_a_counter(key, "holds an empty value"));
    }
    let text = std::str::from_utf8(raw.trim_ascii()).ok();
    match text.map(str::parse::<i64>) {
        Some(Ok(v)) => Ok(v),
        Some(Err(e))
            if matches!(
                e.kind(),
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow
            ) =>
        {
            Err(not_a_counter(
                key,
                &format!("holds {}, out of the i64 range", shown(raw)),
            ))
        }
        _ => Err(not_a_counter(
            key,
            &format!("holds {}, not a decimal integer", shown(raw)),
        )),
    }
}

/// A value quoted for a message: escaped, bounded, in quotes.
fn shown(raw: &[u8]) -> String {
    format!("\"{}\"", printable(raw, SHOWN_VALUE_MAX))
}

fn not_a_counter(key: &str, what: &str) -> Error {
    Error::new(
        ErrorKind::BadResponse,
        format!(
            "counter {key:?}: the key {what}; a counter's value is the decimal text of a \
             64-bit signed integer (an absent key is 0)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(value: Option<&[u8]>, modify_index: u64) -> KvPair {
        KvPair {
            key: "c".into(),
            value: value.map(<[u8]>::to_vec),
            flags: 0,
            session: None,
            lock_index: 0,
            create_index: 1,
            modify_index,
        }
    }

    #[test]
    fn encodes_canonical_decimal_text() {
        assert_eq!(encode(42), b"42");
        assert_eq!(encode(-7), b"-7");
        assert_eq!(encode(0), b"0");
        assert_eq!(encode(i64::MIN), b"-9223372036854775808");
        for v in [0, 1, -1, 42, i64::MAX, i64::MIN] {
            assert_eq!(parse("c", Some(&encode(v))).unwrap(), v);
        }
    }

    #[test]
    fn an_absent_key_is_zero_with_create_only_index() {
        assert_eq!(decode("c", None).unwrap(), (0, 0));
        assert_eq!(decode("c", Some(&pair(Some(b"-3"), 17))).unwrap(), (-3, 17));
    }

    #[test]
    fn tolerates_what_other_writers_add() {
        assert_eq!(parse("c", Some(b"42\n")).unwrap(), 42);
        assert_eq!(parse("c", Some(b" +5 ")).unwrap(), 5);
        assert_eq!(parse("c", Some(b"007")).unwrap(), 7);
    }

    #[test]
    fn refuses_what_is_not_a_counter_naming_key_and_value() {
        for (raw, want) in [
            (&b"abc"[..], "\"abc\", not a decimal integer"),
            (b"4 2", "not a decimal integer"),
            (b"1.5", "not a decimal integer"),
            (b"0x10", "not a decimal integer"),
            (b"\xff", "not a decimal integer"),
            (b"9223372036854775808", "out of the i64 range"),
            (b"-9223372036854775809", "out of the i64 range"),
            (b"", "empty value"),
        ] {
            let e = parse("jobs/n", Some(raw)).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::BadResponse);
            assert!(e.message().contains("\"jobs/n\""), "{e}");
            assert!(e.message().contains(want), "{raw:?}: {e}");
        }
        let e = parse("c", None).unwrap_err();
        assert!(e.message().contains("empty value"), "{e}");
    }

    #[test]
    fn a_long_or_hostile_value_is_shown_escaped_and_cut() {
        let raw = [b"\x1b[31m".as_slice(), &[b'x'; 5000]].concat();
        let e = parse("c", Some(&raw)).unwrap_err();
        assert!(!e.message().contains('\u{1b}'), "{e}");
        assert!(e.message().contains("(5005 bytes)"), "{e}");
        assert!(e.message().len() < 400, "{e}");
    }
}
