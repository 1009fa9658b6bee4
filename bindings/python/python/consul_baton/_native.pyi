from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, TypedDict, Union

#: A value written to Consul: bytes, or a str (stored UTF-8 encoded).
Value = Union[bytes, bytearray, memoryview, str]

__version__: str

# The shape of `Client.metrics()` (the core's `MetricsSnapshot::to_json()`). Stub-only types:
# import them for annotations under `typing.TYPE_CHECKING`.

class HistogramSnapshot(TypedDict):
    """A histogram as read at snapshot time (seconds)."""

    #: The buckets' upper bounds, ascending (the last bucket, ``+Inf``, has none).
    bounds: List[float]
    #: Observations per bucket, NOT cumulative: one more than ``bounds`` (the last: ``+Inf``).
    buckets: List[int]
    #: The number of observations (the sum of ``buckets``).
    count: int
    #: The sum of the observations, in seconds.
    sum: float

class MetricsSnapshot(TypedDict):
    """``Client.metrics()``: each metric under its Prometheus name less ``baton_`` and
    ``_total``, labels as nested dicts in label order. Recipes: ``lock``, ``semaphore``,
    ``rwlock``, ``multilock``, ``election``; acquire outcomes: ``acquired``, ``not_acquired``,
    ``timed_out``, ``cancelled``, ``error``; loss reasons: ``key_changed``, ``removed``,
    ``invalidated``, ``deadline_exceeded``, ``destroyed``, ``client_closed``, ``other``;
    request families: ``kv``, ``session``, ``txn``, ``agent``, ``status``, ``other``;
    request outcomes: ``2xx``, ``4xx``, ``429``, ``5xx``, ``no_answer``."""

    #: Holdings held now, by recipe.
    held: Dict[str, int]
    #: Acquire calls by recipe, then outcome (one call, however many tries).
    acquires: Dict[str, Dict[str, int]]
    #: How long acquire calls took, whatever their outcome, by recipe.
    acquire_wait_seconds: Dict[str, HistogramSnapshot]
    #: How long holdings lasted, from acquired to released or lost, by recipe.
    hold_seconds: Dict[str, HistogramSnapshot]
    #: Holdings lost (a release is not a loss), by recipe, then reason.
    losses: Dict[str, Dict[str, int]]
    #: Session renewals by the client's renewer: ``{"ok": n, "failed": n}``.
    renewals: Dict[str, int]
    #: The latency of renewals.
    renewal_seconds: HistogramSnapshot
    #: The smallest lease time left of the client's live sessions with a TTL; None: none.
    lease_left_seconds: Optional[float]
    #: HTTP requests to Consul by endpoint family, then outcome.
    requests: Dict[str, Dict[str, int]]
    #: The latency of (non-blocking) requests by family.
    request_seconds: Dict[str, HistogramSnapshot]
    #: Requests sent again after a transient failure or a stale connection.
    retries: int
    #: Seconds calls spent waiting out a Consul without a leader.
    leaderless_seconds: float
    #: Work owed to Consul and waiting now: ``{"unlocks", "slots", "sessions"}``.
    owed: Dict[str, int]

class Client:
    """A connection to Consul, configured from the CONSUL_* environment variables; keyword
    arguments take precedence.

    Every duration (``request_timeout``, ``ttl``, ``lock_delay``, ``timeout``) is a number of
    seconds. As with ``threading.Lock.acquire`` and ``time.sleep``, NaN or a negative value
    raises ``ValueError`` (except ``acquire``'s ``timeout=-1``: wait forever) and a value above
    9223372036 seconds (``threading.TIMEOUT_MAX`` on 64-bit Linux, about 292 years; infinity
    included) raises ``OverflowError``; both name the parameter. For every wait's
    ``timeout``, ``None`` means no limit (as ``-1`` does for ``acquire``).

    ``request_timeout`` (seconds; ``None``: 30) bounds one ordinary request.
    ``default_session`` configures the client's shared session (used by locks, semaphores and
    elections given no ``session``) with ``create_session``'s keywords as a dict, e.g.
    ``{"ttl": 30, "lock_delay": 0}``; keys left out keep its defaults (name ``"baton"``, ``ttl``
    15 seconds, Consul's ``lock_delay`` of 15 seconds); an unknown key is a ``TypeError``;
    ``{"ttl": None}`` asks for a session without a TTL, ``{"ttl": 0}`` is refused
    (``baton.InvalidArgumentError``), as for ``create_session``."""

    def __init__(
        self,
        address: Optional[str] = None,
        *,
        token: Optional[str] = None,
        token_file: Optional[str] = None,
        datacenter: Optional[str] = None,
        request_timeout: Optional[float] = None,
        default_session: Optional[Mapping[str, Any]] = None,
    ) -> None: ...
    @property
    def address(self) -> str: ...
    @property
    def closed(self) -> bool: ...
    def default_session(self) -> Session:
        """The client's shared session (created on first use with the ``default_session``
        options, replaced once lost)."""
        ...
    def create_session(
        self,
        *,
        name: Optional[str] = None,
        ttl: Optional[float] = 15.0,
        lock_delay: Optional[float] = None,
        behavior: str = "release",
        node: Optional[str] = None,
        node_checks: Optional[Sequence[str]] = None,
        service_checks: Optional[Sequence[str]] = None,
    ) -> Session:
        """Creates a session renewed in the background. ``ttl`` is in seconds, default 15 (the
        default session's and the C API's); ``ttl=None`` asks for a session without a TTL (it
        lives until destroyed or invalidated by a check, so only for sessions bound to health
        checks). ``ttl=0`` is refused (``baton.InvalidArgumentError``, also a ``ValueError``):
        Consul would read it as no TTL. ``lock_delay`` is in seconds,
        default Consul's (15); ``0`` really means none. ``node`` defaults to the agent's node. ``node_checks`` are IDs of checks of
        the node (default Consul's ``["serfHealth"]``; ``[]`` for none) and ``service_checks``
        IDs of service checks: the session is invalidated, and its locks released, when one of
        them turns critical (see :attr:`agent`). Consul refuses a check that is not passing
        (``baton.ServerError`` with Consul's text). For a lock another process must get quickly
        after the check fails, pass ``lock_delay=0``."""
        ...
    def adopt_session(self, session_id: str) -> Session:
        """Manages a session created elsewhere (another process, the ``consul`` CLI). The ID
        must be a UUID (``baton.InvalidArgumentError``) of a session Consul knows
        (``baton.NotFoundError``). A session with a TTL is renewed right away and then in the
        background (renewing only extends it); ``close()`` releases this client's locks held
        with it but never destroys it; ``Session.destroy()`` does. Adopting a session this
        client already manages returns it."""
        ...
    @property
    def agent(self) -> "Agent":
        """The agent's check and service endpoints (TTL checks for binding sessions)."""
        ...
    def kv_get(self, key: str) -> Optional[bytes]:
        """The value at ``key``, or None when the key does not exist."""
        ...
    def kv_get_entry(self, key: str) -> Optional["KvEntry"]:
        """The entry at ``key`` (value, flags, session, indexes), or None."""
        ...
    def kv_put(self, key: str, value: Value, *, flags: int = 0, cas: Optional[int] = None) -> bool:
        """Writes ``value`` (bytes, or str stored UTF-8 encoded) at ``key`` with ``flags``.
        With ``cas`` only if the key's ModifyIndex is ``cas`` (0: only if it does not exist).
        Returns whether Consul applied it."""
        ...
    def kv_delete(self, key: str, *, cas: Optional[int] = None) -> bool:
        """Deletes ``key`` (a missing key is not an error); with ``cas`` only if its
        ModifyIndex is ``cas``. Returns whether Consul applied it."""
        ...
    def close(self, timeout: Optional[float] = 5.0) -> bool:
        """Releases what the client holds, destroys its sessions, stops its threads; whether
        that finished within ``timeout`` seconds (``None``: no limit)."""
        ...
    def metrics(self) -> MetricsSnapshot:
        """A snapshot of this client's metrics, counted in the core since the client was
        made (the same names and meanings in every language): a ``dict`` with each metric
        under its Prometheus name less ``baton_`` and ``_total`` (``m["acquires"]["lock"]
        ["timed_out"]``, ``m["held"]["lock"]``), durations in seconds, histograms as
        ``{"bounds", "buckets", "count", "sum"}`` with ``buckets`` per bucket (not
        cumulative; the last is ``+Inf``). Cheap: reads atomic counters, makes no request.
        ``consul_baton.prometheus.register`` exposes it to ``prometheus_client``."""
        ...
    def lock(self, key: str, *, value: Optional[Value] = None, session: Optional["Session"] = None) -> "Lock":
        """A lock on ``key``; ``value`` (bytes, or str stored UTF-8 encoded) is written on
        acquire; ``session`` defaults to the client's default session."""
        ...
    def semaphore(
        self, prefix: str, limit: int, *, value: Optional[Value] = None, session: Optional["Session"] = None
    ) -> "Semaphore":
        """A semaphore of ``limit`` slots under ``prefix`` (``value`` as for ``lock``)."""
        ...
    def election(
        self, key: str, *, session: Optional["Session"] = None, flags: Optional[int] = None
    ) -> "Election":
        """A participant in the election on ``key``. ``flags``: what the leader key is written
        with; by default Go's ``api.Lock`` flag (Go services take part), ``0`` to campaign
        alongside clients that follow Consul's leader-election guide (a plain ``?acquire=``:
        curl, py-consul, most scripts). Reading the leader (``leader()``, ``observe()``) works
        on either format."""
        ...
    def leader(self, key: str) -> Optional["Leader"]:
        """The current leader of the election on ``key`` (one consistent read), or None."""
        ...
    def check_sequencer(self, sequencer: "Sequencer") -> bool:
        """Whether ``sequencer`` is still current (one consistent read)."""
        ...
    def guarded_put(self, sequencer: "Sequencer", key: str, value: Value) -> None:
        """Writes ``value`` at ``key`` only while ``sequencer``'s session still holds its lock;
        a stale holder gets ``baton.ConflictError`` and nothing is written."""
        ...
    def guarded_txn(self, sequencer: "Sequencer", ops: Sequence[Mapping[str, Any]]) -> "list[KvEntry]":
        """Runs ``ops`` in one transaction behind a ``check-session`` of ``sequencer``'s key.
        Each op is a dict: ``verb`` (Consul's: ``"set"``, ``"cas"``, ``"get"``, ``"delete"``,
        ``"check-index"``, ...), ``key``, and as the verb needs ``value`` (bytes or str),
        ``flags``, ``index``, ``session``. A stale holder gets ``baton.ConflictError``
        (``stale sequencer ...``) and nothing is written. Returns the entries Consul
        reported."""
        ...
    def read_lock(self, prefix: str) -> "RwLock":
        """The reader side of the read-write lock on ``prefix`` (each call a handle with a
        contender key of its own): readers hold together, a writer holds alone."""
        ...
    def write_lock(self, prefix: str) -> "RwLock":
        """The writer side of the read-write lock on ``prefix``."""
        ...
    def multi_lock(
        self, keys: Sequence[str], *, value: Optional[Value] = None, session: Optional["Session"] = None
    ) -> "MultiLock":
        """A lock on all of ``keys`` at once (at least two different keys; duplicates dropped,
        sorted): all or none."""
        ...
    def leader_task(
        self,
        key: str,
        value: Value,
        *,
        requeue: bool = True,
        requeue_delay: Optional[float] = None,
        on_started_leading: Optional[Callable[[], object]] = None,
        on_stopped_leading: Optional[Callable[[str], object]] = None,
        on_new_leader: Optional[Callable[[Optional["Leader"]], object]] = None,
    ) -> "LeaderTask":
        """A leader task on the election ``key``, campaigning with ``value``. ``requeue``:
        campaign again after a term; ``requeue_delay`` (seconds, default 0.5): how long a
        candidate whose task returned lets another take over first. ``on_started_leading()``
        and ``on_stopped_leading(reason)`` (``"returned"``, ``"failed"``, ``"lost"``,
        ``"stopped"``) run on the thread calling ``run``; ``on_new_leader(leader)`` (a
        ``Leader`` or None) on baton's callback thread while ``run`` runs."""
        ...
    def group(self, prefix: str) -> "Group":
        """The group of members under ``prefix``."""
        ...
    def barrier(self, key: str) -> "Barrier":
        """A barrier on ``key`` (nothing is written until ``hold()``)."""
        ...
    def double_barrier(self, prefix: str, count: int, *, session: Optional["Session"] = None) -> "DoubleBarrier":
        """A double barrier of ``count`` participants (1 to 126) on ``prefix``."""
        ...
    def counter(self, key: str) -> "Counter":
        """A counter kept in ``key`` (an absent key is 0)."""
        ...
    def __enter__(self) -> "Client": ...
    def __exit__(self, *args: object) -> bool: ...

class Session:
    """A Consul session renewed in the background."""

    @property
    def id(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def ttl(self) -> Optional[float]:
        """The TTL in seconds as Consul last reported it; None for no TTL."""
        ...
    @property
    def cancel_token(self) -> "CancelToken":
        """A token baton cancels when the session is lost (watch-only: its ``cancel()``
        raises ``TypeError``)."""
        ...
    def is_valid(self) -> bool: ...
    def time_left(self) -> Optional[float]:
        """Seconds left until the local lease deadline (moved forward by each successful
        renew); 0.0 once lost or past it; None for a session without a TTL."""
        ...
    def valid_until(self) -> Optional[float]:
        """The local lease deadline as a ``time.monotonic()`` value in seconds; None for a
        session without a TTL."""
        ...
    def wait_lost(self, timeout: Optional[float] = None, *, cancel: Optional["CancelToken"] = None) -> str:
        """Blocks until the session is lost; returns why. ``timeout`` in seconds (``None``:
        no limit) raises ``baton.TimeoutError``; ``cancel`` raises ``baton.CancelledError``.
        It may return before the ``on_lost`` callbacks have run (they run on another
        thread)."""
        ...
    def on_lost(self, callback: Callable[[str], object]) -> int:
        """Calls ``callback(reason)`` once when lost, on baton's callback thread (the
        dispatcher), after the state change: ``is_valid()`` is already False and
        ``cancel_token`` cancelled. Not ordered with ``wait_lost()``, which may return
        before the callback has run. Exceptions it raises go to ``sys.unraisablehook``.
        Returns an id for ``remove_callback``."""
        ...
    def remove_callback(self, callback_id: int) -> bool:
        """Removes an ``on_lost`` callback; True if it was registered."""
        ...
    def destroy(self) -> None: ...

class CancelToken:
    """Cancels blocking calls from another thread: pass it as ``cancel=`` to ``acquire``,
    ``campaign``, ``wait_lost`` or ``Observer.next``, then call ``cancel()``; the call raises
    ``baton.CancelledError`` and whatever it acquired meanwhile is released. Shaped like
    ``threading.Event``. The tokens of holdings and sessions (``Lock.cancel_token``, ...) are
    cancelled by baton and cannot be cancelled by hand (``TypeError``)."""

    def __init__(self) -> None: ...
    def cancel(self) -> None: ...
    def cancelled(self) -> bool: ...
    def wait(self, timeout: Optional[float] = None) -> bool:
        """Blocks until cancelled (True) or ``timeout`` seconds pass (False; ``None``: no
        limit). Ctrl-C interrupts it."""
        ...

class KvEntry:
    """A KV entry, as read (``Client.kv_get_entry``) or as a transaction returned it."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> Optional[bytes]: ...
    @property
    def flags(self) -> int: ...
    @property
    def session(self) -> Optional[str]: ...
    @property
    def lock_index(self) -> int: ...
    @property
    def create_index(self) -> int: ...
    @property
    def modify_index(self) -> int: ...

class Agent:
    """The local agent's check and service endpoints: one request each, bounded by the
    client's ``request_timeout``. Bad input raises ``baton.InvalidArgumentError``; Consul's
    refusals carry its text (an unknown check: ``baton.NotFoundError`` or
    ``baton.ServerError``, depending on the version).

    Recipe: ``check_register("worker-1", ttl=2.0)``, ``check_pass("worker-1")``,
    ``create_session(node_checks=["serfHealth", "worker-1"], lock_delay=0)``, then call
    ``check_pass`` more often than every ``ttl`` seconds while healthy: when the health
    function fails the check turns critical after ``ttl`` and the session's locks are lost."""

    def check_register(
        self,
        check_id: str,
        ttl: float,
        *,
        name: Optional[str] = None,
        service_id: Optional[str] = None,
        notes: Optional[str] = None,
        status: Optional[str] = None,
    ) -> None:
        """Registers (or replaces) a TTL check: critical when ``ttl`` seconds pass without a
        report. It starts critical unless ``status`` (``"passing"``, ``"warning"``,
        ``"critical"``) says otherwise. With ``service_id`` it is a check of that service."""
        ...
    def check_deregister(self, check_id: str) -> None:
        """Removes a check; sessions bound to it are invalidated."""
        ...
    def check_pass(self, check_id: str, note: Optional[str] = None) -> None:
        """Reports the check passing; its ``ttl`` starts again."""
        ...
    def check_warn(self, check_id: str, note: Optional[str] = None) -> None:
        """Reports the check warning (bound sessions stay valid)."""
        ...
    def check_fail(self, check_id: str, note: Optional[str] = None) -> None:
        """Reports the check critical: bound sessions are invalidated."""
        ...
    def check_update(self, check_id: str, status: str, output: Optional[str] = None) -> None:
        """Sets the status (``"passing"``, ``"warning"``, ``"critical"``) and output."""
        ...
    def service_register(
        self,
        name: str,
        *,
        service_id: Optional[str] = None,
        tags: Optional[Sequence[str]] = None,
        address: Optional[str] = None,
        port: Optional[int] = None,
    ) -> None:
        """Registers (or replaces) a service (``service_id`` defaults to ``name``)."""
        ...
    def service_deregister(self, service_id: str) -> None:
        """Removes a service and its checks."""
        ...

class Sequencer:
    """Proof of one acquisition; `str()` gives a stable form that `parse` reads back."""

    @property
    def key(self) -> str: ...
    @property
    def session(self) -> str: ...
    @property
    def lock_index(self) -> int: ...
    @property
    def token(self) -> int: ...
    @staticmethod
    def parse(text: str) -> "Sequencer": ...

class Lock:
    """A distributed lock on one key (Go api.Lock compatible), used like threading.Lock.
    ``value`` reads as bytes and accepts bytes or str (stored UTF-8 encoded)."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> bytes: ...
    @value.setter
    def value(self, value: Value) -> None: ...
    @property
    def sequencer(self) -> Optional[Sequencer]: ...
    @property
    def lost_reason(self) -> Optional[str]:
        """Why the last holding ended (``"released"``, ``"key_changed"``, ``"removed"``,
        ``"session_lost"``, ``"client_closed"``); None while held and before the first acquire."""
        ...
    @property
    def lost_session_reason(self) -> Optional[str]:
        """With ``lost_reason == "session_lost"``: why the session was lost, as the session
        reports it (``"invalidated"``, ``"deadline_exceeded"``, ``"destroyed"``); else None."""
        ...
    @property
    def cancel_token(self) -> CancelToken:
        """A token baton cancels when the current holding ends (already cancelled when not
        held)."""
        ...
    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = -1, *, cancel: Optional[CancelToken] = None
    ) -> bool:
        """True once held; False when ``timeout`` seconds pass (``-1`` or ``None``: no limit)
        or when ``blocking=False`` and it is taken. ``cancel`` raises
        ``baton.CancelledError``; Ctrl-C interrupts. Nothing is left held either way."""
        ...
    def release(self) -> None:
        """``baton.NotHeldError`` (a ``BatonError`` and a ``RuntimeError``, code
        ``BATON_NOT_HELD``) if not held: never acquired, released, or lost."""
        ...
    def locked(self) -> bool: ...
    def on_lost(self, callback: Callable[[str], object]) -> int:
        """Calls ``callback(reason)`` once per lost holding (``"key_changed"``,
        ``"session_lost"``), on baton's callback thread (the dispatcher), after the state
        change: ``locked()`` is already False and ``cancel_token`` cancelled. Not ordered with
        ``wait_lost()``, which may return before the callback has run. Exceptions it raises go
        to ``sys.unraisablehook``. Returns an id for ``remove_callback``."""
        ...
    def remove_callback(self, callback_id: int) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> str:
        """Blocks until the holding ends; returns why. ``timeout`` in seconds (``None``: no
        limit). It may return before the ``on_lost`` callbacks have run."""
        ...
    def destroy(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *args: object) -> bool: ...

class Semaphore:
    """A counting semaphore on a prefix (Go api.Semaphore compatible)."""

    @property
    def prefix(self) -> str: ...
    @property
    def limit(self) -> int: ...
    @property
    def lost_reason(self) -> Optional[str]:
        """Why the last holding ended (``"released"``, ``"key_changed"``, ``"removed"``,
        ``"session_lost"``, ``"client_closed"``); None while held and before the first acquire."""
        ...
    @property
    def lost_session_reason(self) -> Optional[str]:
        """With ``lost_reason == "session_lost"``: why the session was lost, as the session
        reports it (``"invalidated"``, ``"deadline_exceeded"``, ``"destroyed"``); else None."""
        ...
    @property
    def cancel_token(self) -> CancelToken:
        """A token baton cancels when the current holding ends."""
        ...
    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = -1, *, cancel: Optional[CancelToken] = None
    ) -> bool:
        """As ``Lock.acquire`` (``timeout`` in seconds, ``-1`` or ``None``: no limit)."""
        ...
    def release(self) -> None:
        """``baton.NotHeldError`` if not held."""
        ...
    def locked(self) -> bool: ...
    def on_lost(self, callback: Callable[[str], object]) -> int:
        """As ``Lock.on_lost`` (``"removed"``, ``"session_lost"``): on baton's callback
        thread, after the state change; ``wait_lost()`` may return before it has run."""
        ...
    def remove_callback(self, callback_id: int) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> str:
        """Blocks until the holding ends; returns why. ``timeout`` in seconds (``None``: no
        limit). It may return before the ``on_lost`` callbacks have run."""
        ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *args: object) -> bool: ...

class Leader:
    """The leader as read from the election key."""

    @property
    def value(self) -> bytes: ...
    @property
    def session(self) -> str: ...
    @property
    def lock_index(self) -> int: ...
    @property
    def token(self) -> int: ...

class Observer:
    """Iterator over leader changes: a Leader, or None for no leader. It never ends by
    itself, so ``for leader in election.observe():`` keeps receiving changes across
    failovers (``None`` between two leaders); errors are raised. The first item is the
    current state. ``baton.aio``'s ``async for`` yields the same items."""

    def next(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> Optional[Leader]:
        """The next change; ``timeout`` in seconds (``None``: no limit) raises
        ``baton.TimeoutError``."""
        ...
    def __iter__(self) -> "Observer": ...
    def __next__(self) -> Optional[Leader]: ...

class Election:
    """A participant in the leader election on one key."""

    def campaign(
        self, value: Value, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None
    ) -> bool:
        """True once elected; False when ``timeout`` seconds pass (``None`` or ``-1``: no
        limit). ``cancel`` raises ``baton.CancelledError``."""
        ...
    def resign(self) -> bool: ...
    def proclaim(self, value: Value) -> None: ...
    def is_leader(self) -> bool: ...
    def leader(self) -> Optional[Leader]: ...
    def observe(self) -> Observer: ...
    @property
    def sequencer(self) -> Optional[Sequencer]: ...
    @property
    def lost_reason(self) -> Optional[str]:
        """Why the last holding ended (``"released"``, ``"key_changed"``, ``"removed"``,
        ``"session_lost"``, ``"client_closed"``); None while held and before the first acquire."""
        ...
    @property
    def lost_session_reason(self) -> Optional[str]:
        """With ``lost_reason == "session_lost"``: why the session was lost, as the session
        reports it (``"invalidated"``, ``"deadline_exceeded"``, ``"destroyed"``); else None."""
        ...
    @property
    def cancel_token(self) -> CancelToken:
        """A token baton cancels when leadership ends."""
        ...
    def on_lost(self, callback: Callable[[str], object]) -> int:
        """As ``Lock.on_lost``, when leadership is lost: on baton's callback thread, after the
        state change (``is_leader()`` already False); ``wait_lost()`` may return before it
        has run."""
        ...
    def remove_callback(self, callback_id: int) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> str:
        """Blocks until leadership ends; returns why. ``timeout`` in seconds (``None``: no
        limit). It may return before the ``on_lost`` callbacks have run."""
        ...

class RwLock:
    """One side (reader or writer) of the read-write lock on a prefix, used like ``Lock``.
    A waiting writer holds later readers back."""

    @property
    def prefix(self) -> str: ...
    @property
    def mode(self) -> str:
        """``"read"`` or ``"write"``."""
        ...
    @property
    def key(self) -> Optional[str]:
        """The contender key of the current holding, or None."""
        ...
    @property
    def sequencer(self) -> Optional[Sequencer]: ...
    @property
    def lost_reason(self) -> Optional[str]:
        """Why the last holding ended (``"released"``, ``"key_changed"``, ``"removed"``,
        ``"session_lost"``, ``"client_closed"``); None while held and before the first acquire."""
        ...
    @property
    def lost_session_reason(self) -> Optional[str]:
        """With ``lost_reason == "session_lost"``: why the session was lost; else None."""
        ...
    @property
    def cancel_token(self) -> CancelToken:
        """A token baton cancels when the current holding ends."""
        ...
    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = -1, *, cancel: Optional[CancelToken] = None
    ) -> bool:
        """As ``Lock.acquire`` (``timeout`` in seconds, ``-1`` or ``None``: no limit); nothing
        is left held or queued when it returns False or raises."""
        ...
    def release(self) -> None:
        """``baton.NotHeldError`` if not held."""
        ...
    def locked(self) -> bool: ...
    def on_lost(self, callback: Callable[[str], object]) -> int:
        """As ``Lock.on_lost``: on baton's callback thread, after the state change."""
        ...
    def remove_callback(self, callback_id: int) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> str:
        """Blocks until the holding ends; returns why. ``timeout`` in seconds (``None``: no
        limit)."""
        ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *args: object) -> bool: ...

class MultiLock:
    """A lock on several keys at once, all or none, used like ``Lock``."""

    @property
    def keys(self) -> "list[str]": ...
    @property
    def value(self) -> bytes: ...
    @property
    def sequencers(self) -> "list[Sequencer]":
        """One sequencer per key (in ``keys`` order) while held; empty otherwise."""
        ...
    @property
    def sequencer(self) -> Optional[Sequencer]: ...
    @property
    def lost_reason(self) -> Optional[str]:
        """Why the last holding ended (``"released"``, ``"key_changed"``, ``"removed"``,
        ``"session_lost"``, ``"client_closed"``); None while held and before the first acquire."""
        ...
    @property
    def lost_session_reason(self) -> Optional[str]:
        """With ``lost_reason == "session_lost"``: why the session was lost; else None."""
        ...
    @property
    def cancel_token(self) -> CancelToken:
        """A token baton cancels when the current holding ends."""
        ...
    def acquire(
        self, blocking: bool = True, timeout: Optional[float] = -1, *, cancel: Optional[CancelToken] = None
    ) -> bool:
        """As ``Lock.acquire`` (``timeout`` in seconds, ``-1`` or ``None``: no limit); nothing
        is left held or queued when it returns False or raises."""
        ...
    def release(self) -> None:
        """``baton.NotHeldError`` if not held."""
        ...
    def locked(self) -> bool: ...
    def on_lost(self, callback: Callable[[str], object]) -> int:
        """As ``Lock.on_lost``: on baton's callback thread, after the state change."""
        ...
    def remove_callback(self, callback_id: int) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> str:
        """Blocks until the holding ends; returns why. ``timeout`` in seconds (``None``: no
        limit)."""
        ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *args: object) -> bool: ...

class LeaderTask:
    """Runs a task while leading an election, and only then."""

    @property
    def key(self) -> str: ...
    @property
    def sequencer(self) -> Optional[Sequencer]:
        """The fencing sequencer of the current term, or None."""
        ...
    def is_leader(self) -> bool: ...
    def run(self, task: Callable[[CancelToken], object], stop: Optional[CancelToken] = None) -> None:
        """Campaigns and calls ``task(token)`` on this thread while leading, until ``stop``
        is cancelled (or, with ``requeue=False``, for one term). ``token`` fires the moment
        leadership is lost or ``stop`` fires. A task's ``Exception`` ends its term as
        ``"failed"`` (raised by ``run`` without requeue); ``KeyboardInterrupt`` and other
        ``BaseException``s stop ``run`` and are raised."""
        ...

class MemberInfo:
    """One live member of a group, as read from Consul."""

    @property
    def id(self) -> str: ...
    @property
    def value(self) -> bytes: ...
    @property
    def session(self) -> str: ...
    @property
    def create_index(self) -> int: ...
    @property
    def modify_index(self) -> int: ...

class MembershipEvent:
    """One change of a group: ``kind`` is ``"snapshot"`` (``members``), ``"joined"`` or
    ``"updated"`` (``member``, ``id``) or ``"left"`` (``id``)."""

    @property
    def kind(self) -> str: ...
    @property
    def id(self) -> Optional[str]: ...
    @property
    def member(self) -> Optional[MemberInfo]: ...
    @property
    def members(self) -> "Optional[list[MemberInfo]]": ...

class MembersWatch:
    """A group's snapshot, then each join, leave and update (an iterator that never ends by
    itself)."""

    def next(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> Optional[MembershipEvent]:
        """The next event; None when ``timeout`` seconds pass with nothing new."""
        ...
    def members(self) -> "Optional[list[MemberInfo]]": ...
    def close(self) -> None: ...
    def __iter__(self) -> "MembersWatch": ...
    def __next__(self) -> MembershipEvent: ...

class Member:
    """This process's membership of a group; ``with`` leaves on exit."""

    @property
    def id(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def session(self) -> Session: ...
    @property
    def lost_reason(self) -> Optional[str]:
        """``"left"``, ``"key_changed"``, ``"session_lost"``; None while a member."""
        ...
    @property
    def lost_session_reason(self) -> Optional[str]: ...
    @property
    def cancel_token(self) -> CancelToken: ...
    def is_member(self) -> bool: ...
    def wait_lost(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> str:
        """Blocks until the membership ends; returns why. ``timeout`` in seconds (``None``: no
        limit) raises ``baton.TimeoutError``."""
        ...
    def update_value(self, value: Value) -> None: ...
    def leave(self) -> bool: ...
    def __enter__(self) -> "Member": ...
    def __exit__(self, *args: object) -> bool: ...

class Group:
    """A group of members under one prefix."""

    @property
    def prefix(self) -> str: ...
    def join(self, id: str, value: Optional[Value] = None, *, session: Optional[Session] = None) -> Member: ...
    def members(self) -> "list[MemberInfo]": ...
    def watch(self) -> MembersWatch: ...

class Barrier:
    """A barrier on one key: ``hold()`` raises it, ``release()`` lowers it, ``wait()``
    blocks until it is down."""

    @property
    def key(self) -> str: ...
    def hold(self, *, session: Optional[Session] = None) -> bool: ...
    def release(self) -> bool: ...
    def is_held(self) -> bool: ...
    def wait(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> bool:
        """True once down (at once if not up); False when ``timeout`` seconds pass."""
        ...

class DoubleBarrier:
    """A double barrier of ``count`` participants; ``with`` enters and leaves."""

    @property
    def prefix(self) -> str: ...
    @property
    def count(self) -> int: ...
    def is_entered(self) -> bool: ...
    def enter(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> bool:
        """Waits until a round of ``count`` that counts this participant opens: True once
        entered, False when ``timeout`` seconds pass (``None``: no limit)."""
        ...
    def leave(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> bool:
        """Leaves, then waits until every participant of the round has: True, or False when
        ``timeout`` seconds pass (it has left either way)."""
        ...
    def __enter__(self) -> "DoubleBarrier": ...
    def __exit__(self, *args: object) -> bool: ...

class CounterWatch:
    """The values a counter takes (an iterator that never ends by itself)."""

    def next(self, timeout: Optional[float] = None, *, cancel: Optional[CancelToken] = None) -> Optional[int]:
        """The next value (the first call: the current one); None when ``timeout`` seconds
        pass with no change."""
        ...
    def close(self) -> None: ...
    def __iter__(self) -> "CounterWatch": ...
    def __next__(self) -> int: ...

class Counter:
    """A counter kept in one key, changed atomically across processes."""

    @property
    def key(self) -> str: ...
    def get(self) -> int: ...
    def get_with_index(self) -> Tuple[int, int]: ...
    def set(self, value: int) -> None: ...
    def add(self, delta: int) -> int: ...
    def increment(self) -> int: ...
    def decrement(self) -> int: ...
    def compare_and_set(self, expected: int, new: int) -> bool: ...
    def watch(self) -> CounterWatch: ...

class LeaderTerms:
    """A leader task's run for ``baton.aio`` (``LeaderTask._terms(stop)``), one term at a time;
    dropping it ends the run (a leadership still held is given back)."""

    def _start_next_term(self, done: Any) -> Pending:
        """Campaigns (driven, no thread of its own): a ``Term`` once leading, None once over."""
        ...

class Term:
    """One term of a ``LeaderTerms`` run."""

    @property
    def token(self) -> CancelToken:
        """Cancelled the moment leadership ends or the run's ``stop`` fires."""
        ...
    def _start_wait_end(self, done: Any) -> Pending: ...
    def _start_finish(self, done: Any, failure: Optional[str] = None) -> Pending:
        """Ends the term (``failure``: the task's failure, or None); resolves to whether the
        run goes on."""
        ...

class Pending:
    """A core call running on a baton thread, started by the `_start_*` methods that
    `baton.aio` uses."""

    def cancel(self) -> None: ...
    def cancelled(self) -> bool: ...
    def _give_back(self, finished: Callable[[], None]) -> bool:
        """Gives back what the call acquired, which nobody will take; a baton thread calls
        ``finished()`` after. False when there is nothing to give back."""
        ...

class LeaderEvents:
    """An observed election as ``baton.aio`` follows it (``Election._observe_stream()``): the
    current state first, then every change; a pending next holds no thread."""

    def _start_next(self, done: Any, timeout: Optional[float] = None) -> Pending:
        """Starts the wait for the next state, reported to ``done``; ``timeout`` in seconds
        (``None``: no limit)."""
        ...

class Hub:
    """Where baton threads queue the outcomes of one event loop's ``baton.aio`` calls; the loop
    reads ``fileno()`` and calls ``drain()`` (``baton.aio`` sets this up)."""

    def __init__(self) -> None: ...
    def fileno(self) -> int: ...
    def drain(self) -> bool:
        """Reports the queued outcomes; True when ``turn_over()`` is due once the tasks they
        woke have run."""
        ...
    def turn_over(self) -> None:
        """The loop's turn that took the drained outcomes is over (their tasks made their next
        calls): the baton threads that delivered them may park."""
        ...
    def in_turn(self) -> bool:
        """Whether an outcome was drained in a turn that is not over: a call made now finds
        the baton thread that delivered it awake."""
        ...

class WarmCall:
    """A lock acquire or release whose one request ``baton.aio``'s event loop writes and reads
    itself (``Lock._aio_acquire`` / ``_aio_release`` make and start it; ``baton.aio`` awaits it)."""

    def fileno(self) -> int: ...
    @property
    def conn_id(self) -> int:
        """Which connection ``fileno()`` belongs to: unique in the process, so the loop can
        keep a duplicate of the socket registered between calls and tell it from a later
        connection given the same descriptor number. A connection baton drops is shut down,
        so a duplicate still registered turns readable."""
        ...
    @property
    def time_limit(self) -> float:
        """Seconds its request may take before the loop gives it up (the client's request
        timeout)."""
        ...
    def abandon(self) -> None:
        """Gives the call up as a warm one (its time ran out); ``_start_resume`` finishes it."""
        ...
    def drop_call(self) -> None:
        """Drops the call in flight (its task was cancelled): what it may have acquired is
        given back, and a release goes on, in the background."""
        ...
    def _start_resume(self, done: Any, timeout: Optional[float] = None) -> Pending:
        """Finishes on a baton thread what the warm path handed over; ``timeout`` in seconds
        (what is left of the call's; None: no limit)."""
        ...

class LoopConn:
    """The native half of ``baton.aio``'s ``_Conn`` (an agent connection as an event loop's
    warm calls use it): the call in flight on it and the step a readiness of its socket takes.
    ``hub`` is the loop's ``_LoopHub`` (``_let_go``, ``_write_interest``); ``running(loop)``
    gives the task running on a loop, or None."""

    def __init__(self, conn_id: int, fd: int, hub: Any,
                 running: Callable[[Any], Any]) -> None: ...
    @property
    def id(self) -> int: ...
    @property
    def fd(self) -> int:
        """The duplicate of the connection's socket; -1 once closed."""
        ...
    def _take_fd(self) -> int:
        """Takes the duplicate to close it (``fd`` is -1 from now on); -1 if already taken."""
        ...
    @property
    def call(self) -> Optional[WarmCall]:
        """The warm call in flight on it, or None."""
        ...
    @property
    def fut(self) -> Any:
        """What gets the call's outcome, or None."""
        ...
    @property
    def deadline(self) -> float:
        """The loop time the call in flight is given up at."""
        ...
    @property
    def writing(self) -> bool:
        """Whether the loop also polls it for writing."""
        ...
    def start(self, call: WarmCall, fut: Any, deadline: float) -> None:
        """Starts ``call`` on it: ``fut`` gets ``(2, value)`` once settled, or ``(3, None)``
        when ``_start_resume`` must finish it (its time ran out)."""
        ...
    def readable(self) -> None:
        """The loop's reader callback: steps the call in flight, and on its outcome runs the
        awaiting task's step at once (``_wake_now``)."""
        ...
    def writable(self) -> None:
        """The loop's writer callback."""
        ...
    def finish(self) -> None:
        """The call in flight no longer uses it."""
        ...
    def drop_call(self, call: WarmCall) -> None:
        """``finish`` if ``call`` is the call in flight (its await was cancelled)."""
        ...

def _wake_now(fut: Any, value: Any, running: Callable[[Any], Any]) -> None:
    """Sets ``fut``'s result and runs the step of the task awaiting it at once, when its one
    done-callback is that wake-up and no task is running on its loop (``running(loop)`` is
    None); ``set_result`` alone otherwise. Only from a loop callback."""
    ...

def _warm_begin(loop: Any, hub: Any, call: WarmCall, conn: LoopConn,
                timeout: Optional[float] = None) -> Tuple[Any, float]:
    """Starts warm ``call`` on ``conn`` (the loop's registration of its connection, ``hub``
    the loop's): its future, its deadline (the hub's timer armed if it is the earliest), its
    request written. Returns the future and the loop time it began at. ``_loop._warm`` calls
    it once it has registered the connection; ``Lock._aio_acquire`` / ``_aio_release`` do the
    same in one call."""
    ...

def _end_idle_threads() -> None:
    """Ends ``baton.aio``'s idle threads (waiting 100 ms at most): called once a client has
    closed, so no baton thread outlives it."""
    ...

def _start_call(done: Any, call: Callable[[], Any]) -> Pending:
    """Runs ``call()`` on a pooled baton thread and reports ``done(ok, value)`` (``baton.aio``'s
    short synchronous calls)."""
    ...

def _metric_defs() -> List[Tuple[str, str, List[str], str]]:
    """The metrics every client exposes, in exposition order, as ``(name, type, labels,
    help)``: the core's one table (``consul_baton.prometheus.metric_defs()``)."""
    ...

def devserver_main(args: Sequence[str], argv0: Optional[str] = None) -> int:
    """Runs the `baton-devserver` command line (``args`` without the program name) until
    SIGINT or SIGTERM and returns its exit status (``consul_baton.devserver.main``)."""
    ...
