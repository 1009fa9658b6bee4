//! `baton-devserver agent -config-file F ...`, also reached through a `consul` symlink (or a
//! copy) of the binary: what Consul's Go test harness (`sdk/testutil` `NewTestServerConfigT`)
//! runs, `consul agent -config-file <tmp>/config.json`, so the harness starts the dev server
//! unmodified with the dev server on `$PATH` as `consul`.
//!
//! Read from the JSON config files (Consul's keys): `node_name`, `datacenter`, `ports.http`,
//! `addresses.http` (an IP address, a `unix:///path` socket, or both space-separated: with a
//! socket alone the TCP listener every dev server has takes a free port), `unix_sockets.mode`
//! (not `user`/`group`), `client_addr`, `acl.enabled` (with `acl.tokens.master` or
//! `acl.tokens.initial_management`, or neither: then not bootstrapped), `acl.default_policy`
//! (absent means `deny` here, where Consul's default is `allow`), `session_ttl_min`,
//! `node_id`, `node_meta`, `server`, `ports.serf_lan`/`serf_wan` (listened on, for other
//! agents' joins); the files' `service`/`services` definitions are registered on
//! `PUT /v1/agent/reload` (not at start). Everything else is accepted and ignored;
//! `-dev`, `-config-dir` and other flags of `consul agent` are accepted too.
//!
//! `consul version [-format=pretty|json]` answers as Consul's `command/version` does: the
//! harness of Consul 1.15 and later (`findConsulVersion`) runs `consul version -format=json`
//! before anything else and decodes `{"Version": ...}` with `hashicorp/go-version`, then writes
//! that version back into the agent's config file as `version`.
//!
//! The Consul version both forms emulate is `-consul-version X.Y.Z` (for `agent`), else the
//! environment variable [`CONSUL_VERSION_ENV`] (the only way to reach `consul version`, which
//! the harness runs without flags), else [`ConsulVersion::CURRENT`]. The agent's per-client
//! connection limit is that release's default
//! ([`ConsulVersion::http_max_conns_per_client`]).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use crate::{parse_go_duration, Config, ConsulVersion};
use serde_json::{json, Value};

/// The environment variable that names the Consul version `consul version` reports and
/// `consul agent` emulates when no `-consul-version` flag is given (`1.15.10`, `current`).
pub const CONSUL_VERSION_ENV: &str = "BATON_CONSUL_VERSION";

/// The version to emulate: the flag's value, else [`CONSUL_VERSION_ENV`], else the current one.
fn emulated_version(flag: Option<&str>) -> Result<ConsulVersion, String> {
    if let Some(v) = flag {
        return ConsulVersion::parse(v).map_err(|e| format!("-consul-version: {e}"));
    }
    match std::env::var(CONSUL_VERSION_ENV) {
        Ok(v) if !v.trim().is_empty() => {
            ConsulVersion::parse(&v).map_err(|e| format!("{CONSUL_VERSION_ENV}: {e}"))
        }
        _ => Ok(ConsulVersion::CURRENT),
    }
}

/// Consul's RPC protocol versions (`consul.DefaultRPCProtocol`, `ProtocolVersionMin`,
/// `ProtocolVersionMax`), the same in every 1.x release.
const RPC_PROTOCOL: (u8, u8, u8) = (2, 2, 3);

/// What `consul version [-format=pretty|json]` prints, emulating `version`. `Err` carries the
/// message for a flag Consul's command refuses.
pub(crate) fn version_output(args: &[String], version: ConsulVersion) -> Result<String, String> {
    let mut format = "pretty".to_string();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let flag = a.trim_start_matches('-');
        match flag.split_once('=') {
            Some(("format", v)) => format = v.to_string(),
            None if flag == "format" => {
                format = it
                    .next()
                    .cloned()
                    .ok_or("flag needs an argument: -format")?
            }
            _ => return Err(format!("flag provided but not defined: {a}")),
        }
    }
    // No git commit or build of Consul stands behind the dev server: the revision is empty
    // (Consul then leaves the line out) and the build date is the epoch.
    let build_date = "1970-01-01T00:00:00Z";
    let (default, min, max) = RPC_PROTOCOL;
    match format.as_str() {
        "pretty" => Ok(format!(
            "Consul v{version}\nBuild Date {build_date}\nProtocol {default} spoken by default, \
             understands {min} to {max} (agent will automatically use protocol >{default} when \
             speaking to compatible agents)\n"
        )),
        "json" => {
            let info = json!({
                "Version": version.to_string(),
                "Revision": "",
                "Prerelease": "",
                "BuildDate": build_date,
                "RPC": {"Default": default, "Min": min, "Max": max}
            });
            let mut out = serde_json::to_string_pretty(&info).map_err(|e| e.to_string())?;
            out.push('\n');
            Ok(out)
        }
        other => Err(format!("Invalid format: {other}")),
    }
}

/// Runs `consul version ARGS` (the arguments after `version`): prints as Consul does and gives
/// the exit status (1 for a refused flag or version, as Consul's command does).
pub fn run_version(args: &[String]) -> u8 {
    match emulated_version(None).and_then(|v| version_output(args, v)) {
        Ok(out) => {
            print!("{out}");
            0
        }
        Err(e) => {
            eprintln!("{e}");
            1
        }
    }
}

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(*k))
}

/// Where HTTP is served, from `client_addr`, `addresses.http`, `ports.http` and `-http-port`
/// (a later file's value replacing an earlier one's, as Consul merges config files).
struct HttpListen {
    /// `client_addr` (default 127.0.0.1).
    client: IpAddr,
    /// `addresses.http`, when set: its IP address and its unix socket, each when it has one.
    http: Option<(Option<IpAddr>, Option<PathBuf>)>,
    /// `ports.http` or `-http-port` (default 8500).
    port: u16,
}

impl HttpListen {
    /// Puts the listeners into `cfg`. `addresses.http` wins over `client_addr`, as Consul's
    /// `makeAddrs` does; with only a unix socket there, the TCP listener (which every dev
    /// server has, where Consul would have none) takes a free port on `client_addr`'s IP.
    fn apply(self, cfg: &mut Config) {
        let (ip, port, unix) = match self.http {
            None => (self.client, self.port, None),
            Some((Some(ip), unix)) => (ip, self.port, unix),
            Some((None, unix)) => (self.client, 0, unix),
        };
        cfg.addr = SocketAddr::new(ip, port);
        cfg.unix_socket = unix;
    }
}

/// One IP address of an address list, as Consul's `expandAddrs` reads it (`[::]` included).
fn ip_of(key: &str, a: &str) -> Result<IpAddr, String> {
    let a = if a == "[::]" { "::" } else { a };
    a.parse()
        .map_err(|_| format!("{key}: invalid ip address: {a}"))
}

/// `addresses.http`: space-separated IP addresses and `unix://` sockets (Consul serves HTTP
/// on each); the dev server serves one of each kind.
fn http_addresses(v: &str) -> Result<(Option<IpAddr>, Option<PathBuf>), String> {
    let key = "addresses.http";
    let (mut ip, mut unix) = (None, None);
    for a in v.split_whitespace() {
        if let Some(path) = super::unix_socket_path(key, a)? {
            if unix.replace(path).is_some() {
                return Err(format!(
                    "{key}: the dev server serves one unix socket (got {v:?})"
                ));
            }
        } else if ip.replace(ip_of(key, a)?).is_some() {
            return Err(format!(
                "{key}: the dev server serves one IP address (got {v:?})"
            ));
        }
    }
    Ok((ip, unix))
}

fn apply(cfg: &mut Config, v: &Value, listen: &mut HttpListen) -> Result<(), String> {
    let s = |path: &[&str]| get(v, path).and_then(Value::as_str).map(str::to_string);
    if let Some(n) = s(&["node_name"]) {
        cfg.node_name = n;
    }
    if let Some(d) = s(&["datacenter"]) {
        cfg.datacenter = d;
    }
    if let Some(id) = s(&["node_id"]).filter(|id| !id.is_empty()) {
        cfg.node_id = Some(id.to_ascii_lowercase());
    }
    if let Some(meta) = get(v, &["node_meta"]).and_then(Value::as_object) {
        for (k, val) in meta {
            let val = val.as_str().ok_or(format!("node_meta.{k}: not a string"))?;
            cfg.node_meta.retain(|(old, _)| old != k);
            cfg.node_meta.push((k.clone(), val.to_string()));
        }
    }
    for (key, slot) in [
        ("serf_lan", &mut cfg.serf_ports.0),
        ("serf_wan", &mut cfg.serf_ports.1),
    ] {
        if let Some(p) = get(v, &["ports", key]).and_then(Value::as_i64) {
            *slot = u16::try_from(p).map_err(|_| format!("ports.{key} {p} is not a port"))?;
        }
    }
    if let Some(a) = s(&["client_addr"]).filter(|a| !a.trim().is_empty()) {
        // Consul's expandIPs: IP addresses only.
        if a.trim().starts_with("unix://") {
            return Err("client_addr cannot be a unix socket".into());
        }
        listen.client = ip_of("client_addr", a.trim())?;
    }
    if let Some(a) = s(&["addresses", "http"]).filter(|a| !a.trim().is_empty()) {
        listen.http = Some(http_addresses(&a)?);
    }
    if let Some(p) = get(v, &["ports", "http"]).and_then(Value::as_i64) {
        listen.port = u16::try_from(p).map_err(|_| format!("ports.http {p} is not a port"))?;
    }
    if let Some(mode) = s(&["unix_sockets", "mode"]).filter(|m| !m.is_empty()) {
        cfg.unix_socket_mode =
            Some(super::parse_mode(&mode).map_err(|e| format!("unix_sockets.mode: {e}"))?);
    }
    let enabled = get(v, &["acl", "enabled"]).and_then(Value::as_bool) == Some(true);
    let token =
        s(&["acl", "tokens", "initial_management"]).or_else(|| s(&["acl", "tokens", "master"]));
    if enabled {
        cfg.acl_enabled = true;
        cfg.acl_token = token;
    }
    if let Some(p) = s(&["acl", "default_policy"]) {
        cfg.acl_default_allow = p == "allow";
    }
    if let Some(server) = get(v, &["server"]).and_then(Value::as_bool) {
        cfg.server = server;
    }
    if let Some(d) = s(&["session_ttl_min"]) {
        let ns = parse_go_duration(&d).map_err(|e| format!("session_ttl_min: {e}"))?;
        cfg.session_ttl_min = Duration::from_nanos(ns.max(1) as u64);
    }
    Ok(())
}

/// Builds the dev server's config from `consul agent` arguments (after `agent`).
pub fn parse_agent_args(args: &[String]) -> Result<Config, String> {
    let mut cfg = Config::default();
    let mut listen = HttpListen {
        client: IpAddr::V4(Ipv4Addr::LOCALHOST),
        http: None,
        port: 8500,
    };
    let mut version_flag = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let flag = a.trim_start_matches('-');
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        match name {
            "consul-version" => {
                version_flag = Some(
                    inline
                        .or_else(|| it.next().cloned())
                        .ok_or("-consul-version needs a value")?,
                )
            }
            "config-file" => {
                let path = inline
                    .or_else(|| it.next().cloned())
                    .ok_or("-config-file needs a value")?;
                let v = crate::config::read_config_file(std::path::Path::new(&path))?;
                apply(&mut cfg, &v, &mut listen)?;
                cfg.config_files.push(path.into());
            }
            "node" => {
                cfg.node_name = inline
                    .or_else(|| it.next().cloned())
                    .ok_or("-node needs a value")?
            }
            "datacenter" => {
                cfg.datacenter = inline
                    .or_else(|| it.next().cloned())
                    .ok_or("-datacenter needs a value")?
            }
            "http-port" => {
                let v = inline
                    .or_else(|| it.next().cloned())
                    .ok_or("-http-port needs a value")?;
                listen.port = v
                    .parse()
                    .map_err(|_| format!("-http-port {v:?}: not a port"))?;
            }
            "dev" | "server" | "bootstrap" | "ui" => {}
            // Flags with a value that do not change what a client sees.
            _ if inline.is_none() && !a.starts_with('-') => {}
            _ => {
                if inline.is_none() {
                    it.next();
                }
            }
        }
    }
    listen.apply(&mut cfg);
    cfg.consul_version = emulated_version(version_flag.as_deref())?;
    // As the agent of that release would: no per-client connection limit before 1.6.3, 100
    // until 1.7.1, 200 from it (config files' `limits` are not read).
    cfg.max_conns_per_client = cfg.consul_version.http_max_conns_per_client();
    // A `consul agent` listens on its serf ports: other agents of a test join it there.
    cfg.serf_listen = true;
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_connection_limit_is_the_emulated_releases_default() {
        for (v, conns) in [("1.6.1", 0), ("1.7.0", 100), ("current", 200)] {
            let args = ["-dev".to_string(), format!("-consul-version={v}")];
            assert_eq!(
                parse_agent_args(&args).unwrap().max_conns_per_client,
                conns,
                "{v}"
            );
        }
    }
}
