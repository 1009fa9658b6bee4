"""The exception hierarchy. Every baton exception derives from :class:`BatonError` and carries
``code`` (the same name the C API and the Node addon use, e.g. ``"BATON_TIMEOUT"``), ``status``
(Consul's HTTP status, when there was one), ``server_text`` (Consul's own error text),
``endpoint`` (the failing request's method and API path, ``"PUT /v1/session/create"``), ``url``
(the full URL it went to, address prefix included) and
``transient`` (True when Consul could not be reached or could not serve the request *now*: no
raft leader, a refused or reset connection, a request timeout, 429/502/503/504 — worth trying
again later; False for refusals such as 403, 400 or a conflict). Acquires, campaigns and
semaphore waits already wait transient failures out within their timeout."""

import builtins
from typing import Optional


class BatonError(Exception):
    """Base of every baton error."""

    code: str = "BATON_ERROR"
    status: Optional[int] = None
    server_text: Optional[str] = None
    endpoint: Optional[str] = None
    url: Optional[str] = None
    transient: bool = False


class ConnectionError(BatonError, builtins.ConnectionError):
    """Consul could not be reached, or the connection broke."""


class TimeoutError(BatonError, builtins.TimeoutError):
    """The call's deadline passed before it finished."""


class CancelledError(BatonError):
    """The call was cancelled."""


class PermissionDeniedError(BatonError, PermissionError):
    """Consul answered 403 (ACL denial or unknown token)."""


class NotFoundError(BatonError, LookupError):
    """The thing asked for does not exist."""


class InvalidArgumentError(BatonError, ValueError):
    """Consul or baton rejected an argument or the configuration."""


class ConflictError(BatonError):
    """A transaction failed, or a key is used in an incompatible way."""


class SessionLostError(BatonError):
    """The session is gone: destroyed, expired, or invalidated by a failed check."""


class NotHeldError(BatonError, RuntimeError):
    """``release()`` of a lock or semaphore slot this object does not hold: never acquired,
    already released, or lost (the message says which). Also a ``RuntimeError``, as
    ``threading.Lock().release()`` raises, so ``threading``-style code keeps working."""

    code: str = "BATON_NOT_HELD"


class ServerError(BatonError):
    """Consul answered with an error status (see ``status`` and ``server_text``)."""


class ClosedError(BatonError):
    """The client was closed (or this is a forked child of the process that made it)."""


class UnsupportedError(BatonError):
    """The Consul server is too old for what was asked; the message names the version that
    added it (e.g. the ``get-or-empty`` transaction verb)."""
