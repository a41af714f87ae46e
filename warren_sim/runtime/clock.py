"""The process clock, and the one module allowed to read wall time.

Why one module: every wait in WARREN (decision deadlines, lease TTLs, long-polls, pacing) is a trio cancel
scope on the process's trio clock, which may be real, accelerated (``--rate R``: a
``trio.testing.MockClock(rate=R)``, every timeout passes R times faster) or autojumping (tests). Wall time
is needed in exactly two places: the ``deadline_unix`` field on the wire, and log timestamps. Keeping
``time.time()`` here makes "nothing else reads the wall clock" checkable with a grep.

Decision on ``deadline_unix`` (the mapping :class:`WallMap` implements): virtual seconds map 1:1 onto unix
seconds, anchored at the moment the map was made. ``deadline_unix = unix0 + (trio_deadline - trio0)``. On
the real clock this is simply the wall-clock deadline. Under acceleration it is the deadline *as the agent
experiences time in the warped world*: a 60 s decision deadline always reads 60 s after the observation's
issue time, so agents and tests reason in the same seconds the simulation uses, while the deadline arrives
after 60 / R real seconds. (The alternative, scaling by 1/R to real unix time, would make deadlines look
60 / R s away and meaningless under the autojump clock, where virtual time has no fixed relation to wall
time at all.) A client under acceleration should therefore compare ``deadline_unix`` with another server
timestamp, not with its own ``time.time()``.
"""

import math
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import trio

# trio is imported where it is used: `warren run`, `warren eval` and the progress display time themselves
# with this module and must not pay trio's (and trio.testing's, which pulls in pytest) import on start-up.

__all__ = ["WallMap", "make_clock", "seconds_until_unix", "unix_now", "wall_seconds"]


def make_clock(rate: float | None) -> "trio.abc.Clock | None":
    """The clock to pass to ``trio.run(..., clock=...)`` for a time rate.

    ``None`` or ``1.0`` gives ``None``: trio's own real clock. Any other positive finite rate gives a
    ``MockClock(rate=rate)`` on which every sleep and timeout passes ``rate`` times faster (or slower,
    below 1) than real time.
    """
    if rate is None:
        return None
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate <= 0:
        raise ValueError(f"clock rate must be a finite number > 0 (1 is real time), got {rate!r}")
    if rate == 1.0:
        return None
    import trio.testing

    return trio.testing.MockClock(rate=float(rate))


def unix_now() -> float:
    """Wall-clock unix time, for log timestamps only; never use it to decide anything."""
    return time.time()


def seconds_until_unix(deadline_unix: float) -> float:
    """Seconds of wall time from now until ``deadline_unix`` (negative when it passed): how a blocking
    client (the LLM policy) bounds its work by an envelope's decision deadline. Under a server's ``--rate``
    the deadline is in warped seconds (see the module docstring), so this over-estimates; such clients
    also take a bound of their own."""
    return deadline_unix - time.time()


def wall_seconds() -> float:
    """A monotonic wall-clock reading in seconds, for measuring how long something took (summaries,
    benchmarks); never for deciding anything in a simulation."""
    return time.perf_counter()


class WallMap:
    """Maps the trio clock onto unix time: ``unix0 + (trio_time - trio0)`` (see the module docstring).

    Create it inside trio (``WallMap(rate)``) once per process or run; it captures ``unix0 = time.time()``
    and ``trio0 = trio.current_time()`` at that instant. ``rate`` is recorded for reference (logs, the
    server's self-description); it does not enter the mapping.
    """

    __slots__ = ("rate", "trio0", "unix0")

    def __init__(self, rate: float | None = None) -> None:
        import trio

        self.unix0 = time.time()
        self.trio0 = trio.current_time()
        self.rate = 1.0 if rate is None else float(rate)

    @classmethod
    def fixed(cls, unix0: float, trio0: float, rate: float = 1.0) -> "WallMap":
        """A map with given anchors (no clock read): for tests and replays that need exact numbers."""
        self = cls.__new__(cls)
        self.unix0 = float(unix0)
        self.trio0 = float(trio0)
        self.rate = float(rate)
        return self

    def to_unix(self, trio_deadline: float) -> float:
        """The unix time corresponding to a trio clock value (e.g. a ``move_on_at`` deadline)."""
        return self.unix0 + (trio_deadline - self.trio0)

    def now_unix(self) -> float:
        """The current trio time as unix time (must be called inside trio)."""
        import trio

        return self.to_unix(trio.current_time())

    def __repr__(self) -> str:
        return f"WallMap(unix0={self.unix0!r}, trio0={self.trio0!r}, rate={self.rate!r})"
