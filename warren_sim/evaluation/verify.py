"""Verified results: replay every journal of a cross-play, recompute every score, check the manifest.

An organiser given a results file (``warren eval ... --focal ... --journals DIR --json``) and its journals
checks, without trusting the submitter's machine: each run's journal replays to the same records (so its
commands are the ones the engine adjudicated), the run it rebuilds has the status, sim time and score the
results claim, each cell's aggregates follow from its runs, and the files the manifest hashes (scenario,
populations, focal policies) are the ones on this machine, with the same WARREN version. Every problem
names the run(s) it concerns.

Replay lives beside evaluation (:mod:`warren_sim.replay`), so the caller hands in the function that replays a
journal (``replay(path) -> result`` with ``identical``, ``divergence``, ``scenario``, ``seed`` and ``sim``),
as it hands in the clock: the CLI passes :func:`warren_sim.replay.replay_journal`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from .. import __version__
from ..scenarios import ScenarioError, load_scenario
from ..scenarios.loader import find_scenario
from .crossplay import KIND
from .manifest import sha256_file
from .runs import SCENARIO_FILES, score_of
from .stats import mean_interval

Replay = Callable[[Path], Any]


class VerifyError(ValueError):
    """A results file that cannot be verified at all (not cross-play results, no journals)."""


@attrs.frozen
class Problem:
    runs: tuple[str, ...]  # the runs concerned (every run of a cell or of the file, for a shared cause)
    what: str  # "journal", "score", "hash" or "version"
    detail: str


@attrs.frozen
class Verdict:
    runs: int
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def failed_runs(self) -> list[str]:
        return sorted({r for p in self.problems for r in p.runs})


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def verify(results: dict[str, Any], replay: Replay, journals: str | os.PathLike[str] | None = None, *,
           populations: str | os.PathLike[str] | None = None) -> Verdict:
    """Check ``results`` (a cross-play's JSON) against its journals (``journals``, else the directory the
    results name) and this machine's files. ``populations``: where held-out populations are now (their
    files are looked up there by name instead of at the path the manifest recorded)."""
    if results.get("kind") != KIND or "cells" not in results or "manifest" not in results:
        raise VerifyError("not cross-play results: expected the JSON of warren eval SCENARIO --focal ... --json")
    folder = journals if journals is not None else results.get("journals")
    if not folder:
        raise VerifyError("these results kept no journals (run warren eval with --journals DIR), and no "
                          "--journals DIR was given")
    journal_dir = Path(folder)
    if not journal_dir.is_dir():
        raise VerifyError(f"--journals {journal_dir}: not a directory")
    problems: list[Problem] = []
    every = tuple(r["run"] for c in results["cells"] for r in c["per_seed"])
    problems += _check_manifest(results, every, populations)
    try:
        loaded = load_scenario(results["scenario"], dict(results.get("params") or {}))
    except ScenarioError as exc:
        return Verdict(len(every), (*problems, Problem(every, "hash", f"cannot load the scenario: {exc}")))
    for cell in results["cells"]:
        names = tuple(r["run"] for r in cell["per_seed"])
        for row in cell["per_seed"]:
            problems += _check_run(row, journal_dir, replay, loaded, results)
        scores = [float(r["score"]) for r in cell["per_seed"]]
        completed = sum(1 for r in cell["per_seed"] if r["status"] == "completed")
        if completed != cell["completed"] or not _close(mean_interval(scores)[0], float(cell["score"]["mean"])):
            problems.append(Problem(names, "score", f"cell {cell['focal']} x {cell['population']}: its completion "
                                                    "or mean score does not follow from its runs"))
    return Verdict(len(every), tuple(problems))


def _check_run(row: dict[str, Any], journal_dir: Path, replay: Replay, loaded: Any,
               results: dict[str, Any]) -> list[Problem]:
    name = row["run"]
    path = journal_dir / f"{name}.jsonl"
    if not path.is_file():
        return [Problem((name,), "journal", f"no journal {path.name} in {journal_dir}")]
    try:
        got = replay(path)
    except ValueError as exc:  # JournalError: not a readable journal
        return [Problem((name,), "journal", str(exc))]
    out: list[Problem] = []
    if got.scenario != results["scenario"] or got.seed != row["seed"]:
        out.append(Problem((name,), "journal", f"the journal is of {got.scenario} seed {got.seed}, the results "
                                               f"say {results['scenario']} seed {row['seed']}"))
    if not got.identical:
        out.append(Problem((name,), "journal", "replaying the journal differs" + _where(got.divergence)))
        return out
    if row["status"] in ("crashed", "error"):
        return out  # the policy raised: the journal stops there and no score was computed from it
    sim = got.sim
    summary = sim.summary()
    score = score_of(loaded, summary, sim)
    if summary["status"] != row["status"] or summary["sim_time_ms"] != row["sim_time_ms"]:
        out.append(Problem((name,), "score", f"the replayed run ends {summary['status']} at "
                                             f"{summary['sim_time_ms']} ms; the results say {row['status']} at "
                                             f"{row['sim_time_ms']} ms"))
    if not _close(score, float(row["score"])):
        out.append(Problem((name,), "score", f"the replayed run scores {score}; the results say {row['score']}"))
    return out


def _where(d: Any) -> str:
    """`` at record N (cursor C) in KEYS: DETAIL`` for a replay's first divergence."""
    if d is None:
        return ""
    text = f" at record {d.index}" + (f" (cursor {d.cursor})" if d.cursor is not None else "")
    keys = ", ".join(d.keys_differing())
    return text + (f" in {keys}" if keys else "") + (f": {d.detail}" if d.detail else "")


def _check_manifest(results: dict[str, Any], every: tuple[str, ...],
                    populations: str | os.PathLike[str] | None) -> list[Problem]:
    manifest = results["manifest"]
    out: list[Problem] = []
    if manifest.get("warren") != __version__:
        out.append(Problem(every, "version", f"made with WARREN {manifest.get('warren')}, verified with "
                                             f"{__version__}: install that version to verify"))
    try:
        directory = find_scenario(results["scenario"])
    except ScenarioError as exc:
        return [*out, Problem(every, "hash", str(exc))]
    want = manifest["scenario"]["files"]
    have = {f: sha256_file(directory / f) for f in SCENARIO_FILES if (directory / f).is_file()}
    for f in sorted(set(want) | set(have)):
        if want.get(f) != have.get(f):
            out.append(Problem(every, "hash", f"scenario file {f} of {results['scenario']} differs from the one "
                                              "the results were made with"))
    for cell_name, entry, runs in _entries(results):
        for recorded, digest in entry["files"].items():
            path = Path(recorded) if Path(recorded).is_absolute() else directory / recorded
            if populations is not None and entry.get("source") == "held-out":
                path = Path(populations) / path.name
            if sha256_file(path) != digest:
                out.append(Problem(runs, "hash", f"{cell_name}: {path} differs from the file the results were "
                                                 "made with (or is missing)"))
    return out


def _entries(results: dict[str, Any]) -> list[tuple[str, dict[str, Any], tuple[str, ...]]]:
    """(label, manifest entry, the runs that used it) for every population and focal spec."""
    manifest = results["manifest"]
    out = []
    for name, entry in manifest["populations"].items():
        runs = tuple(r["run"] for c in results["cells"] if c["population"] == name for r in c["per_seed"])
        out.append((f"population {name}", entry, runs))
    for text, entry in manifest["focal"].items():
        runs = tuple(r["run"] for c in results["cells"] if c["focal"] == text for r in c["per_seed"])
        out.append((f"focal policy {text}", entry, runs))
    return out
