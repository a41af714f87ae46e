"""The long-poll load benchmark in reduced form against a real `warren serve` (bench/load_longpoll.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import trio
from reliability_helpers import Served
from tiers import sizes

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for the bench package

from bench.load_longpoll import run_load  # noqa: E402


@sizes(quick=(20, 3.0), ci=(100, 5.0), soak=(500, 60.0))
def test_long_polling_agents_against_a_real_server_make_no_errors(tmp_path, size):
    """100 agents x 5 s (20 x 3 s fast, 500 x 60 s WARREN_FULL_TESTS=1): 0 errors, all woken, p99 wake reported."""
    agents, duration = size
    with Served(tmp_path) as s:
        result = trio.run(run_load, s.url, agents, duration)
    print(f"\n{agents} agents x {duration:g} s: {result['decisions']} decisions, {result['requests']} requests, "
          f"wake ms {result['wake_ms']}, after start {result['wake_ms_after_start']}, probe {result['probe_get_ms']}")
    assert result["errors"] == 0, result["error_samples"]
    assert result["agents_woken"] == agents and result["run_status_at_end"] == "running"
    assert result["decisions"] >= agents * duration / 3  # each agent sleeps 0.5-3 s between decisions
    assert 0 <= result["wake_ms"]["n"] - result["decisions"] <= agents  # the window may close mid-decision
