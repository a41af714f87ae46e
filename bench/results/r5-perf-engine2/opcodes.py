"""Python bytecodes (and Python calls) per decision of one headless ``warren`` run, per function.

Usage: ``PYTHONPATH=<tree> python bench/results/r5-perf-engine2/opcodes.py [agents]`` (default 1,000).
Counted with ``sys.settrace`` opcode events: deterministic, unlike any timing on a shared machine, and the
plain engine's time follows it (most of a decision is CPython's eval loop: perf, bench/results/r5-perf-engine2.md).
"""

from __future__ import annotations

import collections
import sys
from types import FrameType
from typing import Any

from warren_sim.engine import run_headless
from warren_sim.scenarios import instantiate, load_scenario


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    sim, pol = instantiate(load_scenario("warren", {"agents": n}), 0, "solution", record=False)
    ops: collections.Counter[str] = collections.Counter()
    calls: collections.Counter[str] = collections.Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "call":
            calls[frame.f_code.co_qualname] += 1
        elif event == "opcode":
            ops[frame.f_code.co_qualname] += 1
        return trace

    sys.settrace(trace)
    s = run_headless(sim, pol)
    sys.settrace(None)
    d = s["decisions"]
    print(f"{d} decisions: {sum(ops.values()) / d:.0f} bytecodes and {sum(calls.values()) / d:.1f} Python calls "
          "per decision")
    for name, v in ops.most_common(30):
        print(f"{v / d:8.1f} {calls[name] / d:6.2f}  {name}")


if __name__ == "__main__":
    main()
