"""``GET /metrics``: one app's Prometheus metrics, on a ``CollectorRegistry`` of its own.

Why a registry per app, not prometheus_client's global one: a test process makes an app per test, the pytest
plugin runs servers in threads beside the user's own, and a bench runs several in one process; metrics
registered globally would collide (a name may be registered once) or add up across apps.

Two kinds of metric, by what they cost the hot path:

- **Counted as it happens** (a request's latency, a verdict, an adjudication, a journal write, an fsync): the
  callers measure with ``runtime.clock.wall_seconds`` and call one method here, which adds to plain Python ints
  and floats (:class:`_Histogram`: one ``bisect`` over the fixed buckets and two additions; a verdict: one dict
  add). No prometheus_client object is touched per decision: its ``labels()`` lookups and its per-value locks cost
  about 20 us a decision on a loaded machine (bench/RESULTS.md, "Metrics: counted in plain ints"). The locks are
  not needed: an app's metrics are counted and scraped on the one thread its trio loop runs on.
- **Read at scrape time**: :class:`_CountedCollector` turns those ints into the same Prometheus families
  prometheus_client's ``Counter`` and ``Histogram`` would (the same names, samples, labels, ``_created``), and
  the state gauges (runs by status, live leases, parked long-polls, spectators) are read from the app when
  Prometheus asks (:class:`State`): nothing of them is counted on the hot path at all.

The names follow Prometheus's conventions (base units, ``_total`` for counters, ``_seconds``, ``_bytes``,
``_info``); docs/operations.md lists every metric. :data:`NO_METRICS` (``warren serve --no-metrics``) has the
same methods and does nothing.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

# prometheus_client (about 0.1 s to import: it brings http.server, inspect, wsgiref) is imported when an app makes
# its Metrics, not by every module that names the types here (the run loop, the journal, the SDK's neighbours)

__all__ = ["NO_METRICS", "Metrics", "NoMetrics", "State"]

# A request's latency: from a fraction of a millisecond (a judged command) to a long-poll's whole wait (up to
# warren serve --max-wait, 60 s by default)
REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# A batch's adjudication: tens of microseconds (a few agents) to around a second (100,000 foragers)
ADJUDICATION_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                        1.0, 2.5)
FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


@attrs.frozen
class State:
    """What the scrape reads from the app when it is asked (nothing of it is counted on the hot path)."""

    runs_by_status: Mapping[str, int]
    leases: int  # live leases over every live run
    long_polls: int  # long-polls parked (waiting for an envelope) right now
    spectators: int  # spectator streams connected (WebSocket and SSE)


class _StateCollector:
    """The scrape-time gauges: one call of the app's state reader per scrape."""

    def __init__(self, read: Callable[[], State | None]) -> None:
        self.read = read

    def describe(self) -> list[Any]:
        return []  # nothing to check at registration (the app's state may not exist yet)

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import GaugeMetricFamily

        state = self.read()
        if state is None:  # the app is not serving yet
            return
        runs = GaugeMetricFamily("warren_runs", "Runs this server knows, by status (live and ended)",
                                 labels=["status"])
        for status, n in sorted(state.runs_by_status.items()):
            runs.add_metric([status], n)
        yield runs
        yield GaugeMetricFamily("warren_leases", "Live agent leases over every live run", value=state.leases)
        yield GaugeMetricFamily("warren_long_polls", "Long-polls parked, waiting for an envelope",
                                value=state.long_polls)
        yield GaugeMetricFamily("warren_spectators", "Spectator streams connected (WebSocket and SSE)",
                                value=state.spectators)


class _Histogram:
    """One histogram series in plain numbers: ``counts[i]`` observations in bucket ``i`` (not cumulative; the last
    is ``+Inf``), their ``total``, and when it was first observed (``created``, unix seconds)."""

    __slots__ = ("bounds", "counts", "total", "created")

    def __init__(self, bounds: tuple[float, ...], created: float) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0
        self.created = created

    def observe(self, seconds: float) -> None:
        # bisect_left: the first bound >= seconds, the bucket Prometheus's ``le`` (less than or equal) puts it in
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.total += seconds


def _bucket_samples(metric: Any, name: str, labels: dict[str, str], h: _Histogram) -> None:
    """A histogram series' samples, as prometheus_client's ``Histogram`` writes them (cumulative buckets, count,
    sum, created)."""
    from prometheus_client.utils import floatToGoString

    acc = 0
    for bound, n in zip((*h.bounds, float("inf")), h.counts, strict=True):
        acc += n
        metric.add_sample(f"{name}_bucket", {**labels, "le": floatToGoString(bound)}, acc)
    metric.add_sample(f"{name}_count", labels, acc)
    metric.add_sample(f"{name}_sum", labels, h.total)
    metric.add_sample(f"{name}_created", labels, h.created)


class _CountedCollector:
    """The counted metrics (see the module docstring), turned into Prometheus families when scraped."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterable[Any]:
        from prometheus_client.metrics_core import Metric

        m = self.metrics
        requests = Metric("warren_request_duration_seconds", REQUESTS_HELP, "histogram")
        for (transport, route), h in list(m.requests.items()):
            _bucket_samples(requests, requests.name, {"transport": transport, "route": route}, h)
        yield requests
        decisions = Metric("warren_decisions", DECISIONS_HELP, "counter")
        for (verdict, transport), n in list(m.decisions.items()):
            labels = {"verdict": verdict, "transport": transport}
            decisions.add_sample("warren_decisions_total", labels, n)
            decisions.add_sample("warren_decisions_created", labels, m.decisions_created[verdict, transport])
        yield decisions
        for name, doc, h in (("warren_batch_adjudication_seconds", ADJUDICATION_HELP, m.adjudication),
                             ("warren_journal_fsync_seconds", FSYNC_HELP, m.fsync)):
            metric = Metric(name, doc, "histogram")
            _bucket_samples(metric, name, {}, h)
            yield metric
        written = Metric("warren_journal_written_bytes", JOURNAL_HELP, "counter")
        written.add_sample("warren_journal_written_bytes_total", {}, m.journal_bytes)
        written.add_sample("warren_journal_written_bytes_created", {}, m.created)
        yield written


REQUESTS_HELP = ("Agent and API requests' time to answer, by transport and route (a long-poll's includes its wait; a "
                 "WebSocket method's is its handling)")
DECISIONS_HELP = "Commands judged, by verdict (accepted, duplicate, stale, ...) and transport"
ADJUDICATION_HELP = "The engine's adjudication of one batch of commands"
JOURNAL_HELP = "Bytes of journal records handed to the OS"
FSYNC_HELP = "One fsync of a journal (--fsync, and each run's close with it)"


class Metrics:
    """One app's metrics (see the module docstring). ``engine``: ``"compiled"`` or ``"python"`` and why
    (``warren_sim.engine.BUILD``, ``WHY``), shown as the info metric ``warren_engine_build_info``. ``now``: unix
    time, read when a series is first counted (its ``_created`` sample; the caller passes
    ``runtime.clock.unix_now``)."""

    enabled = True

    def __init__(self, *, version: str, engine: str, engine_why: str = "",
                 now: Callable[[], float] = lambda: 0.0) -> None:
        from prometheus_client import CollectorRegistry, Info
        from prometheus_client.gc_collector import GCCollector
        from prometheus_client.platform_collector import PlatformCollector
        from prometheus_client.process_collector import ProcessCollector

        # auto_describe off: registering the process collector would read /proc once per app (a test makes many)
        self.registry = CollectorRegistry()
        reg = self.registry
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        GCCollector(registry=reg)
        Info("warren_engine_build", "The engine this server runs: compiled with mypyc or plain Python, and why",
             registry=reg).info({"engine": engine, "why": engine_why, "version": version})
        self.now = now
        self.created = now()
        # the counted numbers (read by _CountedCollector at scrape time)
        self.requests: dict[tuple[str, str], _Histogram] = {}
        self.decisions: dict[tuple[str, str], int] = {}
        self.decisions_created: dict[tuple[str, str], float] = {}
        self.adjudication = _Histogram(ADJUDICATION_BUCKETS, self.created)
        self.fsync = _Histogram(FSYNC_BUCKETS, self.created)
        self.journal_bytes = 0
        reg.register(_CountedCollector(self))

    def read_state_with(self, read: Callable[[], State | None]) -> None:
        """Register the app's state reader for the scrape-time gauges (once, when the app is made)."""
        self.registry.register(_StateCollector(read))

    # -- the hot path: one call each, plain ints -----------------------------------------------------------
    def request(self, route: str, transport: str, seconds: float, verdict: str | None = None) -> None:
        """A request answered: its latency under ``(transport, route)``, and with ``verdict`` a judged command."""
        key = (transport, route)
        h = self.requests.get(key)
        if h is None:
            h = self.requests[key] = _Histogram(REQUEST_BUCKETS, self.now())
        h.observe(seconds)
        if verdict is not None:
            self.decision(verdict, transport)

    def decision(self, verdict: str, transport: str, n: int = 1) -> None:
        """``n`` commands judged with ``verdict`` (``agent.submit_many`` counts its commands at once)."""
        key = (verdict, transport)
        decisions = self.decisions
        if key in decisions:
            decisions[key] += n
        else:
            decisions[key] = n
            self.decisions_created[key] = self.now()

    def adjudicated(self, seconds: float) -> None:
        """One batch adjudicated in ``seconds``."""
        self.adjudication.observe(seconds)

    def journal_written(self, nbytes: int) -> None:
        self.journal_bytes += nbytes

    def fsynced(self, seconds: float) -> None:
        self.fsync.observe(seconds)

    # -- the scrape ----------------------------------------------------------------------------------------
    def exposition(self, accept: str | None = None) -> tuple[bytes, str]:
        """The registry in the format ``accept`` asks for (OpenMetrics when asked, else Prometheus text 0.0.4):
        ``(body, content type)``."""
        from prometheus_client.exposition import choose_encoder

        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class NoMetrics:
    """Metrics turned off (``--no-metrics``): the same calls, doing nothing."""

    enabled = False

    def read_state_with(self, read: Callable[[], State | None]) -> None:
        pass

    def request(self, route: str, transport: str, seconds: float, verdict: str | None = None) -> None:
        pass

    def decision(self, verdict: str, transport: str, n: int = 1) -> None:
        pass

    def adjudicated(self, seconds: float) -> None:
        pass

    def journal_written(self, nbytes: int) -> None:
        pass

    def fsynced(self, seconds: float) -> None:
        pass


NO_METRICS = NoMetrics()
