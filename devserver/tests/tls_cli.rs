//! `baton-devserver tls ...` writes Consul's files (`consul tls ca create`, `consul tls cert
//! create`), never overwrites, and the process serves HTTPS with them, printing the second
//! ready line.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn devserver(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(args)
        .output()
        .expect("baton-devserver runs")
}

fn saved(out: &Output) -> Vec<PathBuf> {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("==> Saved ").map(PathBuf::from))
        .collect()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baton-tls-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn names(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn pem_label(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().next().unwrap_or_default().to_string()
}

#[test]
fn files_are_named_as_consul_names_them_and_never_overwritten() {
    let dir = tmp("names");
    let d = dir.to_str().unwrap();
    let ca = saved(&devserver(&["tls", "ca", "create", "-dir", d]));
    assert_eq!(
        names(&ca),
        ["consul-agent-ca.pem", "consul-agent-ca-key.pem"]
    );
    assert_eq!(pem_label(&ca[0]), "-----BEGIN CERTIFICATE-----");
    assert_eq!(pem_label(&ca[1]), "-----BEGIN PRIVATE KEY-----");
    let s0 = saved(&devserver(&["tls", "cert", "create", "-server", "-dir", d]));
    let s1 = saved(&devserver(&[
        "tls", "cert", "create", "--server", "--dir", d,
    ]));
    let c0 = saved(&devserver(&[
        "tls", "cert", "create", "-client", "-dc=dc2", "-dir", d,
    ]));
    let cli = saved(&devserver(&["tls", "cert", "create", "-cli", "-dir", d]));
    assert_eq!(
        names(&s0),
        ["dc1-server-consul-0.pem", "dc1-server-consul-0-key.pem"]
    );
    assert_eq!(
        names(&s1),
        ["dc1-server-consul-1.pem", "dc1-server-consul-1-key.pem"]
    );
    assert_eq!(
        names(&c0),
        ["dc2-client-consul-0.pem", "dc2-client-consul-0-key.pem"]
    );
    assert_eq!(
        names(&cli),
        ["dc1-cli-consul-0.pem", "dc1-cli-consul-0-key.pem"]
    );
    let ss = saved(&devserver(&["tls", "self-signed", "create", "-dir", d]));
    assert_eq!(names(&ss), ["self-signed.pem", "self-signed-key.pem"]);
    // A second CA in the same place is refused, and the first is left as it was.
    let before = std::fs::read(&ca[0]).unwrap();
    let again = devserver(&["tls", "ca", "create", "-dir", d]);
    assert_eq!(again.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already exists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(std::fs::read(&ca[0]).unwrap(), before);
    // Keys are private to their owner.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&s0[1]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cert_without_a_ca_says_how_to_make_one() {
    let dir = tmp("noca");
    let out = devserver(&[
        "tls",
        "cert",
        "create",
        "-server",
        "-dir",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("baton-devserver tls ca create"), "{err}");
    let out = devserver(&["tls", "cert", "create", "-dir", dir.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("-server, -client or -cli"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_process_serves_https_beside_http_and_prints_both_addresses() {
    let dir = tmp("serve");
    let d = dir.to_str().unwrap();
    saved(&devserver(&["tls", "ca", "create", "-dir", d]));
    saved(&devserver(&["tls", "cert", "create", "-server", "-dir", d]));
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["--port", "0", "--https-port", "0"])
        .arg("--tls-cert")
        .arg(dir.join("dc1-server-consul-0.pem"))
        .arg("--tls-key")
        .arg(dir.join("dc1-server-consul-0-key.pem"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let second = lines.next().unwrap().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        first.starts_with("BATON_DEVSERVER_ADDR=127.0.0.1:"),
        "{first}"
    );
    assert!(
        second.starts_with("BATON_DEVSERVER_HTTPS_ADDR=127.0.0.1:"),
        "{second}"
    );
    assert_ne!(first.split('=').nth(1), second.split('=').nth(1));
    // TLS settings without an HTTPS port, or verify_incoming without a CA, are refused.
    let out = devserver(&["--port", "0", "--tls-cert", "c.pem", "--tls-key", "k.pem"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--https-port"));
    let out = devserver(&[
        "--port",
        "0",
        "--https-port",
        "0",
        "--tls-cert",
        "c.pem",
        "--tls-key",
        "k.pem",
        "--verify-incoming",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-ca"));
    std::fs::remove_dir_all(&dir).unwrap();
}
