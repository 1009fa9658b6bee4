//! `baton-devserver agent -config-file F ...`, also reached through a `consul` symlink (or a
//! copy) of the binary: what Consul's Go test harness (`sdk/testutil` `NewTestServerConfigT`)
//! runs, `consul agent -config-file <tmp>/config.json`, so the harness starts the dev server
//! unmodified with the dev server on `$PATH` as `consul`.
//!
//! Read from the JSON config files (Consul's keys): `node_name`, `datacenter`, `ports.http`,
//! `addresses.http`, `bind_addr`/`client_addr`, `acl.enabled` (with `acl.tokens.master` or
//! `acl.tokens.initial_management`, or neither: then not bootstrapped), `acl.default_policy`
//! (absent means `deny` here, where Consul's default is `allow`), `session_ttl_min`,
//! `node_id`, `node_meta`, `server`, `ports.serf_lan`/`serf_wan` (listened on, for other
//! agents' joins); the files' `service`/`services` definitions are registered on
//! `PUT /v1/agent/reload` (not at start). Everything else is accepted and ignored;
//! `-dev`, `-config-dir` and other flags of `consul agent` are accepted too.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use crate::{parse_go_duration, Config};
use serde_json::Value;

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, k| cur.get(*k))
}

fn apply(cfg: &mut Config, v: &Value, ip: &mut IpAddr, port: &mut u16) -> Result<(), String> {
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
    for key in [&["client_addr"][..], &["addresses", "http"][..]] {
        if let Some(a) = s(key).filter(|a| !a.is_empty()) {
            if a.starts_with("unix://") {
                return Err("unix socket HTTP addresses are not supported".into());
            }
            *ip = a.parse().map_err(|e| format!("{}: {e}", key.join(".")))?;
        }
    }
    if let Some(p) = get(v, &["ports", "http"]).and_then(Value::as_i64) {
        *port = u16::try_from(p).map_err(|_| format!("ports.http {p} is not a port"))?;
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
    let mut ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut port = 8500;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let flag = a.trim_start_matches('-');
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        match name {
            "config-file" => {
                let path = inline
                    .or_else(|| it.next().cloned())
                    .ok_or("-config-file needs a value")?;
                let v = crate::config::read_config_file(std::path::Path::new(&path))?;
                apply(&mut cfg, &v, &mut ip, &mut port)?;
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
                port = v
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
    cfg.addr = SocketAddr::new(ip, port);
    // A `consul agent` listens on its serf ports: other agents of a test join it there.
    cfg.serf_listen = true;
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}
