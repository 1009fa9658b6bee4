//! The one rule for the KV keys and prefixes every API takes, in every language.
//!
//! Consul's HTTP API puts the key in the URL after `/v1/kv/`, so a user who
//! writes `/jobs/a` and one who writes `jobs/a` mean the same key; Go's
//! `api.KV` drops the leading `/` on reads and deletes but refuses it on writes,
//! and the lock, semaphore and transaction paths each did something else. baton
//! has one rule instead, applied here and nowhere else (the C, Python and Node
//! layers only check types):
//!
//! - one leading `/` is dropped: `/jobs/a` is `jobs/a` for reads, writes,
//!   deletes, transactions, locks, elections, semaphores, fencing and watches;
//! - a key that still begins with `/` after that (`//jobs/a`) is refused: it
//!   would name a key whose name starts with `/`, which Consul's HTTP paths
//!   cannot reach reliably (Go's `net/http` cleans and redirects `//`);
//! - a NUL byte is refused (Consul cannot store it in a URL path);
//! - a key must not be empty; a prefix (list, keys, delete-tree, watch) may be,
//!   meaning every key.

use crate::foundations::error::{Error, ErrorKind, Result};

/// The key Consul will be asked about for `key`, or an `InvalidArgument` error
/// naming what is wrong with it.
pub(crate) fn key(key: &str) -> Result<&str> {
    let k = common("key", key)?;
    if k.is_empty() {
        return Err(Error::new(ErrorKind::InvalidArgument, "missing key"));
    }
    Ok(k)
}

/// The prefix Consul will be asked about for `prefix` (may be empty: every key).
pub(crate) fn prefix(prefix: &str) -> Result<&str> {
    common("prefix", prefix)
}

/// Like [`prefix`] but refuses an empty one (a semaphore's prefix names its keys).
pub(crate) fn nonempty_prefix<'a>(what: &str, prefix: &'a str) -> Result<&'a str> {
    let p = common(what, prefix)?;
    if p.is_empty() {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("missing {what}"),
        ));
    }
    Ok(p)
}

fn common<'a>(what: &str, raw: &'a str) -> Result<&'a str> {
    let k = raw.strip_prefix('/').unwrap_or(raw);
    if k.starts_with('/') {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "invalid {what} {raw:?}: it begins with more than one '/' (one leading '/' \
                 is dropped; a name that still begins with '/' cannot be reached through \
                 Consul's HTTP paths)"
            ),
        ));
    }
    if k.contains('\0') {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!("invalid {what} {raw:?}: it contains a NUL byte"),
        ));
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_leading_slash_is_dropped() {
        assert_eq!(key("/jobs/a").unwrap(), "jobs/a");
        assert_eq!(key("jobs/a").unwrap(), "jobs/a");
        assert_eq!(prefix("/").unwrap(), "");
        assert_eq!(prefix("").unwrap(), "");
    }

    #[test]
    fn bad_keys_are_refused_with_the_reason() {
        assert_eq!(key("").unwrap_err().message(), "missing key");
        assert_eq!(key("/").unwrap_err().message(), "missing key");
        let e = key("//a").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("more than one '/'"), "{e}");
        assert!(key("a\0b").unwrap_err().message().contains("NUL"));
        assert!(prefix("//").is_err());
        assert_eq!(
            nonempty_prefix("prefix", "/").unwrap_err().message(),
            "missing prefix"
        );
    }
}
