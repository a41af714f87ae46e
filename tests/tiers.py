"""The test tiers and the sizes of long checks, in one place (README: "Tests").

- `pytest -m "not slow"`: the edit-test loop, under 2 minutes on 2 cores. A long check runs here in a reduced
  size (its `quick` parameter): fewer fuzz examples, race rounds and crashes, shorter load windows, no 30 s
  real waits.
- `pytest` (README's test command, `.ci/run`): everything, the `quick` versions and, marked `slow`, the CI size.
- `WARREN_FULL_TESTS=1 pytest`: the slow versions grow to their soak size (10,000 fuzz examples, 500 agents x
  60 s, 5,000 race rounds, Hypothesis's "full" profile); the quick versions stay quick.
"""

from __future__ import annotations

import os
from typing import Any

import pytest


def full() -> bool:
    """WARREN_FULL_TESTS=1: the slow checks run at their soak size."""
    return os.environ.get("WARREN_FULL_TESTS", "") == "1"


def sizes(quick: Any, ci: Any, soak: Any = None, *, argname: str = "size") -> pytest.MarkDecorator:
    """Parametrize a long check over its tiers: `quick` in the fast tier; `ci` marked slow (`soak` when full())."""
    big = soak if full() and soak is not None else ci
    return pytest.mark.parametrize(argname, [pytest.param(quick, id="quick"),
                                             pytest.param(big, id="slow", marks=pytest.mark.slow)])
