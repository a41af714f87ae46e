"""warp: wall time of the expiry tests in warped time (pytest-trio's autojump clock).

``pytest tests/test_protocol_transports.py -k "lease or deadline or expiry"`` runs the tests whose lease TTLs
(300 s) and decision deadlines (60 s) pass in full, over HTTP and WebSocket, on the in-process app. Reported:
the wall time of the whole subprocess (interpreter start, imports, collection included) and pytest's own
duration (its ``in N s`` line). Target: < 2 s of wall time.

The suite runs with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` and ``-p pytest_trio.plugin``: it needs pytest-trio and
nothing else, and importing every plugin installed in the venv (schemathesis's, hypothesis's, anyio's...) was
about half of its wall time, the half that grows first on a busy machine. The same tests with autoloading on are
measured next to it, as the cost avoided. The plugin is named by its module, not by its entry point's name
(``-p trio``): pytest marks a ``-p`` name for assertion rewriting, and ``trio`` is the trio package, so its 58
modules were parsed and rewritten on every run wherever bytecode is not written (``PYTHONDONTWRITEBYTECODE``,
set in this machine's shell and in many CI images).
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

from bench.common import (
    REPO,
    MissingExtra,
    Options,
    bench_env,
    fmt_stat,
    print_table,
    summary,
    target,
    targets_table,
)
from warren_sim.runtime.clock import wall_seconds

SELECT = "lease or deadline or expiry"
TEST_FILE = "tests/test_protocol_transports.py"
TARGET_S = 2.0


def pytest_argv(*extra: str, autoload: bool = False) -> list[str]:
    """The warp suite's command (run with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1``: see ``suite_env``); with
    ``autoload``, pytest-trio comes by its entry point like every other plugin (naming it too would load it twice)."""
    plugin = [] if autoload else ["-p", "pytest_trio.plugin"]
    return [sys.executable, "-m", "pytest", TEST_FILE, "-k", SELECT, "-p", "no:cacheprovider", *plugin,
            # the project's addopts ask for pytest-xdist (-n auto), which autoload-off does not load
            "-o", "addopts=-q", *extra]


def suite_env(autoload: bool = False) -> dict[str, str]:
    """The suite's environment: third-party plugins are not autoloaded (``-p pytest_trio.plugin`` loads the one
    it needs)."""
    env = bench_env()
    if autoload:
        env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
    else:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def once(autoload: bool = False) -> dict[str, Any]:
    """One run of the suite; ``autoload=True``: every installed plugin autoloaded (the cost it avoids)."""
    env = suite_env(autoload)
    argv = pytest_argv(autoload=autoload)
    t0 = wall_seconds()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    wall = wall_seconds() - t0
    if done.returncode != 0:
        missing = re.search(r"No module named '([\w.]+)'", done.stderr + done.stdout)
        if missing:
            raise MissingExtra(missing.group(1))
        output = (done.stdout[-3000:] + done.stderr[-3000:]).strip() or "(no output)"
        raise RuntimeError(f"the warped tests failed (exit {done.returncode}):\n{output}")
    found = re.search(r"(\d+) passed.* in ([\d.]+)s", done.stdout)
    return {"wall_s": wall, "pytest_s": float(found.group(2)) if found else float("nan"),
            "passed": int(found.group(1)) if found else 0}


def import_seconds() -> float:
    """Wall time of a bare ``python -c 'import pytest, trio, quart_trio, warren_sim.http.app'`` (the floor)."""
    t0 = wall_seconds()
    subprocess.run([sys.executable, "-c", "import pytest, pytest_trio, trio, quart_trio, hypothesis, "
                    "warren_sim.http.app"], check=True, cwd=REPO, env=bench_env(), timeout=120)
    return wall_seconds() - t0


def run(opts: Options) -> dict[str, Any]:
    reps = opts.reps(5, 1)
    runs, bare, imports = [], [], []
    for _ in range(reps):  # interleaved, so each row sees the same noise
        runs.append(once())
        bare.append(once(autoload=True))
        imports.append(import_seconds())
    wall = summary(r["wall_s"] for r in runs)
    own = summary(r["pytest_s"] for r in runs)
    autoloaded = summary(r["wall_s"] for r in bare)
    imp = summary(imports)
    print_table(f"warp: {runs[0]['passed']} expiry tests under the autojump clock ({reps} repeat(s); median (min-max))",
                ["measure", "seconds"],
                [["wall, whole pytest subprocess", fmt_stat(wall, 2)], ["pytest's own duration", fmt_stat(own, 2)],
                 ["wall, every installed plugin autoloaded (not the suite's way)", fmt_stat(autoloaded, 2)],
                 ["floor: python + imports only", fmt_stat(imp, 2)]])
    targets = [target("warped expiry tests, wall", wall["median"], "<", TARGET_S, " s")]
    targets_table(targets)
    out: dict[str, Any] = {"command": "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 " + " ".join(pytest_argv()[1:]),
                           "passed": runs[0]["passed"], "wall_s": wall, "pytest_s": own,
                           "plugin_autoload_wall_s": autoloaded, "imports_s": imp, "runs": runs,
                           "runs_plugin_autoload": bare, "targets": targets}
    if opts.profile:
        opts.out.mkdir(parents=True, exist_ok=True)
        path = opts.out / "warp_profile.txt"
        subprocess.run([sys.executable, "-m", "pyinstrument", "-r", "text", "-o", str(path), "-m", "pytest",
                        *pytest_argv()[3:]], cwd=REPO, env=suite_env(), timeout=300, capture_output=True)
        out["profile"] = str(path)
        print(f"profile: {path}")
    return out
