"""Two builds of one engine (setup.py; docs/decisions.md "The compiled engine by default").

An install compiles the engine's hot modules with mypyc where it can, and falls back to plain Python (with a
warning) where it cannot; the engine imports its compiled modules only while they are built from the sources
beside them (``warren_sim.engine.build``). Both builds decide exactly the same: whichever build this suite runs
on, the slow tests run the engine's tests and the pinned trace and perception digests on the other one, unchanged.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import warren_sim
import warren_sim.engine as engine
from warren_sim.engine import build

ROOT = Path(__file__).resolve().parents[1]
FALLBACK = "installing the plain Python engine"
WHICH = "import warren_sim.engine as e; print(e.BUILD, e.sim.__file__, e.rules.__file__); print(e.WHY)"


def setup_py(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "setup.py", *args], cwd=cwd, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=900)


def python(code: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``cwd`` (first on sys.path: a copy's own package is the one imported)."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env={**os.environ, **(env or {})},
                          capture_output=True, text=True, timeout=120)


def copy_of_the_checkout(to: Path) -> Path:
    to.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, to / name)
    for tree in ("warren_sim", "scenarios", "tests"):
        shutil.copytree(ROOT / tree, to / tree,
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "_compiled_from.py"))
    return to


def engine_tests(cwd: Path) -> list[str]:
    return ["tests/test_trace_digests.py", "tests/test_engine_perception_digests.py",
            *sorted(str(p.relative_to(cwd)) for p in (cwd / "tests").glob("test_engine_*.py"))]


def run_engine_tests(cwd: Path, env: dict[str, str]) -> None:
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "",
                          *engine_tests(cwd)],
                         cwd=cwd, env={**os.environ, **env}, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert run.stdout.rstrip().endswith("[100%]") and "F" not in run.stdout.replace("[100%]", "")


def test_the_build_in_use_is_named() -> None:
    """``engine.BUILD`` says "mypyc" exactly when the engine's modules were imported from compiled extensions."""
    modules = tuple(getattr(engine, name) for name in build.COMPILED)
    compiled = [m for m in modules if not (m.__file__ or "").endswith(".py")]
    assert engine.BUILD == ("mypyc" if compiled else "python")
    assert compiled in ([], list(modules))  # all of them or none
    assert engine.BUILD == "python" or engine.WHY == ""


def test_setup_compiles_the_modules_the_engine_chooses_between() -> None:
    names = re.search(r"ENGINE_COMPILED = (\[.*?\])", (ROOT / "setup.py").read_text(encoding="utf-8"))
    assert names is not None and tuple(eval(names.group(1))) == build.COMPILED


def test_warren_engine_python_runs_the_plain_engine() -> None:
    """``WARREN_ENGINE=python``: the plain modules, whatever is installed, and the process says why when a
    compiled engine was there to choose."""
    out = python(WHICH, ROOT, {"WARREN_ENGINE": "python"})
    assert out.returncode == 0, out.stderr
    first, why = out.stdout.splitlines()
    name, sim_file, rules_file = first.split()
    assert name == "python" and sim_file.endswith("sim.py") and rules_file.endswith("rules.py")
    assert why == ("WARREN_ENGINE=python asked for the plain Python engine" if engine.BUILD == "mypyc" else "")


def test_without_a_compiler_the_install_is_plain_python_with_a_warning(tmp_path: Path) -> None:
    """Not asked to skip, without a C compiler: a warning, the plain build, and any earlier record of a compiled
    one forgotten. ``WARREN_MYPYC=0``: no compiling and no word; ``WARREN_MYPYC=1``: the missing compiler is an
    error. (Metadata alone compiles nothing.)"""
    copy = copy_of_the_checkout(tmp_path / "warren")
    record = copy / "warren_sim" / "engine" / "_compiled_from.py"
    record.write_text("SOURCES = {}\n", encoding="utf-8")
    no_cc = setup_py(["build_ext", "--inplace"], {"WARREN_MYPYC": "", "CC": "/nonexistent/cc"}, copy)
    assert no_cc.returncode == 0, no_cc.stderr
    assert "no C compiler (/nonexistent/cc)" in no_cc.stderr and FALLBACK in no_cc.stderr
    assert not record.exists() and not list((copy / "warren_sim").rglob("*.so"))
    skipped = setup_py(["build_ext", "--inplace"], {"WARREN_MYPYC": "0"}, copy)
    assert skipped.returncode == 0 and "warren-sim:" not in skipped.stderr, skipped.stderr
    required = setup_py(["build_ext", "--inplace"], {"WARREN_MYPYC": "1", "CC": "/nonexistent/cc"}, copy)
    assert required.returncode != 0 and "WARREN_MYPYC=1 but no C compiler" in required.stderr
    metadata = setup_py(["--name"], {"WARREN_MYPYC": "", "CC": "/nonexistent/cc"}, copy)
    assert metadata.returncode == 0 and metadata.stdout.strip().endswith("warren-sim")
    assert "warren-sim:" not in metadata.stderr


def can_compile() -> bool:
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"], "Python.h").exists()
    return importlib.util.find_spec("mypyc") is not None and shutil.which(cc) is not None and headers


@pytest.mark.slow
def test_a_compiler_that_fails_leaves_the_plain_engine(tmp_path: Path) -> None:
    """A C compiler that is there but fails (``CC=false``): a warning, no compiled module and no record of one, so
    the engine the install leaves is the plain one; with ``WARREN_MYPYC=1`` the failure is the build's error."""
    if importlib.util.find_spec("mypyc") is None or shutil.which("false") is None:
        pytest.skip("mypyc or false(1) is missing here")
    copy = copy_of_the_checkout(tmp_path / "warren")
    failed = setup_py(["build_ext", "--inplace"], {"WARREN_MYPYC": "", "CC": "false"}, copy)
    assert failed.returncode == 0, failed.stderr[-2000:]
    assert "warren-sim: compiling the engine failed" in failed.stderr and FALLBACK in failed.stderr
    assert not list((copy / "warren_sim").rglob("*.so"))
    assert not (copy / "warren_sim" / "engine" / "_compiled_from.py").exists()
    assert python(WHICH, copy).stdout.split()[0] == "python"
    required = setup_py(["build_ext", "--inplace"], {"WARREN_MYPYC": "1", "CC": "false"}, copy)
    assert required.returncode != 0


@pytest.mark.slow
def test_the_compiled_engine_decides_exactly_what_the_plain_one_does(tmp_path: Path) -> None:
    """Compiled from this checkout, the engine's pinned traces, perceptions and tests hold unchanged; an engine
    module edited after the build runs the whole engine as plain Python (never the old code), and says why."""
    if not can_compile():
        pytest.skip("mypyc, a C compiler or Python.h is missing: the compiled build cannot be made here")
    copy = copy_of_the_checkout(tmp_path / "warren")
    built = setup_py(["build_ext", "--inplace"], {"WARREN_MYPYC": "1"}, copy)
    assert built.returncode == 0, built.stderr[-2000:]
    assert FALLBACK not in built.stderr
    assert sorted(p.name.split(".")[0] for p in (copy / "warren_sim" / "engine").glob("*.so")) == [
        "_compiled__mypyc", "command", "effects", "headless", "perception", "rules", "scheduler", "sim", "world"]
    # python -c in the copy puts it first on sys.path: its compiled engine is the one imported
    which = python(WHICH, copy)
    assert which.stdout.split()[0] == "mypyc" and str(copy) in which.stdout, which.stdout + which.stderr
    run_engine_tests(copy, {})
    # an engine module edited after the build: every module runs from its source, and the engine says why
    source = copy / "warren_sim" / "engine" / "rules.py"
    source.write_text(source.read_text(encoding="utf-8") + "\n# edited after the build\n", encoding="utf-8")
    stale = python(WHICH, copy)
    assert stale.returncode == 0, stale.stderr
    first, why = stale.stdout.splitlines()
    assert first.split()[0] == "python" and first.split()[2] == str(source), stale.stdout
    assert why.startswith("rules.py changed since the engine was compiled"), why
    # some compiled modules gone (by hand): none of the others is imported either
    source.write_text(source.read_text(encoding="utf-8").replace("\n# edited after the build\n", ""), encoding="utf-8")
    assert python(WHICH, copy).stdout.split()[0] == "mypyc"
    for so in (copy / "warren_sim" / "engine").glob("world.*.so"):
        so.unlink()
    partial = python(WHICH, copy)
    first, why = partial.stdout.splitlines()
    assert first.split()[0] == "python" and first.split()[1].endswith("sim.py"), partial.stdout + partial.stderr
    assert why.startswith("only sim, rules, scheduler, headless, perception, effects, command of the engine's "
                          "modules"), why


@pytest.mark.slow
def test_the_plain_engine_decides_exactly_what_the_compiled_one_does() -> None:
    """Whichever build is installed here, the plain one passes the same pinned digests and engine tests (with
    the compiled build installed, ``WARREN_ENGINE=python`` runs it; without, it is what the suite ran on)."""
    run_engine_tests(ROOT, {"WARREN_ENGINE": "python"})


def test_warren_version_names_the_engine_build(capsys: pytest.CaptureFixture[str]) -> None:
    """pip hides a build's warnings: ``warren --version`` says which engine an install runs, and why not the
    compiled one when one was there to choose."""
    from warren_sim.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    build = "compiled with mypyc" if engine.BUILD == "mypyc" else "plain Python"
    assert capsys.readouterr().out.startswith(f"warren {warren_sim.__version__} (engine: {build}")
    plain = subprocess.run([sys.executable, "-m", "warren_sim.cli", "--version"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, env={**os.environ, "WARREN_ENGINE": "python"})
    assert plain.returncode == 0 and "(engine: plain Python" in plain.stdout, plain.stdout + plain.stderr
