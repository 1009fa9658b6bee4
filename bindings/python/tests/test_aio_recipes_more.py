"""baton.aio's read-write and multi-key locks, leader tasks, groups, barriers and counters
against a dev server; their waits hold no thread each."""

import asyncio
import os
import threading
import time
import urllib.request
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio


def key(name: str) -> str:
    return f"py-aio-more/{name}/{uuid.uuid4()}"


def threads() -> int:
    """The threads of this process, as the kernel counts them."""
    return len(os.listdir("/proc/self/task"))


def destroy_session(devserver: str, session_id: str) -> None:
    req = urllib.request.Request(f"http://{devserver}/v1/session/destroy/{session_id}", method="PUT")
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200


async def eventually(cond, within: float = 10.0, what: str = "condition"):
    end = time.monotonic() + within
    while not await cond():
        assert time.monotonic() < end, f"{what} not met within {within} s"
        await asyncio.sleep(0.01)


def test_aio_rwlock_readers_share_writer_excludes_and_is_not_starved(devserver):
    p = key("rw")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            r1, r2 = a.read_lock(p), b.read_lock(p)
            assert await r1.acquire(timeout=5) and await r2.acquire(timeout=5)
            assert r1.mode == "read" and r1.sequencer is not None
            w = b.write_lock(p)
            assert await w.acquire(timeout=0.3) is False
            waiting = asyncio.ensure_future(w.acquire(timeout=10))
            await asyncio.sleep(0.2)
            assert not waiting.done()
            late = a.read_lock(p)
            assert await late.acquire(timeout=0.3) is False, "a later reader waits behind the writer"
            await r1.release()
            await r2.release()
            assert await waiting is True and w.locked()
            with pytest.raises(baton.NotHeldError):
                await r1.release()
            await w.release()
            async with late:
                assert late.locked()
            assert not late.locked() and late.lost_reason == "released"

    asyncio.run(main())


def test_aio_multilock_all_or_none_and_loss(devserver, consul_before):
    k1, k2 = key("m1"), key("m2")
    if consul_before("1.6.2"):
        # Go's lock flags cannot be written exactly by a transaction there (a float64):
        # the multi-key lock refuses, naming the version.

        async def refused():
            async with baton.aio.Client(devserver) as a:
                with pytest.raises(baton.UnsupportedError, match="before 1.6.2"):
                    await a.multi_lock([k1, k2]).acquire(timeout=5)

        asyncio.run(refused())
        return

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            plain = b.lock(k2)
            assert await plain.acquire(timeout=5)
            multi = a.multi_lock([k1, k2])
            assert multi.keys == sorted([k1, k2])
            task = asyncio.ensure_future(multi.acquire(timeout=10))
            end = time.monotonic() + 0.4
            while time.monotonic() < end:
                entry = await a.kv_get_entry(k1)
                assert entry is None or entry.session is None, "holds part of the set"
                assert not task.done()
                await asyncio.sleep(0.02)
            await plain.release()
            assert await task is True
            assert len(multi.sequencers) == 2
            lost = asyncio.ensure_future(multi.wait_lost(timeout=10))
            await a.kv_delete(k1)
            assert await lost in ("key_changed", "removed")
            assert not multi.locked()
            # A cancelled wait leaves nothing held.
            assert await plain.acquire(timeout=5)
            waiter = asyncio.ensure_future(multi.acquire())
            await asyncio.sleep(0.1)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            await plain.release()
            assert not multi.locked()
            assert (await a.kv_get_entry(k1) or None) is None or (await a.kv_get_entry(k1)).session is None

    asyncio.run(main())


def test_aio_barrier_wait_released_and_timing_out(devserver):
    k = key("barrier")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            gate = a.barrier(k)
            assert await gate.wait(timeout=0) is True
            assert await gate.hold() is True and await gate.hold() is False
            assert await gate.is_held()
            assert await b.barrier(k).wait(timeout=0.3) is False
            waiting = asyncio.ensure_future(b.barrier(k).wait(timeout=10))
            await asyncio.sleep(0.1)
            assert not waiting.done()
            assert await b.barrier(k).release() is True
            assert await waiting is True
            # A cancelled wait ends at once.
            await gate.hold()
            w = asyncio.ensure_future(gate.wait())
            await asyncio.sleep(0.05)
            w.cancel()
            with pytest.raises(asyncio.CancelledError):
                await w
            await gate.release()

    asyncio.run(main())


def test_aio_double_barrier_of_two(devserver):
    p = key("double")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            x, y = a.double_barrier(p, 2), b.double_barrier(p, 2)
            assert await x.enter(timeout=0.3) is False and not x.is_entered()
            assert await asyncio.gather(x.enter(timeout=10), y.enter(timeout=10)) == [True, True]
            assert await x.leave(timeout=0.3) is False
            assert await y.leave(timeout=10) is True
            order = []

            async def member(barrier, name):
                async with barrier:
                    order.append(name)
                return barrier.is_entered()

            assert await asyncio.gather(member(x, "x"), member(y, "y")) == [False, False]
            assert sorted(order) == ["x", "y"]

    asyncio.run(main())


def test_aio_counter_races_and_watch(devserver):
    k = key("counter")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            c1, c2 = a.counter(k), b.counter(k)
            assert await c1.get() == 0

            async def adds(c, n):
                for _ in range(n):
                    await c.increment()

            await asyncio.gather(adds(c1, 30), adds(c2, 30), adds(c1, 30))
            assert await c2.get() == 90
            await c1.set(5)
            won = await asyncio.gather(c1.compare_and_set(5, 1), c2.compare_and_set(5, 2))
            assert sorted(won) == [False, True]
            assert await c1.get() == (1 if won[0] else 2)
            assert await c1.decrement() == (0 if won[0] else 1)
            watch = c2.watch()
            first = await watch.next(timeout=10)
            assert first == await c1.get()
            assert await watch.next(timeout=0.2) is None
            await c1.set(42)
            async for value in watch:
                assert value == 42
                break
            watch.close()
            await a.kv_delete(k)

    asyncio.run(main())


def test_aio_group_join_members_watch_and_loss(devserver):
    p = key("group")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            group = a.group(p)
            watch = group.watch()
            snap = await watch.next(timeout=10)
            assert snap.kind == "snapshot" and snap.members == []
            m = await group.join("a", b"1")
            ev = await watch.next(timeout=10)
            assert ev.kind == "joined" and ev.id == "a"
            async with await b.group(p).join("b", "2") as other:
                assert [x.id for x in await group.members()] == ["a", "b"]
                assert (await watch.next(timeout=10)).id == "b"
            ev = await watch.next(timeout=10)
            assert ev.kind == "left" and ev.id == "b" and other.lost_reason == "left"
            await m.update_value("3")
            ev = await watch.next(timeout=10)
            assert ev.kind == "updated" and ev.member.value == b"3"
            lost = asyncio.ensure_future(m.wait_lost(timeout=10))
            await asyncio.sleep(0.05)
            assert not lost.done()
            destroy_session(devserver, m.session.id)
            assert await lost == "session_lost"
            async for ev in watch:
                assert ev.kind == "left" and ev.id == "a"
                break
            with pytest.raises(baton.TimeoutError):
                await (await group.join("c", b"")).wait_lost(timeout=0.1)
            watch.close()

    asyncio.run(main())


def test_aio_leader_task_is_cancelled_on_loss_and_requeues(devserver):
    k = key("lt")

    async def main():
        async with baton.aio.Client(devserver) as a:
            stopped = []
            lt = a.leader_task(k, b"me", requeue_delay=0.05, on_stopped_leading=stopped.append)
            stop = baton.CancelToken()
            terms = []

            async def task(token):
                terms.append(lt.sequencer)
                if len(terms) == 1:
                    # Lose the first term: the session is destroyed by someone else.
                    destroy_session(devserver, lt.sequencer.session)
                    try:
                        await asyncio.sleep(30)
                    except asyncio.CancelledError:
                        assert token.cancelled()
                        terms.append("cancelled")
                        raise
                else:
                    stop.cancel()

            await asyncio.wait_for(lt.run(task, stop), 30)
            assert terms[1] == "cancelled"
            assert len(terms) == 3 and terms[2].token > terms[0].token
            assert stopped[0] == "lost" and stopped[-1] in ("returned", "stopped")
            assert not lt.is_leader()
            assert await a.leader(k) is None

            # Without requeue a failing task's exception comes out of run.
            once = a.leader_task(key("lt-fail"), b"x", requeue=False)

            async def fails(token):
                raise KeyError("boom")

            with pytest.raises(KeyError):
                await once.run(fails)

            # Cancelling the awaiting task cancels the term's task and resigns.
            lt2 = a.leader_task(key("lt-cancel"), b"y")
            started = asyncio.Event()

            async def forever(token):
                started.set()
                await asyncio.sleep(60)

            runner = asyncio.ensure_future(lt2.run(forever))
            await started.wait()
            runner.cancel()
            with pytest.raises(asyncio.CancelledError):
                await runner
            assert not lt2.is_leader()

    asyncio.run(main())


def test_aio_pending_waits_add_no_threads(devserver):
    """200 barrier waits, 100 read-lock acquires, 100 double-barrier enters (one barrier), 100
    watch nexts (a counter's and a group's) and 100 member losses pending at once cost no
    thread each: the count of threads (the kernel's, /proc/self/task, and Python's) stays
    within the clients' own few (their bounded step pool, one long poll per watched prefix)."""
    k, p = key("no-thread-b"), key("no-thread-rw")

    async def main():
        async with baton.aio.Client(devserver) as a, baton.aio.Client(devserver) as b:
            gate = a.barrier(k)
            assert await gate.hold()
            w = a.write_lock(p)
            assert await w.acquire(timeout=5)
            counter = a.counter(key("no-thread-c"))
            group = a.group(key("no-thread-g"))
            member = await group.join("m", b"")
            # Warm up: each kind of call once, so that the clients' own threads exist.
            assert await b.barrier(k).wait(timeout=0) is False
            assert await b.read_lock(p).acquire(timeout=0) is False
            assert await b.double_barrier(key("warm"), 2).enter(timeout=0) is False
            before_py, before = threading.active_count(), threads()
            waits = [asyncio.ensure_future(b.barrier(k).wait(timeout=30)) for _ in range(200)]
            waits += [asyncio.ensure_future(b.read_lock(p).acquire(timeout=30)) for _ in range(100)]
            # 100 participants of one double barrier of 126: no round opens.
            db = key("db")
            enters = [asyncio.ensure_future(b.double_barrier(db, 126).enter(timeout=30))
                      for _ in range(100)]
            watches = [counter.watch() for _ in range(50)] + [group.watch() for _ in range(50)]
            for watch in watches:
                await watch.next(timeout=10)
            nexts = [asyncio.ensure_future(watch.next(timeout=30)) for watch in watches]
            losses = [asyncio.ensure_future(member.wait_lost(timeout=30)) for _ in range(100)]
            await asyncio.sleep(0.5)
            during_py, during = threading.active_count(), threads()
            pending = waits + enters + nexts + losses
            assert not any(t.done() for t in pending)
            assert await gate.release()
            assert all(await asyncio.gather(*waits[:200]))
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for watch in watches:
                watch.close()
            await w.release()
            await member.leave()
            return before_py, before, during_py, during

    before_py, before, during_py, during = asyncio.run(main())
    assert during_py == before_py, f"Python threads {before_py} -> {during_py}"
    assert during - before < 20, f"{before} threads before, {during} with 700 waits pending"
