"""Which build of the engine's hot modules this process runs: compiled (mypyc) or plain Python.

An install compiles ``COMPILED`` with mypyc when it can (setup.py: a C compiler and Python's headers at hand;
``WARREN_MYPYC=0`` opts out) and records the SHA-256 of each source it compiled in ``_compiled_from.py``. A
compiled module is imported only while it is the compiled form of the source beside it: an engine module edited
after the build (an editable install, a ``git pull``) makes the whole engine run as plain Python until the next
``pip install``, instead of running the old code silently. ``WARREN_ENGINE=python`` asks for the plain engine
(to compare the two builds, or to step through the engine in a debugger).

Python's own import system prefers an extension module to a source file of the same name, so choosing the plain
build means a finder, ahead of the default ones, that imports the hot modules from their sources: all of them or
none (a compiled module calls the others of its group directly, assuming they are compiled too).

This runs once, at import time, before the engine's modules are imported: it reads files and the environment,
as an import does; the simulation itself stays free of I/O.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

# The modules a decision runs through, plain typed Python that mypyc compiles as is (setup.py's ENGINE_COMPILED:
# the same list, which tests/test_compiled_build.py checks).
COMPILED = ("sim", "rules", "world", "scheduler", "headless", "perception", "effects", "command")
PACKAGE = __name__.rpartition(".")[0]
HERE = os.path.dirname(os.path.abspath(__file__))


def source_digest(path: str) -> str:
    """SHA-256 of a source file's bytes: what setup.py records for each module it compiles."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _extension(name: str) -> str | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = os.path.join(HERE, name + suffix)
        if os.path.exists(path):
            return path
    return None


def _recorded() -> dict[str, str] | None:
    """The sources the compiled modules were built from (``_compiled_from.SOURCES``), or None."""
    try:  # written by setup.py when it compiles (absent from a checkout: not in git)
        compiled_from = importlib.import_module(f"{PACKAGE}._compiled_from")
    except ImportError:
        return None
    sources = getattr(compiled_from, "SOURCES", None)
    return sources if isinstance(sources, dict) else None


def choose() -> tuple[str, str]:
    """``(build, why)``: "mypyc" when the compiled modules are present, asked for and built from these very
    sources; else "python", and why not when compiled modules are present (empty when there are none)."""
    present = [m for m in COMPILED if _extension(m)]
    if not present:
        return "python", ""
    if len(present) < len(COMPILED):  # (never left by setup.py, which keeps all of them or none)
        return "python", (f"only {', '.join(present)} of the engine's modules are compiled: running the plain Python "
                          "engine (pip install -e . compiles all of them)")
    if os.environ.get("WARREN_ENGINE", "").strip().lower() in ("python", "plain"):
        return "python", "WARREN_ENGINE=python asked for the plain Python engine"
    recorded = _recorded()
    if recorded is None:
        return "python", ("the compiled engine does not say which sources it was built from "
                          "(warren_sim/engine/_compiled_from.py is missing): reinstall (pip install -e .)")
    changed = [f"{m}.py" for m in COMPILED
               if recorded.get(m) != source_digest(os.path.join(HERE, m + ".py"))]
    if changed:
        return "python", (f"{', '.join(changed)} changed since the engine was compiled: running the plain Python "
                          "engine until the next install (pip install -e . compiles it again)")
    return "mypyc", ""


class _SourceFinder:
    """Imports the engine's hot modules from their ``.py`` files, ahead of their compiled extension modules."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != PACKAGE or name not in COMPILED:
            return None
        return importlib.util.spec_from_file_location(fullname, os.path.join(HERE, name + ".py"))


BUILD, WHY = choose()
if BUILD == "python" and WHY and not any(isinstance(f, _SourceFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _SourceFinder())
