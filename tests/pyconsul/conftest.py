"""Our replacement for py-consul's root conftest.py: where theirs starts `hashicorp/consul`
in Docker for each test, this starts a `baton-devserver` process for each test (fresh state,
as a fresh container has), with ACLs on and a management token for the `acl_*` fixtures.
The fixture names and shapes are py-consul's own, so its tests run unmodified."""

from __future__ import annotations

import collections
import os
import subprocess
import uuid
from pathlib import Path

import pytest
import requests

ConsulInstance = collections.namedtuple("ConsulInstance", ["container", "port", "version"])


def _binary() -> str:
    explicit = os.environ.get("BATON_DEVSERVER_BIN")
    if explicit:
        return explicit
    root = Path(os.environ.get("BATON_ROOT", Path(__file__).resolve().parents[2]))
    for profile in ("debug", "release"):
        p = root / "target" / profile / "baton-devserver"
        if p.exists():
            return str(p)
    pytest.exit("baton-devserver is not built: run `cargo build -p consul-baton-devserver` first", returncode=2)
    raise AssertionError("unreachable")


@pytest.fixture(scope="session", autouse=True)
def _unset_consul_token():
    os.environ.pop("CONSUL_HTTP_TOKEN", None)


def _port_8500_free() -> bool:
    """Whether 127.0.0.1:8500 can be listened on (nothing else is there)."""
    import socket

    with socket.socket() as s:
        # As the server's listener does: a connection of an earlier server on 8500 that is
        # still in TIME_WAIT does not make the port busy.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", 8500))
        except OSError:
            return False
    return True


def _start(acl_token: str | None):
    # py-consul's own harness runs Consul in a container where the agent listens on 8500, and
    # two of its tests register HTTP checks against http://127.0.0.1:8500 (the agent itself).
    # The dev server takes that port when it is free, so those checks reach it; otherwise any
    # free port, and the checks go to whatever listens on 8500.
    port = "8500" if acl_token is None and _port_8500_free() else "0"
    args = [_binary(), "--port", port, "--session-ttl-min", "10s", "--exit-on-stdin-eof"]
    if acl_token:
        args += ["--acl-token", acl_token]
    # stdin a pipe this process holds: the server ends with it, however the run ends.
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().strip()
    if not line.startswith("BATON_DEVSERVER_ADDR="):
        proc.kill()
        raise RuntimeError(f"baton-devserver did not start: {line!r}")
    port = int(line.rsplit(":", 1)[1])
    headers = {"X-Consul-Token": acl_token} if acl_token else {}
    version = requests.get(f"http://127.0.0.1:{port}/v1/agent/self", headers=headers, timeout=10).json()[
        "Config"
    ]["Version"]
    return proc, ConsulInstance(proc, port, version)


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def consul_instance():
    proc, instance = _start(None)
    try:
        yield instance
    finally:
        _stop(proc)


@pytest.fixture
def acl_consul_instance():
    token = uuid.uuid4().hex
    proc, instance = _start(token)
    try:
        yield instance, token
    finally:
        _stop(proc)


@pytest.fixture
def consul_port(consul_instance):
    return consul_instance.port, consul_instance.version
