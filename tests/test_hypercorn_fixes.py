"""The Hypercorn fixes refuse a Hypercorn (or h11) they were not written for (warren_sim/http/hypercorn_fixes.py).

The decision (docs/decisions.md): a clear error at start, not the unpatched server with a warning. Other releases
are faked through ``check_versions``' parameter, the environment's own versions checked as installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from warren_sim.http import hypercorn_correctness, hypercorn_speed
from warren_sim.http.hypercorn_fixes import (
    WRITTEN_FOR,
    UnsupportedHypercorn,
    check_versions,
    installed_versions,
)


def test_the_installed_releases_are_the_ones_written_for():
    check_versions()  # this environment's: the pinned ones
    assert installed_versions()["hypercorn"] == WRITTEN_FOR["hypercorn"]


@pytest.mark.parametrize(("hypercorn", "h11"), [("0.18.0", "0.16.0"), ("0.18.0", "0.16.4")])
def test_the_releases_written_for_are_accepted(hypercorn, h11):
    check_versions({"hypercorn": hypercorn, "h11": h11})


@pytest.mark.parametrize(("hypercorn", "h11", "named"), [
    ("0.19.0", "0.16.0", "hypercorn 0.19.0 (written for 0.18.0)"),
    ("0.18.1", "0.16.0", "hypercorn 0.18.1 (written for 0.18.0)"),
    ("0.17.2", "0.16.0", "hypercorn 0.17.2 (written for 0.18.0)"),
    ("0.18.0", "0.17.0", "h11 0.17.0 (written for 0.16)"),
    ("0.18.0", "0.160.0", "h11 0.160.0 (written for 0.16)"),
    ("0.18.0", None, "h11 not installed (written for 0.16)"),
])
def test_another_release_is_refused_with_what_to_do(hypercorn, h11, named):
    installed = {"hypercorn": hypercorn, **({"h11": h11} if h11 is not None else {})}
    with pytest.raises(UnsupportedHypercorn) as refused:
        check_versions(installed)
    words = str(refused.value)
    assert named in words
    assert "pip install 'hypercorn==0.18.0'" in words and "WRITTEN_FOR" in words  # what to do about it


def test_each_fix_names_the_test_that_fails_without_it():
    """Fixes 1-4 and 6-7 name a test file of this repository (fix 5, a cost, names its benchmark)."""
    tests = Path(__file__).parent
    for module in (hypercorn_correctness, hypercorn_speed):
        doc = module.__doc__ or ""
        named = {word.split("::")[0].strip("`.,") for word in doc.split() if word.strip("`").startswith("tests/")}
        assert named, module.__name__
        for path in named:
            assert (tests.parent / path).is_file(), path
    assert "Fails without it" in (hypercorn_correctness.__doc__ or "")
