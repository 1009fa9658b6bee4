"""Fixtures: a real baton-devserver process per test session (never a mocked HTTP client).

Every test also checks that it left no session at the server (issue 31: "after close(), no
session is left at the server"): see `no_session_left`."""

import contextlib
import gc
import json
import os
import ssl
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
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
    """BATON_TEST_CONSUL_VERSION (e.g. 1.0.8): the dev server these tests start emulates that
    Consul version's client-visible differences (`baton-devserver --consul-version`). It says
    nothing of the server under test: a test asks the server (`consul_version`)."""
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
    # stdin a pipe this process holds: the server ends with the test run, even a killed one.
    proc = subprocess.Popen(
        [_devserver_binary(), "--port", "0", "--session-ttl-min", "100ms", "--exit-on-stdin-eof"]
        + (["--pretty"] if _pretty() else [])
        + _consul_version(),
        stdin=subprocess.PIPE,
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


# --- no session left behind -------------------------------------------------------------------


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "leaves_sessions(reason): the test leaves sessions at the server on purpose (the "
        "reason says why); the after-test check that none is left is skipped",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "call":
        item._baton_call_failed = outcome.get_result().failed


def _base_url(devserver: str) -> str:
    """The base URL of the test server: BATON_TEST_CONSUL with its scheme, or our dev server."""
    base = os.environ.get("BATON_TEST_CONSUL", "").rstrip("/") if _real_consul() else ""
    if not base:
        return f"http://{devserver}"
    return base if "://" in base else "http://" + base


def _get(devserver: str, path: str):
    """GET `path` of the test server, parsed; with `CONSUL_HTTP_TOKEN` and `CONSUL_CACERT` as
    the clients use them. Returns (the JSON, the response headers)."""
    base = _base_url(devserver)
    req = urllib.request.Request(base + path)
    token = os.environ.get("CONSUL_HTTP_TOKEN")
    if token:
        req.add_header("X-Consul-Token", token)
    context = None
    if base.startswith("https://"):
        context = ssl.create_default_context(cafile=os.environ.get("CONSUL_CACERT") or None)
    with urllib.request.urlopen(req, timeout=10, context=context) as r:
        return json.load(r), r.headers


def server_version(devserver: str):
    """The Consul version the test server reports in `/v1/agent/self` (`Config.Version`, its
    release part) as a tuple, e.g. (1, 0, 8); a dev server reports the version it emulates.
    None when the server will not say (e.g. a token without `agent:read`)."""
    try:
        agent, _ = _get(devserver, "/v1/agent/self")
        text = agent["Config"]["Version"]
        # "1.17.0+ent", "1.9.0-dev": the release part.
        return tuple(int(x) for x in re.split(r"[+-]", text)[0].split("."))
    except (OSError, ValueError, KeyError, TypeError):
        return None


@pytest.fixture(scope="session")
def consul_version(devserver):
    """The test server's Consul version as it reports it (see `server_version`), asked once."""
    return server_version(devserver)


@pytest.fixture(scope="session")
def consul_before(consul_version):
    """`consul_before("1.6.2")`: whether the test server is a Consul older than that (False
    when it will not say its version). Version decisions come from the server, never from
    BATON_TEST_CONSUL_VERSION, which only chooses what a dev server these tests start emulates."""

    def before(version: str) -> bool:
        return consul_version is not None and consul_version < tuple(
            int(x) for x in version.split(".")
        )

    return before


def server_sessions(devserver: str, index: int = 0) -> list:
    """`/v1/session/list` of the test server, parsed. Against BATON_TEST_CONSUL, with its scheme,
    `CONSUL_HTTP_TOKEN` and `CONSUL_CACERT` as the clients use them. With `index` > 0, a
    blocking query that waits up to a second for a change past it."""
    return _session_list(devserver, index)[0]


def _session_list(devserver: str, index: int) -> tuple:
    """(the session list, its X-Consul-Index)."""
    query = f"?index={index}&wait=1s" if index > 0 else ""
    sessions, headers = _get(devserver, "/v1/session/list" + query)
    return sessions, int(headers.get("X-Consul-Index") or 0)


def sessions_left(devserver: str, before: set) -> list:
    """The sessions not in `before`, once the list holds none or 10 s passed. A client whose
    last reference a baton thread held (a call's job finishing, a callback) is closed by that
    thread's drop, just after the test's own: wait for it on blocking queries, not a sleep."""
    end = time.monotonic() + 10
    index = 0
    while True:
        sessions, next_index = _session_list(devserver, index)
        left = [s for s in sessions if s["ID"] not in before]
        if not left or time.monotonic() >= end:
            return left
        index = max(next_index, 1)


@pytest.fixture(autouse=True)
def no_session_left(request, devserver):
    """After each test, once its clients are closed (this fixture is set up before the test's
    other function fixtures, so it is torn down after them: the `client` fixture's close has
    run; a client the test dropped was closed by its drop), the server holds no session that
    was not there before the test: `close()` destroys every session a client made.

    Sessions are told apart by ID (those present before the test are ignored), so a shared
    real Consul (BATON_TEST_CONSUL) works as long as no other program creates sessions on it
    while the tests run; the failure lists each session's name, node and creation index to
    tell. A test that leaves a session on purpose says why with
    `@pytest.mark.leaves_sessions("reason")`. A test that failed already is not checked (its
    traceback keeps its clients open)."""
    marker = request.node.get_closest_marker("leaves_sessions")
    if marker is not None:
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
        if not str(reason).strip():
            pytest.fail("@pytest.mark.leaves_sessions needs a reason", pytrace=False)
        yield
        return
    before = {s["ID"] for s in server_sessions(devserver)}
    yield
    if getattr(request.node, "_baton_call_failed", True):
        return
    # Clients kept alive only by reference cycles are closed by their drop, now.
    gc.collect()
    left = sessions_left(devserver, before)
    if left:
        shown = "; ".join(
            f"{s['ID']} (name {s.get('Name')!r}, node {s.get('Node')!r}, "
            f"created at index {s.get('CreateIndex')})"
            for s in left
        )
        pytest.fail(
            f"{len(left)} session(s) left at the server after the test's clients were closed: "
            f"{shown}. close() must destroy every session a client made; a test that leaves "
            "one on purpose says why with @pytest.mark.leaves_sessions(reason)",
            pytrace=False,
        )


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


@pytest.fixture
def count_baton_threads(monkeypatch):
    """`threads = count_baton_threads()`: from then on, `threads` lists each call `baton.aio`
    starts on a baton thread (its `_run`, under both modules' names: the recipes' calls in
    `aio` and the loop's own in `_loop`). A warm call starts none."""
    import consul_baton._loop as baton_loop
    import consul_baton.aio as baton_aio

    def start() -> list:
        started = []
        real_run = baton_aio._run

        async def counting(start, *args):
            started.append(start)
            return await real_run(start, *args)

        monkeypatch.setattr(baton_aio, "_run", counting)
        monkeypatch.setattr(baton_loop, "_run", counting)
        return started

    return start
