"""Capabilities of the README's "Capabilities by language" table that no other Python test
covered: session behaviour "delete" and lock-delay, the semaphore's limit, ``Election.is_leader``,
and the ``baton.aio`` faces of
session options, the default session's configuration and the loss signals. Against a real dev
server (the ``devserver`` fixture)."""

import asyncio
import json
import queue
import urllib.request
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio
WAIT = 10.0  # the failure bound of every wait


def key(name: str) -> str:
    return f"py-test/parity-gaps/{name}/{uuid.uuid4()}"


def session_info(devserver: str, sid: str) -> dict:
    with urllib.request.urlopen(f"http://{devserver}/v1/session/info/{sid}", timeout=5) as r:
        return json.load(r)[0]


def destroy_foreign_session(devserver: str, sid: str) -> None:
    """Destroys a session from outside this client (a plain HTTP call)."""
    req = urllib.request.Request(f"http://{devserver}/v1/session/destroy/{sid}", method="PUT", data=b"")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert json.load(r) is True


def test_behavior_delete_deletes_the_held_key(client, devserver, session_ttl):
    s = client.create_session(ttl=session_ttl(10), lock_delay=0, behavior="delete")
    assert session_info(devserver, s.id)["Behavior"] == "delete"
    k = key("delete")
    lock = client.lock(k, value="held", session=s)
    assert lock.acquire(timeout=WAIT)
    assert client.kv_get(k) == b"held"
    destroy_foreign_session(devserver, s.id)
    assert lock.wait_lost(timeout=WAIT) == "session_lost"
    assert client.kv_get(k) is None

    # The default behaviour keeps the key (released, value and all).
    kept = client.create_session(ttl=session_ttl(10), lock_delay=0)
    assert session_info(devserver, kept.id)["Behavior"] == "release"
    k2 = key("release")
    lock2 = client.lock(k2, value="held", session=kept)
    assert lock2.acquire(timeout=WAIT)
    destroy_foreign_session(devserver, kept.id)
    assert lock2.wait_lost(timeout=WAIT) == "session_lost"
    assert client.kv_get(k2) == b"held"


def test_lock_delay_reaches_consul(client, devserver):
    none = client.create_session(lock_delay=0)
    some = client.create_session(lock_delay=2.5)
    assert session_info(devserver, none.id)["LockDelay"] == 0
    assert session_info(devserver, some.id)["LockDelay"] == 2_500_000_000  # ns
    none.destroy()
    some.destroy()


def test_election_is_leader(client):
    el = client.election(key("leader"))
    assert el.is_leader() is False
    assert el.campaign("me", timeout=WAIT)
    assert el.is_leader() is True
    assert el.resign()
    assert el.is_leader() is False


def test_semaphore_limit_is_readable(client):
    assert client.semaphore(key("sem"), 3).limit == 3


def test_aio_session_options_reach_consul(devserver, session_ttl):
    async def main():
        async with baton.aio.Client(devserver) as a:
            s = await a.create_session(ttl=session_ttl(10), lock_delay=0, behavior="delete")
            info = session_info(devserver, s.id)
            assert info["LockDelay"] == 0 and info["Behavior"] == "delete"
            with pytest.raises(baton.BatonError, match="Missing node registration"):
                await a.create_session(node="baton-no-such-node")

    asyncio.run(asyncio.wait_for(main(), 30))


def test_aio_default_session_is_configurable(devserver, session_ttl):
    name = f"py-aio-default-{uuid.uuid4()}"

    async def main():
        opts = {"name": name, "ttl": session_ttl(20), "lock_delay": 0}
        async with baton.aio.Client(devserver, default_session=opts) as a:
            s = await a.default_session()
            info = session_info(devserver, s.id)
            assert info["Name"] == name and info["LockDelay"] == 0
            assert s.ttl == session_ttl(20)

    asyncio.run(asyncio.wait_for(main(), 30))


def test_aio_lost_callback_wait_and_token(devserver, session_ttl):
    async def main():
        async with baton.aio.Client(devserver) as a:
            s = await a.create_session(ttl=session_ttl(10), lock_delay=0)
            lock = a.lock(key("lock"), session=s)
            removed, kept = [], queue.Queue()
            rid = lock.on_lost(removed.append)
            lock.on_lost(kept.put)
            assert lock.remove_callback(rid) is True
            assert await lock.acquire(timeout=WAIT)
            token = lock.cancel_token
            assert not token.cancelled()
            destroy_foreign_session(devserver, s.id)
            assert await lock.wait_lost(timeout=WAIT) == "session_lost"
            assert token.cancelled()
            # Callbacks run in registration order on one thread: the removed one would
            # have run before the kept one.
            assert kept.get(timeout=WAIT) == "session_lost"
            assert removed == []

            sem = a.semaphore(key("sem"), 2)
            assert await sem.acquire(timeout=WAIT)
            sem_token = sem.cancel_token
            assert not sem_token.cancelled()
            await sem.release()
            assert await sem.wait_lost(timeout=WAIT) == "released"
            assert sem_token.cancelled()

            el = a.election(key("el"))
            assert await el.campaign("me", timeout=WAIT)
            el_token = el.cancel_token
            assert not el_token.cancelled()
            assert await el.resign()
            assert await el.wait_lost(timeout=WAIT) == "released"
            assert el_token.cancelled()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_aio_session_loss_signals(devserver, session_ttl):
    async def main():
        async with baton.aio.Client(devserver) as a:
            ttl = session_ttl(10)
            s = await a.create_session(ttl=ttl, lock_delay=0)
            left = s.time_left()
            assert left is not None and 0 < left <= ttl
            token = s.cancel_token
            assert not token.cancelled()
            lost = queue.Queue()
            s.on_lost(lost.put)
            destroy_foreign_session(devserver, s.id)
            assert await a.wait_session_lost(s, timeout=WAIT) == "invalidated"
            assert lost.get(timeout=WAIT) == "invalidated"
            assert token.cancelled()
            assert s.time_left() == 0.0

    asyncio.run(asyncio.wait_for(main(), 30))
