"""A dev server started by ``start_devserver`` ends when its starter dies, by any signal
(issue 43): a test runner killed with SIGKILL (a CI timeout) must not leave a server
re-parented to PID 1 and still listening."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

DEADLINE = 10.0  # a bound for "eventually", not a speed assertion

# The parent: starts a dev server, says where it is, then waits to be killed.
PARENT = r"""
import sys, time
from consul_baton.devserver import start_devserver
server = start_devserver()
print(server.addr, flush=True)
time.sleep(600)
"""


def _server_pid(addr: str) -> int:
    with urllib.request.urlopen(f"http://{addr}/_devserver/status", timeout=5) as resp:
        return int(json.loads(resp.read())["pid"])


def _refuses(addr: str) -> bool:
    host, port = addr.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return False
    except OSError:
        return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its new parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL of the parent is a POSIX test")
def test_devserver_ends_when_its_starter_is_killed_with_sigkill():
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True
    )
    server_pid = None
    try:
        addr = parent.stdout.readline().strip()
        assert addr, f"the parent printed no address (exit status {parent.poll()})"
        server_pid = _server_pid(addr)
        assert server_pid != parent.pid
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=DEADLINE)
        deadline = time.monotonic() + DEADLINE
        while not (_refuses(addr) and not _alive(server_pid)):
            assert time.monotonic() < deadline, (
                f"the dev server (pid {server_pid}, {addr}) outlived its SIGKILLed starter "
                f"by {DEADLINE} s"
            )
            time.sleep(0.05)  # polling interval of the condition above
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        parent.stdout.close()
        if server_pid is not None and _alive(server_pid):
            os.kill(server_pid, signal.SIGKILL)
