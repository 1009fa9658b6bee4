"""`baton.aio` takes an acquire's timeout as the synchronous API does (issue 22: `timeout=-1`,
"wait without limit" for `Lock.acquire` as for `threading.Lock.acquire`, was a ValueError in
`baton.aio`)."""

import asyncio
import math
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio
def key(name: str) -> str:
    return f"py-test/aio-timeout/{name}/{uuid.uuid4()}"


@pytest.mark.parametrize("make", ["lock", "semaphore"])
def test_minus_one_waits_without_limit_in_both_apis(devserver, make):
    async def main():
        c = baton.aio.Client(devserver)
        try:
            holder = c.lock(key("l")) if make == "lock" else c.semaphore(key("s"), 1)
            k = holder.sync.key if make == "lock" else holder.sync.prefix
            assert await holder.acquire(timeout=-1)
            other = c.lock(k) if make == "lock" else c.semaphore(k, 1)
            # A waiter with timeout=-1 is still waiting when the holder lets go, then gets it.
            waiter = asyncio.ensure_future(other.acquire(timeout=-1))
            await asyncio.sleep(0)  # one loop turn: a refused timeout would have raised in it
            assert not waiter.done()
            await holder.release()
            assert await asyncio.wait_for(waiter, 10)
            await other.release()
            # The same values are refused the same way by both APIs.
            for bad in (-2, math.nan):
                with pytest.raises(ValueError) as aio_err:
                    await holder.acquire(timeout=bad)
                with pytest.raises(ValueError) as sync_err:
                    holder.sync.acquire(timeout=bad)
                assert "timeout" in str(aio_err.value) and "timeout" in str(sync_err.value)
        finally:
            await c.close()

    asyncio.run(main())
