"""`warren bench` on an install without the benchmarks' extras skips what it cannot run, naming the extra
(issue 33, item 4): no raw ModuleNotFoundError, no "failed (exit 1):" with nothing after the colon.

The missing install is made real for the subprocess: a ``sitecustomize`` on its PYTHONPATH makes the extras'
modules unimportable (as on a base ``pip install -e .``), for it and the pytest it starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HIDE = '''
import sys

HIDDEN = {"simpy", "pyinstrument", "pettingzoo", "gymnasium", "ray", "pytest", "pytest_trio", "hypothesis"}


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
'''


def test_bench_without_its_extras_names_each_one(tmp_path: Path) -> None:
    (tmp_path / "sitecustomize.py").write_text(HIDE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "warren_sim.cli", "bench", "engine", "warp", "rl", "sweeps",
                           "--quick", "--out", str(tmp_path / "out")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    assert "skipped engine: it needs 'simpy', from the 'bench' extra: pip install -e '.[bench]'" in done.stdout
    assert "skipped warp: it needs 'pytest', from the 'test' extra: pip install -e '.[test]'" in done.stdout
    assert "skipped rl: it needs 'gymnasium', from the 'rl' extra" in done.stdout
    assert "skipped sweeps: it needs 'ray', from the 'ray' extra" in done.stdout
    assert "(pip install -e '.[bench,test,rl,ray]' brings them)" in done.stdout
    assert "Traceback" not in out and "ModuleNotFoundError" not in out and "failed (exit" not in out, out
    # nothing could run: say so and exit 1; nothing is written
    assert done.returncode == 1 and "nothing ran" in done.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_extra_for_reads_pyproject() -> None:
    sys.path.insert(0, str(REPO))
    try:
        from bench.common import extra_for
    finally:
        sys.path.remove(str(REPO))
    assert extra_for("simpy") == "bench" and extra_for("no_such_module") is None
    assert extra_for("gymnasium") == "rl" and extra_for("pytest_trio") == "test" and extra_for("openenv") == "peers"
