"""TLS, mutual TLS and ACLs from Python, configured with the CONSUL_* variables as a user would:
a verified server, a wrong name and an unknown CA refused, CONSUL_HTTP_SSL_VERIFY=false,
CONSUL_CAPATH, CONSUL_TLS_SERVER_NAME, mTLS with and without a client certificate, a CA:TRUE
certificate used as the server's, a lock and election round trip over mTLS; a lock refused for
lack of key:write and a session for lack of session:write. Each refusal's text says what to set,
and no token shows in an error or in the ``baton`` logger's records.

These always use dev servers of their own (also with BATON_TEST_CONSUL): a real agent's TLS and
ACL setup cannot be chosen from a test. Certificates come from ``baton-devserver tls``, which
writes the files ``consul tls ca create`` / ``consul tls cert create`` write."""

import json
import logging
import shutil
import subprocess
import tempfile
import urllib.request
from pathlib import Path

import pytest

import consul_baton as baton
from conftest import _devserver_binary

CONSUL_VARS = (
    "CONSUL_HTTP_ADDR",
    "CONSUL_HTTP_SSL",
    "CONSUL_HTTP_SSL_VERIFY",
    "CONSUL_CACERT",
    "CONSUL_CAPATH",
    "CONSUL_CLIENT_CERT",
    "CONSUL_CLIENT_KEY",
    "CONSUL_TLS_SERVER_NAME",
    "CONSUL_HTTP_TOKEN",
    "CONSUL_HTTP_TOKEN_FILE",
)

MANAGEMENT = "mgmt-s3cret-py"
READER = "reader-s3cret-py"  # key:read on jobs/, session:write
NO_SESSION = "nosession-s3cret-py"  # key:write on jobs/, no session rule
LOCKER = "locker-s3cret-py"  # key:write on jobs/, session:write
UNKNOWN = "unknown-s3cret-py"


def _tls(*args: str) -> None:
    subprocess.run([_devserver_binary(), "tls", *args], check=True, stdout=subprocess.DEVNULL)


class _Servers:
    """Certificates and four dev servers: HTTPS, HTTPS with verify_incoming, HTTPS presenting a
    self-signed CA:TRUE certificate, and plain HTTP with ACL tokens."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="baton-tls-py-"))
        self.procs = []
        # Every server's plain HTTP address (each also listens there), for the session check.
        self.plain = []
        d = str(self.dir)
        _tls("ca", "create", "-dir", d)
        _tls("cert", "create", "-server", "-dir", d)
        _tls("cert", "create", "-client", "-dir", d)
        _tls("self-signed", "create", "-dir", d)
        (self.dir / "other").mkdir()
        _tls("ca", "create", "-domain", "other", "-dir", str(self.dir / "other"))
        (self.dir / "capath").mkdir()
        shutil.copy(self.dir / "other" / "other-agent-ca.pem", self.dir / "capath" / "a-other.pem")
        shutil.copy(self.dir / "consul-agent-ca.pem", self.dir / "capath" / "b-consul.pem")
        tls = ["--https-port", "0", "--tls-ca", self.path("consul-agent-ca.pem")]
        server = ["--tls-cert", self.path("dc1-server-consul-0.pem"), "--tls-key", self.path("dc1-server-consul-0-key.pem")]
        self.https = self._start(tls + server)["https"]
        self.mtls = self._start(tls + server + ["--verify-incoming"])["https"]
        self.self_signed = self._start(
            tls + ["--tls-cert", self.path("self-signed.pem"), "--tls-key", self.path("self-signed-key.pem")]
        )["https"]
        self.acl = self._start(
            [
                "--acl-token",
                MANAGEMENT,
                "--acl-token-rules",
                READER + '=key_prefix "jobs/" { policy = "read" } session_prefix "" { policy = "write" }',
                "--acl-token-rules",
                NO_SESSION + '=key_prefix "jobs/" { policy = "write" }',
                "--acl-token-rules",
                LOCKER + '=key_prefix "jobs/" { policy = "write" } session_prefix "" { policy = "write" }',
            ]
        )["http"]

    def path(self, name: str) -> str:
        return str(self.dir / name)

    def _start(self, args):
        proc = subprocess.Popen(
            [_devserver_binary(), "--port", "0", "--session-ttl-min", "1s", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.procs.append(proc)
        line = proc.stdout.readline().strip()
        assert line.startswith("BATON_DEVSERVER_ADDR="), f"unexpected first line {line!r}"
        out = {"http": line.split("=", 1)[1]}
        self.plain.append(out["http"])
        if "--https-port" in args:
            line = proc.stdout.readline().strip()
            assert line.startswith("BATON_DEVSERVER_HTTPS_ADDR="), f"unexpected line {line!r}"
            out["https"] = "https://" + line.split("=", 1)[1]
        return out

    def session_ids(self) -> set:
        """The IDs of the sessions every server holds (over plain HTTP, with the management
        token the ACL server needs)."""
        ids = set()
        for addr in self.plain:
            req = urllib.request.Request(f"http://{addr}/v1/session/list")
            req.add_header("X-Consul-Token", MANAGEMENT)
            with urllib.request.urlopen(req, timeout=10) as r:
                ids |= {s["ID"] for s in json.load(r)}
        return ids

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def servers():
    s = _Servers()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def client_with(monkeypatch, servers):
    """``client_with(NAME=value, ...)``: a client configured from exactly these CONSUL_*
    variables (the rest unset). After the test its clients are closed and none of the servers
    may hold a session they made (as conftest's ``no_session_left`` checks the shared server)."""
    made = []
    before = servers.session_ids()

    def make(**env: str) -> baton.Client:
        for v in CONSUL_VARS:
            monkeypatch.delenv(v, raising=False)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        c = baton.Client(request_timeout=10)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close(10)
    left = servers.session_ids() - before
    assert not left, f"sessions left at the TLS/ACL servers after close(): {sorted(left)}"


def round_trip(c: baton.Client) -> None:
    assert c.kv_put("tls/py", b"over tls")
    assert c.kv_get("tls/py") == b"over tls"


def refusal(c: baton.Client) -> baton.BatonError:
    with pytest.raises(baton.BatonError) as info:
        c.kv_get("tls/py")
    print("refused as:", info.value)
    return info.value


def test_a_verified_server(servers, client_with):
    round_trip(client_with(CONSUL_HTTP_ADDR=servers.https, CONSUL_CACERT=servers.path("consul-agent-ca.pem")))
    # host:port with CONSUL_HTTP_SSL=true is the same.
    round_trip(
        client_with(
            CONSUL_HTTP_ADDR=servers.https.removeprefix("https://"),
            CONSUL_HTTP_SSL="true",
            CONSUL_CACERT=servers.path("consul-agent-ca.pem"),
        )
    )


def test_an_unknown_ca_is_refused_naming_consul_cacert(servers, client_with):
    e = refusal(client_with(CONSUL_HTTP_ADDR=servers.https))
    assert isinstance(e, baton.ConnectionError) and e.code == "BATON_CONNECTION"
    assert not e.transient
    assert "signed by a CA this client does not trust: set CONSUL_CACERT" in str(e)
    e = refusal(client_with(CONSUL_HTTP_ADDR=servers.https, CONSUL_CACERT=servers.path("other/other-agent-ca.pem")))
    assert "signed by none of the CAs in CONSUL_CACERT=" in str(e)


def test_a_wrong_name_is_refused_and_consul_tls_server_name_fixes_it(servers, client_with):
    ca = servers.path("consul-agent-ca.pem")
    e = refusal(client_with(CONSUL_HTTP_ADDR=servers.https, CONSUL_CACERT=ca, CONSUL_TLS_SERVER_NAME="consul.example.com"))
    assert isinstance(e, baton.ConnectionError)
    assert 'not valid for the name "consul.example.com" (it holds server.dc1.consul, localhost, 127.0.0.1)' in str(e)
    assert "set CONSUL_TLS_SERVER_NAME to a name the certificate holds" in str(e)
    round_trip(client_with(CONSUL_HTTP_ADDR=servers.https, CONSUL_CACERT=ca, CONSUL_TLS_SERVER_NAME="server.dc1.consul"))


def test_ssl_verify_false_and_capath(servers, client_with):
    round_trip(client_with(CONSUL_HTTP_ADDR=servers.https, CONSUL_HTTP_SSL_VERIFY="false"))
    round_trip(client_with(CONSUL_HTTP_ADDR=servers.https, CONSUL_CAPATH=servers.path("capath")))


def test_a_ca_certificate_as_the_servers_is_explained(servers, client_with):
    e = refusal(client_with(CONSUL_HTTP_ADDR=servers.self_signed, CONSUL_CACERT=servers.path("self-signed.pem")))
    assert "CaUsedAsEndEntity" in str(e)
    assert "the server presents a CA certificate (CA:TRUE" in str(e)


def test_mtls_needs_a_client_certificate(servers, client_with):
    ca = servers.path("consul-agent-ca.pem")
    e = refusal(client_with(CONSUL_HTTP_ADDR=servers.mtls, CONSUL_CACERT=ca))
    assert isinstance(e, baton.ConnectionError)
    assert "set CONSUL_CLIENT_CERT and CONSUL_CLIENT_KEY" in str(e)
    round_trip(
        client_with(
            CONSUL_HTTP_ADDR=servers.mtls,
            CONSUL_CACERT=ca,
            CONSUL_CLIENT_CERT=servers.path("dc1-client-consul-0.pem"),
            CONSUL_CLIENT_KEY=servers.path("dc1-client-consul-0-key.pem"),
        )
    )


def test_a_lock_and_an_election_over_mtls(servers, client_with):
    env = dict(
        CONSUL_HTTP_ADDR=servers.mtls,
        CONSUL_CACERT=servers.path("consul-agent-ca.pem"),
        CONSUL_CLIENT_CERT=servers.path("dc1-client-consul-0.pem"),
        CONSUL_CLIENT_KEY=servers.path("dc1-client-consul-0-key.pem"),
        CONSUL_TLS_SERVER_NAME="server.dc1.consul",
    )
    a, b = client_with(**env), client_with(**env)
    la, lb = a.lock("tls/py-lock"), b.lock("tls/py-lock")
    assert la.acquire(timeout=20)
    assert la.locked()
    assert not lb.acquire(blocking=False)
    la.release()
    assert lb.acquire(timeout=20)
    lb.release()
    e = a.election("tls/py-leader")
    assert e.campaign(b"py", timeout=20)
    leader = b.leader("tls/py-leader")
    assert leader is not None and leader.value == b"py"
    assert e.resign()
    assert b.leader("tls/py-leader") is None


def _lock_refusal(client_with, servers, token=None, key="jobs/py"):
    env = {"CONSUL_HTTP_ADDR": servers.acl}
    if token is not None:
        env["CONSUL_HTTP_TOKEN"] = token
    c = client_with(**env)
    with pytest.raises(baton.PermissionDeniedError) as info:
        c.lock(key).acquire(timeout=20)
    print("refused as:", info.value)
    assert info.value.code == "BATON_PERMISSION_DENIED"
    return str(info.value)


def test_acl_denials_name_the_permission_and_what_to_set(servers, client_with, caplog):
    caplog.set_level(logging.DEBUG, logger="baton")
    c = client_with(CONSUL_HTTP_ADDR=servers.acl, CONSUL_HTTP_TOKEN=LOCKER)
    lock = c.lock("jobs/py-ok")
    assert lock.acquire(timeout=20)
    lock.release()

    texts = []
    t = _lock_refusal(client_with, servers, READER)
    texts.append(t)
    assert 'key:write on "jobs/py"' in t and "session:write" not in t
    t = _lock_refusal(client_with, servers, NO_SESSION)
    texts.append(t)
    assert "lacks permission 'session:write' on \"baton-dev\"" in t
    assert 'the ACL token lacks session:write on the node "baton-dev"' in t
    t = _lock_refusal(client_with, servers, None)
    texts.append(t)
    assert "no ACL token was sent" in t and "set CONSUL_HTTP_TOKEN" in t
    t = _lock_refusal(client_with, servers, UNKNOWN)
    texts.append(t)
    assert "ACL not found" in t and "does not know this ACL token" in t

    records = [r.getMessage() for r in caplog.records]
    for secret in (MANAGEMENT, READER, NO_SESSION, LOCKER, UNKNOWN):
        for text in texts + records + [repr(c)]:
            assert secret not in text, f"{secret} shown in {text!r}"
