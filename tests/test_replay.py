"""`warren replay`: served journals and headless traces re-run from their recorded commands, identically."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from server_helpers import served

from warren_sim.cli import main as cli_main
from warren_sim.engine import run_headless
from warren_sim.engine.records import TraceWriter
from warren_sim.replay import RUNTIME_KINDS, JournalError, replay_journal
from warren_sim.scenarios import instantiate, load_scenario, make_policy

ROOT = Path(__file__).resolve().parents[1]


def warren_replay(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "warren_sim.cli", "replay", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def engine_records(records: list[dict[str, Any]], *ignore: str) -> list[dict[str, Any]]:
    drop = {"cursor", "wall", *ignore}
    return [{k: v for k, v in r.items() if k not in drop} for r in records if r["kind"] not in RUNTIME_KINDS]


def as_observation(env: dict[str, Any]) -> SimpleNamespace:
    """A policy's view of a wire envelope (the fields the Policy protocol reads)."""
    return SimpleNamespace(agent_id=env["agent_id"], observation_id=env["observation_id"], seq=env["seq"],
                           time=env["sim_time_ms"], reason=env["reason"], observation=env["observation"],
                           affordances=env["affordances"], text=env["text"])


async def drive_with_solution(api: Any, run: str, lease: str, seed: int, after: int = -1) -> None:
    """engineer-1 played remotely by bridge_repair's bundled solution policy until the run ends."""
    status, b = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/briefing?lease={lease}")
    policy = make_policy(load_scenario("bridge_repair"), "solution", "engineer-1", b["role"], b, seed)
    while True:
        status, env = await api.poll(run, lease, after=after, wait=60)
        if status == 410:
            return
        if status == 204:
            continue
        command = policy.decide(as_observation(env))
        status, receipt = await api.submit(run, lease, {"command_id": f"sol-{env['seq']}",
                                                        "observation_id": env["observation_id"], **command})
        assert receipt["status"] == "accepted", receipt
        after = env["seq"]


async def varied_run(tmp_path: Path) -> Path:
    """A served run whose remote agent is accepted, rejected, duplicated, stale, expired, released and reclaimed."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"], npc_policy="solution", decision_deadline_s=5)
        lease = await api.claim(run)
        status, env = await api.poll(run, lease)
        oid = env["observation_id"]
        verdicts = []
        for body in ({"command_id": "r1", "observation_id": oid, "action": "take", "args": {"item": "plank-9"}},
                     {"command_id": "r2", "observation_id": oid, "action": "fly"},
                     {"command_id": "a1", "observation_id": oid, "action": "take", "args": {"item": "toolbox-1"}},
                     {"command_id": "a1", "observation_id": oid, "action": "take", "args": {"item": "toolbox-1"}},
                     {"command_id": "s1", "observation_id": oid, "noop": True},
                     {"command_id": "u1", "observation_id": "engineer-1#77", "noop": True}):
            status, receipt = await api.submit(run, lease, body)
            verdicts.append(receipt["status"])
        assert verdicts == ["rejected", "rejected", "accepted", "duplicate", "stale", "rejected"]
        status, nxt = await api.poll(run, lease, after=env["seq"], wait=60)
        status, later = await api.poll(run, lease, after=nxt["seq"], wait=60)  # nxt expires after 5 s
        status, receipt = await api.submit(run, lease, {"command_id": "e1", "observation_id": nxt["observation_id"],
                                                        "sleep_ms": 10})
        assert receipt["status"] == "expired"
        status, receipt = await api.submit(run, lease, {"command_id": "t1", "observation_id": later["observation_id"],
                                                        "sleep_ms": 2500})
        assert receipt["status"] == "accepted"
        status, _ = await api.call("POST", f"/v1/runs/{run}/agents/engineer-1/release?lease={lease}")
        await trio.sleep(0)  # unclaimed for a moment: its wakes are no-oped without blocking anyone
        lease = await api.claim(run)
        await drive_with_solution(api, run, lease, seed=3)
        assert (await api.run_view(run))["status"] in ("completed", "failed")
    path = tmp_path / "data" / f"{run}.jsonl"
    records = read(path)
    sources = {r["source"] for r in records if r["kind"] == "command" and r["agent"] == "engineer-1"}
    assert {"remote", "expired", "unclaimed"} <= sources
    assert {"npc"} == {r["source"] for r in records if r["kind"] == "command" and r["agent"] != "engineer-1"}
    return path


async def test_a_served_run_with_varied_commands_replays_identically(autojump_clock, tmp_path):
    """accepted, rejected, duplicate, stale, expired commands and a release: `warren replay` says identical."""
    path = await varied_run(tmp_path)
    n = len(engine_records(read(path)))
    proc = warren_replay(path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == f"identical ({n} records)"
    result = replay_journal(path)
    assert result.identical and result.records == n and result.run_id == "run-1" and result.seed == 3


async def test_a_tampered_journal_gives_exit_1_and_shows_the_diverging_record(autojump_clock, tmp_path):
    """An engine record changed by hand: exit 1, the cursor, the journal's record and the replay's."""
    records = read(await varied_run(tmp_path))
    target = next(r for r in records if r["kind"] == "outcome" and r["agent"] == "engineer-1"
                  and r["outcome"] == "accepted")
    target["outcome"], target["reason"] = "rejected", "tampered by hand"
    proc = warren_replay(write(tmp_path / "tampered.jsonl", records))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = proc.stdout
    assert f"diverged at cursor {target['cursor']}" in out
    expected = re.search(r"expected \(journal\): (.*)", out).group(1)
    got = re.search(r"got \(replay\): +(.*)", out).group(1)
    assert json.loads(expected)["reason"] == "tampered by hand"
    assert json.loads(got)["outcome"] == "accepted" and json.loads(got)["observation_id"] == target["observation_id"]
    assert "differs in: outcome, reason" in out
    # a changed command is fed as recorded, so the run itself takes another course from there
    records = read(tmp_path / "data" / "run-1.jsonl")
    move = next(r for r in records if r["kind"] == "command" and r["command"].get("action") == "move_to")
    move["command"]["args"]["dest"] = "clinic" if move["command"]["args"]["dest"] != "clinic" else "depot"
    result = replay_journal(write(tmp_path / "detour.jsonl", records))
    assert not result.identical and result.divergence.cursor > move["cursor"]


async def test_headless_trace_and_served_journal_of_the_same_commands_match(autojump_clock, tmp_path):
    """engineer-1 driven remotely by the solution policy, the others NPCs: the engine records equal a headless run."""
    seed = 5
    async with served(tmp_path) as api:
        run = await api.create(seed=seed, controlled_agents=["engineer-1"], npc_policy="solution")
        lease = await api.claim(run)
        await drive_with_solution(api, run, lease, seed)
        assert (await api.run_view(run))["status"] == "completed"
    served_path = tmp_path / "data" / f"{run}.jsonl"
    sim, policies = instantiate(load_scenario("bridge_repair", {}), seed, "solution")
    out = io.StringIO()
    writer = TraceWriter(out)
    run_headless(sim, policies, on_batch=lambda s: writer.write(s.drain_records()))
    writer.write(sim.drain_records())
    trace_path = tmp_path / "trace.jsonl"
    trace_path.write_text(out.getvalue())
    served_records = engine_records(read(served_path), "source", "run_id")
    headless_records = engine_records(read(trace_path), "source", "run_id")
    assert served_records == headless_records
    assert any(r["kind"] == "command" and r["agent"] == "engineer-1" for r in served_records)
    assert replay_journal(served_path).identical and replay_journal(trace_path).identical


@pytest.mark.parametrize("seed", [0, 7])
def test_headless_traces_replay_identically_from_the_cli(tmp_path, capsys, seed):
    """`warren run --trace` with random policies, then `warren replay` of the trace: identical."""
    trace = tmp_path / "trace.jsonl"
    assert cli_main(["run", "bridge_repair", "--seed", str(seed), "--policy", "random", "--quiet",
                     "--trace", str(trace)]) in (0, 1)
    capsys.readouterr()
    assert cli_main(["replay", str(trace)]) == 0
    assert capsys.readouterr().out.startswith(f"identical ({len(engine_records(read(trace)))} records)")


async def test_runs_cancelled_mid_batch_or_between_batches_replay_identically(autojump_clock, tmp_path):
    """Cancelled while a remote answer is awaited, or during a pacing pause: replay cancels at the same point."""
    async with served(tmp_path) as api:
        waiting = await api.create(controlled_agents=["engineer-1"])
        lease = await api.claim(waiting)
        await api.poll(waiting, lease)
        await api.call("DELETE", f"/v1/runs/{waiting}")
        paced = await api.create(controlled_agents=[], pace=1)
        await trio.sleep(7.5)
        await api.call("DELETE", f"/v1/runs/{paced}")
    for run in (waiting, paced):
        records = read(tmp_path / "data" / f"{run}.jsonl")
        end = [r for r in records if r["kind"] == "end"]
        assert end and end[0]["status"] == "cancelled"
        result = replay_journal(tmp_path / "data" / f"{run}.jsonl")
        assert result.identical and result.status == "cancelled", result.divergence
    mid = read(tmp_path / "data" / f"{waiting}.jsonl")
    assert [r["kind"] for r in engine_records(mid)][-2:] == ["observation", "end"]  # engineer-1#0 never answered


def test_unreadable_journals_are_usage_errors(tmp_path, capsys):
    """Not JSON Lines, no 'run' record, or a missing file: exit 2 with a message, no traceback."""
    (tmp_path / "bad.jsonl").write_text('{"cursor": 0, "kind": "run"\n')
    (tmp_path / "norun.jsonl").write_text('{"cursor": 0, "kind": "status", "status": "created"}\n')
    for name, needle in (("bad.jsonl", "bad.jsonl:1: not a JSON record"), ("norun.jsonl", "no 'run' record"),
                         ("missing.jsonl", "cannot read")):
        assert cli_main(["replay", str(tmp_path / name)]) == 2
        assert needle in capsys.readouterr().err
    proc = warren_replay(tmp_path / "norun.jsonl")  # the installed command line too, without a traceback
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "warren replay:" in proc.stderr
    with pytest.raises(JournalError):
        replay_journal(tmp_path / "norun.jsonl")


def test_every_record_kind_the_runtime_writes_is_known_to_replay():
    """Each "kind" literal journaled by the runtime's modules is in RUNTIME_KINDS (replay must skip it); the
    spectators' control frames (lagged, gap) are not journal records."""
    source = "".join(p.read_text() for p in sorted((ROOT / "warren_sim" / "runtime").glob("*.py"))
                     if p.name != "spectators.py")
    kinds = set(re.findall(r'"kind":\s*"(\w+)"', source))
    assert kinds and kinds <= RUNTIME_KINDS, kinds - RUNTIME_KINDS
