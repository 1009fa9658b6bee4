"""pytest plugin of consul-baton (registered through the ``pytest11`` entry point).

Fixtures:

* ``consul_devserver`` (session scope): a :class:`consul_baton.devserver.DevServer` started
  once per test session; ``.addr`` is ``host:port`` for ``CONSUL_HTTP_ADDR`` or any Consul
  client, and its methods are the fault controls (``pause()``, ``restart()``,
  ``set_leader(False)``, ``invalidate_session(id)``, ``fail_node()``, ...). Stopped at the end.
* ``consul_devserver_factory`` (function scope): ``factory(**kwargs)`` starts a fresh server
  (``start_devserver`` arguments) that is stopped after the test.

Options: the ini key ``consul_devserver_args`` adds ``baton-devserver`` arguments to the
session server (e.g. ``--session-ttl-min 100ms``).
"""

from typing import Any, Callable, Iterator, List

import pytest

from .devserver import DevServer, start_devserver


def pytest_addoption(parser: Any) -> None:
    parser.addini(
        "consul_devserver_args",
        type="args",
        default=[],
        help="extra baton-devserver arguments for the consul_devserver fixture",
    )


@pytest.fixture(scope="session")
def consul_devserver(pytestconfig: Any) -> Iterator[DevServer]:
    """A Consul-compatible dev server for the whole test session (stopped at its end)."""
    server = start_devserver(args=list(pytestconfig.getini("consul_devserver_args")))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def consul_devserver_factory() -> Iterator[Callable[..., DevServer]]:
    """``factory(**start_devserver_kwargs)``: a fresh dev server, stopped after the test."""
    started: List[DevServer] = []

    def factory(**kwargs: Any) -> DevServer:
        server = start_devserver(**kwargs)
        started.append(server)
        return server

    try:
        yield factory
    finally:
        for server in started:
            server.stop()
