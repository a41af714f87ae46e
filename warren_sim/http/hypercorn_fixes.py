"""Hypercorn, patched: the version check, then the fixes (:func:`apply`, :func:`apply_lean_writes`).

WARREN runs Hypercorn 0.18's trio worker with seven fixes that replace methods of its private classes and read
h11's private connection state: four for correctness (:mod:`.hypercorn_correctness`: connections that never
closed, a write with no bound, two writers on one socket) and three for speed (:mod:`.hypercorn_speed`: fewer
writes per response, a long-poll's reply written as its batch is published). Code written against another
release's internals is wrong in ways no error shows: so before anything is patched, :func:`check_versions`
compares the installed Hypercorn and h11 with :data:`WRITTEN_FOR`, and a mismatch stops the server at start with
:class:`UnsupportedHypercorn`, which names the tests to rerun (docs/decisions.md says why an error, not the
unpatched server with a warning).

Applied by :func:`warren_sim.http.server.start_server` (and the bench's ceiling, bench/trivial_app.py); idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import metadata

from . import hypercorn_correctness, hypercorn_speed
from .hypercorn_speed import early_statistics

__all__ = ["WRITTEN_FOR", "UnsupportedHypercorn", "apply", "apply_lean_writes", "check_versions", "early_statistics",
           "installed_versions"]

#: The releases the fixes were written and tested for: a version is accepted when it is this one or starts with it
#: and a dot ("0.16" accepts h11 0.16.0 and 0.16.1). Widen only after the tests each fix names pass on the new one.
WRITTEN_FOR: dict[str, str] = {"hypercorn": "0.18.0", "h11": "0.16"}


class UnsupportedHypercorn(RuntimeError):
    """The installed Hypercorn (or h11) is not one the fixes were written for: the server does not start."""


def installed_versions() -> dict[str, str]:
    """The installed versions of the packages in :data:`WRITTEN_FOR` ("not installed" for a missing one)."""
    out = {}
    for name in WRITTEN_FOR:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def check_versions(installed: Mapping[str, str] | None = None) -> None:
    """Refuse (:class:`UnsupportedHypercorn`) unless ``installed`` (the packages' versions, those of this
    environment by default) are the releases the fixes were written for (:data:`WRITTEN_FOR`)."""
    found = installed_versions() if installed is None else dict(installed)
    wrong = {name: found.get(name, "not installed") for name, want in WRITTEN_FOR.items()
             if not _matches(found.get(name, ""), want)}
    if wrong:
        shown = ", ".join(f"{name} {version} (written for {WRITTEN_FOR[name]})" for name, version in wrong.items())
        raise UnsupportedHypercorn(
            f"warren serve patches Hypercorn's internals and was written for other releases than those installed: "
            f"{shown}. Install the pinned ones (pip install 'hypercorn=={WRITTEN_FOR['hypercorn']}'), or, to move to "
            "the new release, rerun the tests each fix names (warren_sim/http/hypercorn_correctness.py and "
            "hypercorn_speed.py), then add it to WRITTEN_FOR in warren_sim/http/hypercorn_fixes.py")


def _matches(version: str, want: str) -> bool:
    return version == want or version.startswith(want + ".")


def apply(send_timeout: float = 10.0) -> None:
    """Check the versions, then install the correctness fixes (1-4 and 8; ``send_timeout`` bounds every write) and the
    direct writes (fix 5)."""
    check_versions()
    hypercorn_correctness.apply(send_timeout)
    hypercorn_speed.apply_direct_writes()


def apply_lean_writes() -> None:
    """Check the versions, then install one write per fixed-length response (fix 6, and fix 7's replay)."""
    check_versions()
    hypercorn_speed.apply_lean_writes()
