"""The event-loop half of :mod:`consul_baton.aio`: each loop's hub (the outcomes baton threads
deliver, the agent connections warm calls poll, the timer that gives them up), and the two ways a
call is awaited: on a baton thread (``_run``) or written and read by the loop itself (``_warm``).
"""

import asyncio
import math
import os
import time
import types
import weakref
from typing import Any, Callable, Optional

from . import _native


def _settle(fut: "asyncio.Future[Any]", unwound: "asyncio.Future[None]", ok: bool, value: Any,
            give_back: Callable[[Callable[[], None]], bool]) -> None:
    def finished() -> None:
        if not unwound.done():
            unwound.set_result(None)

    if fut.cancelled() and ok:
        # A success that raced the cancel: if it holds something, `unwound` is set once that
        # is given back.
        loop = unwound.get_loop()
        if give_back(lambda: _call_soon(loop, finished)):
            return
    finished()
    if fut.cancelled():
        return
    if ok:
        fut.set_result(value)
    else:
        fut.set_exception(value)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    try:
        loop.call_soon_threadsafe(fn)
    except RuntimeError:  # the loop is closed: nobody awaits any more
        pass


class _LoopHub:
    """One event loop's end of the native hub: baton threads queue outcomes there and write a
    byte to a socket this loop reads, so no baton thread takes the GIL to report one.

    The baton thread that delivered an outcome stays awake for the next call until the turn of
    this loop that took the outcome is over (``_drain`` schedules ``turn_over`` behind the steps
    of the tasks it woke; see ``core/src/foundations/pool.rs``): a task that calls again at once (a release
    right after an acquire) hands its call to an awake thread.

    While a call on a baton thread is young the loop also polls instead of sleeping, as the
    Node binding does (``bindings/node/spin.js``, where the reasons and figures are): for at
    most ``WINDOW`` seconds after the latest call started, only for a call made in the turn
    that took an outcome (its baton thread is still awake: a spinning loop would keep a thread
    it has to wake off its CPU), and only while most recent calls settled within ``WINDOW``.
    Between polls it yields the CPU. A warm call (``_warm``) never polls: the loop sleeps on
    its socket as a blocking Rust call sleeps on it, and polling would spend a core on the
    wait (twice Rust's CPU per lock cycle at 0 ms). ``BATON_AIO_SPIN=0`` in the environment
    switches the polling off (a machine whose cores are better spent elsewhere;
    ``make bench-bindings`` measures both)."""

    SPIN = os.environ.get("BATON_AIO_SPIN") != "0"
    WINDOW = 0.0003
    WEIGHT = 1 / 8
    # Registered connections no call is using that are kept, at most (the oldest goes first).
    IDLE_CONNS = 4

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        # Weak: `_hubs` holds this object for as long as the loop lives, and a strong reference
        # back would keep the loop (and the hub's socket) alive forever.
        self.loop = weakref.ref(loop)
        self.native = _native.Hub()
        loop.add_reader(self.native.fileno(), self._drain)
        self.pending = 0
        self.latest = 0.0
        self.quick = 1.0
        self.spinning = False
        # The agent connections warm calls use, by connection id (see `_Conn`). Weak: the
        # loop holds each one (its reader), and a call in flight on one holds the loop (its
        # future), which this hub, kept by `_hubs` for as long as the loop lives, must not. A
        # dict of references rather than a WeakValueDictionary: its lookup is on the path of
        # every warm call, and `WeakValueDictionary.get` is a Python function.
        self.conns: "dict[int, weakref.ref[_Conn]]" = {}
        # The time of the earliest `_expire` timer pending (the timers are the loop's only).
        self.timer_at = math.inf

    def live_conns(self) -> "list[_Conn]":
        """The registered connections."""
        return [c for c in (ref() for ref in list(self.conns.values())) if c is not None]

    def _watch(self, conn_id: int, fd: int) -> "_Conn":
        """Registers a duplicate of connection ``conn_id``'s socket ``fd`` (see ``_Conn``)."""
        loop = self.loop()
        assert loop is not None  # a call is running on it
        idle = [c for c in self.live_conns() if c.call is None]
        if len(idle) >= self.IDLE_CONNS:
            self._let_go(idle[0])
        conn = _Conn(conn_id, os.dup(fd), self, _running_task)
        self.conns[conn_id] = weakref.ref(conn)
        loop.add_reader(conn.fd, conn.readable)
        return conn

    def _let_go(self, conn: "_Conn") -> None:
        """Unregisters ``conn`` and closes its duplicate: no call of this loop is using it and
        it turned readable (another thread's request is answered on it, the agent closed it,
        or baton dropped it and shut it down; a later call registers it again), or it is the
        oldest idle one."""
        loop = self.loop()
        if loop is not None and not loop.is_closed():
            loop.remove_reader(conn.fd)
            if conn.writing:
                loop.remove_writer(conn.fd)
        ref = self.conns.get(conn.id)
        if ref is not None and ref() is conn:
            del self.conns[conn.id]
        conn.close()

    def _write_interest(self, conn: "_Conn", on: bool) -> None:
        """The call on ``conn`` waits to write (``on``), or no longer does."""
        loop = self.loop()
        if loop is None:
            return
        if on:
            loop.add_writer(conn.fd, conn.writable)
        else:
            loop.remove_writer(conn.fd)

    def _arm(self, deadline: float) -> None:
        """Sets the timer for a warm call given up at loop time ``deadline``, the earliest."""
        loop = self.loop()
        assert loop is not None
        loop.call_at(deadline, self._expire)
        self.timer_at = deadline

    def _expire(self) -> None:
        """Gives up the warm calls whose time is up, and sets the timer for the next."""
        loop = self.loop()
        if loop is None:
            return
        now = loop.time()
        soonest = math.inf
        for conn in self.live_conns():
            call, fut = conn.call, conn.fut
            if call is None or fut is None:
                continue
            if conn.deadline <= now:
                conn.finish()
                if not fut.done():
                    call.abandon()
                    fut.set_result((_RESUME, None))
            elif conn.deadline < soonest:
                soonest = conn.deadline
        # This was the earliest timer (a later one may still be pending), or the next call
        # to give up comes before any timer pending.
        if self.timer_at <= now or soonest < self.timer_at:
            self.timer_at = soonest
            if soonest < math.inf:
                loop.call_at(soonest, self._expire)

    def _drain(self) -> None:
        """Reports the outcomes the baton threads queued. The thread that delivered one stays
        awake for the next call until this turn is over: ``turn_over`` is scheduled behind the
        steps of the tasks these outcomes woke, so it runs once they have made their calls."""
        if self.native.drain():
            loop = self.loop()
            if loop is None:
                self.native.turn_over()
            else:
                loop.call_soon(self.native.turn_over)

    def _tick(self) -> None:
        loop = self.loop()
        if loop is not None and self.pending and time.perf_counter() - self.latest < self.WINDOW:
            _yield_cpu()
            loop.call_soon(self._tick)
        else:
            self.spinning = False

    def started(self) -> float:
        """A call on a baton thread is starting; returns the token for ``ended``."""
        now = time.perf_counter()
        self.pending += 1
        if self.SPIN and self.quick >= 0.5 and self.native.in_turn():
            self.latest = now
            loop = self.loop()
            if not self.spinning and loop is not None:
                self.spinning = True
                loop.call_soon(self._tick)
        return now

    def ended(self, start: float) -> None:
        now = time.perf_counter()
        self.pending -= 1
        self.quick += ((1.0 if now - start < self.WINDOW else 0.0) - self.quick) * self.WEIGHT


class _Conn(_native.LoopConn):
    """One agent connection as a loop's warm calls use it: a duplicate of its socket,
    registered with the loop for reading from the first warm call on it until the hub lets it
    go, so that a call costs no registration of its own (adding and removing a reader took a
    third of a lock cycle's instructions). The duplicate is the loop's own: baton closing its
    descriptor, and the number going to another socket, cannot touch the registration. baton
    shuts down a connection it drops, so the duplicate then turns readable and is let go.

    The native half (``bindings/python/src/loop_conn.rs``) holds the warm call in flight on it
    (``call``), what gets its outcome (``fut``), the loop time it is given up at
    (``deadline``) and whether it also waits to write (``writing``), and steps the call when
    the socket is ready (``readable``, ``writable``). The loop holds it while it is
    registered; the duplicate is closed when the hub lets it go, or with the loop."""

    __slots__ = ()

    def close(self) -> None:
        fd = self._take_fd()
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


# The task running on a loop (None: none), as `asyncio.current_task(loop)` says. Before Python
# 3.12 that is a Python function around a dict the interpreter keeps, and calling it cost 6k
# instructions per lock cycle (callgrind): there the dict is read directly.
_current_tasks = getattr(asyncio.tasks, "_current_tasks", None)
_running_task: "Callable[[asyncio.AbstractEventLoop], Optional[asyncio.Task[Any]]]" = (
    _current_tasks.get
    if isinstance(_current_tasks, dict) and
    not isinstance(asyncio.current_task, types.BuiltinFunctionType)
    else asyncio.current_task)

_yield_cpu: Callable[[], None] = getattr(os, "sched_yield", lambda: None)

# Each running loop's hub; None for a loop without add_reader (outcomes then come through
# call_soon_threadsafe, from the baton thread).
_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Optional[_LoopHub]]" = \
    weakref.WeakKeyDictionary()


# The loop `_hub` was last asked about, and its hub (None: it has none), both weakly: no loop
# or hub is kept alive here. The loop holds its hub (the hub's reader is registered there).
_last: "tuple[Optional[weakref.ref[asyncio.AbstractEventLoop]], Optional[weakref.ref[_LoopHub]]]" = \
    (None, None)


def _hub(loop: asyncio.AbstractEventLoop) -> Optional[_LoopHub]:
    global _last
    loop_ref, hub_ref = _last
    if loop_ref is not None and loop_ref() is loop:
        return hub_ref() if hub_ref is not None else None
    try:
        hub = _hubs[loop]
    except KeyError:
        try:
            hub = _LoopHub(loop)
        except NotImplementedError:  # e.g. the Windows proactor loop
            hub = None
        _hubs[loop] = hub
    _last = (weakref.ref(loop), weakref.ref(hub) if hub is not None else None)
    return hub


async def _run(start: Callable[..., Any], *args: Any) -> Any:
    """Starts a native call (`start(done, *args)`) and awaits its outcome. A cancelled await
    cancels the call and waits (shielded) until it has returned and a success that raced the
    cancel is given back: when the CancelledError arrives, nothing is left held."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    unwound = loop.create_future()
    hub = _hub(loop)

    def give_back(finished: Callable[[], None]) -> bool:
        # What the call acquired, given back by the native side (a baton thread calls
        # `finished` after); False when it holds nothing. Only called once `pending` is set.
        return pending._give_back(finished)

    if hub is None:
        def done(ok: bool, value: Any) -> None:  # on a baton thread, holding the GIL
            try:
                loop.call_soon_threadsafe(_settle, fut, unwound, ok, value, give_back)
            except RuntimeError:  # the loop is closed: nobody awaits any more
                if ok:
                    give_back(lambda: None)

        pending = start(done, *args)
    else:
        def settled(ok: bool, value: Any) -> None:  # on the loop, from the hub
            _settle(fut, unwound, ok, value, give_back)

        # Weak: a pending call must not keep a closed, dropped loop alive (its outcome is then
        # given back by the native side); this frame keeps `settled` alive while anyone awaits.
        pending = start((hub.native, weakref.ref(settled)), *args)
    began = hub.started() if hub is not None else 0.0
    try:
        return await fut
    except asyncio.CancelledError:
        pending.cancel()
        await asyncio.shield(unwound)
        if fut.done() and not fut.cancelled() and fut.exception() is None:
            # The outcome was set, but the cancel reached this task before it took it.
            gone = loop.create_future()

            def given_back() -> None:
                if not gone.done():
                    gone.set_result(None)

            if give_back(lambda: _call_soon(loop, given_back)):
                await asyncio.shield(gone)
        raise
    finally:
        if hub is not None:
            hub.ended(began)


# What a warm call's step says (`WarmCall::step`, bindings/python/src/warm.rs).
_DONE, _RESUME = 2, 3


async def _warm(call: Any, timeout: Optional[float]) -> Any:
    """Drives a warm lock call whose connection the running loop has not registered yet
    (``Lock._aio_acquire`` / ``_aio_release`` start every other one themselves): registers
    it (see ``_Conn``) and starts the call as they do, then awaits it (``_warm_outcome``)."""
    loop = asyncio.get_running_loop()
    hub = _hub(loop)
    assert hub is not None  # the call was made for this loop's hub
    ref = hub.conns.get(call.conn_id)
    conn = ref() if ref is not None else None
    if conn is None:
        try:
            conn = hub._watch(call.conn_id, call.fileno())
        except OSError:
            # No descriptor left for the duplicate (EMFILE): the call goes on on a baton
            # thread, as one given up before it wrote anything (nothing can have been granted).
            call.abandon()
            return await _run(call._start_resume, timeout)
    fut, begun = _native._warm_begin(loop, hub, call, conn, timeout)
    return await _warm_outcome(fut, call, conn, begun, timeout)


async def _warm_outcome(fut: "asyncio.Future[Any]", call: Any, conn: _Conn, begun: float,
                        timeout: Optional[float]) -> Any:
    """Awaits a warm lock call started on ``conn`` at loop time ``begun`` (``fut`` gets what
    its step says): the loop writes its one request and reads the answer itself, instead of
    a baton thread blocking on it and handing the outcome over (that hop is what a loop
    loses at a real agent's latency: docs/src/performance.md, "The loops' own floors"). Its
    request is given up (``abandon``) when ``timeout`` or the client's request timeout
    passes. A call the warm path did not settle goes on on a baton thread, with what is left
    of ``timeout``. A cancelled await drops the call: what it may have been granted is given
    back in the background, as a blocking acquire cancelled mid-request does."""
    try:
        state, value = await fut
    except asyncio.CancelledError:
        conn.drop_call(call)
        call.drop_call()
        raise
    if state == _DONE:
        return value
    # What is left of the call's time; a deadline already passed stays passed (a zero would
    # mean "try once" and give the rest a whole request timeout).
    left = None
    if timeout is not None:
        left = timeout - (asyncio.get_running_loop().time() - begun)
        left = max(left, 0.0 if timeout == 0 else 1e-6)
    return await _run(call._start_resume, left)


async def _off_loop(call: Callable[[], Any]) -> Any:
    """Runs a synchronous baton call (one that releases the GIL while it waits) on a pooled
    baton thread and awaits its outcome: never on the event loop, never in the loop's default
    executor. These calls hold nothing to undo."""
    return await _run(_native._start_call, call)
