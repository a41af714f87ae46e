"""Time-warped testing for users: the ``pytest11`` plugin that serves WARREN inside their own test suites.

Installed with ``warren-sim``, pytest loads :mod:`warren_sim.testing.plugin` (entry point ``warren``; disable it
with ``-p no:warren``). It gives three fixtures and a marker:

* ``warren_server``: a real ``warren serve`` on 127.0.0.1:0 in a background thread, on its own trio clock at
  ``@pytest.mark.warren(rate=R)`` (or the ini option ``warren_rate``); for blocking agents, any HTTP client, any
  language. See :class:`~warren_sim.testing.served.WarrenServer`.
* ``warren_app``: the app in-process for trio tests under pytest-trio's ``autojump_clock``, with the SDK's
  async client bound to it. See :class:`~warren_sim.testing.inprocess.InProcessWarren`.
* ``warren_run``: a factory of runs on whichever of the two the test uses.

and assertion helpers, importable from here: :func:`assert_replays`, :func:`verdicts`, :func:`wait_status`.

Why this module defines nothing at import: pytest imports it for every test session once the package is
installed, also in projects that never use WARREN. Names resolve on first access (PEP 562), so loading the
plugin imports no trio, httpx or server code (a test checks it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .checks import assert_replays, verdicts, wait_status
    from .inprocess import AppRun, InProcessWarren
    from .served import ServedRun, WarrenServer, WarrenTestError

__all__ = ["AppRun", "InProcessWarren", "ServedRun", "WarrenServer", "WarrenTestError", "assert_replays",
           "verdicts", "wait_status"]

_WHERE = {
    "assert_replays": "checks", "verdicts": "checks", "wait_status": "checks",
    "AppRun": "inprocess", "InProcessWarren": "inprocess",
    "ServedRun": "served", "WarrenServer": "served", "WarrenTestError": "served",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
