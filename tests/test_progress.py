"""Progress of long runs: a live display on a terminal (a real pty), a plain line every few seconds elsewhere."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys

import pytest

from warren_sim.progress import Progress

WARREN = [sys.executable, "-m", "warren_sim.cli"]


class Ticks:
    """A clock the test moves by hand (the display's only notion of time)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_come_every_few_seconds_with_every_figure():
    """Not a terminal: nothing before the interval, then one line with objectives, sim time, decisions/s, seeds."""
    out, clock = io.StringIO(), Ticks()
    progress = Progress("warren eval", stream=out, interactive=False, every_s=5.0, clock=clock)
    progress.update(sim_time_ms=12_000, decisions=100, objectives=[("repair", 1, 2)], seeds_done=3, seeds_total=10)
    assert out.getvalue() == ""
    assert not progress.due()
    clock.now += 5.0
    assert progress.due()
    progress.update(decisions=1000)
    line = out.getvalue()
    assert line.count("\n") == 1
    assert "seeds 3/10" in line and "t=12.0s" in line and "decisions=1,000 (200/s)" in line
    assert "objectives repair 1/2" in line
    clock.now += 1.0
    progress.update(decisions=1200)
    assert out.getvalue().count("\n") == 1  # throttled
    progress.close()
    assert out.getvalue().count("\n") == 1  # closing a plain display writes nothing
    clock.now += 5.0
    progress.seed_done(7, 10, {"scenario": "relay", "seed": 6})  # the callback shape a sweep backend calls
    assert out.getvalue().splitlines()[-1].startswith("warren eval: relay  seeds 7/10")


def test_rich_display_draws_objective_bars_and_seeds_on_a_terminal():
    """A terminal with rich: a live table (seeds bar, one bar per objective), taken off the screen at the end."""
    pytest.importorskip("rich")
    out, clock = io.StringIO(), Ticks()
    with Progress("warren run", stream=out, interactive=True, clock=clock, use_rich=True) as progress:
        clock.now += 1
        progress.update(sim_time_ms=5000, decisions=50, objectives=[("repair", 1, 2), ("resupply", 0, 3)],
                        seeds_done=1, seeds_total=4)
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    for text in ("warren run", "t=5.0s", "decisions=50 (50/s)", "repair", "1/2", "resupply", "0/3", "seeds"):
        assert text in drawn, text


def test_one_line_display_without_rich():
    """A terminal without rich: one line redrawn in place with \\r, wiped at the end."""
    out, clock = io.StringIO(), Ticks()
    with Progress("warren run", stream=out, interactive=True, clock=clock, use_rich=False) as progress:
        clock.now += 1
        progress.update(sim_time_ms=1000, decisions=10, objectives=[("larder", 3, 9)])
    text = out.getvalue()
    assert text.startswith("\rwarren run: t=1.0s  decisions=10 (10/s)  objectives larder 3/9")
    assert text.endswith("\r") and "\n" not in text


def _run_in_pty(args: list[str], timeout: float = 120.0) -> str:
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                            env={**os.environ, "COLUMNS": "120", "TERM": "xterm"})
    os.close(slave)
    chunks = []
    try:
        while True:
            ready, _, _ = select.select([master], [], [], timeout)
            if not ready:
                break
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the pty
                break
            if not data:
                break
            chunks.append(data)
    finally:
        proc.wait(timeout=timeout)
        os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


def test_warren_run_on_a_terminal_shows_live_progress():
    """`warren run warren --param agents=400` in a real pty: the live display shows while it runs, then the summary."""
    pytest.importorskip("rich")
    text = _run_in_pty([*WARREN, "run", "warren", "--param", "agents=400"])
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert "warren run warren seed 0" in plain and "decisions=" in plain and "larder" in plain
    assert "warren seed 0: completed" in plain


def test_warren_eval_off_a_terminal_writes_plain_lines(tmp_path):
    """`warren eval` piped: plain progress lines on stderr (interval from WARREN_PROGRESS_EVERY), the table on stdout."""
    proc = subprocess.run([*WARREN, "eval", "contention", "--seeds", "0-5"], capture_output=True, text=True,
                          env={**os.environ, "WARREN_PROGRESS_EVERY": "0"}, timeout=120)
    assert proc.returncode == 0
    lines = [line for line in proc.stderr.splitlines() if line.startswith("warren eval")]
    assert lines and all("\r" not in line for line in lines)
    assert any("seeds 5/6" in line for line in lines)
    assert "completed" in proc.stdout
