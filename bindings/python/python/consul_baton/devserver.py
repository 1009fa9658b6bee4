"""The Consul-compatible dev server, for tests of code that talks to Consul.

``baton-devserver`` (this package's console script, or ``python -m consul_baton.devserver``)
runs it in the foreground; ``--help`` lists its options. It prints one line to stdout when
ready, ``BATON_DEVSERVER_ADDR=<host:port>``, logs to stderr and stops on SIGINT/SIGTERM.

From Python, :func:`start_devserver` starts one as a child process and gives a
:class:`DevServer` handle with the address and the fault controls (pause, restart, no leader,
latency, invalidated sessions, node failure). The pytest plugin's ``consul_devserver`` fixture
is one of these per test session.

>>> import consul_baton
>>> from consul_baton.devserver import start_devserver
>>> with start_devserver(session_ttl_min="100ms") as server:
...     client = consul_baton.Client(server.addr)
...     server.pause()        # requests hang, as in a silent partition
...     server.resume()
"""

import json
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any, Optional, Sequence

__all__ = ["DevServer", "DevServerError", "start_devserver", "main"]


class DevServerError(RuntimeError):
    """The dev server did not start, or a fault control was refused."""


def _duration(value: Any) -> str:
    """Seconds (int/float) or a Go duration string ("100ms") -> a Go duration string."""
    if isinstance(value, str):
        return value
    return f"{int(round(float(value) * 1000))}ms"


class DevServer:
    """A running dev server (a child process): its address and its fault controls.

    ``addr`` is ``host:port`` (what ``consul_baton.Client(addr)`` and ``CONSUL_HTTP_ADDR``
    take), ``url`` the same with ``http://``. Fault controls are the server's
    ``/_devserver/`` HTTP API, so they reach it from any process."""

    def __init__(self, proc: "subprocess.Popen[str]", addr: str) -> None:
        self._proc = proc
        self.addr = addr
        self.url = f"http://{addr}"

    def __enter__(self) -> "DevServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"DevServer(addr={self.addr!r})"

    def _control(self, method: str, path: str) -> Any:
        req = urllib.request.Request(self.url + "/_devserver/" + path, method=method, data=b"" if method == "PUT" else None)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                body = resp.read()
        except urllib.error.HTTPError as e:
            raise DevServerError(f"{method} /_devserver/{path}: {e.code} {e.read().decode(errors='replace')}") from None
        return json.loads(body) if body.strip() else None

    def pause(self) -> None:
        """Stop answering /v1/ requests (they hang), like a silent network partition."""
        self._control("PUT", "pause")

    def resume(self) -> None:
        """Answer again after :meth:`pause`; held requests are served."""
        self._control("PUT", "resume")

    def restart(self) -> None:
        """Restart with every session, key and index lost (connections dropped)."""
        self._control("PUT", "restart")

    def set_latency(self, delay: Any) -> None:
        """A fixed delay before every request: seconds, or a Go duration ("50ms"); 0 = none."""
        self._control("PUT", f"latency?d={_duration(delay)}")

    def set_leader(self, present: bool) -> None:
        """``False``: "No cluster leader" (500s; TTL timers stop); ``True``: a leader again."""
        self._control("PUT", f"leader?present={'true' if present else 'false'}")

    def invalidate_session(self, session_id: str) -> None:
        """Invalidate a session as a failed TTL or health check would (behaviour, lock-delay)."""
        self._control("PUT", f"session/invalidate/{session_id}")

    def fail_node(self) -> None:
        """The node's ``serfHealth`` turns critical: sessions bound to it are invalidated."""
        self._control("PUT", "node/fail")

    def heal_node(self) -> None:
        """The node's ``serfHealth`` passes again."""
        self._control("PUT", "node/heal")

    def request_counts(self) -> Any:
        """Requests served so far, per route (``GET /_devserver/requests``)."""
        return self._control("GET", "requests")

    def status(self) -> Any:
        """The server's state (``GET /_devserver/status``)."""
        return self._control("GET", "status")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s) and reap it. Idempotent."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()


def start_devserver(
    *,
    port: int = 0,
    session_ttl_min: Any = "10s",
    args: Sequence[str] = (),
    stderr: Optional[Any] = subprocess.DEVNULL,
) -> DevServer:
    """Starts a dev server as a child process and returns once it answers.

    ``port`` 0 picks a free port; ``session_ttl_min`` is Consul's (default 10 s; lower it,
    e.g. ``"100ms"``, to test short TTLs); ``args`` are more ``baton-devserver`` options
    (``["--acl-token", "root"]``, ``["--consul-version", "1.6.1"]``, ...). Logs go to
    ``stderr`` (default: discarded).

    The server ends with this process, however it ends (``kill -9`` included): its stdin is a
    pipe this process holds open, and it shuts down when that pipe closes. The pipe belongs to
    the returned handle, so keep the handle for as long as the server is needed: once it is
    garbage-collected, the pipe closes and the server stops."""
    # stdin is a pipe this process keeps the write end of, and --exit-on-stdin-eof stops the
    # server when it closes: the kernel closes it when this process dies, however it dies
    # (SIGKILL of a test runner, a CI timeout), so no server outlives its starter.
    cmd = [sys.executable, "-m", "consul_baton.devserver", "--exit-on-stdin-eof", "--port", str(port),
           "--session-ttl-min", _duration(session_ttl_min), *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
    line = proc.stdout.readline().strip() if proc.stdout else ""
    if not line.startswith("BATON_DEVSERVER_ADDR="):
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
        raise DevServerError(
            f"baton-devserver did not start (exit status {proc.returncode}, first line {line!r}); "
            f"run `{' '.join(cmd[1:])}` by hand to see why"
        )
    return DevServer(proc, line.split("=", 1)[1])


def main() -> None:
    """The ``baton-devserver`` console script."""
    import logging

    from . import _native

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    sys.exit(_native.devserver_main(sys.argv[1:], argv0=sys.argv[0]))


if __name__ == "__main__":
    main()
