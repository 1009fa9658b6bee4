//! The low-level KV endpoints (`/v1/kv/*`) and the KV entry type.

use base64::Engine as _;
use serde::{Deserialize, Deserializer};

use crate::foundations::error::{Error, ErrorKind, Result};
use crate::transport::http::{encode_key, QueryMeta, QueryOptions, Request};

/// One KV entry as Consul returns it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct KvPair {
    /// The key.
    #[serde(rename = "Key")]
    pub key: String,
    /// The value (`None` when empty: Consul sends `null`).
    #[serde(rename = "Value", default, deserialize_with = "de_base64")]
    pub value: Option<Vec<u8>>,
    /// Opaque uint64 flags.
    #[serde(rename = "Flags", default)]
    pub flags: u64,
    /// The session holding the lock on this key, if any.
    #[serde(rename = "Session", default, deserialize_with = "de_nonempty_string")]
    pub session: Option<String>,
    /// Number of acquisitions by a new holder.
    #[serde(rename = "LockIndex", default)]
    pub lock_index: u64,
    /// Raft index at which the key was created.
    #[serde(rename = "CreateIndex", default)]
    pub create_index: u64,
    /// Raft index of the last effective change.
    #[serde(rename = "ModifyIndex", default)]
    pub modify_index: u64,
}

fn de_base64<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Vec<u8>>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    match s {
        None => Ok(None),
        Some(s) => base64::engine::general_purpose::STANDARD
            .decode(s.as_bytes())
            .map(Some)
            .map_err(|e| serde::de::Error::custom(format_args!("not valid base64 ({e})"))),
    }
}

fn de_nonempty_string<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<String>, D::Error> {
    let s: Option<String> = Option::deserialize(d)?;
    Ok(s.filter(|s| !s.is_empty()))
}

/// Options of a KV write (`PUT /v1/kv/<key>`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Flags stored with the value (uint64).
    pub flags: u64,
    /// Check-and-set: 0 = only create, N = only if ModifyIndex is N.
    pub cas: Option<u64>,
    /// Acquire the key's lock with this session.
    pub acquire: Option<String>,
    /// Release the key's lock held by this session (value and flags are written too).
    pub release: Option<String>,
}

/// The low-level KV API; get one from [`Client::kv`](crate::Client::kv).
#[derive(Debug, Clone, Copy)]
pub struct Kv<'a> {
    pub(crate) conn: &'a crate::transport::conn::Conn,
}

pub(crate) fn kv_path(key: &str) -> String {
    format!("/v1/kv/{}", encode_key(key))
}

/// The one KV read: `GET /v1/kv/<key>` (with `recurse`, every entry under the
/// prefix), a 404 read as no entries. `send` sends it — a caller's
/// deadline-bounded send, or a background thread's poll on its own agent
/// (the key hub, a watch): the same request and decoding either way.
pub(crate) fn read(
    key: &str,
    recurse: bool,
    options: &QueryOptions,
    send: impl FnOnce(&Request) -> Result<crate::transport::http::Response>,
) -> Result<(Vec<KvPair>, QueryMeta)> {
    let req = read_request(key, recurse, options);
    let resp = send(&req)?;
    read_answer(&req, resp)
}

/// The request of [`read`], for a caller that sends it its own way.
pub(crate) fn read_request(key: &str, recurse: bool, options: &QueryOptions) -> Request {
    let mut req = Request::new("GET", kv_path(key));
    if recurse {
        req.flag("recurse");
    }
    options.apply(&mut req);
    req
}

/// The entries of an answer to a [`read_request`] (none for a 404).
pub(crate) fn read_answer(
    req: &Request,
    resp: crate::transport::http::Response,
) -> Result<(Vec<KvPair>, QueryMeta)> {
    if resp.status == 404 {
        return Ok((Vec::new(), resp.meta));
    }
    let resp = crate::transport::http::check(req, resp)?;
    Ok((resp.json(req)?, resp.meta))
}

impl Kv<'_> {
    /// Reads one key; `None` if it does not exist.
    pub fn get(&self, key: &str) -> Result<Option<KvPair>> {
        Ok(self.get_with(key, &QueryOptions::default())?.0)
    }

    /// Reads one key with blocking/consistency options.
    pub fn get_with(
        &self,
        key: &str,
        options: &QueryOptions,
    ) -> Result<(Option<KvPair>, QueryMeta)> {
        let (list, meta) = read(crate::foundations::keys::key(key)?, false, options, |r| {
            self.conn.send(r)
        })?;
        Ok((list.into_iter().next(), meta))
    }

    /// Lists every entry whose key starts with `prefix` (plain string prefix).
    pub fn list(&self, prefix: &str) -> Result<Vec<KvPair>> {
        Ok(self.list_with(prefix, &QueryOptions::default())?.0)
    }

    /// Like [`Kv::list`], with blocking/consistency options.
    pub fn list_with(
        &self,
        prefix: &str,
        options: &QueryOptions,
    ) -> Result<(Vec<KvPair>, QueryMeta)> {
        read(
            crate::foundations::keys::prefix(prefix)?,
            true,
            options,
            |r| self.conn.send(r),
        )
    }

    /// Lists key names under `prefix`; with a `separator`, keys are cut after
    /// the first separator that follows the prefix.
    pub fn keys(&self, prefix: &str, separator: Option<&str>) -> Result<Vec<String>> {
        Ok(self
            .keys_with(prefix, separator, &QueryOptions::default())?
            .0)
    }

    /// Like [`Kv::keys`], with blocking/consistency options.
    pub fn keys_with(
        &self,
        prefix: &str,
        separator: Option<&str>,
        options: &QueryOptions,
    ) -> Result<(Vec<String>, QueryMeta)> {
        let mut req = Request::new("GET", kv_path(crate::foundations::keys::prefix(prefix)?));
        req.flag("keys");
        if let Some(s) = separator {
            req.param("separator", s);
        }
        options.apply(&mut req);
        let resp = self.conn.send(&req)?;
        if resp.status == 404 {
            return Ok((Vec::new(), resp.meta));
        }
        let resp = crate::transport::http::check(&req, resp)?;
        Ok((resp.json(&req)?, resp.meta))
    }

    /// Writes a value (flags 0). Returns Consul's `true`/`false`.
    pub fn put(&self, key: &str, value: &[u8]) -> Result<bool> {
        self.put_with(key, value, &WriteOptions::default())
    }

    /// Writes a value with flags, CAS, acquire or release. Returns whether
    /// Consul applied it (`false`: CAS mismatch, lock held, lock-delay, not holder).
    /// At most one of `cas`, `acquire`, `release` may be set.
    pub fn put_with(&self, key: &str, value: &[u8], options: &WriteOptions) -> Result<bool> {
        let mut req = Request::new("PUT", kv_path(crate::foundations::keys::key(key)?));
        if options.flags != 0 {
            req.param("flags", options.flags.to_string());
        }
        if let Some(cas) = options.cas {
            req.param("cas", cas.to_string());
        }
        if let Some(s) = &options.acquire {
            req.param("acquire", s.clone());
        }
        if let Some(s) = &options.release {
            req.param("release", s.clone());
        }
        req.raw_body(value.to_vec());
        let resp = self.conn.call(&req)?;
        parse_bool(&req, &resp.body)
    }

    /// Acquires `key`'s lock with `session`, writing `value` and `flags`.
    pub fn acquire(&self, key: &str, value: &[u8], session: &str, flags: u64) -> Result<bool> {
        self.put_with(
            key,
            value,
            &WriteOptions {
                flags,
                acquire: Some(session.to_string()),
                ..Default::default()
            },
        )
    }

    /// Releases `key`'s lock held by `session`, writing `value` and `flags`
    /// (Consul overwrites both on release, so resend them).
    pub fn release(&self, key: &str, value: &[u8], session: &str, flags: u64) -> Result<bool> {
        self.put_with(
            key,
            value,
            &WriteOptions {
                flags,
                release: Some(session.to_string()),
                ..Default::default()
            },
        )
    }

    /// Deletes one key (always `true`, also for a missing key).
    pub fn delete(&self, key: &str) -> Result<bool> {
        let req = Request::new("DELETE", kv_path(crate::foundations::keys::key(key)?));
        let resp = self.conn.call(&req)?;
        parse_bool(&req, &resp.body)
    }

    /// Deletes one key only if its ModifyIndex is `index` (a missing key gives `true`).
    pub fn delete_cas(&self, key: &str, index: u64) -> Result<bool> {
        let mut req = Request::new("DELETE", kv_path(crate::foundations::keys::key(key)?));
        req.param("cas", index.to_string());
        let resp = self.conn.call(&req)?;
        parse_bool(&req, &resp.body)
    }

    /// Deletes every key starting with `prefix` (an empty prefix deletes everything).
    pub fn delete_tree(&self, prefix: &str) -> Result<bool> {
        let mut req = Request::new("DELETE", kv_path(crate::foundations::keys::prefix(prefix)?));
        req.flag("recurse");
        let resp = self.conn.call(&req)?;
        parse_bool(&req, &resp.body)
    }
}

pub(crate) fn parse_bool(req: &Request, body: &[u8]) -> Result<bool> {
    let text = String::from_utf8_lossy(body);
    match text.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(Error::new(
            ErrorKind::BadResponse,
            format!("expected true or false, got {other:?}"),
        )
        .with_endpoint(req.endpoint())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kv_pair_decodes_values_flags_and_session() {
        let p: KvPair = serde_json::from_str(
            r#"{"LockIndex":1,"Key":"svc/leader","Flags":3304740253564472344,"Value":"aGVsbG8=",
            "Session":"abc","CreateIndex":20,"ModifyIndex":21}"#,
        )
        .unwrap();
        assert_eq!(p.value.as_deref(), Some(&b"hello"[..]));
        assert_eq!(p.flags, 3304740253564472344);
        assert_eq!(p.session.as_deref(), Some("abc"));
        let p: KvPair = serde_json::from_str(
            r#"{"LockIndex":0,"Key":"k","Flags":16210313421097356768,"Value":null,"CreateIndex":2,"ModifyIndex":2}"#,
        )
        .unwrap();
        assert_eq!(p.value, None);
        assert_eq!(p.session, None);
        assert_eq!(p.flags, 16210313421097356768);
    }
}
