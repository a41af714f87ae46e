"""The opt-in compiled engine (setup.py, ``WARREN_MYPYC=1``; docs/decisions.md "An opt-in compiled engine").

It is opt-in, it falls back to plain Python without a compiler, and it decides exactly what the plain engine
decides: the slow test builds it from this checkout in a temporary copy (``setup.py build_ext --inplace``, what
an editable install with ``WARREN_MYPYC=1`` runs), checks that the compiled modules are the ones imported, and
runs the pinned trace and perception digests and the engine's tests there, unchanged.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import warren_sim.engine as engine

ROOT = Path(__file__).resolve().parents[1]
FALLBACK = "building the plain Python engine"


def setup_py(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "setup.py", *args], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=900)


def test_the_build_in_use_is_named() -> None:
    """``engine.BUILD`` says "mypyc" exactly when the engine's modules were imported from compiled extensions."""
    modules = (engine.sim, engine.rules, engine.world, engine.scheduler, engine.headless, engine.perception)
    compiled = [m for m in modules if not (m.__file__ or "").endswith(".py")]
    assert engine.BUILD == ("mypyc" if compiled else "python")


def test_without_the_variable_or_a_compiler_the_engine_is_plain_python() -> None:
    """Not asked: no compiling, no word. Asked without a C compiler: a warning, and the plain build."""
    plain = setup_py(["--name"], {"WARREN_MYPYC": ""})
    assert plain.returncode == 0 and FALLBACK not in plain.stderr, plain.stderr
    no_cc = setup_py(["--name"], {"WARREN_MYPYC": "1", "CC": "/nonexistent/cc"})
    assert no_cc.returncode == 0, no_cc.stderr
    assert "no C compiler (/nonexistent/cc)" in no_cc.stderr and FALLBACK in no_cc.stderr
    assert no_cc.stdout.strip().endswith("warren-sim")


@pytest.mark.slow
def test_the_compiled_engine_decides_exactly_what_the_plain_one_does(tmp_path: Path) -> None:
    """Compiled from this checkout, the engine's pinned traces, perceptions and tests hold unchanged."""
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if importlib.util.find_spec("mypyc") is None or shutil.which(cc) is None:
        pytest.skip("mypyc or a C compiler is missing: the compiled build cannot be made here")
    copy = tmp_path / "warren"
    copy.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    for tree in ("warren_sim", "scenarios", "tests"):
        shutil.copytree(ROOT / tree, copy / tree, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    built = setup_py(["build_ext", "--inplace"], {"WARREN_MYPYC": "1"}, cwd=copy)
    assert built.returncode == 0, built.stderr[-2000:]
    assert FALLBACK not in built.stderr
    assert sorted(p.name.split(".")[0] for p in (copy / "warren_sim" / "engine").glob("*.so")) == [
        "_compiled__mypyc", "headless", "perception", "rules", "scheduler", "sim", "world"]
    # python -m puts the copy first on sys.path: its compiled engine is the one imported
    which = subprocess.run([sys.executable, "-c", "import warren_sim.engine as e; print(e.BUILD, e.sim.__file__)"],
                           cwd=copy, capture_output=True, text=True, timeout=120)
    assert which.stdout.split()[0] == "mypyc" and str(copy) in which.stdout, which.stdout + which.stderr
    tests = ["tests/test_trace_digests.py", "tests/test_engine_perception_digests.py",
             *sorted(str(p.relative_to(copy)) for p in (copy / "tests").glob("test_engine_*.py"))]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", *tests],
                         cwd=copy, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.stdout.rstrip().endswith("[100%]") and "F" not in run.stdout.replace("[100%]", "")
    # an engine module edited after the build: the compiled one would run, so importing the engine says so
    source = copy / "warren_sim" / "engine" / "rules.py"
    newest = max(p.stat().st_mtime for p in (copy / "warren_sim" / "engine").glob("*.so"))
    os.utime(source, (newest + 60, newest + 60))
    stale = subprocess.run([sys.executable, "-c", "import warren_sim.engine"], cwd=copy, capture_output=True,
                           text=True, timeout=120)
    assert stale.returncode == 0 and f"the compiled engine is older than {source}" in stale.stderr, stale.stderr
