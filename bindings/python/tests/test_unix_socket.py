"""A Consul agent serving HTTP on a unix socket (Consul's `addresses.http = "unix:///path"`),
reached as `unix:///path` (as `CONSUL_HTTP_ADDR` may say): locks, semaphores and `baton.aio`'s
warm calls all go through the socket. A dev server of its own, serving on a socket beside TCP
(`baton-devserver --addr unix:///path`); no real Consul needed or used."""

import asyncio
import json
import os
import subprocess
import tempfile
import urllib.request
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio

from conftest import _devserver_binary


@pytest.fixture(scope="module")
def server():
    """`(tcp address, unix:///path)` of a dev server serving on both; the tests' clients get
    the socket, and only the checks below read through TCP."""
    path = os.path.join(tempfile.mkdtemp(prefix="baton-py-"), "consul.sock")
    proc = subprocess.Popen(
        [_devserver_binary(), "--port", "0", "--addr", f"unix://{path}",
         "--session-ttl-min", "100ms", "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        lines = {}
        for _ in range(3):
            name, _, value = proc.stdout.readline().strip().partition("=")
            lines[name] = value
            if name == "BATON_DEVSERVER_UNIX_ADDR":
                break
        assert lines.get("BATON_DEVSERVER_UNIX_ADDR") == f"unix://{path}", lines
        yield lines["BATON_DEVSERVER_ADDR"], lines["BATON_DEVSERVER_UNIX_ADDR"]
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def key(name: str) -> str:
    return f"py-test/unix/{name}/{uuid.uuid4()}"


def sessions(tcp: str) -> list:
    """The sessions the agent holds, read over TCP with a plain request (not through baton)."""
    with urllib.request.urlopen(f"http://{tcp}/v1/session/list", timeout=10) as r:
        return json.loads(r.read())


def test_locks_and_semaphores_over_the_socket(server):
    tcp, socket_url = server
    with baton.Client(socket_url) as c:
        assert c.address == socket_url, "the address says the socket"
        k = key("lock")
        lock = c.lock(k)
        for _ in range(3):
            assert lock.acquire(timeout=10)
            assert c.kv_get_entry(k).session == lock.sequencer.session
            lock.release()
        sem = c.semaphore(key("sem"), 2)
        assert sem.acquire(timeout=10)
        sem.release()
    assert sessions(tcp) == [], "sessions left after close"


def test_aio_warm_calls_over_the_socket(server, count_baton_threads):
    """After a cold cycle opens the loop connection (to the socket), acquires and releases
    are written and read by the event loop itself: no call goes to a baton thread."""

    async def main():
        async with baton.aio.Client(server[1]) as c:
            k = key("aio")
            lock = c.lock(k)
            assert await lock.acquire(timeout=10)
            await lock.release()
            threads = count_baton_threads()
            for _ in range(3):
                assert await lock.acquire(timeout=10)
                await lock.release()
            assert threads == [], f"calls went to baton threads: {threads}"

    asyncio.run(main())


def test_a_missing_socket_names_its_path():
    path = os.path.join(tempfile.mkdtemp(prefix="baton-py-"), "none.sock")
    with baton.Client(f"unix://{path}", request_timeout=2) as c:
        with pytest.raises(baton.ConnectionError) as e:
            c.kv_get("k")
    assert path in str(e.value)
