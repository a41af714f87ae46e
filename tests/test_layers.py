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


def _warren_imports(path: pathlib.Path) -> set[str]:
    """Every warren_sim module ``path`` imports, absolute or relative, at any depth of the file."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    if path.name == "__init__.py":
        package = package.rsplit(".", 1)[0] + ".__init__"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names if alias.name.startswith("warren_sim"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: -node.level]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            if module.startswith("warren_sim"):
                out.add(module)
                out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def test_nothing_imports_the_cli():
    """No module of warren_sim (outside warren_sim/cli itself) or bench/ imports warren_sim.cli, even lazily."""
    offenders = []
    for p in [*(ROOT / "warren_sim").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        if (ROOT / "warren_sim" / "cli") in p.parents:
            continue
        hits = [m for m in _warren_imports(p) if m == "warren_sim.cli" or m.startswith("warren_sim.cli.")]
        if hits:
            offenders.append(f"{p.relative_to(ROOT)}: {sorted(hits)}")
    assert offenders == []


def test_the_cli_import_check_sees_relative_imports():
    """The scanner above resolves ``from ..cli import x`` in warren_sim/engine/x.py to warren_sim.cli."""
    sample = ROOT / "warren_sim" / "engine" / "records.py"
    assert "warren_sim.engine.records" not in _warren_imports(sample)  # a module does not import itself
    assert "warren_sim.cli" not in _warren_imports(sample)
    assert "warren_sim.cli._common" in _warren_imports(ROOT / "warren_sim" / "cli" / "run.py")
