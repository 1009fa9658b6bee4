//! Metrics (issue 47): known operations on a fresh client, and the exact counts its
//! snapshot (`Client::metrics`) shows for them; the `prometheus` feature's exposition,
//! parsed.

mod common;

use std::time::{Duration, Instant};

use baton::{CancelToken, Client, ErrorKind, MetricsSnapshot};
use common::{unique, Fixture};

/// Generous bound for "eventually"; a failure bound, not a speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// Polls `client`'s snapshot until `cond` holds (panics naming `what` at the deadline).
fn until(client: &Client, what: &str, cond: impl Fn(&MetricsSnapshot) -> bool) -> MetricsSnapshot {
    let end = Instant::now() + PATIENCE;
    loop {
        let s = client.metrics();
        if cond(&s) {
            return s;
        }
        assert!(Instant::now() < end, "{what} never happened: {s:#?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn hold_samples(s: &MetricsSnapshot, recipe: &str) -> u64 {
    s.hold_time
        .iter()
        .find(|(r, _)| *r == recipe)
        .map_or(0, |(_, h)| h.count)
}

#[test]
fn acquires_holdings_and_losses_are_counted_exactly() {
    let f = Fixture::start();
    let c = f.client();
    let other = f.client();
    let (k, taken) = (unique("metrics/a"), unique("metrics/taken"));
    let s = c.metrics();
    assert_eq!(s.held("lock"), 0);
    assert!(s.acquires.iter().all(|r| r.count == 0), "{s:#?}");

    // One acquire.
    let l = c.lock(&k).unwrap();
    assert!(l.acquire(Some(PATIENCE), None).unwrap());
    let s = c.metrics();
    assert_eq!(s.acquires("lock", "acquired"), 1);
    assert_eq!(s.held("lock"), 1);
    assert!(s.lease_left.is_some_and(|d| d > Duration::ZERO), "{s:#?}");
    let wait = &s.acquire_wait.iter().find(|(r, _)| *r == "lock").unwrap().1;
    assert_eq!(wait.count, 1);

    // A try of a key another client holds; a wait for it that times out; a cancelled one.
    let theirs = other.lock(&taken).unwrap();
    assert!(theirs.acquire(Some(PATIENCE), None).unwrap());
    let mine = c.lock(&taken).unwrap();
    assert!(!mine.try_acquire().unwrap());
    assert!(!mine
        .acquire(Some(Duration::from_millis(300)), None)
        .unwrap());
    let cancel = CancelToken::new();
    let canceller = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            cancel.cancel();
        })
    };
    let e = mine.acquire(Some(PATIENCE), Some(&cancel)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled);
    canceller.join().unwrap();
    let s = c.metrics();
    assert_eq!(s.acquires("lock", "not_acquired"), 1);
    assert_eq!(s.acquires("lock", "timed_out"), 1);
    assert_eq!(s.acquires("lock", "cancelled"), 1);
    assert_eq!(s.acquires("lock", "acquired"), 1);
    assert_eq!(s.acquires("lock", "error"), 0);
    let wait = &s.acquire_wait.iter().find(|(r, _)| *r == "lock").unwrap().1;
    assert_eq!(wait.count, 4);
    assert_eq!(s.held("lock"), 1);

    // A release: nothing held, one hold-time sample, no loss.
    assert!(l.release().unwrap());
    let s = c.metrics();
    assert_eq!(s.held("lock"), 0);
    assert_eq!(hold_samples(&s, "lock"), 1);
    assert!(s.losses.iter().all(|r| r.count == 0), "{s:#?}");

    // A loss by key change: another client deletes the key.
    assert!(l.acquire(Some(PATIENCE), None).unwrap());
    assert!(other.kv().delete(&k).unwrap());
    let s = until(&c, "the key-changed loss", |s| {
        s.losses("lock", "key_changed") == 1
    });
    assert_eq!(s.held("lock"), 0);
    assert_eq!(hold_samples(&s, "lock"), 2);

    // A loss by session invalidation: another client destroys the session.
    assert!(l.acquire(Some(PATIENCE), None).unwrap());
    let sid = l.session().expect("held with a session").id().to_string();
    other.sessions().destroy(&sid).unwrap();
    let s = until(&c, "the invalidation loss", |s| {
        s.losses("lock", "invalidated") == 1
    });
    assert_eq!(s.losses("lock", "key_changed"), 1);
    assert_eq!(s.held("lock"), 0);
    assert_eq!(s.acquires("lock", "acquired"), 3);
    assert_eq!(
        s.losses.iter().map(|r| r.count).sum::<u64>(),
        2,
        "{:#?}",
        s.losses
    );

    // A semaphore acquire, counted as the semaphore's.
    let sem = c.semaphore(&unique("metrics/sem"), 2).unwrap();
    assert!(sem.acquire(Some(PATIENCE), None).unwrap());
    let s = c.metrics();
    assert_eq!(s.acquires("semaphore", "acquired"), 1);
    assert_eq!(s.held("semaphore"), 1);
    assert_eq!(s.acquires("lock", "acquired"), 3);
    assert!(sem.release().unwrap());
    assert_eq!(c.metrics().held("semaphore"), 0);

    // Requests: every one answered, none refused for the connection limit.
    let s = c.metrics();
    assert!(
        s.requests("kv", "2xx") + s.requests("txn", "2xx") > 0,
        "{s:#?}"
    );
    assert_eq!(s.requests("kv", "429"), 0);
    assert!(theirs.release().unwrap());
    c.close(PATIENCE);
    other.close(PATIENCE);
}

#[test]
fn an_election_s_campaigns_count_as_the_election_s() {
    let f = Fixture::start();
    let c = f.client();
    let e = c.election(&unique("metrics/elect")).unwrap();
    assert!(e.campaign(b"me", Some(PATIENCE), None).unwrap());
    let s = c.metrics();
    assert_eq!(s.acquires("election", "acquired"), 1);
    assert_eq!(s.held("election"), 1);
    assert_eq!(s.acquires("lock", "acquired"), 0);
    assert_eq!(s.held("lock"), 0);
    assert!(e.resign().unwrap());
    assert_eq!(c.metrics().held("election"), 0);
    c.close(PATIENCE);
}

#[test]
fn the_json_form_holds_every_metric_under_its_name() {
    let f = Fixture::start();
    let c = f.client();
    let l = c.lock(&unique("metrics/json")).unwrap();
    assert!(l.acquire(Some(PATIENCE), None).unwrap());
    let j = c.metrics().to_json();
    assert_eq!(j["held"]["lock"], 1);
    assert_eq!(j["acquires"]["lock"]["acquired"], 1);
    assert_eq!(j["acquires"]["semaphore"]["timed_out"], 0);
    assert_eq!(j["acquire_wait_seconds"]["lock"]["count"], 1);
    let h = &j["acquire_wait_seconds"]["lock"];
    assert_eq!(
        h["buckets"].as_array().unwrap().len(),
        h["bounds"].as_array().unwrap().len() + 1
    );
    assert!(j["lease_left_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(j["owed"]["unlocks"], 0);
    // Every metric of the table, under its name less `baton_` and `_total`.
    for m in baton::metrics::METRICS {
        let key = m
            .name
            .trim_start_matches("baton_")
            .trim_end_matches("_total");
        assert!(j.get(key).is_some(), "{} has no {key:?}", m.name);
    }
    assert!(l.release().unwrap());
    assert_eq!(c.metrics().to_json()["held"]["lock"], 0);
    c.close(PATIENCE);
}

#[test]
fn an_async_acquire_counts_once_however_many_tries() {
    let f = Fixture::start();
    let c = f.client();
    let other = f.client();
    let k = unique("metrics/async");
    let theirs = other.lock(&k).unwrap();
    assert!(theirs.acquire(Some(PATIENCE), None).unwrap());
    let mine = c.lock(&k).unwrap();
    use baton::aio::AsyncHold;
    // Freed while the future waits: several tries, one acquire.
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        assert!(theirs.release().unwrap());
    });
    let got = async_std::task::block_on(mine.acquire_async(Some(PATIENCE)));
    releaser.join().unwrap();
    assert!(got.unwrap());
    let s = c.metrics();
    assert_eq!(s.acquires("lock", "acquired"), 1, "{:#?}", s.acquires);
    assert_eq!(
        s.acquires.iter().map(|r| r.count).sum::<u64>(),
        1,
        "{:#?}",
        s.acquires
    );
    assert_eq!(s.held("lock"), 1);
    c.close(PATIENCE);
    other.close(PATIENCE);
}

#[test]
fn a_binding_s_warm_acquire_settled_by_its_one_request_counts_once() {
    use baton::warm::WarmStep;
    let f = Fixture::start();
    if f.before("1.6.2") {
        return; // No warm path there.
    }
    let c = f.client();
    let lock = c.lock(&unique("metrics/warm")).unwrap();
    // One blocking cycle makes the key known free; then the loop connection.
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    assert!(lock.release().unwrap());
    c.open_loop_conn().unwrap();
    let mut w = lock.warm_acquire().expect("a warm acquire");
    let end = Instant::now() + PATIENCE;
    loop {
        match w.advance() {
            WarmStep::Pending(_) => {
                assert!(Instant::now() < end, "the warm call stayed pending");
                std::thread::yield_now();
            }
            WarmStep::Done(r) => {
                assert!(r.unwrap());
                break;
            }
            WarmStep::Resume(_) => panic!("not settled by its one request"),
        }
    }
    drop(w);
    let s = c.metrics();
    assert_eq!(s.acquires("lock", "acquired"), 2, "{:#?}", s.acquires);
    assert_eq!(
        s.acquires.iter().map(|r| r.count).sum::<u64>(),
        2,
        "{:#?}",
        s.acquires
    );
    assert_eq!(s.held("lock"), 1);
    assert!(lock.release().unwrap());
    c.close(PATIENCE);
}

#[test]
fn renewals_are_counted_and_the_lease_left_follows_the_sessions() {
    let f = Fixture::start();
    if !f.short_ttls() {
        return; // A real Consul's TTLs start at 10 s.
    }
    let c = f.client();
    assert_eq!(c.metrics().lease_left, None, "no session yet");
    let ttl = Duration::from_millis(900);
    let session = c
        .create_session(&baton::SessionOptions::new().ttl(ttl))
        .unwrap();
    let s = until(&c, "two renewals", |s| s.renewals_ok >= 2);
    assert_eq!(s.renewals_failed, 0);
    // Every renewal has its latency sample (one more may have come in as it was read).
    let renewals = s.renewals_ok + s.renewals_failed;
    let samples = s.renewal_latency.count;
    assert!(
        (renewals..=renewals + 1).contains(&samples),
        "{samples} samples, {renewals} renewals"
    );
    let left = s.lease_left.expect("a live session's lease");
    assert!(left > Duration::ZERO && left <= ttl, "{left:?}");
    assert!(s.requests("session", "2xx") >= s.renewals_ok);
    session.destroy().unwrap();
    let s = until(&c, "no live session", |s| s.lease_left.is_none());
    assert_eq!(s.owed_sessions, 0);
    c.close(PATIENCE);
}

#[test]
fn riding_out_a_consul_without_a_leader_is_counted() {
    let f = Fixture::start();
    let Some(dev) = f.dev("no-leader window") else {
        return;
    };
    let c = f.client();
    let key = unique("metrics/leaderless");
    let lock = c.lock(&key).unwrap();
    assert!(lock.acquire(Some(PATIENCE), None).unwrap());
    let before = c.metrics();
    assert_eq!((before.retries, before.leaderless), (0, Duration::ZERO));
    dev.set_no_leader(baton_devserver::NoLeader {
        hold: Duration::ZERO,
        answers: baton_devserver::NoLeaderAnswers::ClientAgent,
    });
    // A release that fails is owed; a second lock's acquire rides the window out.
    assert!(lock.release().unwrap_err().is_transient());
    let s = c.metrics();
    assert_eq!(s.owed_unlocks, 1, "{s:#?}");
    assert_eq!(s.held("lock"), 0);
    let waiter = {
        let c = c.clone();
        let key = unique("metrics/leaderless-wait");
        std::thread::spawn(move || {
            let l = c.lock(&key).unwrap();
            let got = l.acquire(Some(PATIENCE), None);
            (got, l)
        })
    };
    until(&c, "retries during the window", |s| s.retries >= 3);
    dev.end_no_leader();
    let (got, _l) = waiter.join().unwrap();
    assert!(got.unwrap());
    let s = until(&c, "the owed unlock made", |s| s.owed_unlocks == 0);
    assert!(s.leaderless > Duration::ZERO, "{s:#?}");
    let refused: u64 = ["kv", "txn"].iter().map(|f| s.requests(f, "5xx")).sum();
    assert!(refused >= 1, "{:#?}", s.requests);
    assert_eq!(s.acquires("lock", "acquired"), 2);
    assert_eq!(s.held("lock"), 1);
    c.close(PATIENCE);
}

#[test]
fn a_full_connection_limit_shows_as_exactly_the_429s_caused() {
    const LIMIT: usize = 4;
    const REFUSED: u64 = 3;
    let f = Fixture::start_with(baton_devserver::Config {
        max_conns_per_client: LIMIT,
        ..baton_devserver::Config::default()
    });
    if f.dev("the connection limit is the dev server's").is_none() {
        return;
    }
    if common::test_transport() != common::Transport::Tcp {
        return;
    }
    let c = f.client();
    // Fill the limit with idle connections of our own.
    let addr = f.addr.trim_start_matches("http://").to_string();
    let held: Vec<_> = (0..LIMIT)
        .map(|_| std::net::TcpStream::connect(&addr).unwrap())
        .collect();
    let dev = f.dev("counted").unwrap();
    let end = Instant::now() + PATIENCE;
    while dev.open_connections() < LIMIT {
        assert!(
            Instant::now() < end,
            "the server never counted our connections"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    for _ in 0..REFUSED {
        let e = c.kv().get("metrics/limited").unwrap_err();
        assert_eq!(e.status(), Some(429), "{e}");
    }
    let s = c.metrics();
    assert_eq!(s.requests("kv", "429"), REFUSED, "{:#?}", s.requests);
    let all_429: u64 = s
        .requests
        .iter()
        .filter(|r| r.second == "429")
        .map(|r| r.count)
        .sum();
    assert_eq!(all_429, REFUSED);
    drop(held);
    // Answered again once the server has seen our connections go.
    let end = Instant::now() + PATIENCE;
    while dev.open_connections() >= LIMIT {
        assert!(
            Instant::now() < end,
            "the server never saw our connections close"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(c.kv().get("metrics/limited").unwrap(), None);
    // The missing key's 404, and no more 429s.
    let s = c.metrics();
    assert_eq!(s.requests("kv", "4xx"), 1, "{:#?}", s.requests);
    assert_eq!(s.requests("kv", "429"), REFUSED);
    c.close(PATIENCE);
}

/// The text exposition as (name, sorted labels) → value.
#[cfg(feature = "prometheus")]
fn parse(text: &str) -> std::collections::HashMap<(String, Vec<(String, String)>), f64> {
    let mut out = std::collections::HashMap::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("a sample line");
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => {
                let body = rest.strip_suffix('}').expect("closed labels");
                let mut labels: Vec<(String, String)> = body
                    .split(',')
                    .filter(|p| !p.is_empty())
                    .map(|p| {
                        let (k, v) = p.split_once('=').expect("label=value");
                        (k.to_string(), v.trim_matches('"').to_string())
                    })
                    .collect();
                labels.sort();
                (n.to_string(), labels)
            }
            None => (series.to_string(), Vec::new()),
        };
        let value = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("a number: {line}")),
        };
        out.insert((name, labels), value);
    }
    out
}

#[cfg(feature = "prometheus")]
#[test]
fn the_prometheus_registry_encodes_the_snapshot() {
    use prometheus_client::registry::Registry;
    let f = Fixture::start();
    let c = f.client();
    let mut registry = Registry::default();
    baton::prometheus::register(&c, &mut registry);
    let l = c.lock(&unique("metrics/prom")).unwrap();
    assert!(l.acquire(Some(PATIENCE), None).unwrap());
    let free = c.lock(&unique("metrics/prom-free")).unwrap();
    assert!(free.try_acquire().unwrap());
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    let m = parse(&text);
    let get = |name: &str, labels: &[(&str, &str)]| {
        let mut l: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.sort();
        *m.get(&(name.to_string(), l))
            .unwrap_or_else(|| panic!("{name} {labels:?} missing in\n{text}"))
    };
    let s = c.metrics();
    assert_eq!(get("baton_held", &[("recipe", "lock")]), 2.0);
    assert_eq!(
        get(
            "baton_acquires_total",
            &[("recipe", "lock"), ("outcome", "acquired")]
        ),
        2.0
    );
    assert_eq!(
        get("baton_acquire_wait_seconds_count", &[("recipe", "lock")]),
        2.0
    );
    assert_eq!(
        get(
            "baton_acquire_wait_seconds_bucket",
            &[("recipe", "lock"), ("le", "+Inf")]
        ),
        2.0
    );
    assert_eq!(
        get(
            "baton_losses_total",
            &[("recipe", "lock"), ("reason", "key_changed")]
        ),
        0.0
    );
    let kv_ok = get(
        "baton_requests_total",
        &[("family", "kv"), ("outcome", "2xx")],
    ) + get(
        "baton_requests_total",
        &[("family", "txn"), ("outcome", "2xx")],
    );
    assert!(kv_ok >= 1.0 && kv_ok <= (s.requests("kv", "2xx") + s.requests("txn", "2xx")) as f64);
    assert!(get("baton_lease_left_seconds", &[]) > 0.0);
    assert_eq!(get("baton_owed", &[("kind", "unlocks")]), 0.0);
    assert_eq!(get("baton_retries_total", &[]), 0.0);
    for def in baton::metrics::METRICS {
        assert!(
            text.contains(&format!("# HELP {} ", def.name.trim_end_matches("_total"))),
            "{} has no help line in\n{text}",
            def.name
        );
    }
    c.close(PATIENCE);
}

#[test]
fn the_book_lists_every_metric_with_its_type_and_labels() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/guide/observing.md"),
    )
    .expect("the book's metrics page");
    let table = page
        .split("<!-- metrics:begin -->")
        .nth(1)
        .and_then(|t| t.split("<!-- metrics:end -->").next())
        .expect("the page's metrics table");
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("| `baton_"))
        .collect();
    assert_eq!(rows.len(), baton::metrics::METRICS.len(), "{rows:#?}");
    for (m, row) in baton::metrics::METRICS.iter().zip(&rows) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[1], format!("`{}`", m.name), "{row}");
        let kind = format!("{:?}", m.kind).to_lowercase();
        assert_eq!(cells[2], kind, "{row}");
        for label in m.labels {
            assert!(cells[3].contains(&format!("`{label}`")), "{label} in {row}");
        }
    }
}
