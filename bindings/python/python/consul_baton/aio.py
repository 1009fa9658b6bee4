"""asyncio faces of baton's locks, semaphores, elections and the other recipes (read-write
and multi-key locks, leader tasks, group membership, barriers, counters).

>>> import consul_baton as baton, consul_baton.aio
>>> async def main():
...     async with baton.aio.Client() as client:
...         async with client.lock("jobs/report"):        # awaits the lock
...             ...                                        # work while holding it
...         election = client.election("svc/api/leader")
...         if await election.campaign(b"10.0.0.7:8080", timeout=5):
...             await election.resign()
...         async for leader in election.observe():        # Leader, or None: no leader
...             break

A call that waits — an acquire of a held key, a campaign, ``wait_lost`` — holds no thread
while it waits: it is a future of the Rust core, woken by the client's key watch, its timer
or a cancel, whose few baton threads make the requests (ten thousand pending acquires cost
the same threads as one; ``make bench-scale`` measures it). A short call (a release, a KV
read) runs on a baton thread reused from call to call. Either settles an asyncio future
through the loop's hub (a queue, and a socket the loop reads; baton threads never take the
GIL for it): the event loop never blocks, and the default executor's few threads are never
used. A lock's warm acquire and release
(its key known free, a plain-HTTP agent; one request each) need no thread: the loop writes the
request and reads the answer itself on a connection it polls, without blocking, and anything more
goes on on a baton thread. Cancelling the awaiting task
(``task.cancel()``, ``asyncio.wait_for`` timing out, a ``TaskGroup`` failing) cancels the wait in
the core, and the ``CancelledError`` comes once the native call has returned: an
acquisition that raced the cancellation has been released by then, so nothing is
left held. Errors are the exceptions of :mod:`baton`.

Quick, non-blocking operations (``locked()``, ``is_leader()``, ``sequencer``,
``on_lost``, ``cancel_token``) are the synchronous objects' own, reached through ``.sync``.
The client's requests (sessions, KV, ``leader``, fencing) are awaitable too and run on baton
threads of their own. Every duration is a number of seconds; ``timeout=None`` waits without
limit.
"""

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator, Awaitable, Callable, Optional

import consul_baton as baton
from . import _native
from ._native import KvEntry, Leader, MemberInfo, MembershipEvent, Sequencer

if TYPE_CHECKING:
    from ._native import MetricsSnapshot

__all__ = [
    "Agent", "Client", "Lock", "Semaphore", "Election", "RwLock", "MultiLock", "LeaderTask",
    "Group", "Member", "MembersWatch", "Barrier", "DoubleBarrier", "Counter", "CounterWatch",
]


from ._loop import (  # noqa: F401 (tests and docs reach them as baton.aio._*)
    _Conn, _LoopHub, _hub, _hubs, _off_loop, _run, _settle, _warm, _warm_outcome,
)


class _LossReasons:
    """Why the last holding ended, as the synchronous object (``self.sync``) reports it."""

    sync: Any

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the last holding ended (the synchronous object's ``lost_reason``)."""
        return self.sync.lost_reason

    @property
    def lost_session_reason(self) -> Optional[str]:
        """With ``lost_reason == "session_lost"``: why the session was lost."""
        return self.sync.lost_session_reason


class _Holding(_LossReasons):
    """What :class:`Lock` and :class:`Semaphore` share: acquire, release, loss, ``async with``."""

    def __init__(self, sync: Any) -> None:
        self.sync = sync

    def locked(self) -> bool:
        """True while held: not released, not lost, session deadline not passed."""
        return self.sync.locked()

    async def acquire(self, timeout: Optional[float] = None) -> bool:
        """Waits until held: True once held, False when ``timeout`` seconds pass
        (``None`` or ``-1`` waits without limit, as for the synchronous ``acquire``;
        0 tries once)."""
        if timeout is not None and not isinstance(timeout, bool) and timeout == -1:
            timeout = None
        return await _run(self.sync._start_acquire, timeout)

    async def release(self) -> None:
        """Releases it; ``baton.NotHeldError`` (also a RuntimeError) if not held."""
        await _run(self.sync._start_release)

    async def wait_lost(self, timeout: Optional[float] = None) -> str:
        """Waits until the holding ends and returns why (``"released"``,
        ``"key_changed"`` or ``"removed"``, ``"session_lost"``, ``"client_closed"``);
        ``timeout`` in seconds (``None``: no limit) raises ``baton.TimeoutError``. It may
        return before the ``on_lost`` callbacks have run."""
        return await _run(self.sync._start_wait_lost, timeout)

    def on_lost(self, callback: Callable[[str], object]) -> int:
        """Calls ``callback(reason)`` on baton's callback thread (not the event loop) when a
        holding is lost, after the state change (``locked()`` is already False); not ordered
        with ``wait_lost()``, which may return before it has run. Its exceptions go to
        ``sys.unraisablehook``. Returns an id for ``remove_callback``."""
        return self.sync.on_lost(callback)

    def remove_callback(self, callback_id: int) -> bool:
        """Removes a callback by the id ``on_lost`` returned."""
        return self.sync.remove_callback(callback_id)

    @property
    def cancel_token(self) -> "baton.CancelToken":
        """A token cancelled when the current holding ends."""
        return self.sync.cancel_token

    async def __aenter__(self) -> Any:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> bool:
        if self.sync.locked():
            await self.release()
        return False


class Lock(_Holding):
    """An asyncio face of :class:`baton.Lock`: ``await acquire()``, ``await release()``,
    ``async with``. The synchronous lock is ``.sync``."""

    sync: baton.Lock

    @property
    def key(self) -> str:
        """The key."""
        return self.sync.key

    @property
    def sequencer(self) -> Optional[Sequencer]:
        """The fencing sequencer of the current holding, or None."""
        return self.sync.sequencer

    def __repr__(self) -> str:
        return f"baton.aio.Lock(key={self.key!r}, held={self.locked()})"

    async def acquire(self, timeout: Optional[float] = None) -> bool:
        """Waits until held: True once held, False when ``timeout`` seconds pass
        (``None`` or ``-1`` waits without limit, as for the synchronous ``acquire``;
        0 tries once)."""
        if timeout is not None and not isinstance(timeout, bool) and timeout == -1:
            timeout = None
        fut, call, conn, begun = self.sync._aio_acquire(timeout)
        if fut is not None:
            return await _warm_outcome(fut, call, conn, begun, timeout)
        if call is not None:
            return await _warm(call, timeout)
        held = await _run(self.sync._start_acquire, timeout)
        await self._open_loop_conn()
        return held

    async def release(self) -> None:
        """Releases it; ``baton.NotHeldError`` (also a RuntimeError) if not held."""
        fut, call, conn, begun = self.sync._aio_release()
        if fut is not None:
            await _warm_outcome(fut, call, conn, begun, None)
            return
        if call is not None:
            await _warm(call, None)
            return
        await _run(self.sync._start_release)
        await self._open_loop_conn()

    async def _open_loop_conn(self) -> None:
        """After a call on a baton thread: opens the client's loop connection (on a baton
        thread) if it can have one and has none, so that the next calls can be warm."""
        if self.sync._wants_loop_conn():
            try:
                await _off_loop(self.sync._open_loop_conn)
            except baton.BatonError:
                pass  # the next call on a baton thread tries again


class Semaphore(_Holding):
    """An asyncio face of :class:`baton.Semaphore` (same shape as :class:`Lock`)."""

    sync: baton.Semaphore

    @property
    def prefix(self) -> str:
        """The key prefix."""
        return self.sync.prefix

    @property
    def limit(self) -> int:
        """The number of slots."""
        return self.sync.limit


class Election(_LossReasons):
    """An asyncio face of :class:`baton.Election`."""

    def __init__(self, sync: baton.Election) -> None:
        self.sync = sync

    def is_leader(self) -> bool:
        """True while this participant leads."""
        return self.sync.is_leader()

    @property
    def sequencer(self) -> Optional[Sequencer]:
        """The fencing sequencer while leading."""
        return self.sync.sequencer

    async def campaign(self, value: "bytes | str", timeout: Optional[float] = None) -> bool:
        """Campaigns with ``value`` (bytes, or str stored UTF-8 encoded) until elected (True)
        or ``timeout`` seconds pass (False; ``None``: no limit)."""
        return await _run(self.sync._start_campaign, value, timeout)

    async def resign(self) -> bool:
        """Steps down; False if not leading."""
        return await _run(self.sync._start_resign)

    async def proclaim(self, value: "bytes | str") -> None:
        """Replaces the leader's value, keeping the LockIndex."""
        await _run(self.sync._start_proclaim, value)

    async def leader(self) -> Optional[Leader]:
        """The current leader, or None."""
        return await _run(self.sync._start_leader)

    async def wait_lost(self, timeout: Optional[float] = None) -> str:
        """Waits until leadership ends and returns why (``timeout`` in seconds, ``None``:
        no limit). It may return before the ``on_lost`` callbacks have run."""
        return await _run(self.sync._start_wait_lost, timeout)

    def on_lost(self, callback: Callable[[str], object]) -> int:
        """Calls ``callback(reason)`` on baton's callback thread (not the event loop) when
        leadership is lost, after the state change; ``wait_lost()`` may return before it has
        run. Returns an id for ``remove_callback``."""
        return self.sync.on_lost(callback)

    def remove_callback(self, callback_id: int) -> bool:
        """Removes a callback by the id ``on_lost`` returned."""
        return self.sync.remove_callback(callback_id)

    @property
    def cancel_token(self) -> "baton.CancelToken":
        """A token cancelled when leadership ends."""
        return self.sync.cancel_token

    async def observe(self) -> AsyncIterator[Optional[Leader]]:
        """Leader changes as an async iterator: a :class:`baton.Leader`, or None for
        "no leader" (the iteration goes on across failovers, like the synchronous
        ``for leader in election.observe()``); the first item is the current state."""
        events = self.sync._observe_stream()
        while True:
            yield await _run(events._start_next, None)


class RwLock(_Holding):
    """An asyncio face of :class:`baton.RwLock` (one side of a read-write lock):
    ``await acquire()``, ``await release()``, ``async with``. The synchronous one is ``.sync``."""

    sync: baton.RwLock

    @property
    def prefix(self) -> str:
        """The prefix."""
        return self.sync.prefix

    @property
    def mode(self) -> str:
        """``"read"`` or ``"write"``."""
        return self.sync.mode

    @property
    def key(self) -> Optional[str]:
        """The contender key of the current holding, or None."""
        return self.sync.key

    @property
    def sequencer(self) -> Optional[Sequencer]:
        """The fencing sequencer of the current holding, or None."""
        return self.sync.sequencer

    def __repr__(self) -> str:
        return f"baton.aio.RwLock(prefix={self.prefix!r}, mode={self.mode!r}, held={self.locked()})"


class MultiLock(_Holding):
    """An asyncio face of :class:`baton.MultiLock` (every key or none): ``await acquire()``,
    ``await release()``, ``async with``."""

    sync: baton.MultiLock

    @property
    def keys(self) -> "list[str]":
        """The keys, de-duplicated and sorted."""
        return self.sync.keys

    @property
    def sequencer(self) -> Optional[Sequencer]:
        """The sequencer of the first key while held, or None."""
        return self.sync.sequencer

    @property
    def sequencers(self) -> "list[Sequencer]":
        """One sequencer per key while held; empty otherwise."""
        return self.sync.sequencers

    def __repr__(self) -> str:
        return f"baton.aio.MultiLock(keys={self.keys!r}, held={self.locked()})"


class LeaderTask:
    """An asyncio face of :class:`baton.LeaderTask`: ``await run(task)`` campaigns and, while
    leading, runs ``task(token)`` — an async function — as an asyncio Task, cancelled
    (``Task.cancel()``) the moment leadership is lost or ``stop`` fires; ``token`` (a
    :class:`baton.CancelToken`) is cancelled at the same moment. When the task ends the
    candidate resigns and, with ``requeue``, campaigns again. The campaign and the wait for
    loss hold no thread."""

    def __init__(self, sync: baton.LeaderTask) -> None:
        self.sync = sync

    @property
    def key(self) -> str:
        """The election's key."""
        return self.sync.key

    @property
    def sequencer(self) -> Optional[Sequencer]:
        """The fencing sequencer of the current term, or None."""
        return self.sync.sequencer

    def is_leader(self) -> bool:
        """Whether this candidate leads now."""
        return self.sync.is_leader()

    async def run(self, task: Callable[["baton.CancelToken"], Awaitable[object]],
                  stop: "Optional[baton.CancelToken]" = None) -> None:
        """Campaigns and runs ``await task(token)`` while leading, until ``stop`` (a
        :class:`baton.CancelToken`) is cancelled — or, with ``requeue=False``, for one term.
        The task is cancelled the moment leadership is lost (or ``stop`` fires); a task that
        raises an ``Exception`` ends its term as ``"failed"`` (re-raised by ``run`` without
        requeue). Cancelling the task awaiting ``run`` cancels the campaign, or the term's
        task, resigns, and re-raises ``CancelledError``."""
        terms = self.sync._terms(stop)
        while True:
            term = await _run(terms._start_next_term)
            if term is None:
                return
            failure = await self._term(term, task)
            try:
                again = await _run(term._start_finish, None if failure is None else repr(failure))
            except baton.BatonError:
                if failure is not None:
                    raise failure  # requeue off: the task's own exception
                raise
            if not again:
                return

    async def _term(self, term: Any, task: Callable[..., Awaitable[object]]) -> Optional[Exception]:
        """Runs one term's task as an asyncio Task, cancelled when the term's token fires;
        returns what it raised (None when it returned or was cancelled by the term's end).
        A cancel of the caller cancels the task, ends the term, and is re-raised."""
        job = asyncio.ensure_future(task(term.token))
        ended = asyncio.ensure_future(_run(term._start_wait_end))
        try:
            try:
                await asyncio.wait({job, ended}, return_when=asyncio.FIRST_COMPLETED)
                if not job.done():
                    job.cancel()  # leadership lost, or stop fired
            except asyncio.CancelledError:
                job.cancel()
                await asyncio.gather(job, return_exceptions=True)
                await asyncio.shield(_run(term._start_finish, None))
                raise
            try:
                await job
            except asyncio.CancelledError:
                if not term.token.cancelled():
                    # Cancelled by someone else than the term's end: a failure.
                    return baton.CancelledError("the leader task was cancelled")
            except Exception as e:  # the task failed
                return e
            return None
        finally:
            if not ended.done():
                ended.cancel()
            await asyncio.gather(ended, return_exceptions=True)

    def __repr__(self) -> str:
        return f"baton.aio.LeaderTask(key={self.key!r}, leader={self.is_leader()})"


class Member:
    """An asyncio face of :class:`baton.Member`: ``await leave()``, ``await wait_lost()``,
    ``await update_value(v)``; ``async with`` leaves on exit."""

    def __init__(self, sync: baton.Member) -> None:
        self.sync = sync

    @property
    def id(self) -> str:
        """The member's id."""
        return self.sync.id

    @property
    def key(self) -> str:
        """The member's key."""
        return self.sync.key

    @property
    def session(self) -> baton.Session:
        """The session the member's key is acquired with."""
        return self.sync.session

    def is_member(self) -> bool:
        """True while a member."""
        return self.sync.is_member()

    @property
    def lost_reason(self) -> Optional[str]:
        """Why the membership ended (``"left"``, ``"key_changed"``, ``"session_lost"``), or None."""
        return self.sync.lost_reason

    @property
    def cancel_token(self) -> "baton.CancelToken":
        """A token cancelled when the membership ends."""
        return self.sync.cancel_token

    async def wait_lost(self, timeout: Optional[float] = None) -> str:
        """Waits until the membership ends and returns why (``timeout`` in seconds, ``None``:
        no limit, raises ``baton.TimeoutError``); holds no thread."""
        return await _run(self.sync._start_wait_lost, timeout)

    async def update_value(self, value: "bytes | str") -> None:
        """Replaces the member's value."""
        await _run(self.sync._start_update_value, value)

    async def leave(self) -> bool:
        """Leaves the group: True when it left now, False when it was no longer a member."""
        return await _run(self.sync._start_leave)

    async def __aenter__(self) -> "Member":
        return self

    async def __aexit__(self, *exc: object) -> bool:
        await self.leave()
        return False


class MembersWatch:
    """An async iterator of a group's :class:`baton.MembershipEvent`s (the snapshot first),
    with ``await next(timeout=)``; each pending next holds no thread."""

    def __init__(self, native: Any) -> None:
        self._native = native

    async def next(self, timeout: Optional[float] = None) -> Optional[MembershipEvent]:
        """The next event; None when ``timeout`` seconds pass with nothing new."""
        return await _run(self._native._start_next, timeout)

    def close(self) -> None:
        """Stops the watch."""
        self._native.close()

    def __aiter__(self) -> "MembersWatch":
        return self

    async def __anext__(self) -> MembershipEvent:
        ev = await self.next(None)
        assert ev is not None
        return ev


class Group:
    """An asyncio face of :class:`baton.Group`."""

    def __init__(self, sync: baton.Group) -> None:
        self.sync = sync

    @property
    def prefix(self) -> str:
        """The prefix."""
        return self.sync.prefix

    async def join(self, id: str, value: "bytes | str | None" = None, *,
                   session: Optional[baton.Session] = None) -> Member:
        """Joins as member ``id`` with ``value`` (as :meth:`baton.Group.join`)."""
        return Member(await _run(self.sync._start_join, id, value, session))

    async def members(self) -> "list[MemberInfo]":
        """The live members, sorted by id."""
        return await _run(self.sync._start_members)

    def watch(self) -> MembersWatch:
        """A watch of joins, leaves and updates (``async for``)."""
        return MembersWatch(self.sync.watch())


class Barrier:
    """An asyncio face of :class:`baton.Barrier`; ``await wait()`` holds no thread."""

    def __init__(self, sync: baton.Barrier) -> None:
        self.sync = sync

    @property
    def key(self) -> str:
        """The barrier's key."""
        return self.sync.key

    async def hold(self, *, session: Optional[baton.Session] = None) -> bool:
        """Raises the barrier: True when this call raised it, False when it was already up."""
        return await _run(self.sync._start_hold, session)

    async def release(self) -> bool:
        """Lowers the barrier: True when this call lowered it."""
        return await _run(self.sync._start_release)

    async def is_held(self) -> bool:
        """Whether the barrier is up now (one read)."""
        return await _run(self.sync._start_is_held)

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """Waits until the barrier is down: True, or False when ``timeout`` seconds pass
        (``None``: no limit; 0 looks once)."""
        return await _run(self.sync._start_wait, timeout)


class DoubleBarrier:
    """An asyncio face of :class:`baton.DoubleBarrier`: ``await enter()``, ``await leave()``,
    ``async with`` (enter on entry, leave on exit); the waits hold no thread."""

    def __init__(self, sync: baton.DoubleBarrier) -> None:
        self.sync = sync

    @property
    def prefix(self) -> str:
        """The prefix."""
        return self.sync.prefix

    @property
    def count(self) -> int:
        """The number of participants a round waits for."""
        return self.sync.count

    def is_entered(self) -> bool:
        """Whether this participant has entered and not yet left."""
        return self.sync.is_entered()

    async def enter(self, timeout: Optional[float] = None) -> bool:
        """Waits until a round of ``count`` opens: True once entered, False at ``timeout``
        (nothing left behind). A cancelled await leaves nothing entered."""
        return await _run(self.sync._start_enter, timeout)

    async def leave(self, timeout: Optional[float] = None) -> bool:
        """Leaves, then waits until every participant of the round has: True, or False at
        ``timeout`` (it has left either way)."""
        return await _run(self.sync._start_leave, timeout)

    async def __aenter__(self) -> "DoubleBarrier":
        await self.enter()
        return self

    async def __aexit__(self, *exc: object) -> bool:
        if self.sync.is_entered():
            await self.leave()
        return False


class CounterWatch:
    """An async iterator of a counter's values (the current one first), with
    ``await next(timeout=)``; each pending next holds no thread."""

    def __init__(self, native: Any) -> None:
        self._native = native

    async def next(self, timeout: Optional[float] = None) -> Optional[int]:
        """The next value; None when ``timeout`` seconds pass with no change."""
        return await _run(self._native._start_next, timeout)

    def close(self) -> None:
        """Stops the watch."""
        self._native.close()

    def __aiter__(self) -> "CounterWatch":
        return self

    async def __anext__(self) -> int:
        v = await self.next(None)
        assert v is not None
        return v


class Counter:
    """An asyncio face of :class:`baton.Counter`."""

    def __init__(self, sync: baton.Counter) -> None:
        self.sync = sync

    @property
    def key(self) -> str:
        """The key."""
        return self.sync.key

    async def get(self) -> int:
        """The current value (0 when the key is absent)."""
        return await _run(self.sync._start_get)

    async def get_with_index(self) -> "tuple[int, int]":
        """``(value, modify_index)``."""
        return await _run(self.sync._start_get_with_index)

    async def set(self, value: int) -> None:
        """Writes ``value`` whatever the key holds."""
        await _run(self.sync._start_set, value)

    async def add(self, delta: int) -> int:
        """Adds ``delta`` atomically; returns the new value."""
        return await _run(self.sync._start_add, delta)

    async def increment(self) -> int:
        """``add(1)``."""
        return await self.add(1)

    async def decrement(self) -> int:
        """``add(-1)``."""
        return await self.add(-1)

    async def compare_and_set(self, expected: int, new: int) -> bool:
        """Writes ``new`` if the value is ``expected``, atomically; whether it did."""
        return await _run(self.sync._start_compare_and_set, expected, new)

    def watch(self) -> CounterWatch:
        """A watch of the value (``async for``)."""
        return CounterWatch(self.sync.watch())


class Agent:
    """An asyncio face of :class:`baton.Agent`: the same methods, each one short request run
    off the event loop on a pooled baton thread (not the loop's default executor)."""

    def __init__(self, sync: baton.Agent) -> None:
        self.sync = sync

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> None:
        method = getattr(self.sync, name)
        await _off_loop(lambda: method(*args, **kwargs))

    async def check_register(self, check_id: str, ttl: float, **kwargs: Any) -> None:
        await self._call("check_register", check_id, ttl, **kwargs)

    async def check_deregister(self, check_id: str) -> None:
        await self._call("check_deregister", check_id)

    async def check_pass(self, check_id: str, note: Optional[str] = None) -> None:
        await self._call("check_pass", check_id, note)

    async def check_warn(self, check_id: str, note: Optional[str] = None) -> None:
        await self._call("check_warn", check_id, note)

    async def check_fail(self, check_id: str, note: Optional[str] = None) -> None:
        await self._call("check_fail", check_id, note)

    async def check_update(self, check_id: str, status: str, output: Optional[str] = None) -> None:
        await self._call("check_update", check_id, status, output)

    async def service_register(self, name: str, **kwargs: Any) -> None:
        await self._call("service_register", name, **kwargs)

    async def service_deregister(self, service_id: str) -> None:
        await self._call("service_deregister", service_id)


class Client:
    """An asyncio face of :class:`baton.Client` (same arguments). ``async with``
    closes it, which releases what it holds and destroys its sessions."""

    def __init__(self, *args: Any, sync: Optional[baton.Client] = None, **kwargs: Any) -> None:
        self.sync = sync if sync is not None else baton.Client(*args, **kwargs)

    def lock(self, key: str, **kwargs: Any) -> Lock:
        """A lock on ``key`` (keywords as :meth:`baton.Client.lock`)."""
        return Lock(self.sync.lock(key, **kwargs))

    def semaphore(self, prefix: str, limit: int, **kwargs: Any) -> Semaphore:
        """A semaphore of ``limit`` slots under ``prefix``."""
        return Semaphore(self.sync.semaphore(prefix, limit, **kwargs))

    def election(self, key: str, **kwargs: Any) -> Election:
        """A participant in the election on ``key``."""
        return Election(self.sync.election(key, **kwargs))

    def read_lock(self, prefix: str) -> RwLock:
        """The reader side of the read-write lock on ``prefix``."""
        return RwLock(self.sync.read_lock(prefix))

    def write_lock(self, prefix: str) -> RwLock:
        """The writer side of the read-write lock on ``prefix``."""
        return RwLock(self.sync.write_lock(prefix))

    def multi_lock(self, keys: "list[str]", **kwargs: Any) -> MultiLock:
        """A lock on all of ``keys`` at once (keywords as :meth:`baton.Client.multi_lock`)."""
        return MultiLock(self.sync.multi_lock(keys, **kwargs))

    def leader_task(self, key: str, value: "bytes | str", **kwargs: Any) -> LeaderTask:
        """A leader task on the election ``key`` (keywords as
        :meth:`baton.Client.leader_task`; the callbacks run on baton's threads, not the event
        loop: hand work to the loop with ``loop.call_soon_threadsafe``)."""
        return LeaderTask(self.sync.leader_task(key, value, **kwargs))

    def group(self, prefix: str) -> Group:
        """The group of members under ``prefix``."""
        return Group(self.sync.group(prefix))

    def barrier(self, key: str) -> Barrier:
        """A barrier on ``key``."""
        return Barrier(self.sync.barrier(key))

    def double_barrier(self, prefix: str, count: int, **kwargs: Any) -> DoubleBarrier:
        """A double barrier of ``count`` participants on ``prefix``."""
        return DoubleBarrier(self.sync.double_barrier(prefix, count, **kwargs))

    def counter(self, key: str) -> Counter:
        """A counter kept in ``key``."""
        return Counter(self.sync.counter(key))

    async def create_session(self, **kwargs: Any) -> baton.Session:
        """A session of its own (keywords as :meth:`baton.Client.create_session`: ``ttl``
        defaults to 15 s, ``ttl=None`` for none, ``ttl=0`` refused), created on a baton thread."""
        return await _run(lambda done: self.sync._start_create_session(done, **kwargs))

    async def adopt_session(self, session_id: str) -> baton.Session:
        """Manages a session created elsewhere (as :meth:`baton.Client.adopt_session`)."""
        return await _run(self.sync._start_adopt_session, session_id)

    async def default_session(self) -> baton.Session:
        """The client's shared session (created on first use; see ``Client(default_session=)``)."""
        return await _run(self.sync._start_default_session)

    async def wait_session_lost(self, session: baton.Session, timeout: Optional[float] = None) -> str:
        """Waits until ``session`` is lost and returns why (as :meth:`baton.Session.wait_lost`;
        ``timeout`` in seconds, ``None``: no limit)."""
        return await _run(session._start_wait_lost, timeout)

    async def destroy_session(self, session: baton.Session) -> None:
        """Destroys ``session`` (as :meth:`baton.Session.destroy`)."""
        await _run(session._start_destroy)

    async def kv_get(self, key: str) -> Optional[bytes]:
        """The value at ``key``, or None when it does not exist."""
        return await _run(self.sync._start_kv_get, key)

    async def kv_get_entry(self, key: str) -> Optional[KvEntry]:
        """The entry at ``key`` (value, flags, session, indexes), or None."""
        return await _run(self.sync._start_kv_get_entry, key)

    async def kv_put(self, key: str, value: "bytes | str", *, flags: int = 0,
                     cas: Optional[int] = None) -> bool:
        """Writes ``value`` (bytes, or str stored UTF-8 encoded) at ``key`` with ``flags``;
        with ``cas`` only if the key's ModifyIndex is ``cas`` (0: only if absent). Returns
        whether Consul applied it."""
        return await _run(self.sync._start_kv_put, key, value, flags, cas)

    async def kv_delete(self, key: str, *, cas: Optional[int] = None) -> bool:
        """Deletes ``key`` (a missing key is not an error); with ``cas`` only if its
        ModifyIndex is ``cas``. Returns whether Consul applied it."""
        return await _run(self.sync._start_kv_delete, key, cas)

    async def leader(self, key: str) -> Optional[Leader]:
        """The current leader of the election on ``key`` (one consistent read), or None."""
        return await _run(self.sync._start_leader, key)

    async def check_sequencer(self, sequencer: Sequencer) -> bool:
        """Whether ``sequencer`` is still current (one consistent read)."""
        return await _run(self.sync._start_check_sequencer, sequencer)

    async def guarded_put(self, sequencer: Sequencer, key: str, value: "bytes | str") -> None:
        """Writes ``value`` at ``key`` only while ``sequencer`` is current (``ConflictError``
        for a stale holder)."""
        await _run(self.sync._start_guarded_put, sequencer, key, value)

    async def guarded_txn(self, sequencer: Sequencer, ops: "list[dict[str, Any]]") -> "list[KvEntry]":
        """Runs ``ops`` in one transaction behind a check of ``sequencer`` (as
        :meth:`baton.Client.guarded_txn`)."""
        return await _run(self.sync._start_guarded_txn, sequencer, ops)

    @property
    def agent(self) -> "Agent":
        """The agent's check and service endpoints, awaitable."""
        return Agent(self.sync.agent)

    def metrics(self) -> "MetricsSnapshot":
        """A snapshot of the client's metrics, as :meth:`baton.Client.metrics` (the same
        ``dict``). A plain method, not a coroutine: it makes no request and does not block
        (it only reads the core's atomic counters), so it need not be awaited or run off the
        event loop."""
        return self.sync.metrics()

    async def close(self, timeout: Optional[float] = 5.0) -> bool:
        """Closes the client (one wait of at most ``timeout`` seconds, ``None``: no limit,
        run off the event loop)."""
        closed = await _off_loop(lambda: self.sync.close(timeout))
        # The thread that ran the close (and any other idle one) ends now, not 10 s from now.
        _native._end_idle_threads()
        return closed

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> bool:
        await self.close()
        return False
