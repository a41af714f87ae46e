"""The runtime's layout holds: small classes, no import cycle, one protocol that live and stored runs both keep.

pyproject's import-linter contract pins which runtime module may import which; these check what it cannot say.
"""

import ast
import inspect
import pathlib

from warren_sim.runtime.api import RunAPI
from warren_sim.runtime.run import Run
from warren_sim.runtime.stored import StoredRun

ROOT = pathlib.Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "warren_sim" / "runtime"
MAX_CLASS_LINES = 300


def _runtime_imports(path: pathlib.Path) -> set[str]:
    """The runtime modules ``path`` imports (relative imports, TYPE_CHECKING ones too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(alias.name for alias in node.names)
    return out & {p.stem for p in RUNTIME.glob("*.py")}


def test_no_class_in_the_runtime_is_over_300_lines():
    """Each job of a run is a small class of its own (the facade, the loop, the desk, the mailbox, ...)."""
    long = []
    for path in sorted(RUNTIME.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > MAX_CLASS_LINES:
                long.append(f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert long == []


def test_the_runtime_modules_import_no_cycle():
    """No chain of imports between the runtime's modules comes back to where it started (type-only ones count)."""
    graph = {p.stem: _runtime_imports(p) for p in RUNTIME.glob("*.py")}
    assert graph["run"] >= {"loop", "desk", "mailbox", "state"}  # the scanner sees the facade's parts

    def cycle_from(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        for nxt in sorted(graph.get(node, ())):
            found = cycle_from(nxt, [*path, node])
            if found:
                return found
        return None

    cycles = [c for m in sorted(graph) if (c := cycle_from(m, []))]
    assert cycles == []


def test_live_and_stored_runs_both_implement_the_routes_protocol():
    """Every method of RunAPI is on Run and on StoredRun, with the same parameters (mypy checks the types, and
    the attributes, when the manager holds either as a RunAPI)."""
    methods = {n: f for n, f in vars(RunAPI).items() if inspect.isfunction(f) and not n.startswith("_")}
    assert {"claim", "claim_many", "submit", "wait_observation", "ended_poll", "spectator_slot"} <= set(methods)
    for cls in (Run, StoredRun):
        for name, ours in methods.items():
            theirs = vars(cls).get(name)
            assert inspect.isfunction(theirs), f"{cls.__name__} does not define {name} itself"
            assert list(inspect.signature(theirs).parameters) == list(inspect.signature(ours).parameters), \
                f"{cls.__name__}.{name}"
    assert "__getattr__" not in vars(StoredRun)  # nothing is forwarded by a list of names
