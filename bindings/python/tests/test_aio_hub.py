"""`baton.aio` reports outcomes through one hub per event loop (a queue and a socket the loop
reads), so baton threads never take the GIL for it; the thread that delivered an outcome stays
awake for the next call until the loop's turn that took it is over, and the loop polls briefly
while a call made in that turn is young. These tests pin what that must not break."""

import asyncio
import gc
import os
import time
import uuid

import consul_baton as baton
import consul_baton.aio  # baton.aio
from consul_baton import aio as baton_aio


def key(name: str) -> str:
    return f"py-test/aio-hub/{name}/{uuid.uuid4()}"


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def eventually(cond, secs: float = 10.0) -> bool:
    end = time.monotonic() + secs
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_hubs_of_finished_loops_are_freed(devserver):
    """Each asyncio.run() makes a loop and its hub; both go with the loop (no socket leak)."""

    async def once(c):
        assert await c.kv_get(key("missing")) is None

    with baton.Client(devserver) as sync:
        c = baton.aio.Client(sync=sync)
        asyncio.run(once(c))  # the first one may open pooled connections
        gc.collect()
        before = open_fds()
        for _ in range(30):
            asyncio.run(once(c))
        gc.collect()
        assert open_fds() <= before + 2, f"{open_fds() - before} more fds after 30 loops"
        assert len(baton_aio._hubs) <= 1


def test_an_acquire_finishing_after_its_loop_is_gone_is_released(devserver):
    """Nobody will ever see that acquire succeed: it must not stay held."""
    k = key("orphan")
    with baton.Client(devserver) as a, baton.Client(devserver) as b:
        holder = a.lock(k)
        assert holder.acquire(timeout=10)
        orphan = b.lock(k)
        aio_orphan = baton.aio.Lock(orphan)
        loop = asyncio.new_event_loop()
        task = loop.create_task(aio_orphan.acquire(timeout=30))
        loop.run_until_complete(asyncio.sleep(0.05))
        assert not task.done()
        # The loop goes without cancelling the task (as when a thread running it dies).
        loop.close()
        task._log_destroy_pending = False  # the warning this provokes on purpose
        del task, loop
        gc.collect()
        holder.release()
        # The acquire succeeds on a baton thread (the key's LockIndex goes from 1 to 2), finds
        # nobody awaiting it, and releases.
        def orphan_acquired_and_released():
            e = a.kv_get_entry(k)
            return e is not None and e.lock_index == 2 and e.session is None

        assert eventually(orphan_acquired_and_released), f"the orphaned acquire: {a.kv_get_entry(k)}"
        assert not orphan.locked()
        assert holder.acquire(timeout=10)
        holder.release()


def test_outcomes_reach_the_loop_that_awaits_them(devserver):
    """Two threads, each with its own loop and client calls in flight at once."""
    import threading

    results = {}

    def run(name):
        async def main():
            async with baton.aio.Client(devserver) as c:
                k = key(name)
                lock = c.lock(k)
                for _ in range(50):
                    assert await lock.acquire(timeout=10)
                    await lock.release()
                results[name] = threading.get_ident()

        asyncio.run(main())

    threads = [threading.Thread(target=run, args=(f"t{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) == ["t0", "t1"]


def test_an_outcome_opens_a_turn_that_ends_after_the_woken_tasks_ran(devserver):
    """The baton thread that delivered an outcome stays awake for the next call until the
    loop's turn that took the outcome is over: that turn must last until the task it woke has
    run (so a release right after an acquire finds the thread awake), and end after it (so an
    idle loop lets the thread park)."""

    async def main(c):
        hub = baton_aio._hub(asyncio.get_running_loop()).native
        await asyncio.sleep(0)
        assert not hub.in_turn()
        await c.kv_get(key("turn"))
        # This task's step is part of the turn that took the outcome ...
        assert hub.in_turn()
        # ... which is over once the callbacks queued behind it have run.
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert not hub.in_turn()

    with baton.Client(devserver) as sync:
        asyncio.run(main(baton.aio.Client(sync=sync)))
