"""A lock whose session is bound to an HTTP check is lost when the service stops answering
(issue 43): the server probes the check as a Consul agent does, the check turns critical, the
session is invalidated and the lock's loss callback fires."""

import http.server
import json
import os
import queue
import threading
import time
import urllib.request
import uuid

import consul_baton as baton

PATIENCE = 30.0  # a bound for "eventually", not a speed assertion
INTERVAL = 1.0  # the check's interval (Consul's minimum)


class _Service(http.server.ThreadingHTTPServer):
    """A tiny HTTP service answering every request with ``self.code``."""

    daemon_threads = True

    def __init__(self):
        self.code = 200

        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(server.code)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)


def _agent(devserver, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else (b"" if method == "PUT" else None)
    req = urllib.request.Request(f"http://{devserver}{path}", data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
    return json.loads(raw) if raw.strip() else None


def _status(devserver, check):
    c = _agent(devserver, "GET", "/v1/agent/checks").get(check)
    return c and c["Status"]


def test_lock_bound_to_an_http_check_is_lost_when_the_service_stops_answering(devserver):
    svc = _Service()
    serving = threading.Thread(target=svc.serve_forever, name="test-http-service")
    serving.start()
    check = f"baton-py-http-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    a = baton.Client(devserver)
    try:
        _agent(devserver, "PUT", "/v1/agent/check/register", {
            "ID": check, "Name": check, "Interval": "1s", "Timeout": "1s",
            "HTTP": f"http://127.0.0.1:{svc.server_address[1]}/health",
        })
        deadline = time.monotonic() + PATIENCE
        while _status(devserver, check) != "passing":
            assert time.monotonic() < deadline, "the HTTP check never passed"
            time.sleep(0.02)  # polling interval of the condition above
        session = a.create_session(ttl=10.0, lock_delay=0, node_checks=["serfHealth", check], name="http-bound")
        lock = a.lock(f"baton-test/py-http-checks/{os.getpid()}/{uuid.uuid4().hex[:8]}", session=session)
        assert lock.acquire(timeout=PATIENCE)
        lost = queue.Queue()
        lock.on_lost(lambda why: lost.put((why, time.monotonic())))
        failed_at = time.monotonic()
        svc.code = 500
        why, lost_at = lost.get(timeout=PATIENCE)
        assert why in ("session_lost", "key_changed"), why
        after = lost_at - failed_at
        print(f"HTTP check every {INTERVAL} s: lock lost {after:.3f} s after the service answered 500")
        assert after <= 2 * INTERVAL + 1.0, f"lost {after:.3f} s after the service failed"
        assert not lock.locked()
        assert _status(devserver, check) == "critical"
    finally:
        try:
            _agent(devserver, "PUT", f"/v1/agent/check/deregister/{check}")
        finally:
            a.close()
            svc.shutdown()
            serving.join()
            svc.server_close()
