"""baton: Consul sessions, locks, leader election and semaphores, from one Rust core.

>>> import baton
>>> client = baton.Client()                 # CONSUL_HTTP_ADDR, CONSUL_HTTP_TOKEN, ...
>>> session = client.default_session()      # renewed in the background
>>> session.on_lost(lambda why: print("lost:", why))
>>> client.close()

Records of the Rust core go to the ``logging`` module under the ``baton`` logger.
"""

from ._errors import (
    BatonError,
    CancelledError,
    ClosedError,
    ConflictError,
    ConnectionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ServerError,
    SessionLostError,
    TimeoutError,
)
from ._native import Client, Session, __version__

__all__ = [
    "BatonError",
    "CancelledError",
    "ClosedError",
    "ConflictError",
    "ConnectionError",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "ServerError",
    "SessionLostError",
    "TimeoutError",
    "Client",
    "Session",
    "__version__",
]
