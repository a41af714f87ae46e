"""What the server's routes may ask of a run, live or ended: one typed protocol, :class:`RunAPI`.

A run the manager holds is either live (:class:`~warren_sim.runtime.run.Run`, in memory with its task)
or ended and released from memory (:class:`~warren_sim.runtime.stored.StoredRun`, answered from its
files). Both implement this protocol, so a route never asks which one it has: an ended run answers
every agent request as an ended run does (a 410 to a poll or a claim, a receipt, a late verdict), and
a live one answers :meth:`RunAPI.ended_poll` with None.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import orjson
import trio

from ..engine import Simulation
from ..observability.metrics import Metrics, NoMetrics
from ..observability.tracing import NoTracer, Tracer
from ..protocol.models import ControlledAgents, Receipt
from ..protocol.verdicts import Judgement
from .errors import RunError
from .journal import DiskJournal, Journal
from .leases import RemoteAgent
from .views import WireEnvelope

__all__ = ["RunAPI"]


class RunAPI(Protocol):
    """A run as a request handler sees it. Refusals are :class:`~warren_sim.runtime.errors.RunError`."""

    # the app's observability (set by the manager; agent_ops counts verdicts and opens spans with them)
    metrics: Metrics | NoMetrics
    tracer: Tracer | NoTracer

    # -- what it is ---------------------------------------------------------------------------------
    @property
    def run_id(self) -> str: ...

    @property
    def status(self) -> str: ...

    @property
    def error(self) -> str | None: ...

    @property
    def is_ended(self) -> bool: ...

    @property
    def started(self) -> trio.Event: ...

    @property
    def ended(self) -> trio.Event: ...

    @property
    def sim(self) -> Simulation:
        """The engine (an ended run's is rebuilt from its journal on first use)."""

    @property
    def remote(self) -> dict[str, RemoteAgent]:
        """The controlled agents by id."""

    @property
    def journal(self) -> Journal | DiskJournal:
        """Its journal, read here synchronously; request handlers use :meth:`read_journal`."""

    @property
    def spectators(self) -> int:
        """Spectator streams open now."""

    def view(self) -> dict[str, Any]:
        """The run as ``GET /v1/runs/{id}`` shows it."""

    async def read_journal(self) -> Journal | DiskJournal:
        """Its journal for one reader (an ended run's parsed off the event loop)."""

    async def journal_text(self, since: int) -> str:
        """The journal download: the flushed records after cursor ``since``, as NDJSON."""

    def spectator_slot(self) -> AbstractContextManager[None]:
        """Hold one of the run's spectator slots while a stream is open (429 when all are taken)."""

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> None: ...

    def cancel(self, reason: str = ...) -> None: ...

    # -- the agent protocol ---------------------------------------------------------------------------
    def agent(self, agent_id: str) -> RemoteAgent: ...

    def authenticate(self, agent_id: str, token: str | None) -> RemoteAgent: ...

    def claim(self, agent_id: str, token: str | None, proposed: str | None = None) -> tuple[str, bool]: ...

    def claim_many(self, selector: ControlledAgents) -> dict[str, str]: ...

    def release(self, agent_id: str, token: str | None) -> None: ...

    def briefing_for(self, agent_id: str) -> dict[str, Any]: ...

    def ended_poll(self, agent_id: str, token: str | None, lease_ttl: float, max_polls: int) -> RunError | None:
        """The 410 a poll of an ended run gets, if it can be answered without rebuilding the run; else None."""

    async def wait_observation(self, ra: RemoteAgent, after: int, wait: float,
                               deliver: Callable[[bytes], bool] | None = None) -> orjson.Fragment | None: ...

    async def wait_observations(self, wanted: list[tuple[RemoteAgent, int]], wait: float,
                                parts: tuple[str, ...] | None = None) -> list[WireEnvelope]: ...

    def submit(self, ra: RemoteAgent, body: object, lease: str | None = None, *,
               write: bool = True) -> Judgement: ...

    def receipt(self, ra: RemoteAgent, command_id: str) -> Receipt: ...
