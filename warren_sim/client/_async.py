"""The trio client over HTTP: :class:`AsyncAgentClient` and its agent handle :class:`AsyncAgent`.

A driver of :mod:`._core`: each method runs one core operation, carried over HTTP by :func:`drive` (requests with
an ``httpx.AsyncClient``, pauses with ``trio.sleep``). :class:`~warren_sim.client.AsyncWsAgentClient` (in
:mod:`._ws`) is the same client with its agents driven over the WebSocket: it overrides how an agent's
operations are driven, nothing of what they do.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx
import trio

from warren_sim.protocol.models import Receipt, RunView

from . import _core as core
from ._core import HttpOp, Op, RetryPolicy, Sleep, Steps, request_kwargs
from ._exceptions import RunEnded
from ._models import Observation

__all__ = ["AsyncAgent", "AsyncAgentClient"]

T = TypeVar("T")


async def drive(http: httpx.AsyncClient, op: HttpOp[T]) -> T:
    """Run a core operation carried over HTTP (:func:`._core.over_http`): its requests with ``http``, its
    pauses with ``trio.sleep``."""
    with Steps(op) as steps:
        for action in steps:
            if isinstance(action, Sleep):
                await trio.sleep(action.seconds)
                steps.send(action.seconds)
                continue
            try:
                steps.send(await http.request(action.method, action.path, **request_kwargs(http, action)))
            except httpx.TransportError as exc:
                steps.throw(exc)
    return steps.result


class AsyncAgentClient:
    """A warren-agent/0 client on trio, over an ``httpx.AsyncClient`` whose ``base_url`` is the server.

    Pass any client: one with ``transport=httpx.ASGITransport(app=app)`` talks to an app in-process, a plain
    one to a real server. ``AsyncAgentClient.open(url)`` makes (and, on ``aclose``/``async with``, closes) its
    own. ``retry`` says how transport errors are retried where retrying is safe (see :mod:`._core`).
    """

    def __init__(self, http: httpx.AsyncClient, *, retry: RetryPolicy | None = None, owns_http: bool = False) -> None:
        self.http = http
        self.retry = retry or RetryPolicy()
        self._owns_http = owns_http  # close ``http`` when this client is closed

    @classmethod
    def open(cls, url: str, *, timeout: float = 10.0, retry: RetryPolicy | None = None,
             **httpx_kwargs: Any) -> Self:
        """A client of this class with its own ``httpx.AsyncClient`` for the server at ``url`` (closed with the
        client). :func:`warren_sim.client.open` picks the class by transport."""
        return cls(httpx.AsyncClient(base_url=url, timeout=timeout, **httpx_kwargs), retry=retry, owns_http=True)

    async def aclose(self) -> None:
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> AsyncAgentClient:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None = None, exc: BaseException | None = None,
                        tb: TracebackType | None = None) -> None:
        await self.aclose()

    async def _run(self, op: Op[T]) -> T:
        return await drive(self.http, core.over_http(op, self.retry))

    # -- discovery -------------------------------------------------------------------------------------
    async def server_info(self) -> dict[str, Any]:
        """``GET /v1``: the protocol, the server and its endpoints."""
        return await self._run(core.get_json("/v1"))

    async def list_scenarios(self) -> list[dict[str, Any]]:
        return (await self._run(core.get_json("/v1/scenarios")))["scenarios"]

    async def describe_scenario(self, name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``GET /v1/scenarios/{name}``: roles, agents, objectives, parameters and the ``layout`` that ``params`` give."""
        return await self._run(core.get_json(core.scenario_path(name, params)))

    # -- runs ------------------------------------------------------------------------------------------
    async def create_run(self, scenario: str, seed: int = 0, controlled_agents: core.ControlledAgents = (),
                         npc_policy: str = "solution", pace: float | None = None,
                         decision_deadline_s: float = 60.0, params: Mapping[str, Any] | None = None) -> RunView:
        """Create a run (never retried: a retry could create a second one). ``controlled_agents``: agent ids,
        ``"all"``, or ``{"role": ROLE}`` (every agent of that role; a selector fits any world in the body)."""
        body = core.run_create_body(controlled_agents, npc_policy, pace, decision_deadline_s, params)
        return await self._run(core.create_run(scenario, seed, body))

    async def fork_run(self, run_id: str, cursor: int, controlled_agents: core.ControlledAgents = (),
                       npc_policy: str = "solution", pace: float | None = None,
                       decision_deadline_s: float = 60.0) -> RunView:
        """Fork run ``run_id`` at ``cursor`` of its journal (docs/fork.md, "Served"): a new run from the last batch
        boundary at or before it, whose view's ``forked_from`` says which; the other arguments are
        :meth:`create_run`'s, with its defaults (never retried, as a creation)."""
        body = core.run_fork_body(cursor, controlled_agents, npc_policy, pace, decision_deadline_s)
        return await self._run(core.fork_run(run_id, body))

    async def get_run(self, run_id: str) -> RunView:
        return await self._run(core.run_op("GET", core.run_path(run_id)))

    async def list_runs(self) -> list[RunView]:
        return await self._run(core.list_runs())

    async def start_run(self, run_id: str) -> RunView:
        """Start a created run now (its unclaimed controlled agents then do not block; they no-op)."""
        return await self._run(core.run_op("POST", core.run_path(run_id, "/start")))

    async def cancel_run(self, run_id: str) -> RunView:
        return await self._run(core.run_op("DELETE", core.run_path(run_id)))

    async def wait_run_ended(self, run_id: str, *, poll_interval: float = 0.05,
                             timeout: float | None = None) -> RunView:
        """Poll the run until it ends; raises :class:`WaitTimeout` after about ``timeout`` s of polling."""
        return await self._run(core.wait_run_ended(run_id, poll_interval, timeout))

    # -- agents ----------------------------------------------------------------------------------------
    def claim(self, run_id: str, agent_id: str, lease: str | None = None) -> _Claiming:
        """Claim a controlled agent, or resume it with a saved ``lease``.

        ``agent = await client.claim(...)`` gives the handle; ``async with client.claim(...) as agent:``
        also releases the agent when the block ends (unless ``agent.detach()`` was called).
        """
        return _Claiming(self, run_id, agent_id, lease)

    async def claim_many(self, run_id: str, agents: core.ControlledAgents = "all") -> list[AsyncAgent]:
        """Claim several controlled agents in one request (ids, ``"all"`` or ``{"role": ROLE}``), all or none:
        a handle per agent, each with a fresh lease of its own (``POST /v1/runs/{run}/claim``, a WARREN
        extension). Release them yourself (``agent.release()``) or let their leases expire."""
        states = await self._run(core.claim_many(run_id, agents))
        return [AsyncAgent(self, state) for state in states]

    async def poll_many(self, agents: Sequence[AsyncAgent], wait: float = 25.0,
                        parts: Iterable[str] | None = None) -> list[Observation]:
        """One long-poll for several agents of one run (up to ``wait`` s): their new observations, ``[]``
        when none came (``POST /v1/runs/{run}/observations``, a WARREN extension; ~800 agents a request fit
        the 64 KiB body). Each agent's handle keeps its place as with ``agent.poll``. ``parts`` (e.g.
        ``["observation"]``) narrows the envelopes, sparing the server what is left out."""
        return await self._run(core.poll_many([a._state for a in agents], wait, parts))

    async def _new_agent(self, run_id: str, agent_id: str, lease: str | None) -> AsyncAgent:
        return AsyncAgent(self, await self._run(core.claim(core.AgentState(run_id, agent_id, lease or ""))))


class _Claiming:
    """Awaitable (the agent handle) and async context manager (released on exit)."""

    def __init__(self, client: AsyncAgentClient, run_id: str, agent_id: str, lease: str | None) -> None:
        self._client, self._args = client, (run_id, agent_id, lease)
        self._agent: AsyncAgent | None = None

    async def _claim(self) -> AsyncAgent:
        return await self._client._new_agent(*self._args)

    def __await__(self) -> Any:
        return self._claim().__await__()

    async def __aenter__(self) -> AsyncAgent:
        self._agent = await self._claim()
        return self._agent

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        assert self._agent is not None
        await self._agent.__aexit__(exc_type, exc, tb)


class AsyncAgent(core.AgentHandleBase):
    """One claimed agent: its briefing, its observations, its commands. Made by :meth:`AsyncAgentClient.claim`."""

    def __init__(self, client: AsyncAgentClient, state: core.AgentState) -> None:
        self._client = client
        self._state = state

    async def _run(self, op: Op[T]) -> T:
        return await self._client._run(op)

    async def briefing(self, revision: int | None = None) -> dict[str, Any]:
        """The briefing, fetched once per revision and checked against its ``content_hash``."""
        return await self._run(core.get_briefing(self._state, revision))

    async def poll(self, wait: float = 0.0) -> Observation | None:
        """One long-poll of up to ``wait`` s: a new observation, or None. Raises :class:`RunEnded`."""
        return await self._run(core.poll(self._state, wait))

    async def next_observation(self, wait: float = 25.0) -> Observation:
        """Long-poll (``wait`` s per request) until a new observation comes. Raises :class:`RunEnded`."""
        return await self._run(core.next_observation(self._state, wait))

    def observations(self, wait: float = 25.0) -> _ObservationStream:
        """``async for obs in agent.observations():`` every new observation; ends when the run ends
        (``agent.run_status`` then holds its terminal status)."""
        return _ObservationStream(self, wait)

    async def submit(self, observation: Observation | str, command: Mapping[str, Any], *,
                     command_id: str | None = None, next_wait: float | None = None) -> Receipt:
        """Answer ``observation`` (or an observation id) with ``command`` (``{"action": ..., "args": ...}``,
        ``{"sleep_ms": n}`` or ``{"noop": True}``) under a fresh command id (or ``command_id``).

        Transport errors are retried under the same id: if the lost attempt had been accepted, the retry's
        receipt is ``duplicate`` with the original content, which is success (see ``SUCCESS_STATUSES``).

        ``next_wait=S``: the same request waits up to S s for the agent's next observation, which the next
        ``next_observation()`` / ``observations()`` step then returns without a request (one request per
        decision instead of two; on a server without the extension it is simply polled)."""
        body = core.command_body(observation, command, command_id)
        return await self._run(core.submit(self._state, body, next_wait))

    async def receipt(self, command_id: str) -> Receipt:
        """The command's receipt with its current outcome."""
        return await self._run(core.get_receipt(self._state, command_id))

    async def wait_outcome(self, command_id: str, *, until: Iterable[str] | None = None,
                           poll_interval: float = 0.05, timeout: float | None = None) -> Receipt:
        """Poll the receipt until its outcome leaves ``pending`` (or reaches one of ``until``)."""
        return await self._run(core.wait_outcome(self._state, command_id, until, poll_interval, timeout))

    async def resume(self) -> None:
        """After a reconnect: claim again with the lease and have the outstanding envelope redelivered."""
        await self._run(core.resume(self._state))

    async def release(self) -> None:
        """Free the agent now; the lease stops working."""
        await self._run(core.release(self._state))

    async def __aenter__(self) -> AsyncAgent:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None = None, exc: BaseException | None = None,
                        tb: TracebackType | None = None) -> None:
        with trio.CancelScope(shield=True):
            with trio.move_on_after(10):
                await self._run(core.released_quietly(self._state))


class _ObservationStream:
    def __init__(self, agent: AsyncAgent, wait: float) -> None:
        self._agent, self._wait = agent, wait

    def __aiter__(self) -> _ObservationStream:
        return self

    async def __anext__(self) -> Observation:
        try:
            return await self._agent.next_observation(self._wait)
        except RunEnded:
            raise StopAsyncIteration from None
