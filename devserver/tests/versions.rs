//! `Config::consul_version` / `--consul-version`: each client-visible switch, checked over real
//! HTTP on both sides of the release that changed it.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;

use baton_devserver::ConsulVersion;
use common::*;

/// A dev server emulating `version` (short TTLs allowed, pretty-printing as the fixture says).
fn server(version: &str) -> DevServer {
    let v: ConsulVersion = version.parse().expect("a version");
    start_with(|c| c.consul_version = v)
}

/// `Results` of a successful txn.
#[track_caller]
fn results(r: &Response) -> Vec<Value> {
    assert_eq!(r.status, 200, "txn: {}", r.text());
    r.json()["Results"].as_array().cloned().unwrap_or_default()
}

/// The `What` texts of a 409 txn answer.
#[track_caller]
fn errors(r: &Response) -> Vec<String> {
    assert_eq!(r.status, 409, "txn: {}", r.text());
    let v = r.json();
    assert_eq!(v["Results"], Value::Null);
    v["Errors"]
        .as_array()
        .expect("Errors list")
        .iter()
        .map(|e| e["What"].as_str().unwrap().to_string())
        .collect()
}

fn set_op(key: &str, value: &[u8], flags: u64) -> Value {
    json!({"KV": {"Verb": "set", "Key": key, "Value": b64(value), "Flags": flags}})
}

// ----- 1. txn numbers through float64: < 1.6.2 -----

/// Go's `uint64(float64(LOCK_FLAG))` and `uint64(float64(SEMAPHORE_FLAG))`.
const ROUNDED_LOCK_FLAG: u64 = 3304740253564472320;
const ROUNDED_SEMAPHORE_FLAG: u64 = 0xe0f6_9a2b_aa41_5000;

#[test]
fn txn_flags_go_through_float64_before_1_6_2() {
    let s = server("1.6.1");
    let r = txn(
        &s,
        &json!([
            set_op("l", b"", LOCK_FLAG),
            set_op("m", b"", SEMAPHORE_FLAG)
        ]),
    );
    results(&r);
    assert_eq!(
        kv_entry(&s, "l").unwrap()["Flags"].as_u64(),
        Some(ROUNDED_LOCK_FLAG)
    );
    assert_eq!(
        kv_entry(&s, "m").unwrap()["Flags"].as_u64(),
        Some(ROUNDED_SEMAPHORE_FLAG)
    );
    // The query string stays exact on every version.
    put(&s, &format!("/v1/kv/q?flags={LOCK_FLAG}"), b"").assert(200, "true");
    assert_eq!(
        kv_entry(&s, "q").unwrap()["Flags"].as_u64(),
        Some(LOCK_FLAG)
    );
}

#[test]
fn txn_flags_are_exact_from_1_6_2() {
    let s = server("1.6.2");
    let r = txn(
        &s,
        &json!([
            set_op("l", b"", LOCK_FLAG),
            set_op("m", b"", SEMAPHORE_FLAG)
        ]),
    );
    let res = results(&r);
    assert_eq!(res[0]["KV"]["Flags"].as_u64(), Some(LOCK_FLAG));
    assert_eq!(
        kv_entry(&s, "l").unwrap()["Flags"].as_u64(),
        Some(LOCK_FLAG)
    );
    assert_eq!(
        kv_entry(&s, "m").unwrap()["Flags"].as_u64(),
        Some(SEMAPHORE_FLAG)
    );
}

#[test]
fn txn_index_goes_through_float64_before_1_6_2() {
    // 2^53 + 1 is read as 2^53: a check-index naming it fails with the rounded number.
    let big = (1u64 << 53) + 1;
    for (version, seen) in [("1.6.1", 1u64 << 53), ("1.6.2", big)] {
        let s = server(version);
        kv_set(&s, "k", b"v");
        let r = txn(
            &s,
            &json!([{"KV": {"Verb": "check-index", "Key": "k", "Index": big}}]),
        );
        let what = errors(&r);
        let cur = modify_index(&s, "k");
        assert_eq!(
            what,
            [format!(
                "failed index check for key \"k\", current modify index {cur} != {seen}"
            )],
            "{version}"
        );
    }
}

// ----- 2. identical rewrite bumps ModifyIndex: < 1.6.0 -----

#[test]
fn identical_rewrite_bumps_modify_index_before_1_6_0() {
    let s = server("1.5.3");
    kv_set(&s, "k", b"v");
    let m1 = modify_index(&s, "k");
    kv_set(&s, "k", b"v");
    let m2 = modify_index(&s, "k");
    assert!(m2 > m1, "PUT: {m2} > {m1}");
    let res = results(&txn(&s, &json!([set_op("k", b"v", 0)])));
    let m3 = modify_index(&s, "k");
    assert!(m3 > m2, "txn set: {m3} > {m2}");
    assert_eq!(res[0]["KV"]["ModifyIndex"].as_u64(), Some(m3));
    // A blocking read at the old index wakes on the identical write.
    let pending = Req::get(&format!("/v1/kv/k?index={m3}&wait=5s")).spawn(&s);
    kv_set(&s, "k", b"v");
    let (r, _) = pending.expect(TIMEOUT);
    assert!(r.index() > m3);
}

#[test]
fn identical_rewrite_is_a_no_op_from_1_6_0() {
    let s = server("1.6.0");
    kv_set(&s, "k", b"v");
    let m1 = modify_index(&s, "k");
    kv_set(&s, "k", b"v");
    results(&txn(&s, &json!([set_op("k", b"v", 0)])));
    assert_eq!(modify_index(&s, "k"), m1);
}

// ----- 3. txn reports the new index for a no-op write: 1.6.0 <= v < 1.8.0 -----

#[test]
fn txn_no_op_write_reports_the_txn_index_before_1_8_0() {
    let s = server("1.7.4");
    kv_set(&s, "k", b"v");
    let m1 = modify_index(&s, "k");
    let res = results(&txn(&s, &json!([set_op("k", b"v", 0)])));
    let txn_index = s.current_index();
    assert!(txn_index > m1);
    assert_eq!(res[0]["KV"]["ModifyIndex"].as_u64(), Some(txn_index));
    assert_eq!(modify_index(&s, "k"), m1, "the stored entry is unchanged");
}

#[test]
fn txn_no_op_write_reports_the_stored_index_from_1_8_0() {
    let s = server("1.8.0");
    kv_set(&s, "k", b"v");
    let m1 = modify_index(&s, "k");
    let res = results(&txn(&s, &json!([set_op("k", b"v", 0)])));
    assert!(s.current_index() > m1);
    assert_eq!(res[0]["KV"]["ModifyIndex"].as_u64(), Some(m1));
    assert_eq!(modify_index(&s, "k"), m1);
}

// ----- 4. legacy session Checks: < 1.7.0 -----

const LEGACY_SESSION_KEYS: [&str; 9] = [
    "ID",
    "Name",
    "Node",
    "Checks",
    "LockDelay",
    "Behavior",
    "TTL",
    "CreateIndex",
    "ModifyIndex",
];

#[test]
fn sessions_have_only_checks_before_1_7_0() {
    let s = server("1.6.9");
    let default = session_create(&s, &json!({}));
    let info = session_info(&s, &default).unwrap();
    assert_eq!(keys_of(&info), LEGACY_SESSION_KEYS);
    assert_eq!(info["Checks"], json!(["serfHealth"]));
    // `checks` in any letter case replaces the default; `[]` means none.
    let none = session_create(&s, &json!({"checks": []}));
    assert_eq!(session_info(&s, &none).unwrap()["Checks"], json!([]));
    // NodeChecks/ServiceChecks are unknown fields, ignored: no such check is looked up.
    let ignored = session_create(
        &s,
        &json!({"NodeChecks": ["nope"], "ServiceChecks": [{"ID": "nope"}]}),
    );
    assert_eq!(
        session_info(&s, &ignored).unwrap()["Checks"],
        json!(["serfHealth"])
    );
    // Every listing has the legacy shape.
    for path in [
        "/v1/session/list".to_string(),
        format!("/v1/session/node/{}", s.node_name()),
    ] {
        let list = get(&s, &path).json();
        for e in list.as_array().unwrap() {
            assert_eq!(keys_of(e), LEGACY_SESSION_KEYS, "{path}");
        }
    }
    let renewed = put(&s, &format!("/v1/session/renew/{none}"), b"").json();
    assert_eq!(keys_of(&renewed[0]), LEGACY_SESSION_KEYS);
    // A critical check still invalidates the sessions bound to it.
    s.fail_node();
    assert!(session_info(&s, &default).is_none());
    assert!(session_info(&s, &ignored).is_none());
    assert!(session_info(&s, &none).is_some());
}

#[test]
fn sessions_have_node_and_service_checks_from_1_7_0() {
    let s = server("1.7.0");
    let id = session_create(&s, &json!({}));
    let info = session_info(&s, &id).unwrap();
    assert_eq!(info["NodeChecks"], json!(["serfHealth"]));
    assert_eq!(info["ServiceChecks"], Value::Null);
    assert!(info.get("Checks").is_none(), "{info}");
    let r = put_json(&s, "/v1/session/create", &json!({"NodeChecks": ["nope"]}));
    r.assert(500, "apply failed: Missing check 'nope' registration");
}

// ----- 5. get-or-empty and the op cap: < 1.14.0 -----

#[test]
fn get_or_empty_is_unknown_and_64_ops_max_before_1_14_0() {
    let s = server("1.13.7");
    let r = txn(&s, &json!([{"KV": {"Verb": "get-or-empty", "Key": "k"}}]));
    assert_eq!(errors(&r), ["unknown KV verb \"get-or-empty\""]);
    assert_eq!(r.json()["Errors"][0]["OpIndex"], 0);
    let ops = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"KV": {"Verb": "check-not-exists", "Key": format!("k{i}")}}))
            .collect()
    };
    assert_eq!(txn(&s, &ops(64)).status, 200);
    txn(&s, &ops(65)).assert(413, "Transaction contains too many operations (65 > 64)");
}

#[test]
fn get_or_empty_works_and_128_ops_max_from_1_14_0() {
    let s = server("1.14.0");
    let res = results(&txn(
        &s,
        &json!([{"KV": {"Verb": "get-or-empty", "Key": "k"}}]),
    ));
    assert_eq!(res[0]["KV"]["Key"], "k");
    let ops = |n: usize| -> Value {
        (0..n)
            .map(|i| json!({"KV": {"Verb": "check-not-exists", "Key": format!("k{i}")}}))
            .collect()
    };
    assert_eq!(txn(&s, &ops(128)).status, 200);
    txn(&s, &ops(129)).assert(413, "Transaction contains too many operations (129 > 128)");
}

#[test]
fn anonymous_get_or_empty_is_filtered_not_denied_from_1_14_0() {
    // With ACLs, an anonymous read is filtered on the way out; before 1.14.0 the unknown verb
    // needs key write permission.
    for (version, status) in [("1.13.7", 409), ("1.14.0", 200)] {
        let s = start_with(|c| {
            c.consul_version = version.parse().unwrap();
            c.acl_token = Some("root".into());
        });
        let r = txn(&s, &json!([{"KV": {"Verb": "get-or-empty", "Key": "k"}}]));
        assert_eq!(r.status, status, "{version}: {}", r.text());
        if status == 409 {
            assert_eq!(errors(&r), ["Permission denied"]);
        } else {
            assert_eq!(results(&r), Vec::<Value>::new());
        }
    }
}

// ----- 6. lenient txn decoding: < 1.7.0 (and Partition: < 1.11.0) -----

fn with_unknown_fields() -> Value {
    json!([{"Extra": true, "KV": {"Verb": "set", "Key": "k", "Value": b64(b"v"), "Bogus": 1}}])
}

#[test]
fn txn_ignores_unknown_fields_before_1_7_0() {
    let s = server("1.6.9");
    results(&txn(&s, &with_unknown_fields()));
    assert_eq!(entry_value(&kv_entry(&s, "k").unwrap()), b"v");
    results(&txn(
        &s,
        &json!([{"KV": {"Verb": "set", "Key": "p", "Partition": ""}}]),
    ));
}

#[test]
fn txn_rejects_unknown_fields_from_1_7_0() {
    let s = server("1.7.0");
    let r = txn(&s, &with_unknown_fields());
    r.assert(400, "Failed to parse body: json: unknown field \"Extra\"");
    let r = txn(
        &s,
        &json!([{"KV": {"Verb": "set", "Key": "k", "Bogus": 1}}]),
    );
    r.assert(400, "Failed to parse body: json: unknown field \"Bogus\"");
    assert!(kv_entry(&s, "k").is_none());
    // Namespace is known from 1.7.0, Partition only from 1.11.0.
    results(&txn(
        &s,
        &json!([{"KV": {"Verb": "set", "Key": "n", "Namespace": ""}}]),
    ));
    let r = txn(
        &s,
        &json!([{"KV": {"Verb": "set", "Key": "p", "Partition": ""}}]),
    );
    r.assert(
        400,
        "Failed to parse body: json: unknown field \"Partition\"",
    );
    let s = server("1.11.0");
    results(&txn(
        &s,
        &json!([{"KV": {"Verb": "set", "Key": "p", "Partition": ""}}]),
    ));
}

// ----- 7. a -dev agent always pretty-prints: < 1.17.0 -----

/// Whether a JSON body is laid out as Go's indenting encoder does (parsed as well).
fn is_pretty(r: &Response) -> bool {
    r.json();
    let t = r.text();
    t.ends_with('\n') && t.contains("\n    ")
}

#[test]
fn every_json_body_is_pretty_before_1_17_0() {
    let s = start_with(|c| {
        c.consul_version = "1.16.3".parse().unwrap();
        c.pretty = false;
    });
    kv_set(&s, "k", b"v");
    for r in [
        get(&s, "/v1/kv/k"),
        get(&s, "/v1/agent/self"),
        put(&s, "/v1/session/create", b""),
        txn(&s, &json!([set_op("t", b"", 0)])),
    ] {
        assert!(is_pretty(&r), "{}", r.text());
    }
    let t = put(&s, "/v1/kv/k", b"w").text();
    assert_eq!(t, "true\n");
}

#[test]
fn json_bodies_are_compact_unless_asked_from_1_17_0() {
    let s = start_with(|c| {
        c.consul_version = "1.17.0".parse().unwrap();
        c.pretty = false;
    });
    kv_set(&s, "k", b"v");
    let r = get(&s, "/v1/kv/k");
    assert!(!r.text().contains('\n'), "{}", r.text());
    r.json();
    assert!(is_pretty(&get(&s, "/v1/kv/k?pretty")));
}

// ----- 8. /v1/agent/self reports the emulated version -----

#[test]
fn agent_self_reports_the_emulated_version() {
    let s = server("1.6.1");
    assert_eq!(
        get(&s, "/v1/agent/self").json()["Config"]["Version"],
        "1.6.1"
    );
    let s = start_with(|_| {});
    assert_eq!(
        get(&s, "/v1/agent/self").json()["Config"]["Version"],
        ConsulVersion::CURRENT.to_string()
    );
    assert_eq!(ConsulVersion::CURRENT, ConsulVersion::new(1, 21, 4));
}

// ----- the command line -----

#[test]
fn consul_version_flag_on_the_command_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--consul-version X.Y.Z"), "{help}");
    assert!(help.contains(&ConsulVersion::CURRENT.to_string()), "{help}");

    let out = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["--port", "0", "--consul-version", "1.six.1"])
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--consul-version") && err.contains("\"1.six.1\""),
        "{err}"
    );

    let mut child = Command::new(env!("CARGO_BIN_EXE_baton-devserver"))
        .args(["--port", "0", "--consul-version=v1.6.1"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("baton-devserver starts");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        let _ = tx.send(reader.read_line(&mut line).map(|_| line));
        let _ = reader.read_to_end(&mut Vec::new());
    });
    let line = rx.recv_timeout(TIMEOUT);
    let addr = line.ok().and_then(|l| l.ok()).and_then(|l| {
        l.trim_end()
            .strip_prefix("BATON_DEVSERVER_ADDR=")?
            .parse()
            .ok()
    });
    let answer = addr.map(|a| Req::get("/v1/agent/self").send_to(a));
    let _ = child.kill();
    let _ = child.wait();
    let r = answer.expect("ready line with the address");
    assert_eq!(r.json()["Config"]["Version"], "1.6.1");
    assert!(is_pretty(&r), "a 1.6.1 -dev agent pretty-prints");
}
