"""A non-editable install carries every bundled scenario, and scenarios of one's own are found too.

The wheel test builds the wheel with ``pip wheel``, installs it (no deps) into a fresh venv whose
dependencies come from this test environment (a ``.pth`` line, not an editable install), and runs the
``warren`` script from a directory outside the repository, as a user of the package would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from warren_sim.cli import main
from warren_sim.scenarios.loader import bundled_scenarios_dir

ROOT = Path(__file__).resolve().parents[1]
BUNDLED = sorted(p.parent.name for p in (ROOT / "scenarios").glob("*/scenario.toml"))


def test_bundled_scenarios_resolve_to_the_repo_directory_in_a_checkout():
    """Editable install or source checkout: the bundled scenarios are the repo's top-level scenarios/."""
    assert bundled_scenarios_dir().resolve() == (ROOT / "scenarios").resolve()
    assert len(BUNDLED) >= 5


@pytest.mark.slow
def test_wheel_installs_scenarios_and_runs_outside_the_repo(tmp_path):
    """pip wheel . -> fresh venv (non-editable) -> `warren run bridge_repair --seed 3` in a temp dir: completed."""
    wheels = tmp_path / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps",
                            "-q", "-w", str(wheels)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr
    (wheel,) = wheels.glob("warren_sim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for scenario in BUNDLED:  # every file of every bundled scenario is in the wheel
        for f in (ROOT / "scenarios" / scenario).iterdir():
            if f.suffix in (".toml", ".py"):
                assert f"warren_sim/_bundled_scenarios/{scenario}/{f.name}" in names
        for f in (ROOT / "scenarios" / scenario).glob("populations/*.py"):  # and its partner populations
            assert f"warren_sim/_bundled_scenarios/{scenario}/populations/{f.name}" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps",
                              "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert install.returncode == 0, install.stderr
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # The dependencies (trio, quart, ...) from this environment; warren_sim itself only from the wheel.
    Path(site, "warren_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("WARREN_SCENARIOS", "PYTHONPATH")}
    where = subprocess.run([str(py), "-c", "import warren_sim; print(warren_sim.__file__)"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=60)
    assert where.stdout.strip().startswith(str(venv)), where.stdout + where.stderr
    run = subprocess.run([str(venv / "bin" / "warren"), "run", "bridge_repair", "--seed", "3"], cwd=elsewhere,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("bridge_repair seed 3: completed")
    listed = subprocess.run([str(venv / "bin" / "warren"), "scenarios"], cwd=elsewhere, env=env,
                            capture_output=True, text=True, timeout=120)
    assert [line.split(" — ")[0] for line in listed.stdout.splitlines() if " — " in line] == BUNDLED
    cross = subprocess.run([str(venv / "bin" / "warren"), "eval", "bridge_repair", "--focal", "engineer=solution",
                            "--partners", "hoarder", "--seeds", "0", "--jobs", "1", "--quiet"], cwd=elsewhere,
                           env=env, capture_output=True, text=True, timeout=120)
    assert cross.returncode == 0 and "hoarder (bundled)" in cross.stdout, cross.stdout + cross.stderr


def _own_scenario(tmp_path: Path) -> Path:
    """A user's scenarios directory holding a copy of bridge_repair under another name."""
    own = tmp_path / "my-scenarios" / "my_bridge"
    own.mkdir(parents=True)
    for f in ("scenario.toml", "solution.py"):
        (own / f).write_text((ROOT / "scenarios" / "bridge_repair" / f).read_text(encoding="utf-8"), encoding="utf-8")
    return own.parent


def test_scenarios_option_finds_a_users_directory(tmp_path, capsys, monkeypatch):
    """`warren run my_bridge --scenarios DIR` runs a scenario found only in DIR; without it, a usage error."""
    monkeypatch.delenv("WARREN_SCENARIOS", raising=False)
    assert main(["run", "my_bridge", "--seed", "3"]) == 2
    assert "unknown scenario 'my_bridge'" in capsys.readouterr().err
    own = _own_scenario(tmp_path)
    assert main(["run", "my_bridge", "--seed", "3", "--scenarios", str(own)]) == 0
    assert capsys.readouterr().out.startswith("my_bridge seed 3: completed")
    assert main(["scenarios", "--scenarios", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_warren_scenarios_env_var_is_searched(tmp_path, monkeypatch):
    """WARREN_SCENARIOS (os.pathsep-separated) adds directories for every subcommand, here `warren eval`."""
    own = _own_scenario(tmp_path)
    monkeypatch.setenv("WARREN_SCENARIOS", os.pathsep.join([str(tmp_path / "missing"), str(own)]))
    out = subprocess.run([sys.executable, "-m", "warren_sim.cli", "eval", "my_bridge", "--seeds", "0-2", "--json"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"completion_rate": 1.0' in out.stdout
