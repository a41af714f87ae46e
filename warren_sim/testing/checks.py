"""Assertion helpers for users' tests: the run replays, what the server said to an agent, waiting for a status.

They take what the fixtures give (a journal is the list of records ``warren_server.journal(run)`` or
``await warren_app.journal(run)`` returns, or a journal file's path) and fail with the facts a user needs to
debug: the first diverging record, the verdicts in order, the status the run reached instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .inprocess import AppRun
from .served import ServedRun, WarrenTestError

__all__ = ["assert_replays", "verdicts", "wait_status"]

Journal = Iterable[dict[str, Any]] | str | Path


def _records(journal: Journal) -> list[dict[str, Any]]:
    if isinstance(journal, str | Path):
        from ..replay import read_journal

        return read_journal(journal)
    return list(journal)


def assert_replays(journal: Journal) -> None:
    """Assert the run is reproducible: re-running its scenario and seed with its recorded commands gives the
    same engine records, byte for byte (what ``warren replay`` checks)."""
    from ..replay import replay_records

    records = _records(journal)
    result = replay_records(records)
    if result.identical:
        return
    d = result.divergence
    where = f"at engine record {d.index} (journal cursor {d.cursor})" if d is not None else ""
    detail = ""
    if d is not None:
        keys = d.keys_differing()
        detail = (f"; {d.detail}" if d.detail else "") + (f"; keys differing: {', '.join(keys)}" if keys else "") \
            + f"\n  journal: {d.expected}\n  replay:  {d.got}"
    raise AssertionError(f"{result.run_id} ({result.scenario}, seed {result.seed}) does not replay {where}"
                         f"{detail}" + (f"\n  note: {result.note}" if result.note else ""))


def verdicts(journal: Journal, agent: str) -> list[str]:
    """The verdicts the server gave ``agent``'s commands, in order (``accepted``, ``stale``, ``expired``,
    ``rejected``, ``duplicate``)."""
    return [str(r["status"]) for r in _records(journal) if r.get("kind") == "verdict" and r.get("agent") == agent]


def wait_status(run: ServedRun | AppRun, status: str, timeout: float = 60.0) -> Any:
    """Wait until ``run`` has ``status`` (``"running"``, ``"completed"``...); fail at once if it ends otherwise.

    ``timeout`` is in the server's clock seconds (warped: at ``rate=1000``, 60 s is 60 ms of wall time;
    virtual under autojump). Blocking for a ``warren_server`` run; for a ``warren_app`` run it returns a
    coroutine: ``await wait_status(run, "completed")``. Returns the run's view.
    """
    if isinstance(run, ServedRun | AppRun):
        return run.wait_status(status, timeout)
    raise WarrenTestError(f"wait_status takes a run made by warren_server.create_run, warren_app.create_run or "
                          f"warren_run, got {type(run).__name__}")
