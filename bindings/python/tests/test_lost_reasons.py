"""A lost holding names the session's own reason (issue 22: a lock reported only
"session_lost" where its session said "deadline_exceeded")."""

import json
import urllib.request
import uuid

import consul_baton as baton
def key(name: str) -> str:
    return f"py-test/lost-reasons/{name}/{uuid.uuid4()}"


def _control(devserver: str, path: str) -> None:
    req = urllib.request.Request(f"http://{devserver}/_devserver/{path}", method="PUT", data=b"")
    with urllib.request.urlopen(req, timeout=5) as r:
        assert r.status == 200


def test_a_lock_lost_past_its_deadline_says_deadline_exceeded(devserver, dev_only):
    dev_only("pause")
    c = baton.Client(devserver, request_timeout=0.5, default_session={"ttl": 1, "lock_delay": 0})
    try:
        lock = c.lock(key("deadline"))
        assert lock.lost_reason is None and lock.lost_session_reason is None
        assert lock.acquire(timeout=5)
        session = c.default_session()
        _control(devserver, "pause")
        try:
            assert lock.wait_lost(timeout=10) == "session_lost"
        finally:
            _control(devserver, "resume")
        assert lock.lost_reason == "session_lost"
        # The same word the session reports for itself.
        assert session.wait_lost(timeout=5) == "deadline_exceeded"
        assert lock.lost_session_reason == "deadline_exceeded"
    finally:
        c.close()


def test_lost_reasons_of_a_semaphore_and_an_election(client, devserver, dev_only):
    dev_only("session invalidation")
    prefix = key("sem")
    sem = client.semaphore(prefix, 2)
    assert sem.acquire(timeout=5)
    # The semaphore's own session is the name of its contender key, `<prefix>/<session>`.
    with urllib.request.urlopen(f"http://{devserver}/v1/kv/{prefix}/?keys", timeout=5) as r:
        keys = json.load(r)
    (contender,) = [k for k in keys if not k.endswith("/.lock")]
    _control(devserver, f"session/invalidate/{contender.rsplit('/', 1)[1]}")
    assert sem.wait_lost(timeout=10) == "session_lost"
    assert (sem.lost_reason, sem.lost_session_reason) == ("session_lost", "invalidated")

    e = client.election(key("election"))
    assert e.campaign(b"me", timeout=5)
    assert e.lost_reason is None
    e.resign()
    # A release by this process is not a session loss.
    assert (e.lost_reason, e.lost_session_reason) == ("released", None)


def test_aio_objects_report_the_same_reasons(devserver):
    import asyncio

    import consul_baton.aio  # baton.aio
    async def main():
        async with baton.aio.Client(devserver) as c:
            lock = c.lock(key("aio"))
            assert lock.lost_reason is None
            assert await lock.acquire(timeout=5)
            await lock.release()
            assert (lock.lost_reason, lock.lost_session_reason) == ("released", None)
            e = c.election(key("aio-election"))
            assert await e.campaign(b"me", timeout=5)
            await e.resign()
            assert (e.lost_reason, e.lost_session_reason) == ("released", None)

    asyncio.run(main())
