"""Sessions bound to health checks (client.agent, create_session's check options) and
adopted sessions, against a real dev server (or BATON_TEST_CONSUL)."""

import os
import queue
import threading
import time
import uuid

import pytest

import consul_baton as baton
PATIENCE = 30.0  # a bound for "eventually", not a speed assertion
SLACK = 1.0  # the acceptance bound: lost within the check's TTL + 1 s of its last pass
SESSION_TTL = 10.0  # Consul's minimum; renewed, so only the check ends the session


def _check_id(name: str) -> str:
    return f"baton-py-{name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _key(name: str) -> str:
    return f"baton-test/py-checks/{os.getpid()}/{name}-{uuid.uuid4().hex[:8]}"


def test_lock_bound_to_ttl_check_is_lost_within_ttl_plus_one_second_of_last_pass(devserver, real_consul):
    check_ttl = 2.0 if real_consul else 1.0
    a = baton.Client(devserver)
    b = baton.Client(devserver)
    check = _check_id("lock")
    try:
        a.agent.check_register(check, check_ttl, notes="baton python test")
        a.agent.check_pass(check)
        session = a.create_session(
            ttl=SESSION_TTL, lock_delay=0, node_checks=["serfHealth", check], name="bound"
        )
        key = _key("bound-lock")
        lock = a.lock(key, session=session)
        assert lock.acquire(timeout=PATIENCE)
        lost = queue.Queue()
        lock.on_lost(lambda why: lost.put((why, time.monotonic())))

        healthy = threading.Event()
        healthy.set()
        passes = queue.Queue()

        def health_loop():
            # The recipe: report passing more often than the TTL while healthy.
            last = None
            while healthy.is_set():
                sent = time.monotonic()
                a.agent.check_pass(check, "healthy")
                last = sent
                passes.put(sent)
                time.sleep(check_ttl / 4)  # the reporting period, not a wait for a condition
            passes.put(("last", last))

        keeper = threading.Thread(target=health_loop)
        keeper.start()
        first = passes.get(timeout=PATIENCE)
        while True:
            t = passes.get(timeout=PATIENCE)
            if t - first > 3 * check_ttl:
                break
        assert lock.locked(), "lost while the check was passing"
        assert lost.empty(), "lost while the check was passing"

        acquired = queue.Queue()

        def other():
            lb = b.lock(key)
            got = lb.acquire(timeout=PATIENCE)
            at = time.monotonic()
            if got:
                lb.release()
            acquired.put((got, at))

        waiter = threading.Thread(target=other)
        waiter.start()

        healthy.clear()  # the health function fails: no more passes
        keeper.join()
        while True:
            item = passes.get(timeout=PATIENCE)
            if isinstance(item, tuple):
                last_pass = item[1]
                break

        why, lost_at = lost.get(timeout=PATIENCE)
        assert why in ("session_lost", "key_changed"), why
        waiter.join()
        got, acquired_at = acquired.get_nowait()
        assert got, "the other client never got the lock"
        print(
            f"check TTL {check_ttl}s: lost {lost_at - last_pass:.3f}s, acquired by another "
            f"{acquired_at - last_pass:.3f}s after the last pass"
        )
        assert lost_at - last_pass <= check_ttl + SLACK
        assert acquired_at - last_pass <= check_ttl + SLACK
        assert not lock.locked()
    finally:
        try:
            a.agent.check_deregister(check)
        except baton.BatonError:
            pass
        b.close()
        a.close()


def test_failing_service_check_invalidates_the_session(client):
    service = _check_id("svc")
    check = f"{service}:ttl"
    client.agent.service_register(service, port=8080, tags=["baton"])
    client.agent.check_register(check, 30.0, service_id=service, status="passing")
    s = client.create_session(ttl=SESSION_TTL, lock_delay=0, service_checks=[check])
    client.agent.check_update(check, "warning", "slow")
    client.agent.check_fail(check, "broken")
    assert s.wait_lost(timeout=PATIENCE) == "invalidated"
    client.agent.service_deregister(service)


def test_session_cannot_be_bound_to_a_critical_check(client):
    check = _check_id("critical")
    client.agent.check_register(check, 30.0)  # a TTL check starts critical
    with pytest.raises(baton.BatonError) as e:
        client.create_session(node_checks=[check])
    assert check in str(e.value)
    client.agent.check_deregister(check)


def test_node_is_sent(client):
    with pytest.raises(baton.BatonError, match="Missing node registration"):
        client.create_session(node="baton-no-such-node")


def test_bad_input_names_the_problem(client):
    with pytest.raises(baton.InvalidArgumentError, match="TTL must be positive"):
        client.agent.check_register("x", 0.0)
    with pytest.raises(baton.InvalidArgumentError, match="status must be"):
        client.agent.check_update("x", "fine")
    with pytest.raises(baton.InvalidArgumentError, match="check ID must not be empty"):
        client.agent.check_pass("")
    with pytest.raises(baton.InvalidArgumentError, match=r"node_checks\[1\] must not be empty"):
        client.create_session(node_checks=["serfHealth", ""])
    with pytest.raises(baton.InvalidArgumentError, match="not a UUID"):
        client.adopt_session("nope")
    with pytest.raises(baton.NotFoundError, match="does not exist"):
        client.adopt_session(str(uuid.uuid4()))


def test_adopted_session_is_renewed_and_not_destroyed_by_close(devserver, session_ttl):
    owner = baton.Client(devserver)
    try:
        # A session made and owned by the other client; ours only adopts it.
        theirs = owner.create_session(ttl=session_ttl(10.0), lock_delay=0)
        c = baton.Client(devserver)
        s = c.adopt_session(theirs.id.upper())
        assert s.id == theirs.id
        assert s.is_valid() and s.time_left() > 0
        key = _key("adopted")
        lock = c.lock(key, session=s)
        assert lock.acquire(blocking=False)
        c.close()
        assert theirs.is_valid()
        # The owner still has it: it can take the lock its adopter released on close.
        mine = owner.lock(key, session=theirs)
        assert mine.acquire(blocking=False)
        mine.release()
    finally:
        owner.close()


def test_aio_agent_and_adoption(client):
    import asyncio

    import consul_baton.aio  # baton.aio
    async def main():
        a = baton.aio.Client(sync=client)
        check = _check_id("aio")
        await a.agent.check_register(check, 30.0, status="passing")
        s = await a.create_session(ttl=SESSION_TTL, lock_delay=0, node_checks=["serfHealth", check])
        adopted = await a.adopt_session(s.id)
        assert adopted.id == s.id
        await a.agent.check_fail(check, "down")
        assert await asyncio.get_running_loop().run_in_executor(None, s.wait_lost, PATIENCE) == "invalidated"
        await a.agent.check_deregister(check)

    asyncio.run(main())


def test_aio_agent_errors_and_threads(client, monkeypatch):
    """`baton.aio.Agent` calls run on the pooled aio threads (no Python thread per call) and
    raise the synchronous call's exception."""
    import asyncio

    import consul_baton.aio  # baton.aio

    started = []
    real_start = threading.Thread.start

    def start(self):
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)

    async def main():
        a = baton.aio.Client(sync=client)
        check = _check_id("aio-errors")
        with pytest.raises(baton.BatonError) as err:
            await a.agent.check_pass(check, "no such check")
        assert check in str(err.value)
        await a.agent.check_register(check, 30.0)
        for _ in range(20):
            await a.agent.check_pass(check, "ok")
        await a.agent.check_deregister(check)

    asyncio.run(main())
    assert not started, started
