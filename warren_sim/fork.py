"""Forks: a new run from a batch boundary of another run's journal ("what if my agent had done X here?").

WARREN's engine is deterministic, so a journal holds everything needed to stand exactly where its run stood at
any batch boundary: replaying its commands rebuilds the world, and the world's seeded RNG with it. A fork
replays its parent up to the boundary, brings its policies there, and goes on with them from the boundary; a
fork continued with the same policies is its parent, record for record.

The rules:

- **The fork point.** A batch's records run from its ``batch`` record (the first thing adjudication writes) to
  the last record before the next batch's observations; its *boundary* is the cursor of that last record, and
  the run's first boundary is its last record before the first batch. A fork at cursor ``N`` starts from the
  last boundary at or before ``N``: the world after every batch whose records end at or before ``N``
  (:attr:`ForkPoint.batch_cursor` says which). ``N`` below 0 or past the journal's last cursor is an error.
- **Policies continue where they were** (docs/policies.md, "Forks"). Every past observation of an agent that
  the fork drives with a policy is shown to that policy with what the agent answered: a policy with
  ``recall(observation, command)`` is told (it updates its state as if it had answered so); any other policy
  is asked ``decide(observation)``, and its answer must be the recorded one (it is the policy that made the
  record): otherwise the fork stops with a :class:`ForkError` naming the agent, the observation and both
  commands, never a silent divergence. A policy with ``on_receipt`` hears the rejections it heard then.
- **Overrides** replace an agent's answer to its first observation after the fork point (the counterfactual);
  its policy is told that answer as it would be told a past one, so it goes on from what the agent did.
- **A fork's journal is self-contained**: it holds the parent's engine records up to the boundary (the same
  bytes: the engine wrote them again) and its own after, so it replays on its own; its ``run`` record names the
  parent and the fork point (``forked_from``), a key replay ignores.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .engine import Simulation, run_headless
from .engine.headless import tell_rejected
from .engine.policy import Policy, fork_policies
from .engine.records import RUNTIME_KINDS
from .replay import IGNORED_KEYS, journal_origin, strip
from .scenarios import PolicyFactory, instantiate

__all__ = ["ForkError", "ForkPoint", "Forked", "brought_policy", "check_agents", "check_cursor", "fork_records",
           "parse_override", "run_fork", "walk_to"]


class ForkError(ValueError):
    """A fork that cannot be made as asked; the message says why and what to do."""


@attrs.frozen
class ForkPoint:
    """Where a fork starts: the cursor asked for, the boundary used, how many batches and which instant."""

    run_id: str  # the parent's
    cursor: int
    batch_cursor: int
    batches: int
    t: int

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "cursor": self.cursor, "batch_cursor": self.batch_cursor}


@attrs.define
class Forked:
    """A simulation standing at a fork point, with its policies brought there and the journal so far."""

    sim: Simulation
    policies: dict[str, Policy]
    point: ForkPoint
    records: list[dict[str, Any]]  # the fork's engine records so far (the parent's up to the boundary)
    overrides: dict[str, dict[str, Any]]  # agent -> its answer to its first observation after the fork point


def parse_override(text: str) -> tuple[str, dict[str, Any]]:
    """``engineer-1={"action": "take", ...}`` -> ``("engineer-1", {...})`` (``warren fork --override``)."""
    agent, eq, raw = text.partition("=")
    if not eq or not agent.strip():
        raise ForkError(f"--override expects AGENT=COMMAND, as engineer-1='{{\"action\": \"take\", \"args\": "
                        f"{{\"item\": \"toolbox-1\"}}}}', got {text!r}")
    try:
        command = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ForkError(f"--override {agent.strip()}: the command is not JSON ({exc.msg} at column {exc.pos + 1}); "
                        'quote it for the shell: \'{"noop": true}\'') from None
    if not isinstance(command, dict):
        raise ForkError(f"--override {agent.strip()}: a command is a JSON object ({{\"noop\": true}}, "
                        f"{{\"sleep_ms\": 500}} or {{\"action\": ..., \"args\": {{...}}}}), got {raw!r}")
    return agent.strip(), command


def _check_cursor(records: Sequence[dict[str, Any]], cursor: int, where: str) -> None:
    last = records[-1].get("cursor", len(records) - 1) if records else -1
    if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
        raise ForkError(f"cursor must be an integer >= 0 (a record's cursor in {where}), got {cursor!r}")
    if cursor > last:
        raise ForkError(f"cursor {cursor} is past the end of {where}: its cursors run 0..{last}")


class _Bringer:
    """Brings one run's policies along the parent's history, batch by batch, checking every record."""

    def __init__(self, records: Sequence[dict[str, Any]], sim: Simulation, policies: dict[str, Policy],
                 where: str, expected: list[tuple[int, dict[str, Any]]] | None = None, *,
                 check: bool = True) -> None:
        self.sim = sim
        self.policies = policies
        self.where = where
        # Without ``check``, the engine's records are counted, not compared (``engine_records``): for a walk over
        # journal bytes that the run's own digests vouch for (warren_sim/journal_snapshots.py), given only the
        # records it answers from.
        self.check = check
        self.engine_records = 0
        # (each engine record's cursor, and the record without its cursor and wall-clock facts; a journal's are
        # JSON values already, so the JSON round trip of ``strip`` is left for the rare record that does not
        # compare equal without it. A caller that owns ``records`` may give it, built once: ``expected_of``)
        self.expected = expected_of(records) if expected is None else expected
        self.commands: dict[str, dict[str, Any]] = {}
        self.invalid: dict[str, dict[str, Any]] = {}
        for r in records:
            oid = r.get("observation_id")
            if isinstance(oid, str):
                if r["kind"] == "command":
                    self.commands.setdefault(oid, r)
                elif r["kind"] == "invalid":
                    self.invalid.setdefault(oid, r)
        self.batch_cursors = [c for c, r in self.expected if r["kind"] == "batch"]
        self.got: list[dict[str, Any]] = []

    def drain(self) -> None:
        if not self.check:
            self.engine_records += sum(1 for r in self.sim.drain_records() if r["kind"] not in RUNTIME_KINDS)
            return
        for r in self.sim.drain_records():
            if r["kind"] in RUNTIME_KINDS:
                continue
            index = len(self.got)
            plain = _unkeyed(r)
            expected = self.expected[index][1] if index < len(self.expected) else None
            if expected is not None and r["kind"] == "run":  # the fork's own id: the one key that differs
                expected = {**expected, "run_id": plain.get("run_id")}
            if plain != expected and (expected is None or strip(plain) != strip(expected)):
                cursor = self.expected[index][0] if index < len(self.expected) else "past its end"
                raise ForkError(f"{self.where} does not replay: at cursor {cursor} the engine wrote {plain!r:.200}, "
                                "the journal holds another record (was it edited, or written by another WARREN "
                                "version? `warren replay` shows where)")
            self.got.append(r)

    def fork(self) -> _Bringer | None:
        """A copy standing where this one stands (``Simulation.fork``, the policies copied), or None when a
        policy cannot be copied: then the caller walks the journal again instead."""
        try:
            policies = fork_policies(self.policies)
        except Exception:  # (a TypeError naming it, or whatever a policy's own copying raises): walk again
            return None
        new = copy.copy(self)  # the journal's tables are shared: read only
        new.sim, new.policies, new.got = self.sim.fork(), policies, list(self.got)
        return new

    @property
    def boundary(self) -> int:
        return self.expected[len(self.got) - 1][0] if self.got else -1

    def batch(self) -> None:
        """Advance, answer every observation as the journal did (bringing each policy along), adjudicate."""
        batch = self.sim.advance()
        if batch is None:
            raise ForkError(f"{self.where}: the run ended before the journal does; it does not replay")
        self.drain()
        for obs in batch.observations:
            rec = self.commands.get(obs.observation_id)
            if rec is None:
                raise ForkError(f"{self.where} has no command for {obs.observation_id} (t={self.sim.time}): it is "
                                "cut short there (a crash?); fork at an earlier cursor")
            command = rec.get("command")
            if not isinstance(command, dict):
                raise ForkError(f"{self.where}: the command for {obs.observation_id} is not an object")
            policy = self.policies.get(obs.agent_id)
            if policy is not None:
                self.bring(policy, obs, rec)
            self.sim.answer(obs.agent_id, command, source=str(rec.get("source", "policy")))
        self.sim.adjudicate()
        self.drain()

    def bring(self, policy: Policy, obs: Any, rec: dict[str, Any]) -> None:
        """Show ``policy`` its past observation and what was answered (see the module docstring)."""
        command = rec["command"]
        recall = getattr(policy, "recall", None)
        if callable(recall):
            recall(obs, command)
            return
        answer = policy.decide(obs)
        invalid = self.invalid.get(obs.observation_id)
        recorded = invalid.get("command") if invalid is not None else command
        if answer != recorded:
            raise ForkError(
                f"the policy of {obs.agent_id} cannot be brought to the fork point: for {obs.observation_id} "
                f"(t={self.sim.time}) it answers {answer!r:.120}, but the journal records {recorded!r:.120} "
                f"(source {rec.get('source', 'policy')}). It is not the policy that made this run, and it has no "
                "recall(observation, command) to be told what happened; give that agent a policy that has one "
                f"(--policy {obs.agent_id}=none, or add recall to yours: docs/policies.md), or fork at an "
                "earlier cursor")
        if invalid is not None:  # the rules refused its answer then: it hears so again, as headless runs tell it
            tell_rejected(policy, obs.observation_id, answer, str(invalid.get("error", "")))


def fork_records(records: Sequence[dict[str, Any]], cursor: int, policy: str | PolicyFactory = "solution", *,
                 controlled: Sequence[str] = (), run_id: str | None = None,
                 overrides: Mapping[str, dict[str, Any]] | None = None,
                 where: str = "the journal") -> Forked:
    """Stand at the fork point of ``records`` (a journal) for ``cursor``, the policies brought there.

    ``controlled`` agents get no policy (a served fork's remote agents). Raises :class:`ForkError` or
    :class:`~warren_sim.replay.JournalError` with a teaching message; builds nothing on disk.
    """
    records = list(records)
    loaded, seed, parent = journal_origin(records, where)
    _check_cursor(records, cursor, where)
    run_id = f"{parent}-fork" if run_id is None else run_id
    check_agents(loaded.spec, [*(overrides or {}), *controlled])

    def fresh() -> _Bringer:
        sim, policies = instantiate(loaded, seed, policy, controlled, run_id=run_id)
        bringer = _Bringer(records, sim, policies, where)
        bringer.drain()
        return bringer

    bringer, again = walk_to(fresh(), cursor, None)
    if again is not None:
        bringer, _ = walk_to(fresh(), cursor, again)
    point = ForkPoint(parent, cursor, max(bringer.boundary, 0), _batches(bringer.got), bringer.sim.time)
    out = [dict(r) for r in bringer.got]
    for r in out:
        if r["kind"] == "run":
            r["forked_from"] = point.as_dict()
            break
    return Forked(bringer.sim, bringer.policies, point, out, dict(overrides or {}))


def check_agents(spec: Any, agents: Sequence[str]) -> None:
    """Every agent an override or ``controlled`` names is one of the scenario's, or a :class:`ForkError`."""
    known = {a.id for a in spec.agents}
    for agent in agents:
        if agent not in known:
            raise ForkError(f"{agent!r} is not an agent of {spec.name}; its agents: {', '.join(sorted(known))}")


def _batches(records: Sequence[dict[str, Any]]) -> int:
    return sum(1 for r in records if r["kind"] == "batch")


def walk_to(bringer: _Bringer, cursor: int, limit: int | None, *, copy: bool = True) -> tuple[_Bringer, int | None]:
    """Bring a run along its journal: ``limit`` batches, or (None) while boundaries stay at or before ``cursor``;
    the second value is how many batches to walk again (on a fresh run) when the last went past it.

    A batch whose boundary may lie past the cursor (the next batch begins after it) is walked, with ``copy``, on
    a copy of the run (``Simulation.fork``): if it went past, the run as it stood before it is the fork point,
    without walking the journal again (unless a policy cannot be copied). It is walked even when its records
    show it ends past the cursor: a journal cut short inside it is an error, as it always was."""
    bounds = bringer.batch_cursors
    done = 0
    while done < len(bounds) and not bringer.sim.ended:
        if limit is not None and done >= limit:
            break
        if limit is None and bounds[done] > cursor:
            break  # that batch's records begin after the cursor
        maybe_past = limit is None and (done + 1 >= len(bounds) or bounds[done + 1] > cursor)
        before = bringer.fork() if copy and maybe_past else None
        bringer.batch()
        done += 1
        if limit is None and bringer.boundary > cursor:  # the cursor falls inside that batch: stop before it
            if before is not None:
                return before, None
            return bringer, done - 1
    return bringer, None


def expected_of(records: Sequence[dict[str, Any]], *, owned: bool = False) -> list[tuple[int, dict[str, Any]]]:
    """What a :class:`_Bringer` checks the engine's records against: ``(cursor, record without the keys replay
    ignores)`` for each engine record. ``owned`` records (parsed for this fork alone) lose their cursor in place
    instead of being copied: for the 36,000 records a fork of 10,000 foragers walks, a copy of each cost a
    twentieth of the fork."""
    out = []
    for i, r in enumerate(records):
        cursor = int(r.pop("cursor", i) if owned else r.get("cursor", i))
        if r["kind"] not in RUNTIME_KINDS:
            out.append((cursor, _unkeyed(r)))  # (an owned record without wall-clock keys is itself)
    return out


def _unkeyed(record: dict[str, Any]) -> dict[str, Any]:
    """A record without the keys replay ignores (``strip`` without its JSON round trip): itself if it has none."""
    if "cursor" not in record and not IGNORED_KEYS.intersection(record):
        return record
    out = dict(record)
    for key in IGNORED_KEYS:
        out.pop(key, None)
    return out


@attrs.define
class _Override:
    """An agent's policy whose answer to its first observation after the fork point is given (the override).

    The policy is told that answer as it is told a past one (``recall``, else ``decide`` with its answer
    dropped), so it goes on from what the agent did. The override is judged like any policy's answer: one the
    rules refuse becomes a noop with an ``invalid`` record, as in every headless run.
    """

    command: dict[str, Any]
    inner: Policy | None
    used: bool = False

    def decide(self, obs: Any) -> dict[str, Any]:
        if self.used:
            assert self.inner is not None
            return self.inner.decide(obs)
        self.used = True
        if self.inner is not None:
            recall = getattr(self.inner, "recall", None)
            if callable(recall):
                recall(obs, self.command)
            else:
                self.inner.decide(obs)
        return dict(self.command)

    def on_receipt(self, receipt: dict[str, Any]) -> None:
        hook = getattr(self.inner, "on_receipt", None)
        if callable(hook):
            hook(receipt)


def run_fork(forked: Forked, on_batch: Any = None) -> dict[str, Any]:
    """Continue a headless fork to the run's end with its policies (an override replacing one answer each)."""
    policies: dict[str, Any] = dict(forked.policies)
    for agent, command in forked.overrides.items():
        policies[agent] = _Override(command, policies.get(agent))
    return run_headless(forked.sim, policies, on_batch=on_batch)


def check_cursor(records: Sequence[dict[str, Any]], cursor: int, where: str = "the journal") -> None:
    """Raise :class:`ForkError` if ``cursor`` names no record of ``records``: what a served fork answers 400 to
    before anything is replayed (``fork_records`` checks the same)."""
    _check_cursor(records, cursor, where)


def brought_policy(records: Sequence[dict[str, Any]], agent_id: str, factory: PolicyFactory,
                   where: str = "the fork's journal") -> Policy:
    """``agent_id``'s policy, made by ``factory``, brought to where a served fork stands (docs/fork.md, "Served").

    A remote agent that joins a fork (``warren agent``) was not there for its past: shown the fork's own
    journal, whose engine records up to its first ``status`` record are the parent's up to the fork point, its
    policy is brought there as a headless fork's are (every other agent's policy is a noop's, which recalls
    nothing). Raises :class:`ForkError` as :func:`fork_records` does when the policy cannot be brought.
    """
    from .engine.policy import NoopPolicy

    start = next((int(r.get("cursor", i)) for i, r in enumerate(records) if r.get("kind") == "status"), None)
    if start is None:
        raise ForkError(f"{where} has no status record: it is not a served run's journal")

    def only(aid: str, role: str, briefing: dict[str, Any]) -> Any:
        return factory(aid, role, briefing) if aid == agent_id else NoopPolicy()

    return fork_records(records, start, only, where=where).policies[agent_id]
