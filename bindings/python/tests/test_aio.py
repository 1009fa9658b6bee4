"""baton.aio against a dev server: async with, cancellation, concurrency, observe."""

import asyncio
import json
import time
import urllib.request
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio
import consul_baton._loop as baton_loop
def key(name: str) -> str:
    return f"py-aio/{name}/{uuid.uuid4()}"


def sessions_named(devserver: str, name: str) -> list:
    with urllib.request.urlopen(f"http://{devserver}/v1/session/list", timeout=5) as r:
        return [s for s in json.load(r) if s.get("Name") == name]


def kv_session(devserver: str, k: str):
    try:
        with urllib.request.urlopen(f"http://{devserver}/v1/kv/{k}", timeout=5) as r:
            return json.load(r)[0].get("Session")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def wait_key_free(devserver: str, k: str, within: float = 10.0) -> None:
    """Blocks (on blocking queries) until no session holds `k`, failing after `within` s."""
    end = time.monotonic() + within
    index = 0
    while True:
        url = f"http://{devserver}/v1/kv/{k}?index={index}&wait=1s"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                holder = json.load(r)[0].get("Session")
                index = int(r.headers.get("X-Consul-Index", "0"))
        except urllib.error.HTTPError as e:
            if e.code != 404:
                raise
            return
        if holder is None:
            return
        assert time.monotonic() < end, f"{k} still held by {holder}"


def test_async_with_releases_on_exception_and_other_clients_wait(devserver):
    k = key("with")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            lock = a.lock(k, value=b"a")
            with pytest.raises(ZeroDivisionError):
                async with lock:
                    assert lock.locked()
                    assert lock.sequencer.token > 0
                    rival = b.lock(k)
                    assert await rival.acquire(timeout=0) is False
                    assert await rival.acquire(timeout=0.2) is False
                    1 / 0
            assert not lock.locked()
            rival = b.lock(k)
            assert await rival.acquire(timeout=5) is True
            await rival.release()
            with pytest.raises(RuntimeError):
                await rival.release()

    asyncio.run(main())


def test_cancelling_the_task_cancels_the_wait_and_leaves_nothing_held(devserver):
    k = key("cancel")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            holder = a.lock(k)
            assert await holder.acquire()
            waiter = b.lock(k)
            task = asyncio.create_task(waiter.acquire())
            await asyncio.sleep(0.2)
            assert not task.done()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # asyncio.wait_for cancels the same way.
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(waiter.acquire(), 0.2)
            await holder.release()
            await asyncio.sleep(0.3)
            # The cancelled waits did not take the lock behind our back.
            assert not waiter.locked()
            assert kv_session(devserver, k) is None
            other = a.lock(k)
            assert await other.acquire(timeout=0) is True
            await other.release()

    asyncio.run(main())


def test_a_cancel_racing_a_successful_acquire_releases_it(devserver):
    k = key("race")

    async def main():
        async with baton.aio.Client(devserver) as a:
            lock = a.lock(k)
            # The key is free: the acquire succeeds at once, and we cancel right away.
            for _ in range(20):
                task = asyncio.create_task(lock.acquire())
                await asyncio.sleep(0)
                task.cancel()
                try:
                    await task
                    await lock.release()  # it won the race: ours to release
                except asyncio.CancelledError:
                    pass
                # A raced success is released in the background: `locked()` can already
                # be false while the acquire (or its undoing release) is still on its way,
                # so wait for the server to show the key free.
                await asyncio.to_thread(wait_key_free, devserver, k)
                assert not lock.locked()
            await asyncio.to_thread(wait_key_free, devserver, k)
            assert kv_session(devserver, k) is None

    asyncio.run(main())


# How each holding is made, taken, given up and seen held, for the tests over all three.
HOLDINGS = {
    "lock": (lambda c, k: c.lock(k), lambda h, t: h.acquire(timeout=t),
             lambda h: h.release(), lambda h: h.locked()),
    "semaphore": (lambda c, k: c.semaphore(k, 1), lambda h, t: h.acquire(timeout=t),
                  lambda h: h.release(), lambda h: h.locked()),
    "election": (lambda c, k: c.election(k), lambda h, t: h.campaign(b"me", timeout=t),
                 lambda h: h.resign(), lambda h: h.is_leader()),
}


@pytest.mark.parametrize("kind", sorted(HOLDINGS))
@pytest.mark.parametrize("when", ["on_its_way", "not_taken"])
def test_a_success_nobody_takes_is_given_back_before_the_cancel_arrives(devserver, monkeypatch,
                                                                        kind, when):
    """The awaiting task is cancelled after the acquire succeeded: with the outcome on its way
    to the task's future (`on_its_way`: the future is cancelled first), or set on the future
    but not yet taken by the task (`not_taken`: asyncio then throws CancelledError into the
    task and the result is lost). Either way the holding is given back before the
    CancelledError arrives: a rival takes it at once, without waiting."""
    make, take, give, held = HOLDINGS[kind]
    k = key(f"given-back-{kind}-{when}")
    settle = baton_loop._settle
    racing = {}

    def racing_settle(fut, unwound, ok, value, give_back):
        task = racing.pop("task", None)
        if task is None or not (ok and value is True):
            return settle(fut, unwound, ok, value, give_back)
        if when == "on_its_way":
            task.cancel()
            assert fut.cancelled()
            settle(fut, unwound, ok, value, give_back)
        else:
            settle(fut, unwound, ok, value, give_back)
            assert fut.done() and not fut.cancelled()
            task.cancel()

    monkeypatch.setattr(baton_loop, "_settle", racing_settle)

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            mine, rival = make(a, k), make(b, k)
            task = racing["task"] = asyncio.create_task(take(mine, 10))
            with pytest.raises(asyncio.CancelledError):
                await task
            assert "task" not in racing, "the acquire's outcome never reached _settle"
            assert not held(mine)
            assert await take(rival, 0) is True
            await give(rival)

    asyncio.run(main())


def test_200_concurrent_acquires_on_20_keys_do_not_block_the_loop(devserver):
    keys = [key(f"many-{i}") for i in range(20)]
    lags = []

    async def ticker(stop):
        while not stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            lags.append(time.perf_counter() - t - 0.01)

    async def one(client, k, holds):
        lock = client.lock(k)
        async with lock:
            holds[k] = holds.get(k, 0) + 1
            assert holds[k] == 1, "two holders of one key in one process"
            await asyncio.sleep(0.005)
            holds[k] -= 1

    async def main():
        stop = asyncio.Event()
        tick = asyncio.create_task(ticker(stop))
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            holds = {}
            started = time.perf_counter()
            await asyncio.gather(*(one(a if i % 2 else b, keys[i % 20], holds) for i in range(200)))
            took = time.perf_counter() - started
        stop.set()
        await tick
        return took

    took = asyncio.run(main())
    lags.sort()
    p99 = lags[int(len(lags) * 0.99) - 1] * 1000
    worst = lags[-1] * 1000
    print(f"\n200 acquires on 20 keys in {took:.2f} s; event-loop lag p99 {p99:.1f} ms, "
          f"max {worst:.1f} ms over {len(lags)} ticks")
    assert worst < 2000, "the event loop was blocked"


def test_async_observe_sees_failover_and_resign(devserver):
    k = key("observe")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            first, second = a.election(k), b.election(k)
            seen = []

            async def watch():
                async for leader in first.observe():
                    seen.append(leader.value if leader else None)
                    if seen[-1] == b"second":
                        return

            watching = asyncio.create_task(watch())
            assert await first.campaign(b"first", timeout=5)
            assert first.is_leader()
            assert (await second.leader()).value == b"first"
            assert await second.campaign(b"second", timeout=0) is False
            waiting = asyncio.create_task(second.campaign(b"second"))
            await asyncio.sleep(0.1)
            await first.proclaim(b"first-again")
            assert await first.resign() is True
            assert await waiting is True
            await asyncio.wait_for(watching, 10)
            # Observers report the latest state: "first" may be skipped for "first-again".
            assert any(v and v.startswith(b"first") for v in seen) and seen[-1] == b"second"
            with pytest.raises(baton.TimeoutError):
                await second.wait_lost(timeout=0.1)  # still leading
            assert await second.resign() is True
            assert await first.resign() is False

    asyncio.run(main())


def test_aio_close_releases_locks_and_destroys_sessions(devserver):
    name = f"aio-{uuid.uuid4()}"

    async def main():
        client = baton.aio.Client(devserver)
        session = client.sync.create_session(name=name, ttl=10)
        lock = client.lock(key("close"), session=session)
        assert await lock.acquire()
        assert len(sessions_named(devserver, name)) == 1
        await client.close()
        assert not lock.locked()

    asyncio.run(main())
    assert sessions_named(devserver, name) == []


def test_bad_arguments_raise_clear_errors(devserver):
    async def main():
        async with baton.aio.Client(devserver) as a:
            with pytest.raises(ValueError):
                a.lock("")
            lock = a.lock(key("bad"))
            with pytest.raises(ValueError, match="timeout"):
                await lock.acquire(timeout=-2)  # -1 waits without limit, as in the sync API
            with pytest.raises(TypeError, match="bytes or str"):
                await a.election(key("bad")).campaign(42)  # a str is accepted (UTF-8)

    asyncio.run(main())


def test_async_semaphore_limits_holders_and_cancel_frees_the_waiter(devserver):
    prefix = key("sem")

    async def main():
        clients = [baton.aio.Client(devserver) for _ in range(3)]
        try:
            sems = [c.semaphore(prefix, 2, value=f"w{i}".encode()) for i, c in enumerate(clients)]
            async with sems[0], sems[1]:
                assert sems[0].locked() and sems[1].locked()
                assert await sems[2].acquire(timeout=0) is False
                waiting = asyncio.create_task(sems[2].acquire())
                await asyncio.sleep(0.2)
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                assert not sems[2].locked()
            assert not sems[0].locked()
            assert await sems[2].acquire(timeout=5) is True
            assert sems[2].limit == 2 and sems[2].prefix == prefix
            await sems[2].release()
        finally:
            for c in clients:
                await c.close()

    asyncio.run(main())


def test_waiting_calls_hold_no_thread_each(devserver):
    """500 pending acquires, 100 waits for a loss, 100 for a session's loss and 100 observers'
    next state cost the client's few baton threads, not a thread each (they were pooled
    threads, one per call)."""
    import os

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    k = key("no-thread")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            holder = a.lock(k)
            assert await holder.acquire(timeout=10)
            election = a.election(key("no-thread-e"))
            assert await election.campaign(b"me", timeout=10)
            # Warm both clients up (their hub, step and timer threads) before counting.
            assert not await b.lock(k).acquire(timeout=0)
            before = threads()
            waiters = [asyncio.ensure_future(b.lock(k).acquire(timeout=30)) for _ in range(500)]
            losses = [asyncio.ensure_future(holder.wait_lost(timeout=30)) for _ in range(100)]
            session = await b.create_session(ttl=30)
            session_losses = [
                asyncio.ensure_future(b.wait_session_lost(session, timeout=30)) for _ in range(100)
            ]
            streams = [election.observe() for _ in range(100)]
            firsts = [await s.__anext__() for s in streams]
            assert all(f is not None and f.value == b"me" for f in firsts)
            nexts = [asyncio.ensure_future(s.__anext__()) for s in streams]
            await asyncio.sleep(0.5)
            during = threads()
            assert not any(w.done() for w in waiters + losses + session_losses + nexts)
            # The holder lets go: every wait for its loss ends, one waiter gets the key.
            await holder.release()
            assert set(await asyncio.gather(*losses)) == {"released"}
            await b.destroy_session(session)
            assert set(await asyncio.gather(*session_losses)) == {"destroyed"}
            for w in waiters + nexts:
                w.cancel()
            await asyncio.gather(*waiters, *nexts, return_exceptions=True)
            for s in streams:
                await s.aclose()
            return before, during

    before, during = asyncio.run(main())
    assert during - before < 40, f"{before} threads before, {during} with 800 calls pending"
    # No thread of baton.aio outlives the clients' close.
    names = []
    for t in os.listdir("/proc/self/task"):
        try:
            names.append(open(f"/proc/self/task/{t}/comm").read().strip())
        except OSError:
            pass
    assert "baton-py-aio" not in names, names
