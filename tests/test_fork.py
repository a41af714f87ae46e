"""Forks (warren_sim.fork, `warren fork`): a fork continued with the same policies is its parent, record for record;
an override makes it diverge, the same override the same way; bad forks are teaching errors."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from warren_sim.engine import run_headless
from warren_sim.engine.records import TraceWriter
from warren_sim.fork import ForkError, fork_records, parse_override, run_fork
from warren_sim.replay import replay_records
from warren_sim.scenarios import instantiate, list_scenarios, load_scenario

OWN = {"cursor", "forked_from", "run_id"}  # a fork's own facts: its cursors, its id, where it forked


def _trace(scenario: str, seed: int, policy: str = "solution", params: dict[str, Any] | None = None,
           ) -> list[dict[str, Any]]:
    sim, policies = instantiate(load_scenario(scenario, params or {}), seed, policy)
    out = io.StringIO()
    writer = TraceWriter(out)
    run_headless(sim, policies, on_batch=lambda s: writer.write(s.drain_records()))
    writer.write(sim.drain_records())
    return [json.loads(line) for line in out.getvalue().splitlines()]


def _forked_trace(records: list[dict[str, Any]], cursor: int, policy: str = "solution",
                  overrides: dict[str, dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], Any]:
    forked = fork_records(records, cursor, policy, overrides=overrides)
    out = io.StringIO()
    writer = TraceWriter(out)
    writer.write(forked.records)
    run_fork(forked, on_batch=lambda s: writer.write(s.drain_records()))
    writer.write(forked.sim.drain_records())
    return [json.loads(line) for line in out.getvalue().splitlines()], forked.point


def _plain(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in OWN} for r in records]


def _boundaries_by_time(records: list[dict[str, Any]]) -> list[int]:
    """The batch boundaries of a run whose batches all have distinct instants, found without the engine: a
    batch's records all carry its instant, and the next batch's first record (its advance) a later one."""
    out = [0]
    times = [r["t"] for r in records if r["kind"] == "batch"]
    assert len(set(times)) == len(times), "this oracle needs batches at distinct instants"
    for t in times:
        out.append(max(r["cursor"] for r in records if r["t"] <= t))
    return out


# the warren world with random foragers runs long at its default size (its trace digests are in the slow tier):
# 20 foragers here
SMALL = {"warren": {"agents": 20}}


@pytest.mark.parametrize("scenario", list_scenarios())
@pytest.mark.parametrize(("seed", "policy"), [(0, "solution"), (1, "solution"), (2, "random")])
def test_a_fork_continued_with_the_same_policies_is_its_parent(scenario, seed, policy):
    parent = _trace(scenario, seed, policy, SMALL.get(scenario) if policy == "random" else None)
    last = parent[-1]["cursor"]
    batches = [r["cursor"] for r in parent if r["kind"] == "batch"]
    cursors = sorted({0, 1, batches[0], batches[len(batches) // 3], batches[len(batches) // 2] + 1,
                      batches[-1], last - 1, last})
    for cursor in cursors:
        forked, point = _forked_trace(parent, cursor, policy)
        assert point.batch_cursor <= cursor
        assert _plain(forked) == _plain(parent), (scenario, seed, cursor)
        run = forked[0]
        assert run["kind"] == "run" and run["forked_from"] == {"run_id": "headless", "cursor": cursor,
                                                              "batch_cursor": point.batch_cursor}
        assert replay_records(forked).identical  # self-contained: it replays on its own


def test_the_fork_point_is_the_last_boundary_at_or_before_the_cursor():
    parent = _trace("bridge_repair", 3)
    bounds = _boundaries_by_time(parent)
    assert bounds[-1] == parent[-1]["cursor"]  # the last boundary: the run's end
    for cursor in range(parent[-1]["cursor"] + 1):
        expected = max(b for b in bounds if b <= cursor)
        assert fork_records(parent, cursor).point.batch_cursor == expected, cursor


def test_an_override_diverges_and_the_same_override_gives_the_same_fork():
    parent = _trace("bridge_repair", 3)
    override = {"engineer-1": {"noop": True}}
    first, point = _forked_trace(parent, 30, overrides=override)
    again, _ = _forked_trace(parent, 30, overrides=override)
    assert first == again
    assert _plain(first) != _plain(parent)
    assert _plain(first)[: point.batch_cursor + 1] == _plain(parent)[: point.batch_cursor + 1]
    overridden = next(r for r in first[point.batch_cursor + 1:]
                      if r["kind"] == "command" and r["agent"] == "engineer-1")
    assert overridden["command"] == {"noop": True}
    assert replay_records(first).identical


def test_a_policy_that_cannot_be_brought_to_the_fork_point_is_an_error():
    parent = _trace("bridge_repair", 3, "solution")
    with pytest.raises(ForkError, match="cannot be brought to the fork point.*recall"):
        fork_records(parent, 60, "random")
    # none keeps no state (it has recall): any history will do
    forked = fork_records(parent, 60, "none")
    assert forked.point.batch_cursor <= 60


@pytest.mark.parametrize(("cursor", "words"), [(-1, "integer >= 0"), (10**6, "past the end")])
def test_bad_cursors_are_teaching_errors(cursor, words):
    with pytest.raises(ForkError, match=words):
        fork_records(_trace("bridge_repair", 3), cursor)


def test_a_journal_cut_short_forks_before_its_cut_and_says_so_after():
    parent = _trace("bridge_repair", 3)
    cut = [r for r in parent if r["cursor"] < 40 and not (r["kind"] == "command" and r["cursor"] > 30)]
    assert fork_records(cut, 20).point.batch_cursor <= 20
    with pytest.raises(ForkError, match="no command for"):
        fork_records(cut, 39)


@pytest.mark.parametrize(("text", "words"), [("engineer-1", "AGENT=COMMAND"), ("engineer-1={", "not JSON"),
                                             ("engineer-1=[1]", "JSON object")])
def test_bad_overrides_are_teaching_errors(text, words):
    with pytest.raises(ForkError, match=words):
        parse_override(text)


ROOT = Path(__file__).resolve().parents[1]


def _warren(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "warren_sim.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


def test_warren_fork_on_the_command_line(tmp_path: Path):
    """The commands of docs/fork.md: run with a trace, fork with an override, replay the fork."""
    assert _warren("run", "bridge_repair", "--seed", "3", "--trace", "parent.jsonl", "--quiet", cwd=tmp_path
                   ).returncode == 0
    done = _warren("fork", "parent.jsonl", "--cursor", "30", "--trace", "fork.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "forked from headless at cursor 30: batch boundary 27" in done.stdout
    parent = [json.loads(x) for x in (tmp_path / "parent.jsonl").read_text().splitlines()]
    fork = [json.loads(x) for x in (tmp_path / "fork.jsonl").read_text().splitlines()]
    assert _plain(fork) == _plain(parent)
    other = _warren("fork", "parent.jsonl", "--cursor", "30", "--override", 'engineer-1={"noop": true}',
                    "--trace", "other.jsonl", cwd=tmp_path)
    assert other.returncode in (0, 1) and "overrides: engineer-1" in other.stdout, other.stderr
    assert "identical" in _warren("replay", "other.jsonl", cwd=tmp_path).stdout
    for bad, words in [(["--cursor", "-3"], "integer >= 0"), (["--cursor", "99999"], "past the end"),
                       (["--cursor", "5", "--override", "nobody={}"], "not an agent of bridge_repair")]:
        out = _warren("fork", "parent.jsonl", *bad, cwd=tmp_path)
        assert out.returncode == 2 and words in out.stderr, (bad, out.stderr)
    missing = _warren("fork", "nope.jsonl", "--cursor", "3", cwd=tmp_path)
    assert missing.returncode == 2 and "cannot read nope.jsonl" in missing.stderr
