"""A client's metrics in a ``prometheus_client`` registry (issue 47).

>>> import consul_baton as baton
>>> import prometheus_client
>>> from consul_baton import prometheus
>>> client = baton.Client()
>>> collector = prometheus.register(client)     # into prometheus_client.REGISTRY
>>> prometheus_client.start_http_server(8000)    # or generate_latest(), or your framework's
>>> prometheus_client.REGISTRY.unregister(collector)

:func:`register` adds a collector that takes a :meth:`baton.Client.metrics` snapshot at
each scrape and yields it as metric families under the names, help texts and labels of
the core's one table (``baton_acquires_total{recipe, outcome}``,
``baton_acquire_wait_seconds{recipe}``, ... ; :func:`metric_defs` lists them), as the
Rust ``prometheus`` feature does: counters end in ``_total``, histograms have cumulative
``le`` buckets, ``baton_lease_left_seconds`` is absent while no live session has a TTL.

It needs the official ``prometheus_client`` package, an optional dependency:
``pip install consul-baton[prometheus]``. It is imported when :func:`register` is called,
so importing this module never needs it.
"""

import weakref
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Tuple

from . import _native

__all__ = ["MetricDef", "BatonCollector", "metric_defs", "register"]

_INSTALL_HINT = (
    "consul_baton.prometheus needs the prometheus_client package: "
    "pip install consul-baton[prometheus]"
)


class MetricDef(NamedTuple):
    """One exposed metric, from the core's table (``baton::metrics::METRICS``)."""

    #: The Prometheus name (``"baton_acquires_total"``; a counter's ends in ``_total``).
    name: str
    #: ``"gauge"``, ``"counter"`` or ``"histogram"``.
    type: str
    #: The label names, in order (``("recipe", "outcome")``).
    labels: Tuple[str, ...]
    #: The help text.
    help: str


def metric_defs() -> List[MetricDef]:
    """Every metric a client exposes, in exposition order: the core's table of names,
    types, labels and help texts (the same in every language)."""
    return [MetricDef(n, t, tuple(labels), h) for (n, t, labels, h) in _native._metric_defs()]


def _key(name: str) -> str:
    """The snapshot key of a metric: its name less ``baton_`` and ``_total``."""
    if name.startswith("baton_"):
        name = name[len("baton_"):]
    if name.endswith("_total"):
        name = name[: -len("_total")]
    return name


def _prometheus_client() -> Any:
    try:
        import prometheus_client
        import prometheus_client.core
    except ImportError as e:
        raise ImportError(_INSTALL_HINT, name=getattr(e, "name", None)) from e
    return prometheus_client


def _native_client(client: Any) -> Any:
    """The :class:`baton.Client` behind ``client`` (itself, or a ``baton.aio.Client``'s
    ``.sync``)."""
    sync = getattr(client, "sync", client)
    if not isinstance(sync, _native.Client):
        raise TypeError(
            f"register() takes a consul_baton.Client or consul_baton.aio.Client, got {type(client).__name__}"
        )
    return sync


def _rows(value: Any, depth: int, labels: Tuple[str, ...] = ()) -> Iterator[Tuple[Tuple[str, ...], Any]]:
    """The leaves of a snapshot entry nested ``depth`` labels deep, with their label values."""
    if depth == 0:
        yield labels, value
        return
    for k, v in value.items():
        yield from _rows(v, depth - 1, labels + (k,))


def _histogram_buckets(h: Dict[str, Any], float_to_go: Any) -> List[Tuple[str, float]]:
    """A snapshot histogram's per-bucket counts as Prometheus' cumulative ``le`` buckets."""
    bounds = [float_to_go(b) for b in h["bounds"]] + ["+Inf"]
    out, total = [], 0
    for bound, n in zip(bounds, h["buckets"]):
        total += n
        out.append((bound, float(total)))
    return out


class BatonCollector:
    """The collector :func:`register` adds: a snapshot of one client at each scrape.

    It holds the client weakly: once the client is garbage-collected, or closed, it yields
    nothing (unregister it then)."""

    def __init__(self, client: Any) -> None:
        self._prom = _prometheus_client()
        self._client = weakref.ref(_native_client(client))
        self._defs = metric_defs()

    def _family(self, d: MetricDef) -> Any:
        core = self._prom.core
        labels = list(d.labels)
        if d.type == "counter":
            return core.CounterMetricFamily(d.name, d.help, labels=labels)
        if d.type == "histogram":
            return core.HistogramMetricFamily(d.name, d.help, labels=labels)
        return core.GaugeMetricFamily(d.name, d.help, labels=labels)

    def describe(self) -> List[Any]:
        """The metric families without samples (what a registry checks names against at
        registration, without taking a snapshot)."""
        return [self._family(d) for d in self._defs]

    def collect(self) -> Iterator[Any]:
        """One snapshot of the client as metric families (nothing once it is gone or
        closed)."""
        client = self._client()
        if client is None or client.closed:
            return
        snapshot = client.metrics()
        float_to_go = self._prom.utils.floatToGoString
        for d in self._defs:
            value = snapshot.get(_key(d.name))
            if value is None:
                # Absent, not zero, when no session has a lease (baton_lease_left_seconds).
                continue
            family = self._family(d)
            for labels, v in _rows(value, len(d.labels)):
                if d.type == "histogram":
                    family.add_metric(
                        list(labels),
                        buckets=_histogram_buckets(v, float_to_go),
                        sum_value=v["sum"],
                    )
                else:
                    family.add_metric(list(labels), v)
            yield family


def register(client: Any, registry: Optional[Any] = None) -> BatonCollector:
    """Registers ``client``'s metrics (a :class:`baton.Client` or a ``baton.aio.Client``) in
    ``registry`` (default ``prometheus_client.REGISTRY``) and returns the collector, for
    ``registry.unregister(collector)``. Each scrape takes one snapshot of the client.

    One client per registry: a second client's collector would repeat the same series, which
    ``prometheus_client`` refuses (``ValueError``). Raises ``ImportError`` naming
    ``pip install consul-baton[prometheus]`` when ``prometheus_client`` is not installed."""
    prom = _prometheus_client()
    collector = BatonCollector(client)
    (registry if registry is not None else prom.REGISTRY).register(collector)
    return collector
