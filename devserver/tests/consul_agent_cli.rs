//! `consul agent -config-file F`, as Consul's Go test harness runs it (sdk/testutil/server.go
//! `NewTestServerConfigT`: `exec.Command("consul", "agent", "-config-file", configFile)`, then
//! `WaitForLeader`, `WaitForActiveCARoot`, `WaitForSerfCheck` with the `acl.tokens.master`
//! token), against the dev server binary reached through a symlink named `consul`.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};

use common::*;

#[test]
fn the_binary_named_consul_starts_from_the_harness_config_and_passes_its_waits() {
    let dir = std::env::temp_dir().join(format!("baton-consul-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let consul = dir.join("consul");
    let _ = std::fs::remove_file(&consul);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_baton-devserver"), &consul).unwrap();
    // The shape sdk/testutil writes (port 0 here so no other test can take the port first).
    let config = json!({
        "node_name": "node-harness", "node_id": "0b6b2a4c-1111-2222-3333-444444444444",
        "performance": {"raft_multiplier": 1}, "bootstrap": true, "server": true,
        "data_dir": dir.join("data"), "segments": null, "disable_update_check": true,
        "log_level": "debug", "bind_addr": "127.0.0.1", "addresses": {},
        "ports": {"dns": 18600, "http": 0, "https": 18501, "serf_lan": 18301, "serf_wan": 18302,
                  "server": 18300, "grpc": 18502, "grpc_tls": 18503},
        "acl": {"enabled": true, "tokens": {"master": "harness-root"}},
        "connect": {"enabled": true, "ca_config": {"cluster_id": "11111111-2222-3333-4444-555555555555"}},
        "skip_leave_on_interrupt": true, "peering": {"enabled": true}
    });
    let file = dir.join("config.json");
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    let mut child = Command::new(&consul)
        .args(["agent", "-config-file"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line.trim().split_once('=').unwrap().1.parse().unwrap();
    let get = |path: &str| {
        Req::get(path)
            .header("X-Consul-Token", "harness-root")
            .send_to(addr)
    };
    let r = get("/v1/catalog/nodes");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.canonical("X-Consul-Knownleader"), "true");
    assert!(r.index() >= 2);
    assert_eq!(r.json()[0]["Node"], "node-harness");
    assert!(r.json()[0]["TaggedAddresses"]["lan"].is_string());
    let roots = get("/v1/agent/connect/ca/roots").json();
    assert!(!roots["ActiveRootID"].as_str().unwrap().is_empty());
    assert!(!roots["Roots"].as_array().unwrap().is_empty());
    let checks = get("/v1/health/node/node-harness").json();
    assert_eq!(checks[0]["CheckID"], "serfHealth");
    assert_eq!(checks[0]["Status"], "passing");
    // ACLs are on with the harness's token: without it, a write is refused.
    Req::put("/v1/kv/x")
        .body("1")
        .send_to(addr)
        .assert_prefix(403, "Permission denied");
    // The harness stops the server with SIGINT and waits for it to exit.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// TestAPI_CatalogNodes / *_NodeMetaFilter read `node_id` and `node_meta` from the harness
/// config; TestAPI_AgentReload passes a second, empty `-config-file`, writes a service
/// definition into it and reloads: the service is then registered with its port and meta.
#[test]
fn harness_node_id_meta_and_reload_of_an_empty_config_file() {
    let dir = std::env::temp_dir().join(format!("baton-consul-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = json!({
        "node_name": "node-reload", "node_id": "0B6B2A4C-1111-2222-3333-444444444444",
        "node_meta": {"somekey": "somevalue"}, "ports": {"http": 0, "serf_lan": 18401}
    });
    let file = dir.join("config.json");
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    let reload = dir.join("reload.json");
    std::fs::write(&reload, b"").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["agent", "-config-file"])
        .arg(&file)
        .arg("-config-file")
        .arg(&reload)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line.trim().split_once('=').unwrap().1.parse().unwrap();
    let nodes = Req::get("/v1/catalog/nodes?node-meta=somekey:somevalue")
        .send_to(addr)
        .json();
    assert_eq!(nodes[0]["ID"], "0b6b2a4c-1111-2222-3333-444444444444");
    assert_eq!(nodes[0]["Meta"]["somekey"], "somevalue");
    let me = Req::get("/v1/agent/self").send_to(addr).json();
    assert_eq!(
        me["DebugConfig"]["SerfAdvertiseAddrLAN"],
        "tcp://127.0.0.1:18401"
    );
    std::fs::write(
        &reload,
        br#"{"service":{"name":"redis", "port":1234, "Meta": {"some": "meta"}}}"#,
    )
    .unwrap();
    let r = Req::put("/v1/agent/reload").send_to(addr);
    assert_eq!(r.status, 200, "{}", r.text());
    let services = Req::get("/v1/agent/services").send_to(addr).json();
    assert_eq!(services["redis"]["Port"], 1234);
    assert_eq!(services["redis"]["Meta"]["some"], "meta");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// TestAPI_AgentLeave (the leaver's side): `PUT /v1/agent/leave` is answered, then the agent
/// shuts down and its process exits with status 0, as `consul agent` does after a leave.
#[test]
fn leave_ends_the_consul_agent_process() {
    let dir = std::env::temp_dir().join(format!("baton-consul-leave-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config =
        json!({"node_name": "node-leave", "ports": {"http": 0, "serf_lan": 0, "serf_wan": 0}});
    let file = dir.join("config.json");
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["agent", "-config-file"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line.trim().split_once('=').unwrap().1.parse().unwrap();
    let r = Req::put("/v1/agent/leave").send_to(addr);
    assert_eq!(r.status, 200, "{}", r.text());
    let mut status = None;
    let exited = poll_until(std::time::Duration::from_secs(20), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    if exited.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the agent process did not exit after leave");
    }
    assert!(status.unwrap().success(), "{status:?}");
    // Nothing answers on its address any more.
    assert!(std::net::TcpStream::connect(addr).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `consul version -format=json` and `consul version`, as sdk/testutil (1.15 and later,
/// `findConsulVersion`) runs them before `consul agent`: stdout decodes into
/// `struct { Version string }`, whose `Version` `hashicorp/go-version` parses; the emulated
/// version is `BATON_CONSUL_VERSION` (the harness passes no flags), and the agent started
/// next with the same environment emulates it too.
#[test]
fn consul_version_answers_as_the_emulated_release_for_the_harness() {
    let dir = std::env::temp_dir().join(format!("baton-consul-version-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let consul = dir.join("consul");
    let _ = std::fs::remove_file(&consul);
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_baton-devserver"), &consul).unwrap();
    let run = |args: &[&str], version: Option<&str>| {
        let mut cmd = Command::new(&consul);
        cmd.args(args);
        match version {
            Some(v) => cmd.env("BATON_CONSUL_VERSION", v),
            None => cmd.env_remove("BATON_CONSUL_VERSION"),
        };
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "consul {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    // findConsulVersion: json.Unmarshal(stdout, &struct{ Version string }).
    let info: Value = serde_json::from_str(&run(&["version", "-format=json"], Some("1.15.10")))
        .expect("stdout is one JSON document");
    assert_eq!(info["Version"], "1.15.10");
    assert_eq!(info["RPC"], json!({"Default": 2, "Min": 2, "Max": 3}));
    assert!(info["BuildDate"].is_string() && info["Prerelease"] == "");
    let current: Value = serde_json::from_str(&run(&["version", "-format", "json"], None)).unwrap();
    assert_eq!(
        current["Version"],
        baton_devserver::ConsulVersion::CURRENT.to_string()
    );
    let pretty = run(&["version"], Some("v1.15.10"));
    let lines: Vec<&str> = pretty.lines().collect();
    assert_eq!(lines[0], "Consul v1.15.10");
    assert!(
        lines.iter().any(|l| l.starts_with("Build Date ")),
        "{pretty}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(
            "Protocol 2 spoken by default, understands 2 to 3 (agent will automatically use protocol >2"
        )),
        "{pretty}"
    );
    // The harness then writes that version into the config as `version` and starts the agent.
    let config = json!({"node_name": "node-version", "version": info["Version"],
                        "ports": {"http": 0, "serf_lan": 0, "serf_wan": 0}});
    let file = dir.join("config.json");
    std::fs::write(&file, serde_json::to_vec(&config).unwrap()).unwrap();
    let mut child = Command::new(&consul)
        .args(["agent", "-config-file"])
        .arg(&file)
        .env("BATON_CONSUL_VERSION", "1.15.10")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line.trim().split_once('=').unwrap().1.parse().unwrap();
    let me = Req::get("/v1/agent/self").send_to(addr).json();
    assert_eq!(me["Config"]["Version"], "1.15.10");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
