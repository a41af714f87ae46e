"""Replay: re-run a run from its journal and check the engine does exactly the same (``warren replay``).

The journal's ``run`` record names the scenario, seed, parameters and run id; its ``command``
records hold every answer that reached adjudication (a remote agent's accepted command, an NPC's
decision, and the noop recorded for an expired or unclaimed wake), each with its ``source``. Replay
builds a fresh :class:`~warren_sim.engine.Simulation` and drives it with ``advance`` / ``answer`` /
``adjudicate``, feeding each observation the recorded command of the same ``observation_id``.
A run that ended ``cancelled`` is cancelled where its journal's ``end`` record says (between batches
or in the middle of one, where that batch's commands are missing); a crashed run, or a journal cut
short, is replayed as far as its commands go.

The rebuilt engine records are then compared with the journal's, ignoring ``cursor``, every ``wall``
key and the runtime's own records (:data:`RUNTIME_KINDS`: what the server adds about leases,
verdicts and status, none of which feeds the engine). Records are compared as JSON values (key order
does not matter). Served journals and headless traces (``warren run --trace``) replay alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from .engine.records import RUNTIME_KINDS, RecordsError, parse_records
from .scenarios import LoadedScenario, ScenarioError, instantiate, load_scenario

__all__ = ["RUNTIME_KINDS", "Divergence", "JournalError", "ReplayResult", "replay_journal", "replay_records"]

# Records the runtime (server or headless loop) writes; every other kind comes from the engine.

# "forked_from": a fork's run record names its parent and fork point (warren_sim.fork); the engine, replaying
# it, writes the run record without it
IGNORED_KEYS = frozenset({"cursor", "wall", "forked_from"})


class JournalError(ValueError):
    """The file is not a readable WARREN journal (or names a scenario that cannot be loaded)."""


@attrs.frozen
class Divergence:
    index: int  # position among the engine records
    cursor: int | None  # the journal record's cursor; None when only the replay has a record there
    expected: dict[str, Any] | None  # the journal's record (no cursor, no wall); None: the journal ends first
    got: dict[str, Any] | None  # the replay's record; None: the replay ends first
    detail: str = ""

    def keys_differing(self) -> list[str]:
        if self.expected is None or self.got is None:
            return []
        keys = list(dict.fromkeys([*self.expected, *self.got]))
        return [k for k in keys if self.expected.get(k, _MISSING) != self.got.get(k, _MISSING)]


_MISSING = object()


@attrs.frozen
class ReplayResult:
    identical: bool
    records: int  # engine records in the journal (all compared when identical)
    run_id: str
    scenario: str
    seed: int
    status: str  # how the journal says the run ended ("" if it does not say)
    divergence: Divergence | None = None
    note: str = ""  # how the replay stopped when not at the run's natural end
    sim: Any = attrs.field(default=None, eq=False, repr=False)  # the rebuilt simulation, where it stopped


def strip(record: dict[str, Any]) -> dict[str, Any]:
    """A record as replay compares it: as a JSON value, without cursor and wall-clock facts."""
    plain = json.loads(json.dumps(record))
    return {k: v for k, v in plain.items() if k not in IGNORED_KEYS}


def read_journal(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise JournalError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise JournalError(f"{path} is not UTF-8 text: {exc}") from None
    try:
        return parse_records(text, str(path))
    except RecordsError as exc:
        raise JournalError(str(exc)) from None


def replay_journal(path: str | Path) -> ReplayResult:
    """Replay the journal (or trace) at ``path``; raises :class:`JournalError` if it cannot be read."""
    return replay_records(read_journal(path), str(path))


def journal_names(records: list[dict[str, Any]], where: str = "the journal") -> tuple[str, int, str, dict[str, Any]]:
    """``(scenario, seed, run_id, params)`` as a journal's ``run`` record names them, or a :class:`JournalError`
    that says what is missing."""
    run = next((r for r in records if r["kind"] == "run"), None)
    if run is None:
        raise JournalError(f"{where} has no 'run' record (the engine's first record, naming scenario, seed and "
                           "params); is it a WARREN journal or a `warren run --trace` file?")
    try:
        return str(run["scenario"]), int(run["seed"]), str(run["run_id"]), dict(run.get("params") or {})
    except (KeyError, TypeError, ValueError) as exc:
        raise JournalError(f"{where}: its 'run' record lacks a valid {exc} (needs scenario, seed, run_id)") from None


def journal_origin(records: list[dict[str, Any]], where: str = "the journal") -> tuple[LoadedScenario, int, str]:
    """``(scenario loaded with its params, seed, run_id)`` from a journal's ``run`` record: what replaying or
    forking it starts from; a :class:`JournalError` that says what is missing otherwise."""
    scenario, seed, run_id, params = journal_names(records, where)
    try:
        return load_scenario(scenario, params), seed, run_id
    except ScenarioError as exc:
        raise JournalError(f"{where}: cannot load its scenario: {exc}") from None


def replay_records(records: list[dict[str, Any]], where: str = "the journal") -> ReplayResult:
    loaded, seed, run_id = journal_origin(records, where)
    scenario = loaded.spec.name

    expected = [(r.get("cursor"), strip(r)) for r in records if r["kind"] not in RUNTIME_KINDS]
    commands: dict[str, dict[str, Any]] = {}
    for r in records:
        if r["kind"] == "command" and isinstance(r.get("observation_id"), str):
            commands.setdefault(r["observation_id"], r)
    status = _terminal_status(records)

    # Every agent "controlled": the journal's commands drive them all, so no policy is made.
    sim, _ = instantiate(loaded, seed, "none", controlled=[a.id for a in loaded.spec.agents], run_id=run_id)
    got: list[dict[str, Any]] = []
    checked = 0
    note = ""
    refused: Divergence | None = None

    def drain() -> bool:
        """Take the engine's new records; False as soon as they stop matching the journal."""
        nonlocal checked
        got.extend(strip(r) for r in sim.drain_records() if r["kind"] not in RUNTIME_KINDS)
        while checked < len(got) and checked < len(expected):
            if got[checked] != expected[checked][1]:
                return False
            checked += 1
        return checked == len(got)

    def cancel_due() -> dict[str, Any] | None:
        nxt = expected[len(got)][1] if len(got) < len(expected) else None
        return nxt if nxt is not None and nxt.get("kind") == "end" and nxt.get("status") == "cancelled" else None

    try:
        ok = drain()
        while ok and not sim.ended:
            if (end := cancel_due()) is not None:  # cancelled between batches
                sim.cancel(str(end.get("reason", "cancelled")))
                drain()
                break
            batch = sim.advance()
            if not drain() or batch is None:
                break
            if (end := cancel_due()) is not None:  # cancelled while this batch waited for answers
                sim.cancel(str(end.get("reason", "cancelled")))
                drain()
                break
            missing = [o.observation_id for o in batch.observations if o.observation_id not in commands]
            if missing:
                note = (f"the journal has no command for {', '.join(missing[:3])}"
                        + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
                        + f" (t={sim.time}); replay stops there"
                        + (" (the run crashed)" if status == "crashed" else ""))
                break
            for obs in batch.observations:
                rec = commands[obs.observation_id]
                command = rec.get("command")
                err = sim.validate(obs.agent_id, command) if isinstance(command, dict) else \
                    f"command must be a JSON object, got {command!r}"
                if err or not isinstance(command, dict):
                    index = next((i for i, (c, _) in enumerate(expected) if c == rec.get("cursor")), len(got))
                    refused = Divergence(index, rec.get("cursor"), strip(rec), None,
                                         f"the recorded command for {obs.observation_id} is not valid for that "
                                         f"observation: {err}")
                    break
                sim.answer(obs.agent_id, command, source=str(rec.get("source", "policy")))
            if refused is not None:
                break
            sim.adjudicate()
            ok = drain()
    except Exception as exc:  # an engine error on this input: report it, with the records so far
        drain()
        note = f"the engine raised {type(exc).__name__}: {exc} (t={sim.time})"

    if refused is None and not status and len(got) > len(expected) and \
            _first_difference(expected, got[:len(expected)], note) is None:
        # a journal cut short (a kill right after an adjudication): the replay ran one step past its end,
        # which the journal never got to record; replayed as far as its commands go
        note = note or (f"the journal ends at t={expected[-1][1].get('t', '?') if expected else 0} without a "
                        "terminal status (cut short, e.g. the server was killed); replayed as far as it goes")
        got = got[:len(expected)]
    divergence = refused or _first_difference(expected, got, note)
    return ReplayResult(divergence is None, len(expected), run_id, scenario, seed, status, divergence, note, sim)


def _terminal_status(records: list[dict[str, Any]]) -> str:
    for r in reversed(records):
        if r["kind"] == "status" and r.get("status") in ("completed", "failed", "cancelled", "crashed"):
            return str(r["status"])
    end = next((r for r in reversed(records) if r["kind"] == "end"), None)
    return str(end.get("status", "")) if end is not None else ""


def _first_difference(expected: list[tuple[Any, dict[str, Any]]], got: list[dict[str, Any]],
                      note: str) -> Divergence | None:
    for i, (cursor, want) in enumerate(expected):
        if i >= len(got):
            return Divergence(i, cursor, want, None, "the replay produced no record here"
                              + (f": {note}" if note else ""))
        if got[i] != want:
            return Divergence(i, cursor, want, got[i], note)
    if len(got) > len(expected):
        return Divergence(len(expected), None, None, got[len(expected)],
                          "the replay produced more records than the journal holds")
    return None
