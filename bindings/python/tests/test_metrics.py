"""Metrics (issue 47): known operations on fresh clients and the exact counts of their
`Client.metrics()` snapshot; the `consul_baton.prometheus` collector's exposition, scraped
with `prometheus_client.generate_latest` and parsed by a small text parser of our own.

Asynchronous events (a loss) are awaited by polling the snapshot with a deadline, never a
fixed sleep."""

import asyncio
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio
from consul_baton import prometheus
from consul_baton.devserver import start_devserver

# Generous bound for "eventually": a failure bound, not a speed assertion.
PATIENCE = 20.0


def key(name: str) -> str:
    return f"py-test/metrics/{name}/{uuid.uuid4()}"


def until(client, what, cond):
    """Polls `client.metrics()` until `cond(snapshot)` holds; fails naming `what` at the
    deadline."""
    end = time.monotonic() + PATIENCE
    while True:
        m = client.metrics()
        if cond(m):
            return m
        assert time.monotonic() < end, f"{what} never happened: {m}"
        time.sleep(0.02)


def total(nested) -> int:
    """The sum of a `{first: {second: n}}` table."""
    return sum(n for row in nested.values() for n in row.values())


def test_acquires_holdings_and_losses_are_counted_exactly(devserver):
    c = baton.Client(devserver)
    other = baton.Client(devserver)
    try:
        k, taken = key("a"), key("taken")
        m = c.metrics()
        assert m["held"]["lock"] == 0
        assert total(m["acquires"]) == 0, m["acquires"]

        # One acquire.
        lock = c.lock(k)
        assert lock.acquire(timeout=PATIENCE)
        m = c.metrics()
        assert m["acquires"]["lock"]["acquired"] == 1
        assert m["held"]["lock"] == 1
        assert m["lease_left_seconds"] is not None and m["lease_left_seconds"] > 0, m
        assert m["acquire_wait_seconds"]["lock"]["count"] == 1

        # A try of a key another client holds; a wait for it that times out; a cancelled one.
        theirs = other.lock(taken)
        assert theirs.acquire(timeout=PATIENCE)
        mine = c.lock(taken)
        assert not mine.acquire(blocking=False)
        assert not mine.acquire(timeout=0.3)
        cancel = baton.CancelToken()
        canceller = threading.Timer(0.2, cancel.cancel)
        canceller.start()
        with pytest.raises(baton.CancelledError):
            mine.acquire(timeout=PATIENCE, cancel=cancel)
        canceller.join()
        m = c.metrics()
        assert m["acquires"]["lock"] == {
            "acquired": 1,
            "not_acquired": 1,
            "timed_out": 1,
            "cancelled": 1,
            "error": 0,
        }, m["acquires"]
        assert m["acquire_wait_seconds"]["lock"]["count"] == 4
        assert m["held"]["lock"] == 1

        # A release: nothing held, one hold-time sample, no loss.
        lock.release()
        m = c.metrics()
        assert m["held"]["lock"] == 0
        assert m["hold_seconds"]["lock"]["count"] == 1
        assert total(m["losses"]) == 0, m["losses"]

        # A loss by key change: another client deletes the key.
        assert lock.acquire(timeout=PATIENCE)
        assert other.kv_delete(k)
        m = until(c, "the key-changed loss", lambda m: m["losses"]["lock"]["key_changed"] == 1)
        assert m["held"]["lock"] == 0
        assert m["hold_seconds"]["lock"]["count"] == 2

        # A loss by session invalidation: another client destroys the session.
        assert lock.acquire(timeout=PATIENCE)
        sid = c.default_session().id
        other.adopt_session(sid).destroy()
        m = until(c, "the invalidation loss", lambda m: m["losses"]["lock"]["invalidated"] == 1)
        assert m["losses"]["lock"]["key_changed"] == 1
        assert m["held"]["lock"] == 0
        assert m["acquires"]["lock"]["acquired"] == 3
        assert total(m["losses"]) == 2, m["losses"]
        assert m["hold_seconds"]["lock"]["count"] == 3

        # A semaphore acquire, counted as the semaphore's.
        sem = c.semaphore(key("sem"), 2)
        assert sem.acquire(timeout=PATIENCE)
        m = c.metrics()
        assert m["acquires"]["semaphore"]["acquired"] == 1
        assert m["held"]["semaphore"] == 1
        assert m["acquires"]["lock"]["acquired"] == 3
        sem.release()
        assert c.metrics()["held"]["semaphore"] == 0

        # Requests: answered, none refused for the connection limit.
        m = c.metrics()
        assert m["requests"]["kv"]["2xx"] + m["requests"]["txn"]["2xx"] > 0, m["requests"]
        assert sum(row["429"] for row in m["requests"].values()) == 0
        theirs.release()
    finally:
        c.close()
        other.close()


def test_the_snapshot_holds_every_metric_of_the_core_table(devserver):
    with baton.Client(devserver) as c:
        m = c.metrics()
        assert m["lease_left_seconds"] is None, "no session yet"
        # Every metric of the table under its name less `baton_` and `_total`, and no other.
        keys = {d.name[len("baton_"):].removesuffix("_total") for d in prometheus.metric_defs()}
        assert set(m) == keys, sorted(m)
        h = m["acquire_wait_seconds"]["lock"]
        assert len(h["buckets"]) == len(h["bounds"]) + 1
        assert (h["count"], h["sum"]) == (0, 0.0)
        assert m["owed"] == {"unlocks": 0, "slots": 0, "sessions": 0}
        assert m["renewals"] == {"ok": 0, "failed": 0}
        defs = {d.name: d for d in prometheus.metric_defs()}
        assert defs["baton_acquires_total"].type == "counter"
        assert defs["baton_acquires_total"].labels == ("recipe", "outcome")
        assert defs["baton_hold_seconds"].type == "histogram"
        assert defs["baton_held"].type == "gauge"


def test_an_asyncio_acquire_counts_once_however_many_tries(devserver):
    other = baton.Client(devserver)
    k = key("async")
    theirs = other.lock(k)
    assert theirs.acquire(timeout=PATIENCE)

    async def main():
        async with baton.aio.Client(devserver) as c:
            mine = c.lock(k)
            # Freed while the coroutine waits: several tries, one acquire.
            releaser = threading.Timer(0.3, theirs.release)
            releaser.start()
            try:
                assert await mine.acquire(timeout=PATIENCE)
            finally:
                releaser.join()
            m = c.metrics()  # a plain method: no await
            assert m["acquires"]["lock"]["acquired"] == 1, m["acquires"]
            assert total(m["acquires"]) == 1, m["acquires"]
            assert m["held"]["lock"] == 1
            await mine.release()
            assert c.metrics()["held"]["lock"] == 0

    try:
        asyncio.run(main())
    finally:
        other.close()


def _probe(addr: str) -> int:
    """The status of one request on a connection of its own (not a baton client's)."""
    try:
        with urllib.request.urlopen(f"http://{addr}/v1/status/leader", timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_full_connection_limit_shows_as_exactly_the_429s_caused():
    limit, refused = 4, 3
    with start_devserver(session_ttl_min="100ms", args=["--max-conns-per-client", str(limit)]) as server:
        c = baton.Client(server.addr)
        held = []
        try:
            # Fill the limit with idle connections of our own; the server has counted them
            # once a further connection is refused.
            host, port = server.addr.rsplit(":", 1)
            held = [socket.create_connection((host, int(port)), timeout=10) for _ in range(limit)]
            end = time.monotonic() + PATIENCE
            while _probe(server.addr) != 429:
                assert time.monotonic() < end, "the server never counted our connections"
                time.sleep(0.01)
            for _ in range(refused):
                with pytest.raises(baton.BatonError) as e:
                    c.kv_get("metrics/limited")
                assert e.value.status == 429, e.value
            m = c.metrics()
            assert m["requests"]["kv"]["429"] == refused, m["requests"]
            assert sum(row["429"] for row in m["requests"].values()) == refused, m["requests"]
            for s in held:
                s.close()
            held = []
            # Answered again once the server has seen our connections go.
            end = time.monotonic() + PATIENCE
            while _probe(server.addr) == 429:
                assert time.monotonic() < end, "the server never saw our connections close"
                time.sleep(0.01)
            assert c.kv_get("metrics/limited") is None
            # The missing key's 404, and no more 429s.
            m = c.metrics()
            assert m["requests"]["kv"]["4xx"] == 1, m["requests"]
            assert m["requests"]["kv"]["429"] == refused
            assert sum(row["429"] for row in m["requests"].values()) == refused, m["requests"]
        finally:
            for s in held:
                s.close()
            c.close()


# --- the prometheus_client exposition ---------------------------------------------------------


def parse(text: str) -> dict:
    """The text exposition as {(name, frozenset of (label, value))): value}, and checks each
    sample line's shape (a label value here never holds a comma, a quote or a brace)."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        series, value = line.rsplit(" ", 1)
        if "{" in series:
            name, rest = series.split("{", 1)
            assert rest.endswith("}"), line
            labels = []
            for pair in filter(None, rest[:-1].split(",")):
                k, v = pair.split("=", 1)
                assert v.startswith('"') and v.endswith('"'), line
                labels.append((k, v[1:-1]))
        else:
            name, labels = series, []
        key_ = (name, frozenset(labels))
        assert key_ not in out, f"a repeated series: {line}"
        out[key_] = float(value)
    return out


def meta(text: str, kind: str) -> dict:
    """The `# HELP` or `# TYPE` lines as {name: text}."""
    prefix = f"# {kind} "
    return dict(line[len(prefix):].split(" ", 1) for line in text.splitlines() if line.startswith(prefix))


def test_the_prometheus_collector_exposes_the_snapshot(devserver):
    import prometheus_client  # requirements-dev.txt

    registry = prometheus_client.CollectorRegistry()
    with baton.Client(devserver) as c:
        collector = prometheus.register(c, registry)
        lock = c.lock(key("prom"))
        assert lock.acquire(timeout=PATIENCE)
        text = prometheus_client.generate_latest(registry).decode()
        s = parse(text)

        def get(name, **labels):
            k = (name, frozenset(labels.items()))
            assert k in s, f"{name} {labels} missing in\n{text}"
            return s[k]

        assert get("baton_acquires_total", recipe="lock", outcome="acquired") == 1.0
        assert get("baton_acquires_total", recipe="lock", outcome="timed_out") == 0.0
        assert get("baton_held", recipe="lock") == 1.0
        assert get("baton_held", recipe="semaphore") == 0.0
        assert get("baton_acquire_wait_seconds_count", recipe="lock") == 1.0
        assert get("baton_acquire_wait_seconds_bucket", recipe="lock", le="+Inf") == 1.0
        assert get("baton_acquire_wait_seconds_bucket", recipe="lock", le="300.0") == 1.0
        assert get("baton_acquire_wait_seconds_sum", recipe="lock") > 0.0
        assert get("baton_losses_total", recipe="lock", reason="key_changed") == 0.0
        assert get("baton_lease_left_seconds") > 0.0
        assert get("baton_owed", kind="unlocks") == 0.0
        assert get("baton_retries_total") == 0.0
        assert get("baton_renewals_total", outcome="ok") >= 0.0
        assert get("baton_renewal_seconds_count") >= 0.0
        assert get("baton_leaderless_seconds_total") == 0.0
        assert get("baton_requests_total", family="kv", outcome="429") == 0.0
        assert get("baton_request_seconds_count", family="kv") >= 0.0
        # The buckets are cumulative: never fewer at a higher bound.
        bounds = c.metrics()["acquire_wait_seconds"]["lock"]["bounds"]
        les = [prometheus_client.utils.floatToGoString(b) for b in bounds] + ["+Inf"]
        cum = [get("baton_acquire_wait_seconds_bucket", recipe="lock", le=le) for le in les]
        assert cum == sorted(cum) and cum[-1] == 1.0, cum
        # Every metric of the core's table, with its help text and type.
        helps, types = meta(text, "HELP"), meta(text, "TYPE")
        for d in prometheus.metric_defs():
            assert helps.get(d.name) == d.help, f"{d.name}'s help in\n{text}"
            assert types.get(d.name) == d.type, f"{d.name}'s type in\n{text}"

        # A release shows at the next scrape.
        lock.release()
        s = parse(prometheus_client.generate_latest(registry).decode())
        assert s[("baton_held", frozenset({("recipe", "lock")}))] == 0.0
        assert s[("baton_hold_seconds_count", frozenset({("recipe", "lock")}))] == 1.0

        registry.unregister(collector)
        assert "baton_" not in prometheus_client.generate_latest(registry).decode()


def test_the_collector_takes_an_asyncio_client_and_shows_nothing_once_it_is_closed(devserver):
    import prometheus_client

    registry = prometheus_client.CollectorRegistry()

    async def main():
        c = baton.aio.Client(devserver)
        try:
            prometheus.register(c, registry)
            s = parse(prometheus_client.generate_latest(registry).decode())
            assert s[("baton_held", frozenset({("recipe", "lock")}))] == 0.0
            # No session yet: no lease gauge, not a zero one.
            assert ("baton_lease_left_seconds", frozenset()) not in s
            lock = c.lock(key("prom-aio"))
            assert await lock.acquire(timeout=PATIENCE)
            s = parse(prometheus_client.generate_latest(registry).decode())
            assert s[("baton_acquires_total", frozenset({("recipe", "lock"), ("outcome", "acquired")}))] == 1.0
            await lock.release()
        finally:
            await c.close()
        assert "baton_" not in prometheus_client.generate_latest(registry).decode()

    asyncio.run(main())


def test_register_without_prometheus_client_names_the_extra(devserver, monkeypatch):
    # `None` in sys.modules makes `import prometheus_client` raise ImportError.
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with baton.Client(devserver) as c:
        with pytest.raises(ImportError, match=r"pip install consul-baton\[prometheus\]"):
            prometheus.register(c)


def test_register_refuses_what_is_not_a_client():
    import prometheus_client

    with pytest.raises(TypeError, match="consul_baton.Client"):
        prometheus.register(object(), prometheus_client.CollectorRegistry())


def test_a_collector_holds_its_client_weakly(devserver):
    import gc

    import prometheus_client

    registry = prometheus_client.CollectorRegistry()
    c = baton.Client(devserver)
    prometheus.register(c, registry)
    assert "baton_held{" in prometheus_client.generate_latest(registry).decode()
    # The collector does not keep the client alive: once it is gone (its drop closes it),
    # nothing is exposed.
    del c
    gc.collect()
    assert "baton_" not in prometheus_client.generate_latest(registry).decode()
