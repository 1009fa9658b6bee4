//! `baton-devserver tls ...`: CA and certificate files as `consul tls ca create` and
//! `consul tls cert create` write them, for tests in any language (see `baton_devserver::certs`).

use std::net::IpAddr;
use std::path::PathBuf;

use crate::certs::{self, CertAuthority, CertKind, LeafOptions};

pub(crate) const USAGE: &str =
    "usage: baton-devserver tls ca create [-domain D] [-days N] [-dir DIR]
       baton-devserver tls cert create -server|-client|-cli [-dc DC] [-domain D] [-ca FILE]
              [-key FILE] [-additional-dnsname NAME]... [-additional-ipaddress IP]... [-days N]
              [-dir DIR]
       baton-devserver tls self-signed create [-additional-dnsname NAME]... [-days N] [-dir DIR]

Writes certificates the way `consul tls ca create` / `consul tls cert create` do, into DIR
(default: the current directory), and prints `==> Saved FILE` for each file:
  ca create       <domain>-agent-ca.pem, <domain>-agent-ca-key.pem (domain default consul,
                  valid 1825 days)
  cert create     <dc>-<server|client|cli>-<domain>-<n>.pem and ...-<n>-key.pem, the first
                  free n, signed by -ca/-key (default <domain>-agent-ca.pem and
                  <domain>-agent-ca-key.pem in DIR); names server.<dc>.<domain> (or
                  client..., cli.client...), localhost and (not -cli) 127.0.0.1; 365 days
  self-signed     self-signed.pem, self-signed-key.pem: one certificate that is its own CA
                  (CA:TRUE) for localhost and 127.0.0.1, as a quick `openssl req -x509`
                  makes; TLS clients refuse it as a server certificate (CaUsedAsEndEntity)

Flags take one dash or two (`-server` or `--server`, `-dc=dc2` or `-dc dc2`).";

struct Args {
    domain: String,
    dc: String,
    days: Option<u32>,
    dir: PathBuf,
    kind: Option<CertKind>,
    ca: Option<PathBuf>,
    key: Option<PathBuf>,
    dns: Vec<String>,
    ips: Vec<IpAddr>,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let mut a = Args {
        domain: certs::DEFAULT_DOMAIN.into(),
        dc: certs::DEFAULT_DC.into(),
        days: None,
        dir: PathBuf::from("."),
        kind: None,
        ca: None,
        key: None,
        dns: Vec::new(),
        ips: Vec::new(),
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let bare = arg.trim_start_matches('-');
        if bare.len() == arg.len() {
            return Err(format!("unexpected argument {arg:?}"));
        }
        let (flag, inline) = match bare.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (bare, None),
        };
        let mut value = || -> Result<String, String> {
            inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or_else(|| format!("-{flag} needs a value"))
        };
        match flag {
            "h" | "help" => return Err(String::new()),
            "server" => a.kind = Some(CertKind::Server),
            "client" => a.kind = Some(CertKind::Client),
            "cli" => a.kind = Some(CertKind::Cli),
            "domain" => a.domain = value()?,
            "dc" => a.dc = value()?,
            "dir" => a.dir = PathBuf::from(value()?),
            "ca" => a.ca = Some(PathBuf::from(value()?)),
            "key" => a.key = Some(PathBuf::from(value()?)),
            "additional-dnsname" => a.dns.push(value()?),
            "additional-ipaddress" => {
                let v = value()?;
                a.ips.push(
                    v.parse()
                        .map_err(|_| format!("-additional-ipaddress {v:?}: not an IP address"))?,
                );
            }
            "days" => {
                let v = value()?;
                let n: u32 = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("-days {v:?}: not a positive number"))?;
                a.days = Some(n);
            }
            other => return Err(format!("unknown flag -{other}")),
        }
    }
    Ok(a)
}

/// Runs `baton-devserver tls <args>`; `Err("")` asks for the usage text.
pub(crate) fn run(args: &[String]) -> Result<Vec<PathBuf>, String> {
    let words: Vec<&str> = args.iter().take(2).map(String::as_str).collect();
    let rest = args.get(2..).unwrap_or_default();
    match words.as_slice() {
        ["ca", "create"] => {
            let a = parse(rest)?;
            if a.kind.is_some() || a.ca.is_some() || a.key.is_some() {
                return Err("ca create takes -domain, -days and -dir only".into());
            }
            let ca = CertAuthority::create(&a.domain, a.days.unwrap_or(certs::CA_DAYS))
                .map_err(|e| e.to_string())?;
            let f = ca.write(&a.dir).map_err(|e| e.to_string())?;
            Ok(vec![f.cert, f.key])
        }
        ["cert", "create"] => {
            let a = parse(rest)?;
            let kind = a
                .kind
                .ok_or("cert create needs one of -server, -client or -cli")?;
            let ca_cert =
                a.ca.unwrap_or_else(|| a.dir.join(format!("{}-agent-ca.pem", a.domain)));
            let ca_key = a
                .key
                .unwrap_or_else(|| a.dir.join(format!("{}-agent-ca-key.pem", a.domain)));
            let ca = CertAuthority::load(&ca_cert, &ca_key, &a.domain).map_err(|e| {
                format!("{e} (make a CA first with `baton-devserver tls ca create`, or name it with -ca and -key)")
            })?;
            let opts = LeafOptions {
                kind,
                dc: a.dc,
                domain: a.domain,
                dns_names: a.dns,
                ip_addresses: a.ips,
                days: a.days.unwrap_or(certs::CERT_DAYS),
            };
            let f = ca.issue_into(&opts, &a.dir).map_err(|e| e.to_string())?;
            Ok(vec![f.cert, f.key])
        }
        ["self-signed", "create"] => {
            let a = parse(rest)?;
            let pair = certs::self_signed_ca(&a.dns, a.days.unwrap_or(certs::CERT_DAYS))
                .map_err(|e| e.to_string())?;
            let f = pair
                .write(&a.dir, "self-signed")
                .map_err(|e| e.to_string())?;
            Ok(vec![f.cert, f.key])
        }
        [] | ["-h"] | ["--help"] | ["help"] => Err(String::new()),
        _ => Err(format!(
            "unknown tls command {:?} (want `ca create`, `cert create` or `self-signed create`)",
            words.join(" ")
        )),
    }
}
