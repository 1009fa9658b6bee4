//! `baton leader`, `baton holders` and `baton sessions`: read-only views (and
//! `sessions destroy`), human output by default, `-json` for scripts.

use baton::{
    CancelToken, Client, KvPair, LeaderEvent, QueryOptions, SessionEntry, LOCK_FLAG_VALUE,
    SEMAPHORE_FLAG_VALUE,
};
use serde_json::{json, Value};

use crate::args::{Flag, Kind, Parsed};
use crate::watch::{self, Fail, Fetched};
use crate::{connect, exit, gopath};

const JSON: Flag = Flag {
    name: "json",
    kind: Kind::Bool,
    value_name: "",
    help: "Print JSON (one document; with -watch, one per line).",
};

/// Flags of `baton leader`.
pub fn leader_flags() -> Vec<Flag> {
    connect::with_http(&[
        Flag {
            name: "watch",
            kind: Kind::Bool,
            value_name: "",
            help: "Keep running and print every change of leader (or of its value).",
        },
        JSON,
    ])
}

/// Flags of `baton holders` and `baton sessions`.
pub fn json_flags() -> Vec<Flag> {
    connect::with_http(&[
        Flag {
            name: "watch",
            kind: Kind::Bool,
            value_name: "",
            help: "Keep running: print the current state, then the new state after every\nchange (blocking queries; Ctrl-C ends it).",
        },
        JSON,
    ])
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn session_json(id: &str, entry: Option<&SessionEntry>) -> Value {
    match entry {
        None => json!({"id": id, "exists": false}),
        Some(e) => {
            let ttl = e.ttl();
            json!({
                "id": e.id,
                "exists": true,
                "name": e.name,
                "node": e.node,
                "behavior": e.behavior,
                "ttl": e.ttl,
                "lock_delay": baton::format_go_duration(e.lock_delay()),
                "checks": e.bound_checks(),
                // Consul keeps a session up to 2 x TTL after its last renew, and then
                // nobody can take its keys for the lock-delay.
                "max_until_free": ttl.map(|t| baton::format_go_duration(t * 2 + e.lock_delay())),
                "create_index": e.create_index,
            })
        }
    }
}

fn session_line(id: &str, entry: Option<&SessionEntry>) -> String {
    match entry {
        None => format!("session {id} (no longer exists)"),
        Some(e) => {
            let ttl = if e.ttl.is_empty() { "none" } else { &e.ttl };
            let until = e.ttl().map_or_else(
                || "never expires on its own".to_string(),
                |t| {
                    format!(
                        "if it stopped renewing now, free within {}",
                        baton::format_go_duration(t * 2 + e.lock_delay())
                    )
                },
            );
            format!(
                "session {} {:?} on node {}, TTL {ttl}, lock-delay {}; {until}",
                e.id,
                e.name,
                e.node,
                baton::format_go_duration(e.lock_delay())
            )
        }
    }
}

fn info(client: &Client, id: &str) -> Option<SessionEntry> {
    client.sessions().info(id).ok().flatten()
}

fn event_json(key: &str, client: &Client, ev: &LeaderEvent) -> Value {
    match ev {
        LeaderEvent::NoLeader => json!({"key": key, "leader": null}),
        LeaderEvent::Leader(l) => {
            let s = info(client, &l.session);
            json!({"key": key, "leader": {
                "value": text(&l.value),
                "session": session_json(&l.session, s.as_ref()),
                "lock_index": l.lock_index,
                "token": l.token,
            }})
        }
    }
}

fn event_text(key: &str, client: &Client, ev: &LeaderEvent) -> String {
    match ev {
        LeaderEvent::NoLeader => format!("{key}: no leader"),
        LeaderEvent::Leader(l) => {
            let s = info(client, &l.session);
            format!(
                "{key}: leader {:?} (lock index {}, token {})\n  {}",
                text(&l.value),
                l.lock_index,
                l.token,
                session_line(&l.session, s.as_ref())
            )
        }
    }
}

/// `baton leader KEY [-watch] [-json]`.
pub fn leader(p: &Parsed) -> i32 {
    let [key] = p.positionals.as_slice() else {
        eprintln!("baton: leader takes exactly one KEY");
        return exit::ERROR;
    };
    let (client, stop) = match start(p) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let as_json = p.flag("json", false);
    let show = |ev: &LeaderEvent| {
        if as_json {
            println!("{}", event_json(key, &client, ev));
        } else {
            println!("{}", event_text(key, &client, ev));
        }
    };
    if !p.flag("watch", false) {
        return match client.leader(key) {
            Ok(l) => {
                show(&l.map_or(LeaderEvent::NoLeader, LeaderEvent::Leader));
                exit::OK
            }
            Err(e) => {
                eprintln!("baton: reading the leader of {key}: {e}");
                exit::ERROR
            }
        };
    }
    let mut observer = match client.observe_leader(key) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("baton: watching {key}: {e}");
            return exit::ERROR;
        }
    };
    loop {
        match observer.next(None, stop.as_ref()) {
            Ok(ev) => show(&ev),
            // SIGINT, SIGTERM, SIGHUP or SIGQUIT: done.
            Err(e) if e.kind() == baton::ErrorKind::Cancelled => return exit::OK,
            Err(e) => {
                eprintln!("baton: watching {key}: {e}");
                return exit::ERROR;
            }
        }
    }
}

/// What `holders` found at a prefix.
enum Found {
    Lock {
        key: String,
        pair: KvPair,
    },
    Semaphore {
        key: String,
        limit: Option<u64>,
        holders: Vec<(String, bool)>,
    },
}

/// What the entries under `prefix` say is there.
fn find(pairs: &[KvPair], prefix: &str) -> Result<Option<Found>, String> {
    let lock_key = gopath::join(prefix, ".lock");
    if let Some(lp) = pairs.iter().find(|p| p.key == lock_key) {
        if lp.flags == LOCK_FLAG_VALUE {
            return Ok(Some(Found::Lock {
                key: lock_key,
                pair: lp.clone(),
            }));
        }
        if lp.flags == SEMAPHORE_FLAG_VALUE {
            let doc: Value = match lp.value.as_deref() {
                None => json!({}),
                Some(v) => serde_json::from_slice(v)
                    .map_err(|e| format!("{lock_key}: semaphore document does not decode: {e}"))?,
            };
            // Go decodes field names case-insensitively.
            let field = |name: &str| {
                doc.as_object().and_then(|o| {
                    o.iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(name))
                        .map(|(_, v)| v.clone())
                })
            };
            let limit = field("Limit").and_then(|v| v.as_u64());
            let alive: Vec<&str> = pairs.iter().filter_map(|p| p.session.as_deref()).collect();
            let mut holders: Vec<(String, bool)> = field("Holders")
                .and_then(|h| h.as_object().cloned())
                .unwrap_or_default()
                .into_iter()
                .filter(|(_, v)| v.as_bool() == Some(true))
                .map(|(k, _)| {
                    let live = alive.contains(&k.as_str());
                    (k, live)
                })
                .collect();
            holders.sort();
            return Ok(Some(Found::Semaphore {
                key: lock_key,
                limit,
                holders,
            }));
        }
        return Err(format!(
            "{lock_key} has flags {}: neither a lock ({LOCK_FLAG_VALUE}) nor a semaphore ({SEMAPHORE_FLAG_VALUE})",
            lp.flags
        ));
    }
    // An election key, or a Go api.Lock key, named directly.
    let key = prefix.trim_end_matches('/');
    if let Some(p) = pairs.iter().find(|p| p.key == key) {
        if p.flags == LOCK_FLAG_VALUE {
            return Ok(Some(Found::Lock {
                key: key.to_string(),
                pair: p.clone(),
            }));
        }
    }
    Ok(None)
}

/// The output of `holders` for the entries under `prefix` (without a trailing
/// newline). Holders' sessions are read afresh; a failed read is an error, not
/// a session shown as gone.
fn holders_doc(
    client: &Client,
    prefix: &str,
    pairs: &[KvPair],
    as_json: bool,
) -> Result<String, Fail> {
    let lookup = |id: &str| -> Result<Option<SessionEntry>, Fail> {
        client
            .sessions()
            .info(id)
            .map_err(Fail::consul(format!("reading session {id}")))
    };
    let found = find(pairs, prefix).map_err(Fail::Format)?;
    Ok(match found {
        None => {
            if as_json {
                json!({"prefix": prefix, "kind": null, "holders": []}).to_string()
            } else {
                format!("{prefix}: no lock or semaphore here")
            }
        }
        Some(Found::Lock { key, pair }) => {
            let holder = pair.session.as_deref();
            let entry = match holder {
                Some(s) => lookup(s)?,
                None => None,
            };
            if as_json {
                let hs: Vec<Value> = holder
                    .map(|s| session_json(s, entry.as_ref()))
                    .into_iter()
                    .collect();
                json!({"prefix": prefix, "kind": "lock", "key": key,
                       "lock_index": pair.lock_index, "token": pair.modify_index,
                       "value": pair.value.as_deref().map(text), "holders": hs})
                .to_string()
            } else {
                match holder {
                    None => format!("{key}: lock, free"),
                    Some(s) => format!(
                        "{key}: lock, held (lock index {}, token {})\n  {}",
                        pair.lock_index,
                        pair.modify_index,
                        session_line(s, entry.as_ref())
                    ),
                }
            }
        }
        Some(Found::Semaphore {
            key,
            limit,
            holders,
        }) => {
            let mut entries: Vec<(String, bool, Option<SessionEntry>)> = Vec::new();
            for (id, live) in holders {
                let e = lookup(&id)?;
                entries.push((id, live, e));
            }
            let live = entries.iter().filter(|(_, l, _)| *l).count();
            if as_json {
                let hs: Vec<Value> = entries
                    .iter()
                    .map(|(id, l, e)| {
                        let mut v = session_json(id, e.as_ref());
                        v["contender_alive"] = json!(l);
                        v
                    })
                    .collect();
                json!({"prefix": prefix, "kind": "semaphore", "key": key,
                       "limit": limit, "held": live, "holders": hs})
                .to_string()
            } else {
                let limit = limit.map_or_else(|| "?".to_string(), |l| l.to_string());
                let mut out = format!("{prefix}: semaphore, {live} of {limit} slots held");
                for (id, l, e) in &entries {
                    let stale = if *l {
                        ""
                    } else {
                        " [stale: no contender key carries it; pruned by the next writer]"
                    };
                    out.push_str(&format!("\n  {}{stale}", session_line(id, e.as_ref())));
                }
                out
            }
        }
    })
}

/// Blocks the terminating signals first when `-watch` is given (before the
/// client starts any thread); then builds the client.
fn start(p: &Parsed) -> Result<(Client, Option<CancelToken>), i32> {
    let stop = if p.flag("watch", false) {
        match watch::stop_on_signals() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("baton: {e}");
                return Err(exit::ERROR);
            }
        }
    } else {
        None
    };
    match connect::client(p) {
        Ok(c) => Ok((c, stop)),
        Err(e) => {
            eprintln!("baton: {e}");
            Err(exit::ERROR)
        }
    }
}

/// `baton holders PREFIX [-watch] [-json]`.
pub fn holders(p: &Parsed) -> i32 {
    let [prefix] = p.positionals.as_slice() else {
        eprintln!("baton: holders takes exactly one PREFIX");
        return exit::ERROR;
    };
    let prefix = prefix.trim_start_matches('/');
    let (client, stop) = match start(p) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let as_json = p.flag("json", false);
    let round = |opts: &QueryOptions| -> Result<Fetched, Fail> {
        let (pairs, meta) = client
            .kv()
            .list_with(prefix, opts)
            .map_err(Fail::consul(format!("reading {prefix}")))?;
        Ok(Fetched {
            doc: holders_doc(&client, prefix, &pairs, as_json)?,
            index: meta.index,
        })
    };
    if let Some(stop) = stop {
        return watch::run(prefix, as_json, &stop, round);
    }
    match round(&QueryOptions::default()) {
        Ok(f) => {
            println!("{}", f.doc);
            exit::OK
        }
        Err(e) => {
            eprintln!("baton: {e}");
            exit::ERROR
        }
    }
}

/// The `sessions list` output (without a trailing newline).
fn list_doc(mut list: Vec<SessionEntry>, as_json: bool) -> String {
    list.sort_by_key(|e| e.create_index);
    if as_json {
        let v: Vec<Value> = list.iter().map(|e| session_json(&e.id, Some(e))).collect();
        return Value::Array(v).to_string();
    }
    if list.is_empty() {
        return "no sessions".to_string();
    }
    let mut out = format!(
        "{:<36}  {:<16}  {:<7}  {:<8}  {:<10}  NAME",
        "ID", "NODE", "TTL", "BEHAVIOR", "LOCK-DELAY"
    );
    for e in &list {
        out.push_str(&format!(
            "\n{:<36}  {:<16}  {:<7}  {:<8}  {:<10}  {}",
            e.id,
            e.node,
            if e.ttl.is_empty() { "-" } else { &e.ttl },
            e.behavior,
            baton::format_go_duration(e.lock_delay()),
            e.name
        ));
    }
    out
}

/// `baton sessions [list|info ID|destroy ID] [-watch] [-json]`.
pub fn sessions(p: &Parsed) -> i32 {
    let words: Vec<&str> = p.positionals.iter().map(String::as_str).collect();
    let watching = p.flag("watch", false);
    if watching && !matches!(words.as_slice(), [] | ["list"] | ["info", _]) {
        eprintln!("baton: sessions: -watch goes with `sessions [list]` or `sessions info ID`");
        return exit::ERROR;
    }
    let (client, stop) = match start(p) {
        Ok(v) => v,
        Err(code) => return code,
    };
    let as_json = p.flag("json", false);
    match words.as_slice() {
        [] | ["list"] => {
            let round = |opts: &QueryOptions| -> Result<Fetched, Fail> {
                let (list, meta) = client
                    .sessions()
                    .list_with(opts)
                    .map_err(Fail::consul("listing sessions"))?;
                Ok(Fetched {
                    doc: list_doc(list, as_json),
                    index: meta.index,
                })
            };
            if let Some(stop) = stop {
                return watch::run("the sessions", as_json, &stop, round);
            }
            match round(&QueryOptions::default()) {
                Ok(f) => {
                    println!("{}", f.doc);
                    exit::OK
                }
                Err(e) => {
                    eprintln!("baton: {e}");
                    exit::ERROR
                }
            }
        }
        ["info", id] => {
            if let Some(stop) = stop {
                // A session that does not exist (yet, or any more) is a state too.
                let round = |opts: &QueryOptions| -> Result<Fetched, Fail> {
                    let (entry, meta) = client
                        .sessions()
                        .info_with(id, opts)
                        .map_err(Fail::consul(format!("reading session {id}")))?;
                    let doc = if as_json {
                        session_json(id, entry.as_ref()).to_string()
                    } else {
                        session_line(id, entry.as_ref())
                    };
                    Ok(Fetched {
                        doc,
                        index: meta.index,
                    })
                };
                return watch::run(&format!("session {id}"), as_json, &stop, round);
            }
            match client.sessions().info(id) {
                Ok(Some(e)) => {
                    if as_json {
                        println!("{}", session_json(id, Some(&e)));
                    } else {
                        println!("{}", session_line(id, Some(&e)));
                    }
                    exit::OK
                }
                Ok(None) => {
                    eprintln!("baton: no session {id}");
                    exit::ERROR
                }
                Err(e) => {
                    eprintln!("baton: reading session {id}: {e}");
                    exit::ERROR
                }
            }
        }
        ["destroy", id] => {
            // Consul answers `true` for a session that does not exist: look first.
            match client.sessions().info(id) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    eprintln!("baton: no session {id}");
                    return exit::ERROR;
                }
                Err(e) => {
                    eprintln!("baton: reading session {id}: {e}");
                    return exit::ERROR;
                }
            }
            match client.sessions().destroy(id) {
                Ok(()) => {
                    if as_json {
                        println!("{}", json!({"destroyed": id}));
                    } else {
                        println!(
                            "destroyed session {id} (its locks are released, lock-delay applies)"
                        );
                    }
                    exit::OK
                }
                Err(e) => {
                    eprintln!("baton: destroying session {id}: {e}");
                    exit::ERROR
                }
            }
        }
        other => {
            eprintln!(
                "baton: sessions: unknown arguments {:?}; use `baton sessions [list]`, `baton sessions info ID` or `baton sessions destroy ID`",
                other.join(" ")
            );
            exit::ERROR
        }
    }
}
