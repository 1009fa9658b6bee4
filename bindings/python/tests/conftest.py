"""Fixtures: a real baton-devserver process per test session (never a mocked HTTP client)."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _devserver_binary() -> str:
    explicit = os.environ.get("BATON_DEVSERVER_BIN")
    if explicit:
        return explicit
    for profile in ("debug", "release"):
        p = ROOT / "target" / profile / "baton-devserver"
        if p.exists():
            return str(p)
    pytest.exit("baton-devserver is not built: run `cargo build -p consul-baton-devserver` first", returncode=2)


def _pretty() -> bool:
    """BATON_TEST_DEVSERVER_PRETTY (set, not empty, not "0"): the dev server pretty-prints every
    JSON answer as `consul agent -dev` does (a test that compares raw bodies then fails)."""
    return os.environ.get("BATON_TEST_DEVSERVER_PRETTY", "") not in ("", "0")


def _consul_version() -> list:
    """BATON_TEST_CONSUL_VERSION (e.g. 1.0.8): the dev server emulates that Consul version's
    client-visible differences (`baton-devserver --consul-version`)."""
    v = os.environ.get("BATON_TEST_CONSUL_VERSION", "")
    return ["--consul-version", v] if v and v != "current" else []


def _real_consul() -> bool:
    """BATON_TEST_CONSUL (e.g. http://127.0.0.1:8500): the tests run against that real Consul
    instead of a dev server of their own."""
    return bool(os.environ.get("BATON_TEST_CONSUL"))


# Consul's session_ttl_min (also `baton-devserver`'s default); the dev server started below
# uses 100 ms instead.
CONSUL_SESSION_TTL_MIN = 10.0


@pytest.fixture(scope="session")
def real_consul() -> bool:
    """True when the tests run against the real Consul of BATON_TEST_CONSUL."""
    return _real_consul()


@pytest.fixture(scope="session")
def session_ttl(real_consul):
    """`session_ttl(seconds)`: a session TTL the server accepts. `seconds` itself on our dev
    server; at least Consul's 10 s session_ttl_min on a real Consul. For tests whose short TTL
    only keeps them fast, not for tests that need the session to expire (those skip)."""

    def legal(seconds: float) -> float:
        return max(seconds, CONSUL_SESSION_TTL_MIN) if real_consul else seconds

    return legal


@pytest.fixture
def dev_only(real_consul):
    """`dev_only("what")`: skips the test against a real Consul, which has neither the dev
    server's `/_devserver/...` fault controls (pause, restart, invalidate session, node fail,
    request counts) nor session TTLs below 10 s."""

    def need(what: str) -> None:
        if real_consul:
            pytest.skip(f"needs dev-server control: {what}")

    return need


@pytest.fixture(scope="session")
def devserver():
    """The address (host:port) of a dev server with
    session_ttl_min=100ms (pretty-printing when BATON_TEST_DEVSERVER_PRETTY is set, emulating
    BATON_TEST_CONSUL_VERSION when set), or the real Consul of BATON_TEST_CONSUL."""
    if _real_consul():
        yield re.sub(r"^https?://", "", os.environ["BATON_TEST_CONSUL"]).rstrip("/")
        return
    proc = subprocess.Popen(
        [_devserver_binary(), "--port", "0", "--session-ttl-min", "100ms"]
        + (["--pretty"] if _pretty() else [])
        + _consul_version(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("BATON_DEVSERVER_ADDR="), f"unexpected first line {line!r}"
        yield line.split("=", 1)[1]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture
def client(devserver):
    import consul_baton as baton
    c = baton.Client(devserver)
    yield c
    c.close()


@pytest.fixture
def sigint_handled():
    """Python's own SIGINT handler for the test. A process started with SIGINT
    ignored (a background job of a non-interactive shell, `nohup`) keeps it
    ignored, so neither `os.kill(SIGINT)` nor `_thread.interrupt_main()` would
    reach the test, which would then wait for nothing."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


@pytest.fixture
def ticker():
    """`with ticker() as ticks:` runs a thread that appends `time.monotonic()` to `ticks`
    every 10 ms while the block runs: how a test sees that another Python thread was not
    starved (no GIL held) while a baton call waited."""

    @contextlib.contextmanager
    def run():
        ticks = []
        stop = threading.Event()

        def tick():
            while not stop.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.01)

        t = threading.Thread(target=tick)
        t.start()
        try:
            yield ticks
        finally:
            stop.set()
            t.join()

    return run
