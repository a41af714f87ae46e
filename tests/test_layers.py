"""The engine stays pure and the layers point down (DESIGN section 1)."""

import ast
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = {"trio", "quart", "quart_trio", "hypercorn", "httpx", "socket", "asyncio", "time", "threading"}


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_engine_imports_no_io_async_or_clock():
    """No module of warren_sim.engine imports trio, quart, hypercorn, httpx, socket, asyncio or time."""
    offenders = {p.name: _imports(p) & FORBIDDEN for p in (ROOT / "warren_sim" / "engine").glob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_engine_imports_nothing_above_it():
    """The engine never imports another warren_sim layer."""
    for p in (ROOT / "warren_sim" / "engine").glob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                assert not node.module.startswith("warren_sim"), f"{p.name} imports {node.module}"
            if isinstance(node, ast.ImportFrom) and node.level >= 2:
                raise AssertionError(f"{p.name} imports from above the engine: {node.module}")


def test_only_the_clock_module_reads_wall_time():
    """time.time()/time.monotonic()/perf_counter appear only in warren_sim/runtime/clock.py."""
    hits = []
    for p in (ROOT / "warren_sim").rglob("*.py"):
        text = p.read_text(encoding="utf-8")
        for needle in ("time.time(", "time.monotonic(", "time.perf_counter(", "datetime.now("):
            if needle in text and p.name != "clock.py":
                hits.append(f"{p.relative_to(ROOT)}: {needle}")
    assert hits == []


def test_import_linter_contracts_hold():
    """import-linter's contracts in pyproject.toml (layers, pure engine, client on protocol only) are kept."""
    exe = pathlib.Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
