"""``--out FILE.jsonl``: one row per (scenario, params, policy, seed) as it finishes; a rerun resumes.

Why a line per seed, appended and flushed as each arrives (BALROG's evaluator keeps one JSON per
episode for the same reason): a sweep killed half-way, by Ctrl-C, a crash or a pre-empted node, keeps
every row it finished, and the rerun with the same ``--out`` computes only the rest. A last line cut
by the kill is ignored (and that seed is run again). Rows with status ``error`` (the worker died, the
node was lost: nothing about the seed itself) are run again too; a ``crashed`` row (the policy raised)
is a result and is kept, since rerunning it would crash the same way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from .plan import SweepError
from .runs import Task, key_of


class ResultFile:
    """The rows already in ``path`` (by key) and an append handle for new ones."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.rows: dict[str, dict[str, Any]] = {}
        self.skipped_lines = 0
        self._stream: IO[str] | None = None
        if self.path.exists():
            self._read()

    def _read(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise SweepError(f"--out {self.path}: cannot read it to resume ({exc})") from None
        for line in text.splitlines():
            try:
                row = json.loads(line)
                key = key_of(row)
            except (ValueError, KeyError, TypeError):
                self.skipped_lines += 1  # a line cut by a kill, or not ours: its seed is run again
                continue
            if row.get("status") == "error":
                continue  # the worker died, not the seed: run it again
            self.rows[key] = row
        self._ends_mid_line = bool(text) and not text.endswith("\n")

    def open(self) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._stream = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 (closed by close())
        except OSError as exc:
            raise SweepError(f"--out {self.path}: cannot write to it ({exc})") from None
        if getattr(self, "_ends_mid_line", False):
            self._stream.write("\n")  # a cut last line stays alone on its line

    def append(self, row: dict[str, Any]) -> None:
        assert self._stream is not None, "open() first"
        self._stream.write(json.dumps(row, sort_keys=True) + "\n")
        self._stream.flush()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


def fill(tasks: Sequence[Task], rows: list[dict[str, Any] | None], store: ResultFile | None,
         progress: Callable[[int, int, dict[str, Any] | None], None] | None,
         run: Callable[[list[Task], Callable[[int, dict[str, Any]], None]], None]) -> list[int]:
    """Run the tasks whose row is still None (``run(pending, on_row)``: a backend), put each row in its place,
    append it to ``store`` as it arrives and report progress; returns the indices that were computed."""
    todo = [i for i, r in enumerate(rows) if r is None]
    done = len(tasks) - len(todo)
    if progress is not None:
        progress(done, len(tasks), None)

    def on_row(k: int, row: dict[str, Any]) -> None:
        nonlocal done
        rows[todo[k]] = row
        done += 1
        if store is not None:
            store.append(row)
        if progress is not None:
            progress(done, len(tasks), row)

    if store is not None:
        store.open()
    try:
        run([tasks[i] for i in todo], on_row)
    finally:
        if store is not None:
            store.close()
    return todo
