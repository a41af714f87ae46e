"""What a cross-play result was computed from, by content: the manifest ``warren verify`` checks.

The WARREN version, the SHA-256 of the scenario's files (``scenario.toml``, ``solution.py``, ``expand.py``),
of each population's file and of each focal policy's source file, and the seeds and parameters. A policy
given as ``module:factory`` is hashed by the file its module is imported from (a package: its
``__init__.py``); the built-in ``none`` and ``random`` have no file of their own (the version covers them).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..scenarios import LoadedScenario, population_files
from ..scenarios.policies import POPULATION_PREFIX, REGISTRY, _is_file_spec
from .runs import SCENARIO_FILES


def sha256_file(path: str | os.PathLike[str]) -> str | None:
    """The file's SHA-256 (hex), or None when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def spec_files(spec: str, loaded: LoadedScenario) -> list[Path]:
    """The source files a policy spec runs (none for the built-ins)."""
    if spec == "solution":
        return [loaded.directory / "solution.py"]
    if spec in ("none", "random"):
        return []
    if spec.startswith(POPULATION_PREFIX):
        found = population_files(loaded).get(spec[len(POPULATION_PREFIX):])
        return [found] if found is not None else []
    if _is_file_spec(spec):
        return [Path(spec if spec.endswith(".py") else spec.rpartition(":")[0]).expanduser()]
    module = REGISTRY[spec][0].partition(":")[0] if spec in REGISTRY else spec.partition(":")[0]
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found_spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return []
    origin = found_spec.origin if found_spec is not None else None
    return [Path(origin)] if origin and origin not in ("built-in", "frozen") else []


def hashes(paths: Sequence[Path], base: Path) -> dict[str, str | None]:
    """``{file: sha256}``; a file of the scenario's own directory by its path there (``populations/x.py``:
    the same on every install), any other by its absolute path."""
    out: dict[str, str | None] = {}
    root = base.resolve()
    for p in paths:
        full = p.resolve()
        key = str(full.relative_to(root)) if full.is_relative_to(root) else str(full)
        out[key] = sha256_file(full)
    return out


def make_manifest(loaded: LoadedScenario, focals: Sequence[Any], populations: Sequence[Any],
                  seeds: Sequence[int]) -> dict[str, Any]:
    """The manifest of a cross-play over ``loaded`` (focals: :class:`~.crossplay.Focal`, populations:
    :class:`~.crossplay.Population`)."""
    files = [loaded.directory / f for f in SCENARIO_FILES if (loaded.directory / f).is_file()]
    return {
        "warren": __version__,
        "scenario": {"name": loaded.name, "params": dict(loaded.params),
                     "files": {p.name: sha256_file(p) for p in files}},
        "populations": {p.name: {"spec": p.spec, "source": p.source,
                                 "files": hashes([Path(p.path)] if p.path else [], loaded.directory)}
                        for p in populations},
        "focal": {f.text: {"files": hashes(spec_files(f.spec, loaded), loaded.directory)} for f in focals},
        "seeds": list(seeds),
    }
