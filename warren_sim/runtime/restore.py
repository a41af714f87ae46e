"""Rebuilding a run from its journal file: after a restart (DESIGN section 11), and for an ended run on demand.

The engine is deterministic, so a run is rebuilt by replaying its recorded commands: every batch whose
``command`` records are all in the file is answered with them and adjudicated again (the NPC policies are
asked again too, so their own state is what it was). The first batch that lacks some is the one that was
waiting for answers when the server died: its accepted commands stand (their ``verdict`` records carry the
command, and were written before the receipt left), its NPC agents are answered by their policies, and
its remaining remote agents are issued the same observations again, with a deadline counted from the
restart. The engine records the file lacks (those of the batch in progress) are appended after a
``restart`` record, so the file's engine records stay the run's engine records, in order.

Leases resume from the sidecar of token digests (:meth:`~warren_sim.runtime.desk.AgentDesk.save_leases`)
with a fresh TTL: the client's token is never stored, only compared. The rebuilt run takes on what the
journal says through its public API (``note_claimed``, ``answer_npc``, ``resume``, ``ended_as_journaled``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio

from ..engine import Observation
from ..engine.records import RUNTIME_KINDS
from ..protocol.models import TERMINAL_RUN_STATUSES, Receipt
from ..protocol.verdicts import record_acceptance
from ..scenarios import instantiate, load_scenario, npc_team
from .clock import WallMap, unix_now
from .journal import Journal, read_records
from .leases import Lease
from .run import Run, RunConfig

__all__ = ["RestoreError", "lease_path", "rebuild_run", "summary_of", "view_path"]


class RestoreError(Exception):
    """The journal cannot be rebuilt into a run (no run/config record, an unknown scenario, a divergence)."""


def lease_path(journal: Path) -> Path:
    return journal.with_name(journal.stem + ".leases.json")


def view_path(journal: Path) -> Path:
    return journal.with_name(journal.stem + ".view.json")


def summary_of(path: Path) -> tuple[str, str]:
    """``(status, error)`` of a journal file from its last ``status`` record, read without parsing every line."""
    status, error = "created", ""
    with open(path, "rb") as f:
        for line in f:
            if b'"kind":"status"' in line and line.endswith(b"\n"):
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue
                status, error = str(rec.get("status", status)), str(rec.get("error") or "")
    return status, error


def _lease_digests(path: Path) -> dict[str, str]:
    try:
        data = json.loads(lease_path(path).read_text(encoding="utf-8"))
        return {str(k): str(v) for k, v in dict(data.get("sha256", {})).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def _forked_from(run_rec: dict[str, Any]) -> dict[str, Any] | None:
    """A fork's parent and fork point, as its ``run`` record names them (None: the run is no fork)."""
    point = run_rec.get("forked_from")
    return dict(point) if isinstance(point, dict) else None


def rebuild_run(path: Path, wallmap: WallMap, *, lease_ttl: float, max_polls: int, max_spectators: int,
                fsync: bool = False, resume: bool = True) -> Run:
    """The run of journal ``path`` rebuilt. With ``resume`` a live run gets its ``restart`` record and
    ``resume_batch`` (start its task with ``run.main``); an ended run comes back ended, its journal closed."""
    records = read_records(path, repair=True)
    run_rec = next((r for r in records if r.get("kind") == "run"), None)
    cfg = next((r for r in records if r.get("kind") == "config"), None)
    if run_rec is None or cfg is None:
        raise RestoreError(f"{path} has no run or config record")
    try:
        loaded = load_scenario(str(run_rec["scenario"]), dict(run_rec.get("params") or {}))
    except Exception as exc:  # noqa: BLE001 - a scenario that no longer loads: report, never crash the server
        raise RestoreError(f"{path}: cannot load scenario {run_rec.get('scenario')!r}: {exc}") from None
    controlled = tuple(cfg.get("controlled_agents") or ())
    raw_npc = cfg.get("npc_policy", "solution")
    npc_policy = dict(raw_npc) if isinstance(raw_npc, dict) else str(raw_npc)
    run_id, seed = str(run_rec["run_id"]), int(run_rec["seed"])
    sim, policies = instantiate(loaded, seed, npc_team(npc_policy, loaded), controlled, run_id=run_id)
    config = RunConfig(run_id, str(run_rec["scenario"]), seed, controlled, npc_policy, cfg.get("pace"),
                       float(cfg.get("decision_deadline_s", 30.0)), dict(loaded.params), lease_ttl,
                       max_polls, max_spectators, _forked_from(run_rec))
    journal = Journal(path, fsync=fsync, restored=records)
    run = Run(config, sim, policies, journal, wallmap, lease_file=lease_path(path), restored=True)
    try:
        return _replay_into(run, records, path, resume)
    except BaseException:
        journal.discard()
        raise


def _replay_into(run: Run, records: list[dict[str, Any]], path: Path, resume: bool) -> Run:
    sim, policies, journal, lease_ttl = run.sim, run.policies, run.journal, run.config.lease_ttl

    commands: dict[str, dict[str, Any]] = {}
    claimed: list[str] = []  # agents the journal shows claimed
    accepted: dict[str, dict[str, Any]] = {}  # observation id -> its accepted verdict record
    status, error = "created", None
    for r in records:
        kind = r.get("kind")
        if kind == "command":
            commands.setdefault(str(r.get("observation_id")), r)
        elif kind == "verdict":
            ra = run.remote.get(str(r.get("agent")))
            if ra is None:
                continue
            if r["status"] == "accepted":
                accepted[str(r["observation_id"])] = r
            elif r["status"] != "duplicate":
                ra.receipts[str(r["command_id"])] = Receipt(str(r["command_id"]), str(r["observation_id"]),
                                                            r["status"], str(r.get("detail", "")), "none", "")
        elif kind == "claim":
            claimed.append(str(r.get("agent")))
        elif kind == "status":
            status, error = str(r.get("status")), r.get("error")
        elif kind == "fault":  # an injected fault (docs/faults.md): the run view counts them by kind
            met = run.state.faults_met
            met[str(r.get("fault"))] = met.get(str(r.get("fault")), 0) + 1
    engine_in_file = sum(1 for r in records if r.get("kind") not in RUNTIME_KINDS)
    end_rec = next((r for r in reversed(records) if r.get("kind") == "end"), None)

    produced: list[dict[str, Any]] = []

    def drain() -> None:
        produced.extend(r for r in sim.drain_records() if r.get("kind") not in RUNTIME_KINDS)

    def apply(obs: Observation, rec: dict[str, Any] | None) -> None:
        """Answer ``obs`` as the journal says (``rec``: its command record, or None: its accepted verdict)."""
        ra = run.remote.get(obs.agent_id)
        oid = obs.observation_id
        if ra is None:
            if not terminal:  # the policy sees every observation, as in the first life, to decide after it;
                policies[obs.agent_id].decide(obs)  # an ended run's NPCs decide nothing more (its commands are on file)
            assert rec is not None
            sim.answer(obs.agent_id, rec["command"], source=str(rec.get("source", "npc")))
            return
        verdict = accepted.get(oid)
        source = str(rec.get("source")) if rec is not None else "remote"
        if verdict is not None and source == "remote":
            receipt = Receipt(str(verdict["command_id"]), oid, "accepted", "", "pending", "")
            record_acceptance(ra.ledger, receipt, verdict.get("command"))
            ra.receipts[receipt.command_id] = receipt
            ra.observation_of_command[receipt.command_id] = oid
        elif source == "expired":
            ra.ledger.expire(oid, "deadline")
        else:
            ra.ledger.supersede(oid, by=None)
        ra.answered = True
        command = rec["command"] if rec is not None else verdict["command"]  # type: ignore[index]
        sim.answer(obs.agent_id, command, source=source)

    drain()
    outstanding = None
    terminal = status in TERMINAL_RUN_STATUSES
    while not sim.ended:
        if terminal and end_rec is not None and end_rec.get("status") == "cancelled" \
                and len(produced) >= engine_in_file - 1:
            break
        batch = sim.advance()
        drain()
        if batch is None:
            break
        for obs in batch.observations:
            ra = run.remote.get(obs.agent_id)
            if ra is not None:
                ra.ledger.issue(obs.observation_id, obs.seq)
        if all(o.observation_id in commands for o in batch.observations):
            for obs in batch.observations:
                apply(obs, commands[obs.observation_id])
            sim.adjudicate()
            drain()
            continue
        outstanding = batch
        break
    if not terminal and len(produced) < engine_in_file:
        raise RestoreError(f"{path}: rebuilding gave {len(produced)} engine records, the file holds "
                           f"{engine_in_file}")

    for aid, dig in _lease_digests(path).items():  # leases resume with a fresh TTL
        ra = run.remote.get(aid)
        if ra is not None:
            ra.lease = Lease(aid, dig, trio.current_time() + lease_ttl)
            claimed.append(aid)  # a lease in the sidecar was claimed, even if its claim record was lost
    run.note_claimed(claimed)
    if terminal:
        if not sim.ended and end_rec is not None and end_rec.get("status") == "cancelled":
            sim.cancel(str(end_rec.get("reason", "cancelled")))
        sim.drain_records()
        run.ended_as_journaled(status, error)
        journal.close()
        return run

    tail = produced[engine_in_file:]
    if resume:
        journal.append({"kind": "restart", "t": sim.time, "engine_records": len(tail),
                        "wall": {"unix": round(unix_now(), 3)}})
    if outstanding is not None:
        for obs in outstanding.observations:
            rec = commands.get(obs.observation_id)
            if rec is not None or obs.observation_id in accepted:
                apply(obs, rec)
            elif obs.agent_id not in run.remote:
                run.answer_npc(obs)
    journal.extend(tail)
    journal.flush()
    run.resume(status, outstanding)
    if status != "running" and resume and run.all_claimed:
        run.start()  # killed between the last claim and its start: every controlled agent was claimed
    return run
