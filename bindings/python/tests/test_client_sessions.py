import _thread
import builtins
import json
import logging
import sys
import threading
import time

import pytest

import consul_baton as baton
def test_client_from_env_and_kv_round_trip(devserver, monkeypatch):
    monkeypatch.setenv("CONSUL_HTTP_ADDR", devserver)
    with baton.Client() as c:
        assert c.address.endswith(devserver)
        assert c.kv_put("py/greeting", b"hello") is True
        assert c.kv_get("py/greeting") == b"hello"
        assert c.kv_get("py/missing") is None
    assert c.closed


def test_bad_arguments_raise_clear_errors(client):
    # Key rules are the core's, the same in every language: "" is refused, one leading '/'
    # is dropped (for writes as for reads), more than one is refused.
    with pytest.raises(baton.InvalidArgumentError, match="missing key"):
        client.kv_get("")
    assert client.kv_put("/py/abs", b"x")
    assert client.kv_get("py/abs") == b"x"
    with pytest.raises(baton.InvalidArgumentError, match="more than one '/'"):
        client.kv_put("//py/abs", b"x")
    with pytest.raises(ValueError, match="ttl must be a non-negative"):
        client.create_session(ttl=-1)
    with pytest.raises(ValueError, match="behavior must be"):
        client.create_session(behavior="explode")
    with pytest.raises(TypeError, match="bytes or str"):
        client.kv_put("k", 42)  # a str is accepted (stored UTF-8 encoded)
    with pytest.raises(TypeError, match="callable"):
        client.default_session().on_lost(42)


def test_server_errors_map_to_the_hierarchy_with_codes(client):
    with pytest.raises(baton.InvalidArgumentError) as e:
        client.create_session(ttl=0.01)  # below session_ttl_min
    assert e.value.code == "BATON_INVALID_ARGUMENT"
    assert e.value.status == 500
    assert "Invalid Session TTL" in e.value.server_text
    assert e.value.transient is False  # a refusal: trying again will not help
    assert isinstance(e.value, baton.BatonError) and isinstance(e.value, ValueError)


def test_unreachable_server_is_a_connection_error():
    c = baton.Client("127.0.0.1:1", request_timeout=2)
    with pytest.raises(baton.ConnectionError) as e:
        c.kv_get("x")
    assert isinstance(e.value, builtins.ConnectionError)
    assert e.value.code == "BATON_CONNECTION"
    assert e.value.transient is True  # nobody answered: worth trying again later
    c.close()


def test_default_session_is_shared_and_valid(client):
    s1 = client.default_session()
    s2 = client.default_session()
    assert s1.id == s2.id
    assert s1.is_valid() and s1.state == "held"


def test_wait_lost_times_out_with_a_timeout_error(client, session_ttl):
    s = client.create_session(ttl=session_ttl(1))
    t = time.monotonic()
    with pytest.raises(baton.TimeoutError) as e:
        s.wait_lost(timeout=0.3)
    assert time.monotonic() - t >= 0.3
    assert isinstance(e.value, builtins.TimeoutError)
    assert e.value.code == "BATON_TIMEOUT"


def test_loss_by_another_client_fires_callback_and_wait(devserver, client, session_ttl):
    s = client.create_session(ttl=session_ttl(2), lock_delay=0)
    called = []
    done = threading.Event()

    def on_lost(reason):
        called.append((reason, threading.current_thread().name))
        done.set()

    s.on_lost(on_lost)
    with baton.Client(devserver) as other:
        # Destroy it from outside through the KV-free session API of a second client.
        other_session = other.create_session(ttl=session_ttl(2))
        assert other_session.id != s.id
        _destroy_foreign_session(devserver, s.id)
    assert s.wait_lost(timeout=5) == "invalidated"
    assert done.wait(5)
    assert called[0][0] == "invalidated"
    assert called[0][1] != threading.main_thread().name
    assert not s.is_valid()
    assert s.state == "lost:invalidated"


def _destroy_foreign_session(addr, sid):
    import urllib.request

    req = urllib.request.Request(f"http://{addr}/v1/session/destroy/{sid}", method="PUT", data=b"")
    with urllib.request.urlopen(req, timeout=5) as r:
        # Parsed: Consul's layout varies (`-dev` indents and ends the body with a newline).
        assert json.load(r) is True


def test_callback_exceptions_reach_the_unraisable_hook(devserver, client, monkeypatch, session_ttl):
    seen = []
    got = threading.Event()

    def hook(unraisable):
        seen.append(unraisable.exc_value)
        got.set()

    monkeypatch.setattr(sys, "unraisablehook", hook)
    s = client.create_session(ttl=session_ttl(2), lock_delay=0)

    def boom(reason):
        raise RuntimeError("from the callback: " + reason)

    s.on_lost(boom)
    _destroy_foreign_session(devserver, s.id)
    assert got.wait(5)
    assert "from the callback" in str(seen[0])


def test_other_python_threads_run_while_one_blocks(client, session_ttl, ticker):
    s = client.create_session(ttl=session_ttl(2))
    with ticker() as ticks:
        with pytest.raises(baton.TimeoutError):
            s.wait_lost(timeout=0.5)
    assert len(ticks) >= 10, "the GIL was released during the blocking wait"


def test_keyboard_interrupt_interrupts_a_blocking_wait(client, sigint_handled, session_ttl):
    s = client.create_session(ttl=session_ttl(2))
    timer = threading.Timer(0.2, _thread.interrupt_main)
    timer.start()
    t = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        s.wait_lost(timeout=30)
    waited = time.monotonic() - t
    print(f"KeyboardInterrupt raised {waited - 0.2:.3f}s after the signal")
    assert waited < 10, "interrupted long before the timeout"
    assert s.is_valid(), "nothing was lost or leaked by the interrupt"


def test_core_log_records_go_to_the_baton_logger(devserver, caplog, session_ttl):
    caplog.set_level(logging.DEBUG, logger="baton")
    c = baton.Client(devserver)
    s = c.create_session(ttl=session_ttl(2), lock_delay=0)
    _destroy_foreign_session(devserver, s.id)
    s.wait_lost(timeout=5)
    # The loss is logged from the dispatcher after the signals (a log record never delays
    # them): wait for it, bounded.
    deadline = time.monotonic() + 5
    while not any(r.name == "baton" for r in caplog.records) and time.monotonic() < deadline:
        time.sleep(0.01)
    c.close()
    assert any(r.name == "baton" and "lost" in r.getMessage() for r in caplog.records), (
        "no record reached logging"
    )


EXIT_SCRIPT = r"""
import sys, threading, time, urllib.request
import consul_baton as baton
addr = sys.argv[1]
c = baton.Client(addr)
s = c.create_session(ttl=10, lock_delay=0)
started = threading.Event()

def on_lost(reason):
    started.set()
    time.sleep(0.5)  # the GIL is released here while the main thread exits
    print("callback finished:", reason, flush=True)

s.on_lost(on_lost)
req = urllib.request.Request(f"http://{addr}/v1/session/destroy/{s.id}", method="PUT", data=b"")
urllib.request.urlopen(req, timeout=5).read()
assert started.wait(10)
print("main thread exits", flush=True)
"""


def test_exit_while_a_callback_runs_waits_for_it_instead_of_aborting(devserver):
    """A callback thread that gave up the GIL as the interpreter began finalizing used to be
    killed by CPython when it took the GIL back, aborting the process; baton's atexit hook
    waits for it (ported from the helper's branch `py`)."""
    import subprocess

    r = subprocess.run(
        [sys.executable, "-c", EXIT_SCRIPT, devserver], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, f"exit code {r.returncode}: {r.stderr[-2000:]}"
    assert r.stdout.splitlines() == ["main thread exits", "callback finished: invalidated"], r.stdout
