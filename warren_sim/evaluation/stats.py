"""95% intervals for cross-play cells: a Wilson interval for a completion rate, a Student t interval for a mean.

Wilson rather than the normal approximation because a rate of 0% or 100% over a few seeds is common here
and the normal interval collapses to a point there; t rather than 1.96 because ten seeds is a usual
count. The t quantiles are tabulated (two-sided 95%), so evaluation needs no numeric library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054
#: Two-sided 95% quantiles of Student's t by degrees of freedom 1..30; past 30, the normal's.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


def t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else Z95


def wilson_interval(successes: int, n: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a rate of ``successes`` in ``n`` (``(0, 1)`` when n is 0)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """``(mean, low, high)``: the mean and its 95% t interval (a point for fewer than two values)."""
    n = len(values)
    if n == 0:
        return 0.0, 0.0, 0.0
    mean = math.fsum(values) / n
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t95(n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half
