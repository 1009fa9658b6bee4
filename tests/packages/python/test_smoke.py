"""Smoke test of the installed consul-baton wheel/sdist, run from a fresh venv outside the
repository: the pytest plugin's `consul_devserver` fixture (the packaged dev server), a lock,
an election, and a loss caused by the dev server's restart fault."""

import pytest

import consul_baton as baton


def test_installed_outside_the_repository():
    import pathlib

    assert "site-packages" in pathlib.Path(baton.__file__).parts, baton.__file__


def test_lock_election_and_loss(consul_devserver):
    with baton.Client(consul_devserver.addr) as a, baton.Client(consul_devserver.addr) as b:
        session = a.create_session(ttl=1, lock_delay=0)
        lock = a.lock("smoke/lock", value=b"a", session=session)
        assert lock.acquire(timeout=10)
        assert not b.lock("smoke/lock").acquire(blocking=False), "a second holder got the lock"

        election = a.election("smoke/leader", session=session)
        assert election.campaign(b"leader-a", timeout=10)
        leader = b.leader("smoke/leader")
        assert leader is not None and leader.value == b"leader-a"

        consul_devserver.restart()  # every session is gone
        reason = lock.wait_lost(timeout=30)
        assert reason and not lock.locked()
        election.wait_lost(timeout=30)
        assert not election.is_leader()
        assert b.lock("smoke/lock").acquire(timeout=10), "the lock was not free after the loss"


def test_fresh_server_per_test(consul_devserver_factory, consul_devserver):
    server = consul_devserver_factory(session_ttl_min="100ms")
    assert server.addr != consul_devserver.addr
    with baton.Client(server.addr) as c:
        assert c.kv_put("smoke/k", b"v")
        assert c.kv_get("smoke/k") == b"v"
        server.set_leader(False)  # "No cluster leader": a write fails with Consul's 500
        with pytest.raises(baton.BatonError) as e:
            c.kv_put("smoke/k", b"w")
        assert "No cluster leader" in str(e.value)
        server.set_leader(True)
        assert c.kv_put("smoke/k", b"w")
    assert "by_route" in server.request_counts()
    assert server.status() is not None
