//! A stand-in for Serf's member pools, so dev servers can join each other as Consul agents do:
//! each listens on its serf LAN and WAN ports ([`crate::config::Config::serf_listen`]), a
//! `PUT /v1/agent/join/<addr>` tells the agent at `addr` who joins and learns whom it knows,
//! and a `PUT /v1/agent/leave` tells everyone joined that this member has left (Serf's
//! `StatusLeft`, 3). No gossip, no failure detection: one line of JSON each way per connection
//! (`{"Op":"join","Member":{..}}` answered by `{"Members":[..]}`; `{"Op":"leave","Name":..}`).
//!
//! Members are `api.AgentMember` JSON objects, as `/v1/agent/members` lists them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::config::Config;

/// Serf's `StatusAlive`.
pub(crate) const ALIVE: u64 = 1;
/// Serf's `StatusLeft`.
pub(crate) const LEFT: u64 = 3;
/// How long a join or leave may take to reach the other agent.
const PEER_TIMEOUT: Duration = Duration::from_secs(5);

/// The LAN or the WAN pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Pool {
    Lan,
    Wan,
}

/// The members other agents told this one about, and where to tell them of a leave.
#[derive(Default)]
pub(crate) struct Pools {
    /// By pool, then by member name.
    members: Mutex<BTreeMap<Pool, BTreeMap<String, Value>>>,
    /// The serf addresses this agent joined (each told of a leave).
    peers: Mutex<Vec<(Pool, String)>>,
}

impl Pools {
    /// The other members of `pool`, by name.
    pub fn others(&self, pool: Pool) -> Vec<Value> {
        let m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&pool)
            .map(|p| p.values().cloned().collect())
            .unwrap_or_default()
    }

    fn record(&self, pool: Pool, member: Value) {
        let Some(name) = member["Name"].as_str().map(str::to_string) else {
            return;
        };
        let mut m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        m.entry(pool).or_default().insert(name, member);
    }

    fn mark_left(&self, pool: Pool, name: &str) {
        let mut m = self.members.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(member) = m.get_mut(&pool).and_then(|p| p.get_mut(name)) {
            member["Status"] = json!(LEFT);
        }
    }
}

/// This agent as a member of `pool` (`api.AgentMember`): the WAN pool names it
/// `<node>.<dc>`.
pub(crate) fn member(cfg: &Config, node_id: &str, pool: Pool) -> Value {
    let wan = pool == Pool::Wan;
    let name = if wan {
        format!("{}.{}", cfg.node_name, cfg.datacenter)
    } else {
        cfg.node_name.clone()
    };
    let mut tags = json!({
        "acls": if cfg.acls_enabled() { "1" } else { "0" },
        "build": format!("{}:baton-devserver", cfg.consul_version),
        "dc": cfg.datacenter,
        "id": node_id,
        "role": if cfg.server { "consul" } else { "node" },
        "segment": "",
        "vsn": "2",
        "vsn_max": "3",
        "vsn_min": "2",
    });
    if cfg.server {
        tags["port"] = json!("8300");
        tags["raft_vsn"] = json!("3");
        tags["wan_join_port"] = json!(cfg.serf_ports.1.to_string());
    }
    json!({
        "Name": name,
        "Addr": "127.0.0.1",
        "Port": if wan { cfg.serf_ports.1 } else { cfg.serf_ports.0 },
        "Tags": tags,
        "Status": ALIVE,
        "ProtocolMin": 1,
        "ProtocolMax": 5,
        "ProtocolCur": 2,
        "DelegateMin": 2,
        "DelegateMax": 5,
        "DelegateCur": 4
    })
}

/// Answers other agents' joins and leaves on `listener` (the serf port of `pool`); `me` is
/// this agent's member of that pool.
pub(crate) async fn listen(listener: TcpListener, pool: Pool, me: Value, pools: &Pools) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = tokio::time::timeout(PEER_TIMEOUT, answer(stream, pool, &me, pools)).await;
    }
}

async fn answer(stream: TcpStream, pool: Pool, me: &Value, pools: &Pools) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let msg: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
    let reply = match msg["Op"].as_str() {
        Some("join") => {
            let mut all = vec![me.clone()];
            all.extend(pools.others(pool));
            pools.record(pool, msg["Member"].clone());
            json!({ "Members": all })
        }
        Some("leave") => {
            pools.mark_left(pool, msg["Name"].as_str().unwrap_or_default());
            json!({})
        }
        _ => json!({"Error": "unknown request"}),
    };
    write.write_all(format!("{reply}\n").as_bytes()).await?;
    write.shutdown().await
}

async fn ask(addr: &str, msg: &Value) -> std::io::Result<Value> {
    let to: SocketAddr = addr.parse().map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("address {addr}: not an IP:port"),
        )
    })?;
    let exchange = async {
        let stream = TcpStream::connect(to).await?;
        let (read, mut write) = stream.into_split();
        write.write_all(format!("{msg}\n").as_bytes()).await?;
        let mut line = String::new();
        BufReader::new(read).read_line(&mut line).await?;
        Ok::<_, std::io::Error>(serde_json::from_str(&line).unwrap_or(Value::Null))
    };
    tokio::time::timeout(PEER_TIMEOUT, exchange)
        .await
        .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
}

/// Joins the agent whose serf `pool` port is `addr`: it records `me`, this one records the
/// members it answers with. The error is Serf's text for the failed contact.
pub(crate) async fn join(pools: &Pools, pool: Pool, addr: &str, me: &Value) -> Result<(), String> {
    let reply = ask(addr, &json!({"Op": "join", "Member": me}))
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => {
                format!("dial tcp {addr}: connect: connection refused")
            }
            _ => e.to_string(),
        })?;
    for m in reply["Members"].as_array().into_iter().flatten() {
        if m["Name"] != me["Name"] {
            pools.record(pool, m.clone());
        }
    }
    let mut peers = pools.peers.lock().unwrap_or_else(|e| e.into_inner());
    if !peers.iter().any(|(p, a)| *p == pool && a == addr) {
        peers.push((pool, addr.to_string()));
    }
    Ok(())
}

/// Tells every agent this one joined that `me_lan`/`me_wan` left (best effort: an agent that
/// is gone is skipped).
pub(crate) async fn leave(pools: &Pools, me_lan: &str, me_wan: &str) {
    let peers = pools
        .peers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    for (pool, addr) in peers {
        let name = if pool == Pool::Lan { me_lan } else { me_wan };
        let _ = ask(&addr, &json!({"Op": "leave", "Name": name})).await;
    }
}
