"""RunManager: creates runs, owns their tasks in one nursery, finds them by id.

A run task that raises is caught inside ``Run.main`` (the run becomes ``crashed``); nothing a run
does can take the manager, the server or another run down.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from ..protocol.models import RunCreate
from ..scenarios import ScenarioError, instantiate, list_scenarios, load_scenario
from .clock import WallMap
from .errors import RunError
from .journal import Journal
from .run import Run, RunConfig


@attrs.define
class ServerConfig:
    lease_ttl: float = 300.0
    data_dir: Path | None = Path("warren-data")
    max_wait_s: float = 60.0
    rate: float = 1.0
    spectator_queue: int = 1024  # records a live spectator may fall behind before it is sent "lagged"
    sse_keepalive_s: float = 15.0  # an SSE comment this often (clock seconds) while no record is due
    heartbeat_s: float = 15.0
    # Caps (429 with Retry-After, except max_agents: a run that big is refused with 400, retrying cannot help).
    max_polls_per_lease: int = 4
    max_spectators: int = 64  # per run
    max_runs: int = 64  # live (created or running) runs per server
    max_agents: int = 100_000  # per run
    body_timeout_s: float = 30.0  # real seconds a request body may take to arrive (408 beyond)
    # Called with one line per run lifecycle change (created, started, ended with status); warren serve prints it.
    on_event: Callable[[str], None] | None = None


def _last_journaled_run(data_dir: Path | None) -> int:
    """The highest N of the data dir's ``run-N.jsonl`` journals (0 if none)."""
    if data_dir is None or not data_dir.is_dir():
        return 0
    numbers = [int(p.stem[4:]) for p in data_dir.glob("run-*.jsonl") if p.stem[4:].isdigit()]
    return max(numbers, default=0)


class RunManager:
    def __init__(self, config: ServerConfig, nursery: trio.Nursery, wallmap: WallMap) -> None:
        self.config = config
        self.nursery = nursery
        self.wallmap = wallmap
        self.runs: dict[str, Run] = {}
        self._next = 1 + _last_journaled_run(config.data_dir)  # never overwrite an earlier server's journal
        self.draining = trio.Event()

    def get(self, run_id: str) -> Run:
        run = self.runs.get(run_id)
        if run is None:
            known = ", ".join(list(self.runs)[-10:]) or "none yet"
            raise RunError(404, f"no run {run_id!r}; known runs: {known} (GET /v1/runs lists them)")
        return run

    def live_runs(self) -> int:
        return sum(1 for run in self.runs.values() if not run.is_ended)

    def create(self, scenario: str, seed: int, body: RunCreate) -> Run:
        if scenario not in list_scenarios():
            raise RunError(404, f"unknown scenario {scenario!r}; valid scenarios: {', '.join(list_scenarios())}")
        cap = self.config.max_runs
        if self.live_runs() >= cap:
            raise RunError(429, f"this server already has {cap} live runs (created or running; its cap, warren "
                           "serve --max-runs); cancel one you no longer need (DELETE /v1/runs/{run_id}) or wait "
                           "for one to end, then retry", retry_after=10)
        try:
            loaded = load_scenario(scenario, dict(body.params))
        except ScenarioError as exc:
            raise RunError(400, str(exc)) from None
        if len(loaded.spec.agents) > self.config.max_agents:
            raise RunError(400, f"these parameters make a {scenario} world of {len(loaded.spec.agents)} agents; "
                           f"this server runs at most {self.config.max_agents} agents per run (warren serve "
                           "--max-agents); ask for fewer (see GET /v1/scenarios/" + scenario + " for its "
                           "parameters)")
        ids = [a.id for a in loaded.spec.agents]
        unknown = [a for a in body.controlled_agents if a not in ids]
        if unknown:
            shown = ", ".join(ids[:50]) + (f" and {len(ids) - 50} more" if len(ids) > 50 else "")
            raise RunError(400, f"controlled_agents names {', '.join(map(repr, unknown))}, not an agent of "
                           f"{scenario}; its agents: {shown}")
        run_id = f"run-{self._next}"
        self._next += 1
        npc = "solution" if body.npc_policy == "solution" and loaded.solution is not None else "none"
        sim, policies = instantiate(loaded, seed, npc, body.controlled_agents, run_id=run_id)
        path = self.config.data_dir / f"{run_id}.jsonl" if self.config.data_dir is not None else None
        config = RunConfig(run_id, scenario, seed, tuple(body.controlled_agents), body.npc_policy, body.pace,
                           body.decision_deadline_s, dict(loaded.params), self.config.lease_ttl,
                           self.config.max_polls_per_lease, self.config.max_spectators)
        run = Run(config, sim, policies, Journal(path), self.wallmap)
        self.runs[run_id] = run
        self.nursery.start_soon(run.main, name=f"warren run {run_id}")
        if self.config.on_event is not None:
            self.config.on_event(f"{run_id} created: {scenario} seed {seed}, controlled "
                                 f"{', '.join(body.controlled_agents) or 'none'}, npc_policy {body.npc_policy}")
            self.nursery.start_soon(self._report_lifecycle, run, self.config.on_event)
        return run

    @staticmethod
    async def _report_lifecycle(run: Run, say: Callable[[str], None]) -> None:
        """One line when the run starts and one when it ends, with its status and reason (``warren serve``)."""
        await run.started.wait()
        if not run.is_ended:
            say(f"{run.run_id} started")
        await run.ended.wait()
        result = run.view().get("result") or {}
        say(f"{run.run_id} ended: {run.status}" + (f" ({result['reason']})" if result.get("reason") else ""))

    def list_views(self) -> list[dict[str, Any]]:
        return [r.view() for r in self.runs.values()]

    def shutdown(self, reason: str = "the server shut down") -> None:
        """End every live run (journaled as cancelled) and release every waiter."""
        self.draining.set()
        for run in self.runs.values():
            run.cancel(reason)
