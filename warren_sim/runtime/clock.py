"""The process clock, and the one module allowed to read wall time.

Why one module: every wait in WARREN (decision deadlines, lease TTLs, long-polls, pacing) is a trio cancel
scope on the process's trio clock, which may be real, accelerated (``--rate R``: a
``trio.testing.MockClock(rate=R)``, every timeout passes R times faster) or autojumping (tests). Wall time
is needed in exactly two places: the ``deadline_unix`` field on the wire, and log timestamps. Keeping
``time.time()`` here makes "nothing else reads the wall clock" checkable with a grep.

Decision on ``deadline_unix`` (the mapping :class:`WallMap` implements): it is real unix time, the wall
instant at which the deadline passes, so ``deadline_unix - time.time()`` is the time left on any client in
any language. ``deadline_unix = unix0 + (trio_deadline - trio0) / rate``, anchored at the moment the map was
made: on the real clock (rate 1) this is simply the wall-clock deadline; under ``--rate R`` (a
``MockClock(rate=R)``, whose virtual seconds pass R times faster) a 60 s decision deadline reads
``now + 60 / R`` (1.2 s at rate 50), which is when it really arrives. (The map used to be 1:1 in virtual
seconds, so a deadline always read 60 s away and a client under warp had no clock to compare it with.) Under the autojump clock of in-process tests, virtual time has no relation to wall time at all; the
map there is built with rate 1 (``ServerConfig.rate``'s default), so ``deadline_unix`` is the anchor plus
*virtual* seconds: ``deadline_unix - WallMap.now_unix()`` is the virtual time left, and ``time.time()``
means nothing against it.
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
    client (the LLM policy) bounds its work by an envelope's decision deadline. Exact under any ``--rate``
    of the server: ``deadline_unix`` is real unix time (see the module docstring)."""
    return deadline_unix - time.time()


def wall_seconds() -> float:
    """A monotonic wall-clock reading in seconds, for measuring how long something took (summaries,
    benchmarks); never for deciding anything in a simulation."""
    return time.perf_counter()


class WallMap:
    """Maps the trio clock onto unix time: ``unix0 + (trio_time - trio0) / rate`` (see the module docstring).

    Create it inside trio (``WallMap(rate)``) once per process or run, with the rate of the process's clock
    (``make_clock``'s); it captures ``unix0 = time.time()`` and ``trio0 = trio.current_time()`` at that
    instant. ``rate`` divides the virtual seconds since the anchor: a clock R times faster covers them in
    1/R of the real time.
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
        """The unix time at which the trio clock reaches ``trio_deadline`` (e.g. a ``move_on_at`` deadline)."""
        return self.unix0 + (trio_deadline - self.trio0) / self.rate

    def now_unix(self) -> float:
        """The current trio time as unix time (must be called inside trio): ``time.time()`` on a real or
        accelerated clock, the anchor plus virtual seconds under autojump."""
        import trio

        return self.to_unix(trio.current_time())

    def __repr__(self) -> str:
        return f"WallMap(unix0={self.unix0!r}, trio0={self.trio0!r}, rate={self.rate!r})"
