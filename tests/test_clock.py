"""The clock module: rate -> trio clock, and the trio -> unix mapping used for ``deadline_unix``."""

import math
import time

import pytest
import trio
import trio.testing

from warren_sim.runtime.clock import WallMap, make_clock, unix_now


def test_real_time_rates_use_trios_own_clock() -> None:
    assert make_clock(None) is None
    assert make_clock(1.0) is None
    assert make_clock(1) is None


def test_other_rates_give_a_mock_clock_with_that_rate() -> None:
    clock = make_clock(10)
    assert isinstance(clock, trio.testing.MockClock)
    assert clock.rate == 10.0
    slow = make_clock(0.5)
    assert isinstance(slow, trio.testing.MockClock) and slow.rate == 0.5


@pytest.mark.parametrize("rate", [0, -1, math.inf, math.nan, True])
def test_nonsense_rates_are_refused_with_a_teaching_error(rate: float) -> None:
    with pytest.raises(ValueError, match="finite number > 0"):
        make_clock(rate)


def test_accelerated_clock_passes_virtual_seconds_faster_than_real_ones() -> None:
    clock = make_clock(200)

    async def main() -> float:
        start = trio.current_time()
        await trio.sleep(2.0)  # 2 virtual seconds = 10 ms of wall time at rate 200
        return trio.current_time() - start

    wall_start = time.monotonic()
    virtual = trio.run(main, clock=clock)
    wall = time.monotonic() - wall_start
    assert virtual >= 2.0
    assert wall < 1.0


async def test_autojump_map_reads_virtual_seconds_from_its_anchor(autojump_clock: trio.testing.MockClock) -> None:
    """Under the autojump clock (rate 1, in-process tests) ``deadline_unix`` is the anchor plus virtual seconds:
    compare it with ``now_unix()``, not with ``time.time()`` (the decision in runtime/clock.py)."""
    before = time.time()
    wall = WallMap(rate=None)
    after = time.time()
    assert before <= wall.unix0 <= after
    assert wall.trio0 == trio.current_time()
    assert wall.rate == 1.0

    deadline = trio.current_time() + 60.0
    assert wall.to_unix(deadline) == pytest.approx(wall.unix0 + 60.0)

    await trio.sleep(300.0)  # virtual: returns at once under autojump
    assert wall.now_unix() == pytest.approx(wall.unix0 + 300.0)
    assert time.time() - after < 5.0  # no real time was spent waiting
    # A decision deadline set now reads 60 s past "now" as the map sees it.
    with trio.move_on_after(60.0) as scope:
        assert wall.to_unix(scope.deadline) - wall.now_unix() == pytest.approx(60.0)


async def test_rate_scales_the_mapping_to_real_unix_time(autojump_clock: trio.testing.MockClock) -> None:
    """Under ``--rate R`` a virtual deadline d seconds away arrives d / R real seconds later, and reads so."""
    wall = WallMap(rate=50)
    assert wall.rate == 50.0
    assert wall.to_unix(wall.trio0 + 60.0) == pytest.approx(wall.unix0 + 1.2)


def test_rate_scaled_map_tracks_time_time() -> None:
    """On a real accelerated clock ``now_unix()`` is ``time.time()`` and a deadline's ``to_unix`` is its wall instant:
    a 60 s deadline at rate 50 is 1.2 s of real time away."""

    async def main() -> tuple[float, float, float]:
        wall = WallMap(rate=50)
        with trio.move_on_after(60.0) as scope:
            deadline_unix = wall.to_unix(scope.deadline)
            left_at_start = deadline_unix - time.time()
            await trio.sleep(30.0)  # 0.6 s real
            return left_at_start, deadline_unix - time.time(), wall.now_unix() - time.time()
        raise AssertionError("the 60 s scope ended before a 30 s sleep")

    left_at_start, left_later, skew = trio.run(main, clock=make_clock(50))
    assert left_at_start == pytest.approx(1.2, abs=0.1)
    assert left_later == pytest.approx(0.6, abs=0.15)
    assert abs(skew) < 0.15


def test_fixed_map_is_exact() -> None:
    wall = WallMap.fixed(unix0=1_769_812_345.0, trio0=100.0)
    assert wall.to_unix(160.1) == pytest.approx(1_769_812_405.1)
    assert "unix0=1769812345.0" in repr(wall)


def test_wallmap_needs_trio() -> None:
    with pytest.raises(RuntimeError):
        WallMap()


def test_unix_now_is_wall_time() -> None:
    assert abs(unix_now() - time.time()) < 1.0
