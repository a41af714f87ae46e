"""``GET /metrics``: one app's Prometheus metrics, on a ``CollectorRegistry`` of its own.

Why a registry per app, not prometheus_client's global one: a test process makes an app per test, the pytest
plugin runs servers in threads beside the user's own, and a bench runs several in one process; metrics
registered globally would collide (a name may be registered once) or add up across apps.

Two kinds of metric, by what they cost the hot path:

- **Counted as it happens** (a request's latency, a verdict, an adjudication, a journal write, an fsync): the
  callers measure with ``runtime.clock.wall_seconds`` and call one method here. The label children are looked up
  once per label set and kept (``_children``), so a request costs a dict lookup and prometheus_client's own
  locked increments, about a microsecond or two.
- **Read at scrape time** (runs by status, live leases, parked long-polls, spectators): nothing is counted on the
  hot path at all; the app hands in a function that reads its state (:class:`State`) when Prometheus asks.

The names follow Prometheus's conventions (base units, ``_total`` for counters, ``_seconds``, ``_bytes``,
``_info``); docs/operations.md lists every metric. :data:`NO_METRICS` (``warren serve --no-metrics``) has the
same methods and does nothing.
"""

from __future__ import annotations

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


class Metrics:
    """One app's metrics (see the module docstring). ``engine``: ``"compiled"`` or ``"python"`` and why
    (``warren_sim.engine.BUILD``, ``WHY``), shown as the info metric ``warren_engine_build_info``."""

    enabled = True

    def __init__(self, *, version: str, engine: str, engine_why: str = "") -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram, Info
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
        self._requests = Histogram(
            "warren_request_duration_seconds", "Agent and API requests' time to answer, by transport and route (a "
            "long-poll's includes its wait; a WebSocket method's is its handling)",
            ["transport", "route"], buckets=REQUEST_BUCKETS, registry=reg)
        self._decisions = Counter(
            "warren_decisions", "Commands judged, by verdict (accepted, duplicate, stale, ...) and transport",
            ["verdict", "transport"], registry=reg)
        self._adjudication = Histogram(
            "warren_batch_adjudication_seconds", "The engine's adjudication of one batch of commands",
            buckets=ADJUDICATION_BUCKETS, registry=reg)
        self._journal_bytes = Counter(
            "warren_journal_written_bytes", "Bytes of journal records handed to the OS", registry=reg)
        self._fsync = Histogram(
            "warren_journal_fsync_seconds", "One fsync of a journal (--fsync, and each run's close with it)",
            buckets=FSYNC_BUCKETS, registry=reg)
        self._children: dict[tuple[str, str], Any] = {}
        self._verdicts: dict[tuple[str, str], Any] = {}
        self._adjudicated = self._adjudication.observe
        self._fsynced = self._fsync.observe
        self._written = self._journal_bytes.inc

    def read_state_with(self, read: Callable[[], State | None]) -> None:
        """Register the app's state reader for the scrape-time gauges (once, when the app is made)."""
        self.registry.register(_StateCollector(read))

    # -- the hot path: one call each ---------------------------------------------------------------------
    def request(self, route: str, transport: str, seconds: float, verdict: str | None = None) -> None:
        """A request answered: its latency under ``(transport, route)``, and with ``verdict`` a judged command."""
        key = (transport, route)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._requests.labels(transport, route)
        child.observe(seconds)
        if verdict is not None:
            self.decision(verdict, transport)

    def decision(self, verdict: str, transport: str, n: int = 1) -> None:
        """``n`` commands judged with ``verdict`` (``agent.submit_many`` counts its commands at once)."""
        key = (verdict, transport)
        child = self._verdicts.get(key)
        if child is None:
            child = self._verdicts[key] = self._decisions.labels(verdict, transport)
        child.inc(n)

    def adjudicated(self, seconds: float) -> None:
        """One batch adjudicated in ``seconds``."""
        self._adjudicated(seconds)

    def journal_written(self, nbytes: int) -> None:
        self._written(nbytes)

    def fsynced(self, seconds: float) -> None:
        self._fsynced(seconds)

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
