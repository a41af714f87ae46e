"""RunManager: creates runs, owns their tasks in one nursery, finds them by id.

A run task that raises is caught inside ``Run.main`` (the run becomes ``crashed``); nothing a run
does can take the manager, the server or another run down.

DESIGN section 11: on start the manager indexes the journals of its data directory (``restore``): ended
runs are listed and served from disk, live ones are rebuilt and resumed (or marked ``crashed`` with
``resume=False``). When a run ends, its :class:`Run` is swapped for a :class:`StoredRun`, so memory is
bounded by live work.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from ..engine import Policy, Simulation
from ..observability.logs import LogEvent
from ..observability.metrics import NO_METRICS, Metrics, NoMetrics
from ..observability.tracing import NO_TRACER, NoTracer, Tracer
from ..protocol.models import TERMINAL_RUN_STATUSES, ControlledAgents, RoleSelector, RunCreate, RunFork
from ..scenarios import (
    LoadedScenario,
    ScenarioError,
    instantiate,
    list_scenarios,
    load_scenario,
    npc_team,
)
from ..scenarios.loader import find_scenario
from .api import RunAPI
from .clock import WallMap, unix_now
from .errors import RunError
from .faults import FaultInjector, FaultSpec, FaultSpecError, as_fault_spec, parse_faults
from .forking import bring_fork
from .journal import Journal
from .restore import RestoreError, lease_path, rebuild_run, summary_of
from .run import Run, RunConfig
from .stored import StoredRun, write_view

REBUILT_CACHE = 2  # ended runs rebuilt from disk for agent requests, kept for the next request
BIG_RUN_RECORDS = 20_000  # an ended run with this many records gets its memory handed back to the OS at once


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
    fsync: bool = False  # fsync the journal before an accepted receipt leaves (grouped per trio tick)
    resume: bool = True  # on start, resume the data dir's live runs (False: mark them crashed)
    allow_origins: tuple[str, ...] = ()  # browser origins allowed besides the server's own (--allow-origin)
    send_timeout_s: float = 10.0  # a spectator that takes no frame for this long is cut (its slot freed)
    # every run's seeded faults unless its body says (--faults; docs/faults.md); a SPEC string is read here, so
    # the pytest plugin's @pytest.mark.warren(faults="lost_reply=0.2") gets the same teaching errors
    faults: FaultSpec | None = attrs.field(default=None, converter=as_fault_spec)
    fault_seed: int = 0  # --fault-seed
    # Called with one event per run lifecycle change (created, started, ended with status, resumed, not restored):
    # an observability.logs.LogEvent, whose str() is the human line; warren serve logs it (text or JSON).
    on_event: Callable[[LogEvent], None] | None = None
    metrics: bool = True  # GET /metrics and the counting behind it (warren serve --no-metrics: off)
    # an OpenTelemetry TracerProvider for the agent requests' spans (tests); None: the program's global one if it
    # installed an SDK provider (warren serve does from the OTEL_* variables), else no tracing
    tracer_provider: Any = None


def new_metrics() -> Metrics:
    """An app's metrics (its own registry), naming the engine this process runs (``warren_engine_build_info``)."""
    from .. import __version__
    from ..engine import BUILD, WHY

    return Metrics(version=__version__, engine=BUILD, engine_why=WHY, now=unix_now)


LOADED_KEPT = 16  # scenarios (name and parameters) kept loaded, for every manager of the process

# Loaded scenarios, shared by every manager of the process (see RunManager._load): a test suite makes an app,
# so a manager, per test, and each loaded its scenario again (5 ms a time here). The lock because managers
# may live in other threads (the pytest plugin's warren_server runs one in its own).
_LOADED: OrderedDict[tuple[Any, ...], LoadedScenario] = OrderedDict()
_LOADED_LOCK = threading.Lock()


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def _last_journaled_run(data_dir: Path | None) -> int:
    """The highest N of the data dir's ``run-N.jsonl`` journals (0 if none)."""
    if data_dir is None or not data_dir.is_dir():
        return 0
    numbers = [int(p.stem[4:]) for p in data_dir.glob("run-*.jsonl") if p.stem[4:].isdigit()]
    return max(numbers, default=0)


def _give_back_memory() -> None:
    """After a run is released: collect its cycles and hand the freed heap back to the OS (glibc's malloc_trim),
    so the process's RSS follows its live work instead of its peak (bench/memory.py)."""
    gc.collect()
    try:
        if not _libc:
            _libc.append(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6"))
        _libc[0].malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory is still free for Python to reuse
        pass


_libc: list[Any] = []


class RunManager:
    def __init__(self, config: ServerConfig, nursery: trio.Nursery, wallmap: WallMap, *,
                 metrics: Metrics | NoMetrics = NO_METRICS, tracer: Tracer | NoTracer = NO_TRACER) -> None:
        self.config = config
        self.metrics = metrics  # the app's: each run's adjudications, journal writes and verdicts are counted there
        self.tracer = tracer  # the app's: agent requests' spans (runtime.agent_ops reads them from the run)
        self.nursery = nursery
        self.wallmap = wallmap
        self.runs: dict[str, RunAPI] = {}
        self._next = 1 + _last_journaled_run(config.data_dir)  # never overwrite an earlier server's journal
        self.draining = trio.Event()
        self._rebuilt: OrderedDict[str, Run] = OrderedDict()
        self.restore_errors: list[str] = []
        self._loaded = _LOADED  # the process's loaded scenarios: see _load
        self.faults = FaultInjector(config.faults, config.fault_seed)
        # set (then replaced) at each restart fault: the agent WebSockets close with 1012, as a crash closes them
        self.restarted = trio.Event()
        self.restarts = 0

    # -- restart ---------------------------------------------------------------------------------------
    def restore(self) -> None:
        """Index the data directory: ended runs served from disk, live ones resumed (or marked crashed)."""
        data_dir = self.config.data_dir
        if data_dir is None or not data_dir.is_dir():
            return
        paths = sorted((p for p in data_dir.glob("run-*.jsonl") if p.stem[4:].isdigit()), key=lambda p: int(p.stem[4:]))
        for path in paths:
            run_id = path.stem
            try:
                status, _ = summary_of(path)
                if status in TERMINAL_RUN_STATUSES:
                    self.runs[run_id] = self._stored(run_id, path, status)
                    continue
                run = rebuild_run(path, self.wallmap, lease_ttl=self.config.lease_ttl,
                                  max_polls=self.config.max_polls_per_lease,
                                  max_spectators=self.config.max_spectators, fsync=self.config.fsync,
                                  resume=self.config.resume)
            except (RestoreError, OSError, ValueError, KeyError, TypeError) as exc:
                self.restore_errors.append(f"{path.name}: {exc}")
                self.say(LogEvent("run.not_restored", f"{path.name} could not be restored: {exc}",
                                   {"run_id": run_id, "error": str(exc)}, logging.ERROR))
                continue
            self._observe(run)
            if not self.config.resume:
                run.finish("crashed", "server restarted", error="server restarted")
                run.journal.close()
                write_view(path, run.view())
                self.runs[run_id] = self._stored(run_id, path, run.status)
                self.say(LogEvent("run.ended", f"{run_id} ended: crashed (server restarted, --no-resume)",
                                   {"run_id": run_id, "status": "crashed", "reason": "server restarted"},
                                   logging.WARNING))
                continue
            self.runs[run_id] = run
            self._resume_faults(run)
            self.nursery.start_soon(self._drive, run, name=f"warren run {run_id}")
            self.say(LogEvent("run.resumed", f"{run_id} resumed: {run.config.scenario} seed {run.config.seed} at "
                               f"t={run.sim.time} ms", {"run_id": run_id, "scenario": run.config.scenario,
                                                        "seed": run.config.seed, "t": run.sim.time}))
            if self.config.on_event is not None:
                self.nursery.start_soon(report_lifecycle, run, self.config.on_event, True)

    def restart_runs(self) -> list[str]:
        """A ``restart`` fault (docs/faults.md): every live run with a journal file is dropped from memory as a
        crash would drop it (:meth:`Run.drop`) and rebuilt from its file, as a restarted server rebuilds it
        (:func:`~.restore.rebuild_run`, docs/reliability.md section 9), then goes on. Leases come back from
        their sidecar with a fresh TTL; each run keeps its fault plan and its request counters (the process
        lives on: a request that met a restart is not met by it again). The ids of the runs restarted."""
        done = []
        for run_id, old in list(self.runs.items()):
            if not isinstance(old, Run) or old.is_ended or old.journal.path is None:
                continue
            path = old.journal.path
            old.drop()
            try:
                run = rebuild_run(path, self.wallmap, lease_ttl=self.config.lease_ttl,
                                  max_polls=self.config.max_polls_per_lease,
                                  max_spectators=self.config.max_spectators, fsync=self.config.fsync)
            except (RestoreError, OSError, ValueError, KeyError, TypeError) as exc:  # as restore() reports it
                self.restore_errors.append(f"{path.name}: {exc}")
                self.say(LogEvent("run.not_restored", f"{path.name} could not be restored: {exc}",
                                   {"run_id": run_id, "error": str(exc)}, logging.ERROR))
                continue
            self._observe(run)
            self.runs[run_id] = run
            self._resume_faults(run)
            self.nursery.start_soon(self._drive, run, name=f"warren run {run_id}")
            done.append(run_id)
        self.restarts += 1
        event, self.restarted = self.restarted, trio.Event()
        event.set()
        return done

    def _resume_faults(self, run: Run) -> None:
        """A resumed run meets the faults its creation asked for (its journaled ``faults`` record), else the
        server's. The request counters start again at 0: they count requests, which the journal does not hold."""
        chosen = next((r for r in run.journal.records if r.get("kind") == "faults"), None)
        if chosen is None:
            self.faults.start(run.run_id)
            return
        try:
            self.faults.start(run.run_id, parse_faults(chosen["spec"]), int(chosen.get("seed", 0)))
        except (FaultSpecError, KeyError, TypeError, ValueError) as exc:
            self.restore_errors.append(f"{run.run_id}: its faults record cannot be read ({exc}); no faults")

    def _stored(self, run_id: str, path: Path, status: str) -> StoredRun:
        stored = StoredRun(run_id, path, status, self._rebuild_ended, self.config.max_spectators)
        stored.metrics, stored.tracer = self.metrics, self.tracer
        return stored

    def _rebuild_ended(self, stored: StoredRun) -> Run:
        """An ended run rebuilt from its journal for an agent request; the last few are cached."""
        run = self._rebuilt.get(stored.run_id)
        if run is None:
            run = rebuild_run(stored.path, self.wallmap, lease_ttl=self.config.lease_ttl,
                              max_polls=self.config.max_polls_per_lease,
                              max_spectators=self.config.max_spectators, fsync=self.config.fsync)
            run.after_end_change = lambda: write_view(stored.path, run.view())
            self._observe(run)
            if stored.leases is not None:  # ended in this process: its leases keep their own expiry
                for aid, ra in run.remote.items():
                    ra.lease = stored.leases.get(aid)
            self._rebuilt[stored.run_id] = run
            while len(self._rebuilt) > REBUILT_CACHE:
                self._rebuilt.popitem(last=False)
        self._rebuilt.move_to_end(stored.run_id)
        return run

    async def _drive(self, run: Run) -> None:
        """The run task, then its release from memory: the ended run is read from disk from now on."""
        await run.main()
        path = run.journal.path
        if path is not None and not run.state.dropped:  # a dropped run's successor is driven by its own task
            write_view(path, run.view())
            run.after_end_change = lambda: write_view(path, run.view())
            stored = self.runs[run.run_id] = self._stored(run.run_id, path, run.status)
            stored.leases = {aid: ra.lease for aid, ra in run.remote.items() if ra.lease is not None}
            big = len(run.journal.records) >= BIG_RUN_RECORDS
            del run
            if big:  # a full collection costs tens of ms: only worth it (and only paid) after a big run
                await trio.sleep(0)  # the waiters the end released go first
                _give_back_memory()

    def say(self, event: LogEvent) -> None:
        """A line for the server's log (``warren serve`` prints it, as JSON with ``--log-format json``)."""
        if self.config.on_event is not None:
            self.config.on_event(event)

    def _observe(self, run: Run) -> None:
        """Count the run's adjudications, journal writes and verdicts in the app's metrics; trace its requests."""
        run.metrics = run.loop.metrics = run.journal.metrics = self.metrics
        run.tracer = self.tracer

    def get(self, run_id: str) -> RunAPI:
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
        self._check_cap()
        try:
            loaded = self._load(scenario, dict(body.params))
        except ScenarioError as exc:
            raise RunError(400, str(exc)) from None
        if len(loaded.spec.agents) > self.config.max_agents:
            raise RunError(400, f"these parameters make a {scenario} world of {len(loaded.spec.agents)} agents; "
                           f"this server runs at most {self.config.max_agents} agents per run (warren serve "
                           "--max-agents); ask for fewer (see GET /v1/scenarios/" + scenario + " for its "
                           "parameters)")
        controlled = controlled_ids(scenario, loaded.spec.agents, body.controlled_agents)
        faults = self._faults(body)
        run_id = f"run-{self._next}"
        try:
            sim, policies = instantiate(loaded, seed, npc_team(body.npc_policy, loaded), controlled, run_id=run_id)
        except ScenarioError as exc:  # a team naming no role or agent of the scenario, or no such population
            raise RunError(400, f"npc_policy: {exc}") from None
        self._next += 1
        return self._launch(run_id, scenario, seed, loaded, controlled, body, faults, sim, policies)

    def _launch(self, run_id: str, scenario: str, seed: int, loaded: LoadedScenario, controlled: list[str],
                body: RunCreate, faults: FaultSpec | None, sim: Simulation, policies: dict[str, Policy], *,
                engine_records: list[dict[str, Any]] | None = None,
                forked_from: dict[str, Any] | None = None) -> Run:
        """A new run (created or forked) journaled, indexed and started as its own task."""
        path = self.config.data_dir / f"{run_id}.jsonl" if self.config.data_dir is not None else None
        config = RunConfig(run_id, scenario, seed, tuple(controlled), body.npc_policy, body.pace,
                           body.decision_deadline_s, dict(loaded.params), self.config.lease_ttl,
                           self.config.max_polls_per_lease, self.config.max_spectators, forked_from)
        journal = Journal(path, fsync=self.config.fsync)
        journal.metrics = self.metrics  # before the run's first records are written
        run = Run(config, sim, policies, journal, self.wallmap,
                  lease_file=lease_path(path) if path is not None else None, engine_records=engine_records)
        self._observe(run)
        self.runs[run_id] = run
        plan = self.faults.start(run_id, faults, None if body.faults is None else body.faults.seed)
        if plan is not None:  # journaled, so that a restarted server injects the same faults into this run
            run.journal.append({"kind": "faults", "spec": plan.spec.text, "seed": plan.seed})
        self.nursery.start_soon(self._drive, run, name=f"warren run {run_id}")
        if self.config.on_event is not None:
            fork = f", forked from {forked_from['run_id']} at cursor {forked_from['cursor']}" if forked_from else ""
            self.config.on_event(LogEvent(
                "run.created", f"{run_id} created: {scenario} seed {seed}, controlled {_shown(controlled) or 'none'}, "
                f"npc_policy {body.npc_policy}{fork}", {"run_id": run_id, "scenario": scenario, "seed": seed,
                                                        "controlled_agents": len(controlled),
                                                        "npc_policy": body.npc_policy}))
            self.nursery.start_soon(report_lifecycle, run, self.config.on_event)
        return run

    # -- forks (docs/fork.md, "Served") --------------------------------------------------------------
    async def fork(self, parent_id: str, body: RunFork) -> Run:
        """A new run from the last batch boundary at or before ``body.cursor`` of run ``parent_id``'s journal
        (:func:`~warren_sim.runtime.forking.bring_fork` says what is refused, and how)."""
        parent = self.get(parent_id)
        self._check_cap()

        def reserve() -> str:
            run_id = f"run-{self._next}"
            self._next += 1  # taken now: another run may be created while the fork is brought to its point
            return run_id

        fork = await bring_fork(parent, body, reserve, controlled_ids)
        faults = self._faults(body)
        self._check_cap()
        return self._launch(fork.run_id, fork.scenario, fork.seed, fork.loaded, fork.controlled, body, faults,
                            fork.forked.sim, fork.forked.policies, engine_records=fork.forked.records,
                            forked_from=fork.forked.point.as_dict())

    def _check_cap(self) -> None:
        cap = self.config.max_runs
        if self.live_runs() >= cap:
            raise RunError(429, f"this server already has {cap} live runs (created or running; its cap, warren "
                           "serve --max-runs); cancel one you no longer need (DELETE /v1/runs/{run_id}) or wait "
                           "for one to end, then retry", retry_after=10)

    def _faults(self, body: RunCreate) -> FaultSpec | None:
        """The run's own fault SPEC (a 400 for a bad one), checked with the server's: a restart needs journals."""
        faults = None
        if body.faults is not None:
            try:
                faults = parse_faults(body.faults.spec)
            except FaultSpecError as exc:
                raise RunError(400, f"faults.spec: {exc}") from None
        chosen = faults if faults is not None else self.config.faults
        if chosen and chosen.rates.get("restart", 0.0) > 0 and self.config.data_dir is None:
            raise RunError(400, "faults.spec: restart restores every run from its journal file, and this server "
                           "keeps no journals (no data directory); leave restart out, or serve with a data "
                           "directory (warren serve --data-dir)")
        return faults

    def _load(self, scenario: str, params: dict[str, Any]) -> LoadedScenario:
        """``load_scenario``, kept for the next run of the same scenario and parameters.

        Loading parses the TOML, runs ``expand.py`` and validates the spec: 2-5 ms a run, a fifth of the
        server's time when short runs follow each other (bench/results/r4-perf-wire.md). The spec is frozen
        and every run builds its own world from it, so runs can share it. Keyed by the files' modification
        times too: a scenario edited while the server runs is loaded again. Shared by the process's managers
        (``_LOADED``): an app per test no longer loads its scenarios again.
        """
        directory = find_scenario(scenario)
        stamp = tuple(_mtime_ns(directory / f) for f in ("scenario.toml", "expand.py", "solution.py"))
        key = (str(directory), repr(sorted(params.items())), stamp)
        with _LOADED_LOCK:
            loaded = self._loaded.get(key)
            if loaded is not None:
                self._loaded.move_to_end(key)
                return loaded
        loaded = load_scenario(scenario, params)  # outside the lock: two threads may both load, and agree
        with _LOADED_LOCK:
            self._loaded[key] = loaded
            while len(self._loaded) > LOADED_KEPT:
                self._loaded.popitem(last=False)
        return loaded

    def list_views(self) -> list[dict[str, Any]]:
        return [r.view() for r in self.runs.values()]

    def shutdown(self, reason: str = "the server shut down") -> None:
        """End every live run (journaled as cancelled) and release every waiter."""
        self.draining.set()
        for run in self.runs.values():
            run.cancel(reason)


def _shown(ids: list[str], limit: int = 50) -> str:
    return ", ".join(ids[:limit]) + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def controlled_ids(scenario: str, agents: Sequence[Any], chosen: ControlledAgents) -> list[str]:
    """The agent ids a body's ``controlled_agents`` names: a list as given, ``"all"``, or every agent of a role."""
    ids = [a.id for a in agents]
    if chosen == "all":
        return ids
    if isinstance(chosen, RoleSelector):
        picked = [a.id for a in agents if a.role == chosen.role]
        if not picked:
            roles = sorted({a.role for a in agents})
            raise RunError(400, f"controlled_agents {{'role': {chosen.role!r}}} selects no agent of {scenario}; "
                           f"its roles: {', '.join(roles)}")
        return picked
    assert isinstance(chosen, list)
    unknown = [a for a in chosen if a not in ids]
    if unknown:
        raise RunError(400, f"controlled_agents names {', '.join(map(repr, unknown))}, not an agent of "
                       f"{scenario}; its agents: {_shown(ids)} (or select them with \"all\" or "
                       '{"role": ROLE})')
    return list(chosen)


async def report_lifecycle(run: Run, say: Callable[[LogEvent], None], resumed: bool = False) -> None:
    """One event when the run starts (not again for a resumed one) and one when it ends, with its status and
    reason (``warren serve``)."""
    rid = run.run_id
    await run.started.wait()
    if not run.is_ended and not resumed:
        say(LogEvent("run.started", f"{rid} started", {"run_id": rid}))
    await run.ended.wait()
    result = run.view().get("result") or {}
    reason = result.get("reason")
    say(LogEvent("run.ended", f"{rid} ended: {run.status}" + (f" ({reason})" if reason else ""),
                 {"run_id": rid, "status": run.status, "reason": reason, "error": run.error,
                  "sim_time_ms": run.sim.time}, logging.ERROR if run.status == "crashed" else logging.INFO))
