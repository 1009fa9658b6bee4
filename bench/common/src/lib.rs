//! What the benchmark programs (`bench/*`) share: their command-line
//! arguments, this process's figures from `/proc`, and a dev server in its own
//! process (so the threads and memory a benchmark prints are the client's alone).

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The value after `name` on the command line (`--cycles 2000`).
pub fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// [`arg`] parsed, or `default` when absent or not a number.
pub fn num<T: std::str::FromStr>(name: &str, default: T) -> T {
    arg(name).and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// A numeric field of `/proc/self/status` in its unit (`VmRSS:` in KiB,
/// `Threads:`); 0 where there is no such file (not Linux).
pub fn proc_status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// This process's resident memory (KiB).
pub fn rss_kib() -> u64 {
    proc_status("VmRSS:")
}

/// A `baton-devserver` process, killed when dropped.
pub struct DevServerProcess {
    child: Child,
    /// Its HTTP address, `127.0.0.1:PORT`.
    pub addr: String,
}

impl Drop for DevServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the dev server beside this program's binary (or `--devserver PATH`)
/// on a free port with no per-client connection limit; `version` makes it
/// emulate that Consul version.
pub fn start_devserver(version: Option<&str>) -> DevServerProcess {
    let path = arg("--devserver").unwrap_or_else(|| {
        let exe = std::env::current_exe().expect("own path");
        exe.with_file_name("baton-devserver")
            .to_string_lossy()
            .into_owned()
    });
    let mut args = vec!["--port", "0", "--max-conns-per-client", "0"];
    if let Some(v) = version {
        args.extend(["--consul-version", v]);
    }
    let mut child = Command::new(&path)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start {path}: {e} (build it: cargo build --release -p consul-baton-devserver)")
        });
    let out = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(out)
        .read_line(&mut line)
        .expect("address line");
    let addr = line
        .trim()
        .strip_prefix("BATON_DEVSERVER_ADDR=")
        .unwrap_or_else(|| panic!("unexpected first line from the dev server: {line:?}"))
        .to_string();
    DevServerProcess { child, addr }
}

/// The dev server's request counts since the last reset (`GET /_devserver/requests`):
/// `{"total": N, "by_route": {"PUT /v1/txn": N, ...}}`.
pub fn counts(addr: &str) -> serde_json::Value {
    let mut resp = ureq::get(&format!("http://{addr}/_devserver/requests"))
        .call()
        .expect("request counts");
    serde_json::from_reader(resp.body_mut().as_reader()).expect("json counts")
}

/// Starts the dev server's request counts again from zero.
pub fn reset_counts(addr: &str) {
    ureq::delete(&format!("http://{addr}/_devserver/requests"))
        .call()
        .expect("reset counts");
}
