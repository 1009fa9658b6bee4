"""baton: Consul sessions, locks, leader election, semaphores and more recipes (read-write
and multi-key locks, leader tasks, group membership, barriers, counters), from one Rust core.

>>> import consul_baton as baton
>>> client = baton.Client()                 # CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN, ...
>>> session = client.default_session()      # renewed in the background
>>> session.on_lost(lambda why: print("lost:", why))
>>> with client.lock("jobs/report"):          # Go api.Lock compatible
...     pass                                  # work while holding it
>>> client.close()

Records of the Rust core go to the ``logging`` module under the ``baton`` logger.
For asyncio, ``baton.aio`` has awaitable faces of the same objects (``async with``,
``await lock.acquire()``, ``async for leader in election.observe()``).
"""

from ._errors import (
    BatonError,
    CancelledError,
    ClosedError,
    ConflictError,
    ConnectionError,
    InvalidArgumentError,
    NotFoundError,
    NotHeldError,
    PermissionDeniedError,
    ServerError,
    SessionLostError,
    TimeoutError,
    UnsupportedError,
)
from ._native import (
    Agent,
    Barrier,
    CancelToken,
    Client,
    Counter,
    CounterWatch,
    DoubleBarrier,
    Election,
    Group,
    KvEntry,
    Leader,
    LeaderTask,
    Lock,
    Member,
    MemberInfo,
    MembersWatch,
    MembershipEvent,
    MultiLock,
    Observer,
    RwLock,
    Semaphore,
    Sequencer,
    Session,
    __version__,
)

__all__ = [
    "BatonError",
    "CancelledError",
    "ClosedError",
    "ConflictError",
    "ConnectionError",
    "InvalidArgumentError",
    "NotFoundError",
    "NotHeldError",
    "PermissionDeniedError",
    "ServerError",
    "SessionLostError",
    "TimeoutError",
    "UnsupportedError",
    "Agent",
    "CancelToken",
    "Client",
    "Session",
    "Lock",
    "Semaphore",
    "Election",
    "Observer",
    "Leader",
    "Sequencer",
    "KvEntry",
    "RwLock",
    "MultiLock",
    "LeaderTask",
    "Group",
    "Member",
    "MemberInfo",
    "MembersWatch",
    "MembershipEvent",
    "Barrier",
    "DoubleBarrier",
    "Counter",
    "CounterWatch",
    "__version__",
]
