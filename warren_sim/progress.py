"""Progress of a long ``warren run`` or ``warren eval``, for a person watching a terminal or a log.

One small class that any command (or evaluation backend) can feed: :class:`Progress`. On a terminal it
draws a live display that redraws in place (with ``rich`` when installed, the ``plot`` extra; a one-line
``\\r`` display otherwise, so a core install still shows progress); when the output is not a terminal
(CI logs, ``| tee``) it writes a plain line every few seconds instead, so logs stay readable and short
runs print nothing at all. Callers ask :meth:`Progress.due` before gathering figures, so a fast loop
pays one clock read per batch. Shows: objectives (current/target), sim time, decisions and
decisions per second (wall), seeds done of total.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from .runtime.clock import wall_seconds

#: Seconds between plain lines when the output is not a terminal (env WARREN_PROGRESS_EVERY overrides).
PLAIN_EVERY_S = 5.0
#: Seconds between redraws on a terminal.
LIVE_EVERY_S = 0.1

Objective = tuple[str, int, int]  # (id, current, target)


def _plain_every() -> float:
    try:
        return max(0.0, float(os.environ.get("WARREN_PROGRESS_EVERY", PLAIN_EVERY_S)))
    except ValueError:
        return PLAIN_EVERY_S


class Progress:
    """A live display on a terminal, a plain line every few seconds elsewhere, nothing when disabled."""

    def __init__(self, title: str, *, stream: TextIO | None = None, interactive: bool | None = None,
                 enabled: bool = True, every_s: float | None = None,
                 clock: Callable[[], float] = wall_seconds, use_rich: bool | None = None) -> None:
        self.title = title
        self.stream = stream if stream is not None else sys.stderr
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.enabled = enabled
        self.clock = clock
        self.every_s = (LIVE_EVERY_S if self.interactive else _plain_every()) if every_s is None else every_s
        self.started = clock()
        # a terminal shows the first figures at once; a log waits a whole interval (short runs log nothing)
        self.last = float("-inf") if self.interactive else self.started
        self.lines = 0  # plain lines written
        self.fields: dict[str, Any] = {}
        self._live: Any = None
        self._width = 0
        if enabled and self.interactive and use_rich is not False:
            self._live = self._start_rich(required=use_rich is True)

    # -- feeding ---------------------------------------------------------------------------------------
    def due(self) -> bool:
        """True when a redraw (or a plain line) is due: gather the figures and call :meth:`update`."""
        return self.enabled and self.clock() - self.last >= self.every_s

    def update(self, *, sim_time_ms: int | None = None, decisions: int | None = None,
               objectives: Sequence[Objective] | None = None, seeds_done: int | None = None,
               seeds_total: int | None = None, label: str | None = None, force: bool = False) -> None:
        """Record the newest figures; draw them if due (or ``force``)."""
        for key, value in (("sim_time_ms", sim_time_ms), ("decisions", decisions), ("objectives", objectives),
                           ("seeds_done", seeds_done), ("seeds_total", seeds_total), ("label", label)):
            if value is not None:
                self.fields[key] = value
        if not self.enabled or not (force or self.due()):
            return
        self.last = self.clock()
        if self.interactive:
            self._draw_live()
        else:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self.lines += 1

    def seed_done(self, done: int, total: int, row: dict[str, Any] | None = None) -> None:
        """A sweep's per-seed callback, ``(done, total, row)``: seeds done of total, the row's scenario as label."""
        label = str(row["scenario"]) if row and "scenario" in row else None
        self.update(seeds_done=done, seeds_total=total, label=label)

    def close(self) -> None:
        """Take the live display off the terminal (the command prints its summary after)."""
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self.enabled and self.interactive and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        self._width = 0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what is shown ---------------------------------------------------------------------------------
    def rate(self) -> float | None:
        elapsed = self.clock() - self.started
        decisions = self.fields.get("decisions")
        return decisions / elapsed if decisions is not None and elapsed > 0 else None

    def parts(self) -> list[str]:
        f = self.fields
        out = []
        if f.get("label"):
            out.append(str(f["label"]))
        if "seeds_total" in f:
            out.append(f"seeds {f.get('seeds_done', 0)}/{f['seeds_total']}")
        if "sim_time_ms" in f:
            out.append(f"t={f['sim_time_ms'] / 1000:.1f}s")
        if "decisions" in f:
            rate = self.rate()
            out.append(f"decisions={f['decisions']:,}" + (f" ({rate:,.0f}/s)" if rate is not None else ""))
        if f.get("objectives"):
            out.append("objectives " + " ".join(f"{oid} {cur}/{target}" for oid, cur, target in f["objectives"]))
        out.append(f"wall {self.clock() - self.started:.1f}s")
        return out

    def line(self) -> str:
        return f"{self.title}: " + "  ".join(self.parts())

    # -- terminals -------------------------------------------------------------------------------------
    def _start_rich(self, required: bool) -> Any:
        try:
            from rich.console import Console
            from rich.live import Live
        except ImportError:
            if required:
                raise
            return None
        console = Console(file=self.stream, force_terminal=True)
        live = Live(self._renderable(), console=console, auto_refresh=False, transient=True)
        live.start()
        return live

    def _renderable(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        f = self.fields
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold")
        table.add_column()
        table.add_row(self.title, "  ".join(p for p in self.parts() if not p.startswith("objectives ")))
        if "seeds_total" in f and f["seeds_total"]:
            table.add_row("seeds", ProgressBar(total=f["seeds_total"], completed=f.get("seeds_done", 0), width=40))
        for oid, cur, target in f.get("objectives") or ():
            table.add_row(f"  {oid}", _bar(cur, target))
        return table

    def _draw_live(self) -> None:
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)
            return
        text = self.line()
        self.stream.write("\r" + text.ljust(self._width))
        self.stream.flush()
        self._width = max(self._width, len(text))


def _bar(current: int, target: int) -> Any:
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    row = Table.grid(padding=(0, 1))
    row.add_row(ProgressBar(total=max(1, target), completed=min(current, target), width=30), f"{current}/{target}")
    return row
