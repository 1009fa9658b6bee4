"""`baton.aio`'s warm path: a lock's acquire and release whose one request the event loop
writes and reads itself (bindings/python/src/warm.rs, started by bindings/python/src/aio_start.rs),
and what it leaves when its task is cancelled or its time runs out while the request is on its
way."""

import asyncio
import contextvars
import errno
import gc
import json
import os
import socket
import time
import urllib.request
import uuid
import weakref

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio
import consul_baton._loop as baton_loop


def key(name: str) -> str:
    return f"py-test/aio-warm/{name}/{uuid.uuid4()}"


def latency(devserver: str, d: str) -> None:
    req = urllib.request.Request(f"http://{devserver}/_devserver/latency?d={d}", method="PUT")
    urllib.request.urlopen(req, timeout=10).read()


def holder(devserver: str, k: str):
    """The session holding `k` (read with a plain request, not through baton)."""
    try:
        with urllib.request.urlopen(f"http://{devserver}/v1/kv/{k}", timeout=10) as r:
            return json.loads(r.read())[0].get("Session")
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise


def wait_free(devserver: str, k: str) -> None:
    """Until nobody holds `k` (a failure bound, not a speed assertion)."""
    end = time.monotonic() + 20
    while holder(devserver, k) is not None:
        assert time.monotonic() < end, f"{k} stayed held"
        time.sleep(0.01)


async def after_a_cycle(c, name: str):
    """A lock of `c` on a new key, after one cycle (the key known free, the loop connection
    open): its next calls are warm."""
    k = key(name)
    lock = c.lock(k)
    assert await lock.acquire(timeout=10)
    await lock.release()
    return k, lock


async def nothing_left(devserver: str, k: str, lock) -> None:
    """Nothing held by `lock` any more, here or in Consul, and its turn and claim are free
    again: the next acquire goes through."""
    assert not lock.locked()
    wait_free(devserver, k)
    assert await lock.acquire(timeout=10)
    await lock.release()


def running_hub():
    """The running loop's hub (`_loop._LoopHub`)."""
    hub = baton.aio._hub(asyncio.get_running_loop())
    assert hub is not None
    return hub


def test_warm_calls_need_no_baton_thread(devserver, count_baton_threads, consul_before):
    """After one cold cycle (which opens the loop connection), acquires and releases run on
    the loop: no call goes to a baton thread, and each holds and releases as a cold one. On a
    Consul before 1.6.2 (which stores txn numbers through a float64; the server says its
    version) a lock is written as Go writes it, in two requests, and its acquire never takes
    the warm path."""
    warm_acquires = not consul_before("1.6.2")

    async def main():
        async with baton.aio.Client(devserver) as c:
            k, lock = await after_a_cycle(c, "cycle")
            threads = count_baton_threads()
            session = None
            for _ in range(5):
                assert await lock.acquire(timeout=10)
                assert lock.locked()
                assert lock.sequencer is not None
                session = lock.sequencer.session
                assert holder(devserver, k) == session
                await lock.release()
                assert not lock.locked()
                assert holder(devserver, k) is None
            if warm_acquires:
                assert threads == [], f"calls went to baton threads: {threads}"
            else:
                # Acquires go to a thread (two requests each, as Go writes a lock); releases
                # (one `PUT ?release=`) stay warm.
                assert threads == [lock.sync._start_acquire] * 5, threads
            # Not held: a warm release raises what the cold one does.
            with pytest.raises(baton.NotHeldError):
                await lock.release()

    asyncio.run(main())


class _NoReaders(asyncio.SelectorEventLoop):
    """A loop that cannot watch a descriptor, as the Windows proactor loop cannot."""

    def add_reader(self, *args):
        raise NotImplementedError


def test_each_loop_run_in_a_thread_gets_its_own_warm_path(
        devserver, count_baton_threads, consul_before):
    """The loop a thread last made a warm call on, and its hub, are remembered between calls
    (natively, `aio_start.rs`): a loop run after another in the same thread, while the other
    is still alive or after one without readers, never takes the other's. A loop without
    readers makes every call on a baton thread; the loops around it stay warm."""
    warm_acquires = not consul_before("1.6.2")
    threads = count_baton_threads()

    async def cycles(name):
        async with baton.aio.Client(devserver) as c:
            k, lock = await after_a_cycle(c, name)
            threads.clear()
            for _ in range(3):
                assert await lock.acquire(timeout=10)
                assert holder(devserver, k) == lock.sequencer.session
                await lock.release()
                assert holder(devserver, k) is None
            return lock, list(threads)

    def expect_warm(lock, started):
        assert started == ([] if warm_acquires else [lock.sync._start_acquire] * 3), started

    first, second, no_readers = asyncio.new_event_loop(), asyncio.new_event_loop(), _NoReaders()
    try:
        expect_warm(*first.run_until_complete(cycles("first")))
        expect_warm(*second.run_until_complete(cycles("second")))
        lock, started = no_readers.run_until_complete(cycles("no-readers"))
        assert started == [lock.sync._start_acquire, lock.sync._start_release] * 3, started
        expect_warm(*first.run_until_complete(cycles("first-again")))
    finally:
        for loop in (first, second, no_readers):
            loop.close()


def test_a_warm_acquire_cancelled_in_flight_leaves_nothing_held(devserver, dev_only):
    dev_only("latency fault")

    async def main():
        async with baton.aio.Client(devserver) as c:
            k, lock = await after_a_cycle(c, "cancel")
            latency(devserver, "300ms")
            try:
                task = asyncio.ensure_future(lock.acquire(timeout=10))
                await asyncio.sleep(0)  # the task starts: its request is written at once
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            finally:
                latency(devserver, "0s")
            await nothing_left(devserver, k, lock)

    asyncio.run(main())


def test_a_warm_acquire_whose_time_runs_out_in_flight_returns_false_holding_nothing(
        devserver, dev_only):
    dev_only("latency fault")

    async def main():
        async with baton.aio.Client(devserver) as c:
            k, lock = await after_a_cycle(c, "timeout")
            latency(devserver, "300ms")
            try:
                assert await lock.acquire(timeout=0.05) is False
            finally:
                latency(devserver, "0s")
            await nothing_left(devserver, k, lock)

    asyncio.run(main())


def test_warm_calls_register_their_connection_with_the_loop_once(devserver, consul_before):
    """The loop keeps a warm call's connection registered between calls (a duplicate of its
    socket, `aio._Conn`): twenty cycles on one connection register nothing more. Before Consul
    1.6.2 an acquire is not warm: it runs on a baton thread, which may take the same
    connection from the pool, and the loop then lets it go and registers it again for the
    release: at most once a cycle."""
    warm_acquires = not consul_before("1.6.2")

    async def main():
        loop = asyncio.get_running_loop()
        async with baton.aio.Client(devserver) as c:
            _, lock = await after_a_cycle(c, "registered")
            assert await lock.acquire(timeout=10)
            await lock.release()
            registered = []
            real = loop.add_reader

            def counting(fd, callback, *args):
                registered.append(fd)
                return real(fd, callback, *args)

            loop.add_reader = counting  # type: ignore[method-assign]
            try:
                for _ in range(20):
                    assert await lock.acquire(timeout=10)
                    await lock.release()
            finally:
                del loop.add_reader
            if warm_acquires:
                assert registered == [], f"registered again: {registered}"
            else:
                assert len(registered) <= 20, f"registered more than once a cycle: {registered}"

    asyncio.run(main())


def test_a_connection_baton_drops_is_let_go_by_the_loop(devserver):
    """baton shuts down a connection it drops (here: all of them, as the client closes), so
    the loop's duplicate of it turns readable and the loop lets it go, closing it."""

    async def main():
        hub = running_hub()
        async with baton.aio.Client(devserver) as c:
            await after_a_cycle(c, "dropped")
            assert len(hub.live_conns()) == 1
            (conn,) = hub.live_conns()
            dup = conn.fd
            inode = os.fstat(dup).st_ino
        end = time.monotonic() + 20
        while hub.live_conns():
            assert time.monotonic() < end, "the loop kept a connection the client closed"
            await asyncio.sleep(0.01)
        try:
            still = os.fstat(dup).st_ino == inode
        except OSError:
            still = False
        assert not still, "the duplicate of the dropped connection is still open"

    asyncio.run(main())


def test_a_warm_call_is_given_up_on_time_behind_an_earlier_timer(devserver, dev_only):
    """One timer serves every warm call of a loop. A call whose time ends after the timer left
    by an earlier call (which ended long before) is still given up when its own time is up."""
    dev_only("latency fault")

    async def main():
        async with baton.aio.Client(devserver) as c:
            k, lock = await after_a_cycle(c, "timer")
            # Leaves a timer for 0.3 s from now (the call itself ends at once).
            assert await lock.acquire(timeout=0.3)
            await lock.release()
            latency(devserver, "2s")
            try:
                # Its time (0.6 s) ends after that timer: the timer finds nothing due and is
                # set again for this call, which is given up before its answer (2 s) comes.
                assert await lock.acquire(timeout=0.6) is False
            finally:
                latency(devserver, "0s")
            await nothing_left(devserver, k, lock)

    asyncio.run(main())


def test_a_warm_answer_resumes_its_task_in_the_same_turn_of_the_loop(
        devserver, consul_before, monkeypatch):
    """The answer to a warm call resumes the awaiting task inside the loop callback that read
    it (`_native._wake_now`), not a turn later: with the loop's polling off, a warm cycle of
    acquire and release takes one poll of the selector per request. The task resumes as
    itself, in its own context."""
    warm_acquires = not consul_before("1.6.2")
    monkeypatch.setattr(baton_loop._LoopHub, "SPIN", False)
    var = contextvars.ContextVar("var")

    async def main():
        loop = asyncio.get_running_loop()
        async with baton.aio.Client(devserver) as c:
            _, lock = await after_a_cycle(c, "same-turn")
            me = asyncio.current_task()
            var.set("mine")
            selector = loop._selector  # type: ignore[attr-defined]
            polls = []
            real = selector.select

            def counting(timeout=None):
                polls.append(timeout)
                return real(timeout)

            selector.select = counting
            try:
                for _ in range(20):
                    assert await lock.acquire(timeout=10)
                    assert asyncio.current_task() is me and var.get() == "mine"
                    await lock.release()
                    assert asyncio.current_task() is me and var.get() == "mine"
            finally:
                del selector.select
            if warm_acquires:
                assert len(polls) == 40, f"{len(polls)} polls for 40 warm requests"

    asyncio.run(main())


def test_a_loop_out_of_descriptors_takes_the_cold_path(devserver, monkeypatch):
    """When the duplicate of a connection cannot be made (the process has no descriptor
    left), a warm call goes on on a baton thread: it still holds and releases, and the loop
    registers nothing."""

    def no_descriptor(fd):
        raise OSError(errno.EMFILE, "Too many open files")

    async def main():
        hub = running_hub()
        async with baton.aio.Client(devserver) as c:
            k = key("emfile")
            lock = c.lock(k)
            monkeypatch.setattr(baton_loop.os, "dup", no_descriptor)
            for _ in range(3):
                assert await lock.acquire(timeout=10)
                assert holder(devserver, k) == lock.sequencer.session
                await lock.release()
                assert holder(devserver, k) is None
            assert hub.live_conns() == []

    asyncio.run(main())


def test_a_warm_call_does_not_keep_the_loop_polling(devserver, dev_only, monkeypatch):
    """The loop polls instead of sleeping only for a call on a baton thread: a warm call's
    answer comes on the socket the loop sleeps on, as a blocking call's does, so polling
    would only spend a core. A release is warm on every Consul version."""
    dev_only("latency fault")
    monkeypatch.setattr(baton_loop._LoopHub, "SPIN", True)

    async def main():
        hub = running_hub()
        async with baton.aio.Client(devserver) as c:
            _, lock = await after_a_cycle(c, "no-poll")
            assert await lock.acquire(timeout=10)
            hub.quick = 1.0  # recent calls were quick: a call that may poll would
            latency(devserver, "20ms")
            try:
                task = asyncio.ensure_future(lock.release())
                await asyncio.sleep(0)  # the task writes its request
                assert [conn for conn in hub.live_conns() if conn.call is not None], \
                    "the release is not in flight as a warm call"
                assert not hub.spinning
                await task
            finally:
                latency(devserver, "0s")

    asyncio.run(main())


def test_wake_now_steps_the_task_from_a_loop_callback_but_not_from_inside_a_task():
    """`_wake_now` runs the awaiting task's step at once when called from a loop callback (as
    the warm path's reader is), and leaves it to the loop when a task is running (a loop
    re-entered from inside a task): one task cannot step inside another's."""

    def wake_now(fut, value):
        baton_loop._native._wake_now(fut, value, baton_loop._running_task)

    async def main():
        loop = asyncio.get_running_loop()
        order = []

        async def waiter(fut):
            order.append(("got", await fut))

        # From a loop callback: the waiter has stepped when `_wake_now` returns.
        fut = loop.create_future()
        task = asyncio.ensure_future(waiter(fut))
        await asyncio.sleep(0)  # the waiter awaits `fut`
        called = loop.create_future()

        def callback():
            wake_now(fut, 1)
            order.append("returned")
            called.set_result(None)

        loop.call_soon(callback)
        await called
        await task
        assert order == [("got", 1), "returned"]

        # From inside this task: the waiter steps later, in a turn of its own.
        order.clear()
        fut = loop.create_future()
        task = asyncio.ensure_future(waiter(fut))
        await asyncio.sleep(0)
        wake_now(fut, 2)
        order.append("returned")
        await task
        assert order == ["returned", ("got", 2)]

    asyncio.run(main())


def test_a_warm_acquire_too_big_for_one_write_waits_to_write(
        devserver, consul_before, monkeypatch, count_baton_threads):
    """A warm acquire whose request does not fit the socket's send buffer in one write has the
    loop poll for writing until it is out (`_LoopHub._write_interest`), then for the answer:
    the call settles on the loop (no baton thread), the value arrives whole, and the loop
    polls nothing for writing afterwards."""
    if consul_before("1.6.2"):
        pytest.skip("acquires are warm from Consul 1.6.2 (before it, they run on a baton thread)")
    value = os.urandom(300 * 1024)  # within txn_max_req_len once base64-encoded
    interest = []
    real = baton_loop._LoopHub._write_interest

    def spying(self, conn, on):
        interest.append(on)
        return real(self, conn, on)

    monkeypatch.setattr(baton_loop._LoopHub, "_write_interest", spying)

    async def main():
        hub = running_hub()
        async with baton.aio.Client(devserver) as c:
            k = key("big")
            lock = c.lock(k, value=value)
            assert await lock.acquire(timeout=10)  # cold: opens the loop connection
            await lock.release()
            assert await lock.acquire(timeout=10)  # warm: registers it with the loop
            await lock.release()
            # Loopback takes the whole request in one write; a small send buffer on the
            # connection (through a duplicate of its socket) does not.
            (conn,) = hub.live_conns()
            with socket.fromfd(conn.fd, socket.AF_INET, socket.SOCK_STREAM) as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            threads = count_baton_threads()
            for _ in range(3):
                interest.clear()
                assert await lock.acquire(timeout=10)
                assert threads == [], f"the acquire went on on a baton thread: {threads}"
                with urllib.request.urlopen(f"http://{devserver}/v1/kv/{k}?raw", timeout=10) as r:
                    assert r.read() == value
                assert interest[:1] == [True] and interest[-1:] == [False], interest
                assert not any(conn.writing for conn in hub.live_conns())
                await lock.release()
            await nothing_left(devserver, k, lock)

    asyncio.run(main())


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_loop_dropped_with_a_warm_call_in_flight_is_collected(devserver, dev_only):
    """A loop dropped unclosed while a warm call is in flight on it (its connection's
    registration holds the call's future, which holds the loop) is collected with it: the
    garbage collector sees through the connection (`LoopConn.__traverse__`), and the
    connection's duplicate is closed."""
    dev_only("latency fault")
    loop = asyncio.new_event_loop()
    c = baton.aio.Client(devserver)

    async def start():
        _, lock = await after_a_cycle(c, "dropped-loop")
        assert await lock.acquire(timeout=10)
        latency(devserver, "5s")
        # A release: warm on every Consul version (an acquire is from 1.6.2).
        task = asyncio.ensure_future(lock.release())
        await asyncio.sleep(0)  # the task writes its request
        hub = running_hub()
        (conn,) = [conn for conn in hub.live_conns() if conn.call is not None]
        return task, weakref.ref(conn), conn.fd, os.fstat(conn.fd).st_ino, weakref.ref(hub)

    try:
        task, conn, fd, inode, hub = loop.run_until_complete(start())
        loop_ref = weakref.ref(loop)
        # Nothing here keeps the loop: only the cycle through the connection's registration.
        task._log_destroy_pending = False  # type: ignore[attr-defined]
        del task, loop
        gc.collect()
        assert loop_ref() is None, "the loop was kept"
        assert conn() is None and hub() is None, "the connection or its hub was kept"
        try:
            still = os.fstat(fd).st_ino == inode
        except OSError:
            still = False
        assert not still, "the duplicate of the connection is still open"
    finally:
        latency(devserver, "0s")
        c.sync.close()
