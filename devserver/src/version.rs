//! The Consul version the dev server emulates, and every client-visible switch that depends on
//! it.
//!
//! Each switch is one small method on [`ConsulVersion`] whose doc comment names the boundary and
//! where it comes from (a CHANGELOG line, a pull request or an issue of `hashicorp/consul`), so
//! the endpoints ask a question (`v.txn_numbers_through_float64()`) instead of comparing numbers.
//! The crate docs list them all under "Emulating Consul versions".

use std::fmt;
use std::str::FromStr;

/// A Consul release, `MAJOR.MINOR.PATCH`, ordered as releases are.
///
/// Parse one with [`ConsulVersion::parse`] or `str::parse`: `"1.6.1"` and `"v1.6.1"` are
/// accepted, as is `"current"` for [`ConsulVersion::CURRENT`]. Versions newer than
/// [`ConsulVersion::CURRENT`] are accepted and behave as it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConsulVersion {
    major: u32,
    minor: u32,
    patch: u32,
}

impl Default for ConsulVersion {
    /// [`ConsulVersion::CURRENT`].
    fn default() -> Self {
        ConsulVersion::CURRENT
    }
}

impl ConsulVersion {
    /// The newest Consul release whose client-visible behaviour the dev server fully matches,
    /// and the version it emulates unless told otherwise.
    ///
    /// 1.21.4, because 1.21.5 added KV key-name validation (PR #22682: keys outside
    /// `^[a-zA-Z0-9,_./\-?&=]+$` got a 500 `invalid key name ...`, issues #22822 and #22835),
    /// later relaxed by the CVE-2025-11392 fix (PR #22850, backported in #22931 and #22939) to
    /// rejecting `..` path traversal and leading or trailing spaces. The dev server validates no
    /// key names, so it answers as the releases before 1.21.5 do. Everything else it implements
    /// (strict txn decoding, 128 txn ops, `get-or-empty`, `NodeChecks`/`ServiceChecks`, compact
    /// JSON unless `?pretty`) is the behaviour of 1.17.0 and later.
    pub const CURRENT: ConsulVersion = ConsulVersion::new(1, 21, 4);

    /// The version `major.minor.patch`.
    pub const fn new(major: u32, minor: u32, patch: u32) -> ConsulVersion {
        ConsulVersion {
            major,
            minor,
            patch,
        }
    }

    /// The major version (`1` in `1.6.2`).
    pub const fn major(self) -> u32 {
        self.major
    }

    /// The minor version (`6` in `1.6.2`).
    pub const fn minor(self) -> u32 {
        self.minor
    }

    /// The patch version (`2` in `1.6.2`).
    pub const fn patch(self) -> u32 {
        self.patch
    }

    /// Parses `MAJOR.MINOR.PATCH` (three decimal numbers), optionally with a leading `v`, or
    /// `current` for [`ConsulVersion::CURRENT`]. The error names the value it refused.
    pub fn parse(s: &str) -> Result<ConsulVersion, ConfigError> {
        let bad = || {
            ConfigError(format!(
                "invalid Consul version {s:?}: want MAJOR.MINOR.PATCH, such as 1.6.1 (or \"current\")"
            ))
        };
        let t = s.trim();
        if t.eq_ignore_ascii_case("current") {
            return Ok(ConsulVersion::CURRENT);
        }
        let t = t.strip_prefix('v').unwrap_or(t);
        let mut parts = t.split('.');
        let mut num = || -> Result<u32, ConfigError> {
            let p = parts.next().ok_or_else(bad)?;
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            p.parse().map_err(|_| bad())
        };
        let v = ConsulVersion::new(num()?, num()?, num()?);
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(v)
    }

    /// Whether this version is older than `major.minor.patch`.
    const fn before(self, major: u32, minor: u32, patch: u32) -> bool {
        if self.major != major {
            return self.major < major;
        }
        if self.minor != minor {
            return self.minor < minor;
        }
        self.patch < patch
    }

    // ----- the switches -----

    /// Before 1.6.2, `/v1/txn` decoded its body into `interface{}` and then through
    /// mapstructure, so every JSON number went through a float64: a KV op's `Flags` and `Index`
    /// are stored and used as Go's `uint64(float64(n))` (`3304740253564472344` becomes
    /// `3304740253564472320`). `?flags=` and `?cas=` on `PUT /v1/kv` were always exact.
    ///
    /// Source: CHANGELOG 1.6.2, "agent: endpoint performance improvements, Txn endpoint in
    /// particular. [GH-6680]" (PR #6680 "Use encoding/json as JSON decoder instead of
    /// mapstructure"; bug report issue #6655).
    pub const fn txn_numbers_through_float64(self) -> bool {
        self.before(1, 6, 2)
    }

    /// Before 1.6.0, writing a KV entry identical to the stored one (same value, flags, session
    /// and LockIndex) was a real write: it bumped ModifyIndex and woke watchers. From 1.6.0 it is
    /// a no-op. This covers plain PUT, `?cas`, `?acquire` and the txn verbs `set`, `cas`, `lock`.
    ///
    /// Source: PR #5885 "KV: do not trigger watches when setting the same value" (scheduled for
    /// 1.6 by the maintainer; no CHANGELOG line), confirmed on 1.6.5 in issue #7826.
    pub const fn identical_kv_write_bumps_index(self) -> bool {
        self.before(1, 6, 0)
    }

    /// From 1.6.0 until 1.8.0, a `/v1/txn` write that changed nothing (an identical `set`,
    /// `cas` or `lock`) reported the transaction's new raft index as its `ModifyIndex`, although
    /// the stored entry kept its old one.
    ///
    /// Source: issue #7826; fixed in CHANGELOG 1.8.0, "agent: Preserve ModifyIndex for unchanged
    /// entry in KV transaciton [GH-7832]".
    pub const fn txn_reports_new_index_for_noop_write(self) -> bool {
        !self.before(1, 6, 0) && self.before(1, 8, 0)
    }

    /// Before 1.7.0, sessions had only the `Checks` list: create defaults it to `["serfHealth"]`,
    /// a `Checks` key in the body (any letter case) replaces it (`[]` means no checks), and
    /// `NodeChecks`/`ServiceChecks` are unknown fields, silently ignored. Session answers carry
    /// `ID, Name, Node, Checks, LockDelay, Behavior, TTL, CreateIndex, ModifyIndex`.
    ///
    /// Source: `NodeChecks`/`ServiceChecks` documented as new in 1.7.0 (PR #10651); CHANGELOG
    /// 1.7.2, "sessions: Fixed backwards incompatibility with 1.6.x and earlier [GH-7395]";
    /// `FixupChecks` in 1.0.8's `agent/session_endpoint.go`; field order from issue #3732.
    pub const fn legacy_session_checks(self) -> bool {
        self.before(1, 7, 0)
    }

    /// Whether the txn verb `get-or-empty` exists (from 1.14.0). Older servers fail the op with
    /// `unknown KV verb "get-or-empty"` (a 409, like any failing op), and treat it as needing
    /// key write permission.
    ///
    /// Source: CHANGELOG 1.14.0, "http: Add new `get-or-empty` operation to the txn api…
    /// [GH-14474]".
    pub const fn txn_get_or_empty(self) -> bool {
        !self.before(1, 14, 0)
    }

    /// The most operations a `/v1/txn` body may hold: 64 before 1.14.0, 128 from it. More is a
    /// 413 `Transaction contains too many operations (65 > 64)`.
    ///
    /// Source: CHANGELOG 1.14.0, "api: Increase max number of operations inside a transaction
    /// for requests to /v1/txn (128) [GH-14599]".
    pub const fn txn_max_ops(self) -> usize {
        if self.before(1, 14, 0) {
            64
        } else {
            128
        }
    }

    /// Whether the `/v1/txn` body is decoded strictly (from 1.7.0): an unknown field is a 400
    /// `Failed to parse body: json: unknown field "X"`. Before, unknown fields were ignored
    /// (mapstructure with `ErrorUnused` off).
    ///
    /// Source: CHANGELOG 1.7.0 (BREAKING), "HTTP API no longer accepts JSON fields that are
    /// unknown to it… [GH-6874]".
    pub const fn txn_rejects_unknown_fields(self) -> bool {
        !self.before(1, 7, 0)
    }

    /// Whether a txn KV op knows the `Partition` field (from 1.11.0, when admin partitions
    /// arrived). A strict decoder (1.7.0 to 1.10.x) refuses it as an unknown field, even empty;
    /// `Namespace` is known from 1.7.0, where strict decoding starts.
    ///
    /// Source: the KV op structs of those releases (research notes §8, "Strict decoding").
    pub const fn txn_kv_knows_partition(self) -> bool {
        !self.before(1, 11, 0)
    }

    /// Before 1.17.0, a `consul agent -dev` pretty-printed every JSON body (4-space indent and
    /// a trailing newline), with or without `?pretty`. The dev server then pretty-prints
    /// whatever [`crate::Config::pretty`] says.
    ///
    /// Source: CHANGELOG 1.17.0, "dev-mode: Fix dev mode has new line in responses… only when
    /// url has pretty [GH-18367]".
    pub const fn dev_agent_always_pretty(self) -> bool {
        self.before(1, 17, 0)
    }

    /// The default of Consul's `limits.http_max_conns_per_client`, the most HTTP connections
    /// one client (IP) may hold open before further ones get a 429: none (0) before 1.6.3,
    /// which brought the limit with a default of 100, kept through 1.7.0; 200 from 1.7.1.
    /// The command line's `--max-conns-per-client` defaults to this for its `--consul-version`;
    /// [`crate::Config::default`] has 200 whatever [`crate::Config::consul_version`] says.
    ///
    /// Source: CHANGELOG 1.6.3, `limits.http_max_conns_per_client` (CVE-2020-7219, GH-7159);
    /// CHANGELOG 1.7.1, its default raised from 100 to 200 (GH-7289).
    pub const fn http_max_conns_per_client(self) -> usize {
        if self.before(1, 6, 3) {
            0
        } else if self.before(1, 7, 1) {
            100
        } else {
            200
        }
    }
}

impl ConsulVersion {
    /// Whether the ACL system has the builtin policy `builtin/global-read-only`
    /// (ID `00000000-0000-0000-0000-000000000002`) beside `global-management`: from 1.17.0,
    /// and backported to 1.14.9, 1.15.5 and 1.16.1 (1.16.0 came out before it and lacks it).
    ///
    /// Source: CHANGELOG 1.16.1, 1.15.5 and 1.14.9 (all August 8, 2023), "acl: added builtin
    /// ACL policy that provides global read-only access (builtin/global-read-only)
    /// [GH-18319]"; `structs.ACLBuiltinPolicies` in `agent/structs/acl.go`.
    pub const fn builtin_global_read_only_policy(self) -> bool {
        self.has_august_2023_backports()
    }

    /// Whether `/v1/agent/members` runs `?filter=` (bexpr over the members; earlier releases
    /// ignore the parameter): the same releases as the read-only policy.
    ///
    /// Source: CHANGELOG 1.16.1, 1.15.5 and 1.14.9, "cli: Add `-filter` option to `consul
    /// members` [GH-18223]" (the agent endpoint's filter that the option sends).
    pub const fn agent_members_filter(self) -> bool {
        self.has_august_2023_backports()
    }

    /// From 1.17.0, and the 1.14.9 / 1.15.5 / 1.16.1 patch releases of August 8, 2023,
    /// which carried features back (1.16.0 came out before them).
    const fn has_august_2023_backports(self) -> bool {
        match (self.major, self.minor) {
            (1, 14) => self.patch >= 9,
            (1, 15) => self.patch >= 5,
            (1, 16) => self.patch >= 1,
            _ => !self.before(1, 17, 0),
        }
    }
}

impl fmt::Display for ConsulVersion {
    /// `MAJOR.MINOR.PATCH`, as `/v1/agent/self` reports it in `Config.Version`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for ConsulVersion {
    type Err = ConfigError;

    /// [`ConsulVersion::parse`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ConsulVersion::parse(s)
    }
}

/// Go's `uint64(float64(n))` on amd64 for a non-negative JSON number: round to the nearest
/// float64, then truncate. Values from 2^63 up take Go's `x - 2^63` path, so 2^64 and above
/// (out of range) come out as `0x8000000000000000`, as the amd64 code Go generates gives.
pub(crate) fn go_uint64_of_float64(f: f64) -> u64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f < TWO_63 {
        return f as u64;
    }
    let y = f - TWO_63;
    // CVTTSD2SQ gives 0x8000000000000000 for anything out of int64 range.
    let z = if y < TWO_63 { y as u64 } else { 1 << 63 };
    z | (1 << 63)
}

/// A configuration value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_with_and_without_v_and_orders() {
        let v: ConsulVersion = "1.0.8".parse().unwrap();
        assert_eq!(v, ConsulVersion::new(1, 0, 8));
        assert_eq!(ConsulVersion::parse("v1.6.2").unwrap().to_string(), "1.6.2");
        assert_eq!(ConsulVersion::parse("current"), Ok(ConsulVersion::CURRENT));
        assert!(ConsulVersion::new(1, 6, 10) > ConsulVersion::new(1, 6, 2));
        assert!(ConsulVersion::new(1, 10, 0) > ConsulVersion::new(1, 9, 9));
        assert!(ConsulVersion::new(2, 0, 0) > ConsulVersion::CURRENT);
    }

    #[test]
    fn rejects_garbage_naming_the_value() {
        for bad in [
            "",
            "1.6",
            "1.6.x",
            "1.6.2.1",
            "1..2",
            "one",
            "1.6.2-rc1",
            "+1.6.2",
            "v",
        ] {
            let e = ConsulVersion::parse(bad).unwrap_err();
            assert!(e.0.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn switch_boundaries() {
        let v = |s: &str| ConsulVersion::parse(s).unwrap();
        assert!(v("1.6.1").txn_numbers_through_float64());
        assert!(!v("1.6.2").txn_numbers_through_float64());
        assert!(v("1.5.3").identical_kv_write_bumps_index());
        assert!(!v("1.6.0").identical_kv_write_bumps_index());
        assert!(!v("1.5.3").txn_reports_new_index_for_noop_write());
        assert!(v("1.6.0").txn_reports_new_index_for_noop_write());
        assert!(v("1.7.4").txn_reports_new_index_for_noop_write());
        assert!(!v("1.8.0").txn_reports_new_index_for_noop_write());
        assert!(v("1.6.9").legacy_session_checks());
        assert!(!v("1.7.0").legacy_session_checks());
        assert_eq!(
            (v("1.13.9").txn_max_ops(), v("1.14.0").txn_max_ops()),
            (64, 128)
        );
        assert!(!v("1.13.9").txn_get_or_empty() && v("1.14.0").txn_get_or_empty());
        assert!(!v("1.6.9").txn_rejects_unknown_fields());
        assert!(v("1.7.0").txn_rejects_unknown_fields());
        assert!(!v("1.10.9").txn_kv_knows_partition() && v("1.11.0").txn_kv_knows_partition());
        assert!(v("1.16.9").dev_agent_always_pretty());
        assert!(!v("1.17.0").dev_agent_always_pretty());
        for (s, has) in [
            ("1.13.9", false),
            ("1.14.8", false),
            ("1.14.9", true),
            ("1.15.4", false),
            ("1.15.5", true),
            ("1.15.10", true),
            ("1.16.0", false),
            ("1.16.1", true),
            ("1.17.0", true),
        ] {
            assert_eq!(v(s).builtin_global_read_only_policy(), has, "{s}");
        }
        let c = ConsulVersion::CURRENT;
        assert!(
            !c.txn_numbers_through_float64()
                && !c.identical_kv_write_bumps_index()
                && !c.txn_reports_new_index_for_noop_write()
                && !c.legacy_session_checks()
                && c.txn_get_or_empty()
                && c.txn_rejects_unknown_fields()
                && c.txn_kv_knows_partition()
                && !c.dev_agent_always_pretty()
                && c.http_max_conns_per_client() == 200
        );
    }

    #[test]
    fn http_max_conns_per_client_follows_the_release() {
        let v = |s: &str| ConsulVersion::parse(s).unwrap();
        for (s, conns) in [
            ("1.0.8", 0),
            ("1.6.2", 0),
            ("1.6.3", 100),
            ("1.6.10", 100),
            ("1.7.0", 100),
            ("1.7.1", 200),
            ("1.21.4", 200),
            ("2.0.0", 200),
        ] {
            assert_eq!(v(s).http_max_conns_per_client(), conns, "{s}");
        }
        assert_eq!(ConsulVersion::CURRENT.http_max_conns_per_client(), 200);
        // Config::default() keeps the current release's default.
        assert_eq!(
            crate::Config::default().max_conns_per_client,
            ConsulVersion::CURRENT.http_max_conns_per_client()
        );
    }

    #[test]
    fn float64_rounding_matches_go() {
        assert_eq!(
            go_uint64_of_float64(3304740253564472344u64 as f64),
            3304740253564472320
        );
        assert_eq!(
            go_uint64_of_float64(0xe0f6_9a2b_aa41_4de0u64 as f64),
            0xe0f6_9a2b_aa41_5000
        );
        assert_eq!(go_uint64_of_float64(((1u64 << 53) + 1) as f64), 1 << 53);
        assert_eq!(go_uint64_of_float64(u64::MAX as f64), 1 << 63);
        assert_eq!(go_uint64_of_float64(1e30), 1 << 63);
        assert_eq!(go_uint64_of_float64(7.9), 7);
    }
}
