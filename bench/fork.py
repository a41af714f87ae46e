"""fork: what a fork costs (issue 27), in process and from a journal, as ratios measured side by side.

In process (``Simulation.fork()``, ``env.fork()``; docs/fork.md "In process"): a 1,000-forager ``warren`` world
run 100 batches in, then

- forks per second of the simulation (``Simulation.fork``) and of the simulation with its policies
  (``fork_policies``), and one batch's wall time next to it (a fork costs how many batches);
- a step after a fork against a step without one: each repeat forks the run, then steps the fork and the run
  through the same ``STEP_BATCHES`` batches (in alternating order), so both do the same work; the ratio of their
  wall times says whether a fork leaves a slower run behind it (cold caches). Target: <= 1.25.

From a journal (``warren fork``; item 7): ``warren run warren --param agents=10000 --trace T --snapshots`` to its
end, then ``warren fork T --cursor N --trace F`` at 90% of its cursors, both through the real CLI in child
processes; the ratio of their wall times (target, issue 27: <= 0.25), and beside it the fork against the
plain run's (the snapshots' cost to the run left out). Beside it, as information: the same run
without ``--snapshots`` (what the snapshots cost the run) and the same fork replayed from the start (the
snapshots set aside) and the fork from the snapshots without the batch boundaries index (the walk of before it; every journal checked byte for byte against the fork from the snapshot). ``--quick``: 1,000
foragers.
"""

from __future__ import annotations

import gc
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.common import REPO, Options, bench_env, fmt_stat, print_table, summary, target, targets_table
from warren_sim.engine import BUILD, Simulation, run_headless
from warren_sim.engine.policy import fork_policies
from warren_sim.runtime.clock import wall_seconds
from warren_sim.scenarios import instantiate, load_scenario

AGENTS = 1000
WARMUP_BATCHES = 100
STEP_BATCHES = 100  # one "step": many batches (a batch of a 1,000-forager world is a few agents, ~0.03 ms)
PAIRS = 5  # steps after a fork and without one, per repeat
JOURNAL_AGENTS = 10_000
STEP_RATIO_TARGET = 1.25
JOURNAL_RATIO_TARGET = 0.25


def _step(sim: Simulation, policies: dict[str, Any]) -> None:
    run_headless(sim, policies, max_batches=STEP_BATCHES)


def _forks(sim: Simulation, policies: dict[str, Any] | None, n: int) -> None:
    for _ in range(n):
        sim.fork()
        if policies is not None:
            fork_policies(policies)


def _timed(fn: Any, *args: Any) -> float:
    t0 = wall_seconds()
    fn(*args)
    return wall_seconds() - t0


def in_process(reps: int, forks: int) -> dict[str, Any]:
    loaded = load_scenario("warren", {"agents": AGENTS})
    fork_rate, with_policies, batch_s, after, without, ratios = [], [], [], [], [], []
    for rep in range(reps):
        # a run of its own per repeat (never forked itself: its steps are "a step without a fork")
        sim, policies = instantiate(loaded, rep, "solution", record=False)
        run_headless(sim, policies, max_batches=WARMUP_BATCHES)
        gc.collect()
        t = _timed(_forks, sim, None, forks)
        fork_rate.append(forks / t)
        t = _timed(_forks, sim, policies, forks)
        with_policies.append(forks / t)
        pairs_after, pairs_without = 0.0, 0.0
        for i in range(PAIRS):
            forked, forked_policies = sim.fork(), fork_policies(policies)
            if (rep + i) % 2:
                a = _timed(_step, forked, forked_policies)
                b = _timed(_step, sim, policies)
            else:
                b = _timed(_step, sim, policies)
                a = _timed(_step, forked, forked_policies)
            pairs_after += a
            pairs_without += b
        assert not sim.ended, "the run ended before the steps were measured: fewer PAIRS or STEP_BATCHES"
        after.append(pairs_after / PAIRS)
        without.append(pairs_without / PAIRS)
        batch_s.append(pairs_without / PAIRS)
        ratios.append(pairs_after / pairs_without)
    return {"agents": AGENTS, "after_batches": WARMUP_BATCHES, "repeats": reps, "forks_per_repeat": forks,
            "forks_per_s": summary(fork_rate), "forks_with_policies_per_s": summary(with_policies),
            "step_batches": STEP_BATCHES, "step_ms": summary([b * 1000 for b in batch_s]),
            "step_after_fork_ms": summary([a * 1000 for a in after]),
            "step_ratio": summary(ratios)}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _warren(*args: str, cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one ``warren`` command in a child process (the real CLI, as a
    user runs it): a shared machine's load stretches the wall times, hardly the CPU ones."""
    c0, t0 = _children_cpu(), wall_seconds()
    done = subprocess.run([sys.executable, "-m", "warren_sim.cli", *args], cwd=cwd, env=bench_env(),
                          capture_output=True, text=True, timeout=3600)
    wall, cpu = wall_seconds() - t0, _children_cpu() - c0
    if done.returncode != 0:
        raise RuntimeError(f"warren {' '.join(args)} exited {done.returncode}: {done.stderr[-2000:]}")
    return wall, cpu


def from_journal(agents: int, reps: int) -> dict[str, Any]:
    """Per repeat: the run without snapshots, the run with them (``--snapshots``), the fork at 90% of its cursors
    from them, and the same fork replayed from the start (the snapshots set aside): the same fork, byte for
    byte, which the bench checks."""
    plain_runs, runs, forks, unindexed, replays, ratios = [], [], [], [], [], []
    cpu_runs, cpu_forks = [], []
    with tempfile.TemporaryDirectory(prefix="bench-fork-") as tmp:
        cwd = Path(tmp)
        for rep in range(reps):
            # every command writes a new file: ext4 writes back a file truncated and written again when it is
            # closed (auto_da_alloc), 0.035 s for this journal, which one command would pay and another not
            trace = cwd / f"run{rep}.jsonl"
            args = ("run", "warren", "--param", f"agents={agents}", "--quiet", "--trace")
            plain_runs.append(_warren(*args, str(cwd / f"plain{rep}.jsonl"), cwd=cwd)[0])
            (cwd / f"plain{rep}.jsonl").unlink()
            wall, cpu = _warren(*args, str(trace), "--snapshots", cwd=cwd)
            runs.append(wall)
            cpu_runs.append(cpu)
            with trace.open("rb") as f:
                last = sum(1 for _ in f) - 1
            cursor = last * 9 // 10
            fork = ("fork", str(trace), "--cursor", str(cursor), "--trace")
            wall, cpu = _warren(*fork, str(cwd / "fork.jsonl"), cwd=cwd)
            forks.append(wall)
            cpu_forks.append(cpu)
            snaps = cwd / f"run{rep}.jsonl.snapshots"
            (snaps / "boundaries").unlink()  # the same fork without the run's batch boundaries (the copying walk)
            unindexed.append(_warren(*fork, str(cwd / "unindexed.jsonl"), cwd=cwd)[0])
            snaps.rename(cwd / "aside")
            replays.append(_warren(*fork, str(cwd / "replayed.jsonl"), cwd=cwd)[0])
            if not (cwd / "fork.jsonl").read_bytes() == (cwd / "unindexed.jsonl").read_bytes() \
                    == (cwd / "replayed.jsonl").read_bytes():
                raise RuntimeError("the fork from a snapshot differs from the fork replayed from the start")
            ratios.append(forks[-1] / runs[-1])
            shutil.rmtree(cwd / "aside")
            for written in (trace, cwd / "fork.jsonl", cwd / "unindexed.jsonl", cwd / "replayed.jsonl"):
                written.unlink()
    return {"agents": agents, "repeats": reps, "cursor_share": 0.9, "run_s": summary(plain_runs),
            "run_snapshots_s": summary(runs), "fork_s": summary(forks), "fork_unindexed_s": summary(unindexed),
            "ratio_unindexed": summary([f / r for f, r in zip(unindexed, runs, strict=True)]),
            "fork_replayed_s": summary(replays),
            "ratio": summary(ratios), "ratio_replayed": summary([f / r for f, r in zip(replays, runs, strict=True)]),
            "ratio_plain": summary([f / r for f, r in zip(forks, plain_runs, strict=True)]),
            "run_snapshots_cpu_s": summary(cpu_runs), "fork_cpu_s": summary(cpu_forks),
            "ratio_cpu": summary([f / r for f, r in zip(cpu_forks, cpu_runs, strict=True)])}


def run(opts: Options) -> dict[str, Any]:
    reps = opts.reps(5, 1)
    inproc = in_process(reps, 20 if opts.quick else 50)
    print_table(f"fork in process: a {AGENTS:,}-forager warren world {WARMUP_BATCHES} batches in (engine build "
                f"{BUILD}; {reps} repeat(s); median (min-max))",
                ["forks/s (sim)", "forks/s (sim + policies)", f"step ({STEP_BATCHES} batches) ms", "step after a fork ms",
                 "step after : without"],
                [[fmt_stat(inproc["forks_per_s"]), fmt_stat(inproc["forks_with_policies_per_s"]),
                  fmt_stat(inproc["step_ms"], 2), fmt_stat(inproc["step_after_fork_ms"], 2),
                  fmt_stat(inproc["step_ratio"], 3)]])
    agents = AGENTS if opts.quick else JOURNAL_AGENTS
    journal = from_journal(agents, opts.reps(3, 1))
    print_table(f"fork from a journal: warren run warren --param agents={agents:,} --trace T [--snapshots], then "
                "warren fork T --cursor (90% of its cursors) --trace F, from the snapshots and replayed from the start "
                "(child processes; median (min-max))",
                ["run s", "run --snapshots s", "fork s", "fork s, no index", "fork replayed s", "fork : run",
                 "no index : run", "replayed : run", "fork : run, CPU", "fork : run without snapshots"],
                [[fmt_stat(journal["run_s"], 2), fmt_stat(journal["run_snapshots_s"], 2),
                  fmt_stat(journal["fork_s"], 2), fmt_stat(journal["fork_unindexed_s"], 2),
                  fmt_stat(journal["fork_replayed_s"], 2), fmt_stat(journal["ratio"], 3),
                  fmt_stat(journal["ratio_unindexed"], 3), fmt_stat(journal["ratio_replayed"], 3),
                  fmt_stat(journal["ratio_cpu"], 3), fmt_stat(journal["ratio_plain"], 3)]])
    targets = [target("a step after a fork : a step without one", inproc["step_ratio"]["median"], "<=",
                      STEP_RATIO_TARGET),
               target(f"warren fork at 90% : warren run ({agents:,} foragers)", journal["ratio"]["median"], "<=",
                      JOURNAL_RATIO_TARGET)]
    targets_table(targets)
    return {"build": BUILD, "in_process": inproc, "journal": journal, "targets": targets, "repo": str(REPO)}
