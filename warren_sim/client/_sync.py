"""The blocking client: :class:`AgentClient` and its agent handle :class:`Agent`, the same API as the trio
client without ``await``.

A driver of :mod:`._core`: each method runs one core operation, carried over HTTP by :func:`drive` (requests with
an ``httpx.Client``, pauses with ``time.sleep``). There is no blocking WebSocket client.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar

import httpx

from warren_sim.protocol.models import Receipt, RunView

from . import _core as core
from ._core import HttpOp, Op, RetryPolicy, Sleep, Steps, request_kwargs
from ._exceptions import RunEnded
from ._models import Observation

__all__ = ["Agent", "AgentClient"]

T = TypeVar("T")


def drive(http: httpx.Client, op: HttpOp[T]) -> T:
    """Run a core operation carried over HTTP (:func:`._core.over_http`): its requests with ``http``, its
    pauses with ``time.sleep``."""
    with Steps(op) as steps:
        for action in steps:
            if isinstance(action, Sleep):
                time.sleep(action.seconds)
                steps.send(action.seconds)
                continue
            try:
                steps.send(http.request(action.method, action.path, **request_kwargs(http, action)))
            except httpx.TransportError as exc:
                steps.throw(exc)
    return steps.result


class AgentClient:
    """A blocking warren-agent/0 client over an ``httpx.Client`` whose ``base_url`` is the server.

    The same methods as :class:`~warren_sim.client.AsyncAgentClient`; ``AgentClient.open(url)`` makes (and
    on ``close``/``with`` closes) its own ``httpx.Client``.
    """

    def __init__(self, http: httpx.Client, *, retry: RetryPolicy | None = None, owns_http: bool = False) -> None:
        self.http = http
        self.retry = retry or RetryPolicy()
        self._owns_http = owns_http  # close ``http`` when this client is closed

    @classmethod
    def open(cls, url: str, *, timeout: float = 10.0, retry: RetryPolicy | None = None,
             **httpx_kwargs: Any) -> Self:
        """A client with its own ``httpx.Client`` for the server at ``url`` (closed with the client)."""
        return cls(httpx.Client(base_url=url, timeout=timeout, **httpx_kwargs), retry=retry, owns_http=True)

    def close(self) -> None:
        if self._owns_http:
            self.http.close()

    def __enter__(self) -> AgentClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, op: Op[T]) -> T:
        return drive(self.http, core.over_http(op, self.retry))

    # -- discovery -------------------------------------------------------------------------------------
    def server_info(self) -> dict[str, Any]:
        """``GET /v1``: the protocol, the server and its endpoints."""
        return self._run(core.get_json("/v1"))

    def list_scenarios(self) -> list[dict[str, Any]]:
        return self._run(core.get_json("/v1/scenarios"))["scenarios"]

    def describe_scenario(self, name: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``GET /v1/scenarios/{name}``: roles, agents, objectives, parameters and the ``layout`` that ``params`` give."""
        return self._run(core.get_json(core.scenario_path(name, params)))

    # -- runs ------------------------------------------------------------------------------------------
    def create_run(self, scenario: str, seed: int = 0, controlled_agents: core.ControlledAgents = (),
                   npc_policy: str = "solution", pace: float | None = None, decision_deadline_s: float = 60.0,
                   params: Mapping[str, Any] | None = None) -> RunView:
        """Create a run (never retried: a retry could create a second one). ``controlled_agents``: agent ids,
        ``"all"``, or ``{"role": ROLE}`` (every agent of that role; a selector fits any world in the body)."""
        body = core.run_create_body(controlled_agents, npc_policy, pace, decision_deadline_s, params)
        return self._run(core.create_run(scenario, seed, body))

    def fork_run(self, run_id: str, cursor: int, controlled_agents: core.ControlledAgents = (),
                 npc_policy: str = "solution", pace: float | None = None,
                 decision_deadline_s: float = 60.0) -> RunView:
        """Fork run ``run_id`` at ``cursor`` of its journal (docs/fork.md, "Served"): a new run from the last batch
        boundary at or before it, whose view's ``forked_from`` says which; the other arguments are
        :meth:`create_run`'s, with its defaults (never retried, as a creation)."""
        body = core.run_fork_body(cursor, controlled_agents, npc_policy, pace, decision_deadline_s)
        return self._run(core.fork_run(run_id, body))

    def get_run(self, run_id: str) -> RunView:
        return self._run(core.run_op("GET", core.run_path(run_id)))

    def list_runs(self) -> list[RunView]:
        return self._run(core.list_runs())

    def start_run(self, run_id: str) -> RunView:
        """Start a created run now (its unclaimed controlled agents then do not block; they no-op)."""
        return self._run(core.run_op("POST", core.run_path(run_id, "/start")))

    def cancel_run(self, run_id: str) -> RunView:
        return self._run(core.run_op("DELETE", core.run_path(run_id)))

    def wait_run_ended(self, run_id: str, *, poll_interval: float = 0.05, timeout: float | None = None) -> RunView:
        """Poll the run until it ends; raises :class:`WaitTimeout` after about ``timeout`` s of polling."""
        return self._run(core.wait_run_ended(run_id, poll_interval, timeout))

    # -- agents ----------------------------------------------------------------------------------------
    def claim(self, run_id: str, agent_id: str, lease: str | None = None) -> Agent:
        """Claim a controlled agent, or resume it with a saved ``lease``; ``with client.claim(...) as agent:``
        releases it when the block ends (unless ``agent.detach()`` was called)."""
        return Agent(self, self._run(core.claim(core.AgentState(run_id, agent_id, lease or ""))))

    def poll_many(self, agents: Sequence[Agent], wait: float = 25.0, parts: Iterable[str] | None = None
                  ) -> list[Observation]:
        """One long-poll for several agents of one run: their new observations, ``[]`` when none came
        within ``wait`` s (``POST /v1/runs/{run}/observations``)."""
        return self._run(core.poll_many([a._state for a in agents], wait, parts))

    def claim_many(self, run_id: str, agents: core.ControlledAgents = "all") -> list[Agent]:
        """Claim several controlled agents in one request (ids, ``"all"`` or ``{"role": ROLE}``), all or none:
        a handle per agent, each with a fresh lease of its own (``POST /v1/runs/{run}/claim``)."""
        return [Agent(self, state) for state in self._run(core.claim_many(run_id, agents))]


class Agent(core.AgentHandleBase):
    """One claimed agent (blocking): the same methods as :class:`~warren_sim.client.AsyncAgent`."""

    def __init__(self, client: AgentClient, state: core.AgentState) -> None:
        self._client = client
        self._state = state

    def _run(self, op: Op[T]) -> T:
        return self._client._run(op)

    def briefing(self, revision: int | None = None) -> dict[str, Any]:
        """The briefing, fetched once per revision and checked against its ``content_hash``."""
        return self._run(core.get_briefing(self._state, revision))

    def poll(self, wait: float = 0.0) -> Observation | None:
        """One long-poll of up to ``wait`` s: a new observation, or None. Raises :class:`RunEnded`."""
        return self._run(core.poll(self._state, wait))

    def next_observation(self, wait: float = 25.0) -> Observation:
        """Long-poll (``wait`` s per request) until a new observation comes. Raises :class:`RunEnded`."""
        return self._run(core.next_observation(self._state, wait))

    def observations(self, wait: float = 25.0) -> Iterator[Observation]:
        """Every new observation; ends when the run ends (``agent.run_status`` then holds its status)."""
        while True:
            try:
                obs = self.next_observation(wait)
            except RunEnded:
                return
            yield obs

    def submit(self, observation: Observation | str, command: Mapping[str, Any], *,
               command_id: str | None = None, next_wait: float | None = None) -> Receipt:
        """Answer ``observation`` with ``command`` under a fresh (or the given) command id; transport errors
        are retried under the same id, so a lost acceptance comes back as ``duplicate`` (success).
        ``next_wait=S`` fetches the next observation in the same request (see the async client)."""
        body = core.command_body(observation, command, command_id)
        return self._run(core.submit(self._state, body, next_wait))

    def receipt(self, command_id: str) -> Receipt:
        """The command's receipt with its current outcome."""
        return self._run(core.get_receipt(self._state, command_id))

    def wait_outcome(self, command_id: str, *, until: Iterable[str] | None = None, poll_interval: float = 0.05,
                     timeout: float | None = None) -> Receipt:
        """Poll the receipt until its outcome leaves ``pending`` (or reaches one of ``until``)."""
        return self._run(core.wait_outcome(self._state, command_id, until, poll_interval, timeout))

    def resume(self) -> None:
        """After a reconnect: claim again with the lease and have the outstanding envelope redelivered."""
        self._run(core.resume(self._state))

    def release(self) -> None:
        """Free the agent now; the lease stops working."""
        self._run(core.release(self._state))

    def __enter__(self) -> Agent:
        return self

    def __exit__(self, *exc: object) -> None:
        self._run(core.released_quietly(self._state))
