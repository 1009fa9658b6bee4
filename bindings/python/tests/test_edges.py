"""Edge cases of the Python binding: out-of-range durations, and a sync observer that keeps
iterating across "no leader".

Durations follow CPython's ``threading.Lock.acquire`` / ``time.sleep``: NaN and negative
values raise ``ValueError``, values above ``threading.TIMEOUT_MAX`` on 64-bit Linux
(9223372036 s, infinity included) raise ``OverflowError``. Neither may surface as
``pyo3_runtime.PanicException``, which derives from ``BaseException``: the tests assert the
exact exception type.
"""

import asyncio
import math
import queue
import threading
import time
import uuid

import pytest

import consul_baton as baton
import consul_baton.aio  # baton.aio
MAX_SECONDS = 9223372036.0  # threading.TIMEOUT_MAX on 64-bit Linux
WAIT = 10.0  # the bound of every wait on the dev server

# 1e19 fits a Rust Duration but overflowed `Instant::now() + t` (a panic in the core or the
# binding); 1e20 and beyond did not even fit a Duration.
TOO_LARGE = [MAX_SECONDS + 1, 1e19, 1e20, 1e300, math.inf]
INVALID = [-0.5, -2.0, math.nan]


def key(name: str) -> str:
    return f"py-test/edges/{name}/{uuid.uuid4()}"


def expected_error(value: float) -> type:
    return ValueError if math.isnan(value) or value < 0 else OverflowError


def assert_raises_exactly(exc_type: type, param: str, call) -> None:
    """`call()` raises exactly `exc_type` (not a subclass, and not a BaseException such as
    PanicException) with a message naming `param`. It runs on a thread so that a call that
    wrongly accepted its duration and waits on fails the test after WAIT instead of hanging."""
    outcome = []

    def run():
        try:
            outcome.append(("returned", call()))
        except BaseException as e:  # noqa: B036 - PanicException is a BaseException
            outcome.append(("raised", e))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(WAIT)
    assert outcome, f"still running after {WAIT} s; expected {exc_type.__name__}"
    how, what = outcome[0]
    assert how == "raised", f"returned {what!r}; expected {exc_type.__name__}"
    assert type(what) is exc_type, (
        f"expected {exc_type.__name__}, got {type(what).__module__}.{type(what).__name__}: {what}"
    )
    assert param in str(what), f"{param!r} not named in {str(what)!r}"


@pytest.fixture
def fresh(devserver):
    """A client of the test's own (some cases close it)."""
    c = baton.Client(devserver)
    yield c
    c.close()


# Each case: (parameter name as it appears in the message, factory taking (client, value)
# and returning a zero-argument call).
SYNC_CASES = {
    "Client(request_timeout)": ("request_timeout", lambda c, v: lambda: baton.Client(c.address, request_timeout=v)),
    "create_session(ttl)": ("ttl", lambda c, v: lambda: c.create_session(ttl=v)),
    "create_session(lock_delay)": ("lock_delay", lambda c, v: lambda: c.create_session(lock_delay=v)),
    "Client.close(timeout)": ("timeout", lambda c, v: lambda: c.close(timeout=v)),
    "Session.wait_lost(timeout)": ("timeout", lambda c, v: lambda: c.default_session().wait_lost(timeout=v)),
    "Lock.acquire(timeout)": ("timeout", lambda c, v: lambda: c.lock(key("lock")).acquire(timeout=v)),
    "Lock.wait_lost(timeout)": ("timeout", lambda c, v: lambda: c.lock(key("lock")).wait_lost(timeout=v)),
    "Semaphore.acquire(timeout)": ("timeout", lambda c, v: lambda: c.semaphore(key("sem"), 2).acquire(timeout=v)),
    "Election.campaign(timeout)": ("timeout", lambda c, v: lambda: c.election(key("el")).campaign(b"x", timeout=v)),
    "Election.wait_lost(timeout)": ("timeout", lambda c, v: lambda: c.election(key("el")).wait_lost(timeout=v)),
    "Observer.next(timeout)": ("timeout", lambda c, v: lambda: c.election(key("el")).observe().next(timeout=v)),
}


@pytest.mark.parametrize("value", TOO_LARGE + INVALID, ids=repr)
@pytest.mark.parametrize("case", sorted(SYNC_CASES))
def test_sync_durations_out_of_range_raise_value_or_overflow_error(fresh, case, value):
    param, make = SYNC_CASES[case]
    assert_raises_exactly(expected_error(value), param, make(fresh, value))
    assert not fresh.closed  # a refused close() did nothing


def aio_call(devserver: str, value: float, body):
    """Runs `body(aio_client, value)` (a coroutine) in a fresh event loop, bounded."""

    async def main():
        async with baton.aio.Client(devserver) as a:
            await asyncio.wait_for(body(a, value), WAIT)

    return lambda: asyncio.run(main())


def _no_op(ok, value):
    pass


AIO_CASES = {
    "aio Lock.acquire(timeout)": lambda a, v: a.lock(key("lock")).acquire(timeout=v),
    "aio Lock.wait_lost(timeout)": lambda a, v: a.lock(key("lock")).wait_lost(timeout=v),
    "aio Semaphore.acquire(timeout)": lambda a, v: a.semaphore(key("sem"), 2).acquire(timeout=v),
    "aio Semaphore.wait_lost(timeout)": lambda a, v: a.semaphore(key("sem"), 2).wait_lost(timeout=v),
    "aio Election.campaign(timeout)": lambda a, v: a.election(key("el")).campaign(b"x", timeout=v),
    "aio Election.wait_lost(timeout)": lambda a, v: a.election(key("el")).wait_lost(timeout=v),
    "aio Client.close(timeout)": lambda a, v: a.close(timeout=v),
}


@pytest.mark.parametrize("value", TOO_LARGE + INVALID, ids=repr)
@pytest.mark.parametrize("case", sorted(AIO_CASES))
def test_aio_durations_out_of_range_raise_value_or_overflow_error(devserver, case, value):
    assert_raises_exactly(expected_error(value), "timeout", aio_call(devserver, value, AIO_CASES[case]))


@pytest.mark.parametrize("value", TOO_LARGE + INVALID, ids=repr)
def test_aio_observer_next_timeout_out_of_range(client, value):
    # The native half of `async for` over `observe()`; the timeout is refused before any
    # thread starts, so `done` is never called.
    events = client.election(key("el"))._observe_stream()
    assert_raises_exactly(expected_error(value), "timeout", lambda: events._start_next(_no_op, value))


def test_acquire_keeps_threading_semantics(client):
    lock = client.lock(key("lock"))
    # -1 waits forever (the lock is free, so at once); other negatives are refused.
    assert lock.acquire(timeout=-1) is True
    lock.release()
    assert_raises_exactly(ValueError, "timeout", lambda: lock.acquire(timeout=-1.5))
    assert_raises_exactly(ValueError, "non-blocking", lambda: lock.acquire(blocking=False, timeout=1e300))
    # The largest accepted timeout, as threading.Lock().acquire(timeout=threading.TIMEOUT_MAX).
    assert lock.acquire(timeout=MAX_SECONDS) is True
    lock.release()
    # An int too large for a float is refused by the conversion itself.
    assert_raises_exactly(OverflowError, "float", lambda: lock.acquire(timeout=10**400))
    assert not lock.locked()


def test_error_messages_name_the_parameter_and_value(devserver, client):
    with pytest.raises(OverflowError, match=r"request_timeout must be at most 9223372036 seconds.*got 1e\+20"):
        baton.Client(devserver, request_timeout=1e20)
    with pytest.raises(OverflowError, match=r"ttl must be at most .*got inf"):
        client.create_session(ttl=math.inf)
    with pytest.raises(ValueError, match=r"lock_delay must be a number of seconds, got nan"):
        client.create_session(lock_delay=math.nan)
    with pytest.raises(ValueError, match=r"timeout must be a non-negative number of seconds, got -0\.5"):
        client.default_session().wait_lost(timeout=-0.5)


def test_largest_durations_reach_the_core_without_panicking(devserver):
    # The core adds these to Instant::now(); the maximum must be safe there.
    with baton.Client(devserver, request_timeout=MAX_SECONDS) as c:
        assert c.kv_put(key("kv"), b"v") is True
        lock = c.lock(key("lock"))
        assert lock.acquire(timeout=MAX_SECONDS) is True
        lock.release()
        election = c.election(key("el"))
        assert election.campaign(b"x", timeout=MAX_SECONDS) is True
        assert election.observe().next(timeout=MAX_SECONDS).value == b"x"
        assert election.resign() is True
        assert election.wait_lost(timeout=MAX_SECONDS) == "released"
        with pytest.raises(baton.TimeoutError):
            c.default_session().wait_lost(timeout=0.05)
        assert c.close(timeout=MAX_SECONDS) is True


# --- the synchronous observer across leader -> no leader -> new leader ----------------------


class Watcher:
    """Runs `for leader in observer:` on a thread and hands each item over a queue."""

    END = object()

    def __init__(self, observer: baton.Observer) -> None:
        self.items: "queue.Queue[object]" = queue.Queue()
        self.ended_by: "BaseException | None" = None
        self.thread = threading.Thread(target=self._run, args=(observer,), daemon=True)
        self.thread.start()

    def _run(self, observer: baton.Observer) -> None:
        try:
            for leader in observer:
                self.items.put(leader.value if leader is not None else None)
        except BaseException as e:  # noqa: B036 - recorded for the test to inspect
            self.ended_by = e
        self.items.put(self.END)

    def wait_for(self, wanted) -> list:
        """Items received until `wanted` (a value, or None for no leader), within WAIT."""
        got = []
        deadline = time.monotonic() + WAIT
        while True:
            left = deadline - time.monotonic()
            try:
                item = self.items.get(timeout=max(left, 0))
            except queue.Empty:
                pytest.fail(f"no {wanted!r} within {WAIT} s; received {got}")
            if item is Watcher.END:
                pytest.fail(f"the for loop ended (by {self.ended_by!r}) before {wanted!r}; received {got}")
            got.append(item)
            if item == wanted:
                return got


def test_sync_observer_for_loop_survives_no_leader(devserver):
    k = key("observe")
    with baton.Client(devserver) as watcher_client, baton.Client(devserver) as a, baton.Client(devserver) as b:
        watcher = Watcher(watcher_client.election(k).observe())
        # The first item is the current state: nobody leads yet.
        assert watcher.wait_for(None) == [None]

        first = a.election(k)
        assert first.campaign(b"first", timeout=WAIT)
        watcher.wait_for(b"first")

        assert first.resign() is True
        watcher.wait_for(None)  # "no leader" is an item, not the end of the loop

        second = b.election(k)
        assert second.campaign(b"second", timeout=WAIT)
        watcher.wait_for(b"second")
        assert second.resign() is True
        watcher.wait_for(None)

        # Closing the observer's client ends the loop with an error, never silently.
        watcher_client.close()
        watcher.thread.join(WAIT)
        assert not watcher.thread.is_alive()
        assert isinstance(watcher.ended_by, baton.BatonError), repr(watcher.ended_by)


def test_sync_and_async_observers_yield_the_same_items(devserver):
    k = key("observe-same")
    with baton.Client(devserver) as sync_client, baton.Client(devserver) as a:
        watcher = Watcher(sync_client.election(k).observe())

        async def main():
            async with baton.aio.Client(devserver) as aio_client:
                changes = aio_client.election(k).observe()

                async def next_item():
                    leader = await asyncio.wait_for(changes.__anext__(), WAIT)
                    assert leader is None or isinstance(leader, baton.Leader)
                    return None if leader is None else leader.value

                assert await next_item() is None
                assert watcher.wait_for(None) == [None]
                election = a.election(k)
                assert election.campaign(b"one", timeout=WAIT)
                assert await next_item() == b"one"
                watcher.wait_for(b"one")
                assert election.resign() is True
                assert await next_item() is None
                watcher.wait_for(None)
                await changes.aclose()

        asyncio.run(main())
