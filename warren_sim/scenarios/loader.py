"""Load ``scenarios/<name>/scenario.toml`` (+ ``solution.py``, + optional ``expand.py``).

A malformed file must fail at load with the file, the path inside it and what was expected, never
with a traceback: scenario authors are users too. So every read goes through ``_Reader``, which
knows its path (``agents[1].role``) and phrases errors the same way everywhere.

``expand.py`` (optional) lets a scenario grow with its parameters: ``expand(data, params) -> data``
runs on the raw TOML data before validation, so generated worlds are validated like written ones.
"""

from __future__ import annotations

import difflib
import importlib.util
import math
import os
import re
import tomllib
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs

from ..engine import spec as S
from ..engine.rules import generic_names
from ..engine.world import World, WorldError

DATA_FILE = "scenario.toml"
_PY_TYPES: dict[str, type[Any] | tuple[type[Any], ...]] = {"int": int, "float": (int, float), "str": str, "bool": bool}
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TRUE_TEXTS, _FALSE_TEXTS = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


class ParamText(str):
    """A parameter value as typed on a command line (``--param agents=1000``).

    ``validate_params`` reads it by the parameter's declared type (``"1000"`` is the int 1000 for an
    int parameter and the string ``"1000"`` for a str one); any other value must already have the
    declared type, as JSON from an API gives it.
    """


class ScenarioError(ValueError):
    """A scenario that cannot be loaded; the message names the file, the key path and the expectation."""


def bundled_scenarios_dir() -> Path:
    """The scenarios shipped with WARREN: the repo's top-level ``scenarios/``, installed as the package
    ``warren_sim._bundled_scenarios`` (pyproject maps it; see docs/scenarios.md). From a source checkout
    without an install the directory itself is used."""
    spec = importlib.util.find_spec("warren_sim._bundled_scenarios")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    return Path(__file__).resolve().parents[2] / "scenarios"


def scenario_dirs() -> list[Path]:
    """Where scenarios are looked up, first match wins: ``$WARREN_SCENARIOS`` (os.pathsep-separated; ``warren
    --scenarios DIR`` puts DIR in front of it), then the bundled scenarios."""
    dirs = [Path(p) for p in os.environ.get("WARREN_SCENARIOS", "").split(os.pathsep) if p]
    dirs.append(bundled_scenarios_dir())
    return dirs


def list_scenarios() -> list[str]:
    names: dict[str, None] = {}
    for d in scenario_dirs():
        if d.is_dir():
            for child in sorted(d.iterdir()):
                if (child / DATA_FILE).is_file():
                    names.setdefault(child.name, None)
    return sorted(names)


def find_scenario(name: str) -> Path:
    candidate = Path(name)
    if (candidate / DATA_FILE).is_file():
        return candidate
    for d in scenario_dirs():
        if (d / name / DATA_FILE).is_file():
            return d / name
    raise ScenarioError(f"unknown scenario {name!r}; known scenarios: {', '.join(list_scenarios()) or 'none'}")


class _Reader:
    def __init__(self, file: str, data: Any, path: str = "") -> None:
        self.file, self.data, self.path = file, data, path

    def fail(self, key: str, expected: str, got: Any = attrs.NOTHING) -> ScenarioError:
        where = f"{self.path}.{key}" if self.path and key else (self.path or key or "(top level)")
        tail = "" if got is attrs.NOTHING else f", got {_show(got)}"
        return ScenarioError(f"{self.file}: {where}: expected {expected}{tail}")

    def get(self, key: str, kind: Any, expected: str, default: Any = attrs.NOTHING) -> Any:
        if not isinstance(self.data, dict):
            raise self.fail("", "a table")
        if key not in self.data:
            if default is attrs.NOTHING:
                raise self.fail(key, f"{expected} (this key is required)")
            return default
        value = self.data[key]
        if not isinstance(value, kind) or (kind in (int, (int, float)) and isinstance(value, bool)):
            raise self.fail(key, expected, value)
        return value

    def string(self, key: str, default: Any = attrs.NOTHING) -> str:
        return self.get(key, str, "a string", default)

    def integer(self, key: str, default: Any = attrs.NOTHING, minimum: int | None = 0) -> int:
        value = self.get(key, int, "an integer", default)
        if minimum is not None and value < minimum:
            raise self.fail(key, f"an integer >= {minimum}", value)
        return value

    def strings(self, key: str, default: Any = attrs.NOTHING) -> tuple[str, ...]:
        value = self.get(key, list, "a list of strings", default)
        for i, v in enumerate(value):
            if not isinstance(v, str):
                raise self.fail(f"{key}[{i}]", "a string", v)
        return tuple(value)

    def table(self, key: str, default: Any = attrs.NOTHING) -> _Reader:
        value = self.get(key, dict, "a table", default)
        return _Reader(self.file, value, f"{self.path}.{key}" if self.path else key)

    def tables(self, key: str, default: Any = attrs.NOTHING) -> list[_Reader]:
        value = self.get(key, list, "an array of tables ([[" + key + "]])", default)
        out = []
        for i, v in enumerate(value):
            where = f"{self.path}.{key}[{i}]" if self.path else f"{key}[{i}]"
            if not isinstance(v, dict):
                raise ScenarioError(f"{self.file}: {where}: expected a table, got {_show(v)}")
            out.append(_Reader(self.file, v, where))
        return out

    def only(self, *allowed: str) -> None:
        for key in self.data:
            if key not in allowed:
                raise self.fail(key, f"one of the known keys ({', '.join(allowed)}); this key is unknown")

    def int_table(self, key: str) -> tuple[tuple[str, int], ...]:
        t = self.table(key, {})
        out = []
        for k, v in t.data.items():
            if not isinstance(v, int) or isinstance(v, bool):
                raise t.fail(k, "an integer", v)
            out.append((k, v))
        return tuple(out)


def _show(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) < 60 else text[:57] + '...'}"


@attrs.frozen
class LoadedScenario:
    """A validated scenario: its spec (for the given parameters) and where its policies live."""

    name: str
    directory: Path
    spec: S.ScenarioSpec
    params: dict[str, Any]
    solution: ModuleType | None


def _load_module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validate_params(declared: tuple[S.ParamSpec, ...], given: dict[str, Any], scenario: str) -> dict[str, Any]:
    """Fill defaults and check types and bounds; errors name the valid parameters.

    Values wrapped in ``ParamText`` (command-line text) are first read as the declared type. Float
    parameters come out as floats even when given as integers, so a run's recorded params do not
    depend on how they were typed.
    """
    by_name = {p.name: p for p in declared}
    for key in given:
        if key not in by_name:
            if not declared:
                raise ScenarioError(f"scenario {scenario} has no parameter {key!r}; it takes no parameters")
            valid = ", ".join(f"{p.name} ({p.type}, default {p.default!r})" for p in declared)
            close = difflib.get_close_matches(str(key), list(by_name), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ScenarioError(f"scenario {scenario} has no parameter {key!r}; its parameters: {valid}{hint}")
    out: dict[str, Any] = {}
    for p in declared:
        value = given.get(p.name, p.default)
        if isinstance(value, ParamText):
            value = _from_text(p, value, scenario)
        out[p.name] = check_param_value(p, value, f"parameter {p.name} of {scenario}")
    return out


def check_param_value(p: S.ParamSpec, value: Any, what: str) -> Any:
    """``value`` if it has ``p``'s type and lies within its bounds and choices; else a teaching error."""
    want = _PY_TYPES[p.type]
    if isinstance(value, bool) and p.type != "bool" or not isinstance(value, want):
        raise ScenarioError(f"{what} must be a {p.type}, got {_show(value)}")
    if p.type == "float":
        if not math.isfinite(value):
            raise ScenarioError(f"{what} must be a finite number, got {value!r}")
        value = float(value)
    low, high = p.minimum, p.maximum
    if low is not None and value < low or high is not None and value > high:
        if low is not None and high is not None:
            bounds = f"between {low} and {high}"
        else:
            bounds = f"at least {low}" if low is not None else f"at most {high}"
        raise ScenarioError(f"{what} must be {bounds}, got {value}")
    if p.choices and value not in p.choices:
        raise ScenarioError(f"{what} must be one of {list(p.choices)}, got {value!r}")
    return value


def _from_text(p: S.ParamSpec, text: str, scenario: str) -> Any:
    """Command-line text -> a value of the parameter's declared type."""
    if p.type == "str":
        return str(text)
    word = text.strip()
    example = f"--param {p.name}={str(p.default).lower() if p.type == 'bool' else p.default}"
    if p.type == "bool":
        if word.lower() in _TRUE_TEXTS:
            return True
        if word.lower() in _FALSE_TEXTS:
            return False
        raise ScenarioError(f"parameter {p.name} of {scenario} must be a bool (true or false), got {text!r}; "
                            f"for example {example}")
    try:
        return int(word) if p.type == "int" else float(word)
    except ValueError:
        raise ScenarioError(f"parameter {p.name} of {scenario} must be a {p.type}, got {text!r}; "
                            f"for example {example}") from None


def load_scenario(name: str, params: dict[str, Any] | None = None) -> LoadedScenario:
    directory = find_scenario(name)
    file = directory / DATA_FILE
    shown = str(file)
    try:
        raw = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{shown}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"{shown}: not UTF-8 text: {exc}") from None
    top = _Reader(shown, raw)
    declared = _params(top)
    values = validate_params(declared, dict(params or {}), directory.name)
    expand_file = directory / "expand.py"
    if expand_file.is_file():
        module = _load_module(expand_file, f"warren_scenario_{directory.name}_expand")
        if not callable(getattr(module, "expand", None)):
            raise ScenarioError(f"{expand_file}: expected a function expand(data, params) -> data")
        try:
            raw = module.expand(raw, dict(values))
        except ValueError as exc:  # expand's way to refuse a combination of parameters, with a reason
            raise ScenarioError(f"scenario {directory.name}: parameters {values}: {exc}") from None
        if not isinstance(raw, dict):
            raise ScenarioError(f"{expand_file}: expand(data, params) must return the scenario data (a dict), "
                                f"got {_show(raw)}")
        top = _Reader(shown, raw)
    spec = build_spec(top, declared)
    return LoadedScenario(directory.name, directory, spec, values, load_solution(directory))


def load_solution(directory: Path) -> ModuleType | None:
    """The scenario's own policies (its ``solution.py``), loaded afresh, or None when it has none."""
    solution_file = directory / "solution.py"
    return _load_module(solution_file, f"warren_scenario_{directory.name}_solution") \
        if solution_file.is_file() else None


def _params(top: _Reader) -> tuple[S.ParamSpec, ...]:
    declared: list[S.ParamSpec] = []
    for r in top.tables("params", []):
        p = _param(r)
        if any(q.name == p.name for q in declared):
            raise r.fail("name", "a unique parameter name", p.name)
        declared.append(p)
    return tuple(declared)


def _param(r: _Reader) -> S.ParamSpec:
    r.only("name", "type", "default", "description", "min", "max", "choices")
    name = r.string("name")
    if not _PARAM_NAME.match(name):
        raise r.fail("name", "a parameter name of letters, digits and _ (not starting with a digit)", name)
    kind = r.string("type")
    if kind not in _PY_TYPES:
        raise r.fail("type", "one of int, float, str, bool", kind)
    default = r.get("default", _PY_TYPES[kind], f"a {kind}")
    low = r.get("min", (int, float), "a number", None)
    high = r.get("max", (int, float), "a number", None)
    choices = r.strings("choices", ())
    if kind not in ("int", "float"):
        for key in ("min", "max"):
            if key in r.data:
                raise r.fail(key, f"no {key} for a {kind} parameter (only int and float parameters have bounds)",
                             r.data[key])
    if choices and kind != "str":
        raise r.fail("choices", "no choices for a non-str parameter (only str parameters have choices)", choices)
    if low is not None and high is not None and low > high:
        raise r.fail("max", f"a number >= min ({low})", high)
    spec = S.ParamSpec(name, kind, float(default) if kind == "float" else default, r.string("description", ""),
                       low, high, choices)
    try:
        check_param_value(spec, default, "the default")
    except ScenarioError as exc:
        raise r.fail("default", f"a default that is a valid value: {exc}", default) from None
    return spec


def build_spec(top: _Reader, declared: tuple[S.ParamSpec, ...]) -> S.ScenarioSpec:
    top.only("name", "title", "premise", "notes", "conventions", "params", "spaces", "places", "links",
             "items", "structures", "roles", "agents", "tools", "objectives")
    conv_r = top.table("conventions", {})
    fields = [f.name for f in attrs.fields(S.Conventions)]
    conv_r.only(*fields)
    # A zero tick or idle wake would let a run repeat one instant forever: time must move.
    at_least_1 = ("tick_ms", "idle_wake_ms")
    conv = S.Conventions(**{f: conv_r.integer(f, getattr(S.Conventions(), f), minimum=1 if f in at_least_1 else 0)
                            for f in fields})

    spaces = []
    for r in top.tables("spaces"):
        r.only("name", "width", "height", "description")
        spaces.append(S.SpaceSpec(r.string("name"), r.integer("width", minimum=1), r.integer("height", minimum=1),
                                  r.string("description", "")))
    places = []
    for r in top.tables("places"):
        r.only("name", "space", "x", "y", "w", "h", "description")
        places.append(S.PlaceSpec(r.string("name"), r.string("space"), r.integer("x"), r.integer("y"),
                                  r.integer("w", 1, minimum=1), r.integer("h", 1, minimum=1),
                                  r.string("description", "")))
        _within_grid(r, places[-1], spaces)
    links = []
    gates: list[tuple[_Reader, S.GateSpec]] = []
    for r in top.tables("links", []):
        r.only("id", "a", "b", "steps", "gate")
        gate = None
        if "gate" in r.data:
            g = r.table("gate")
            g.only("structure", "field", "at_least")
            gate = S.GateSpec(g.string("structure"), g.string("field"), g.integer("at_least"))
            gates.append((g, gate))
        links.append(S.LinkSpec(r.string("id"), r.string("a"), r.string("b"), r.integer("steps", 1), gate))
    structures = []
    for r in top.tables("structures", []):
        r.only("id", "kind", "name", "place", "fields", "maxima", "secret")
        structures.append(S.StructureSpec(r.string("id"), r.string("kind"), r.string("name"), r.string("place"),
                                          r.int_table("fields"), r.int_table("maxima"), r.string("secret", "")))
    tools = []
    for r in top.tables("tools", []):
        r.only("name", "description", "lane", "durative", "duration_ms", "structure_kinds", "item_kinds",
               "needs_held", "needs_code", "field", "add")
        name = r.string("name")
        if name in generic_names():
            raise r.fail("name", f"a name other than the generic tools ({', '.join(generic_names())})", name)
        lane = r.string("lane", "body")
        if lane not in S.LANES:
            raise r.fail("lane", f"one of {', '.join(S.LANES)}", lane)
        tools.append(S.WorkToolSpec(name, r.string("description"), lane, r.get("durative", bool, "a boolean", True),
                                    r.integer("duration_ms", 1000), r.strings("structure_kinds", ()),
                                    r.strings("item_kinds", ()), r.strings("needs_held", ()),
                                    r.get("needs_code", bool, "a boolean", False), r.string("field", ""),
                                    r.integer("add", 1, minimum=None)))
    tool_names = [t.name for t in tools]
    roles = []
    for r in top.tables("roles"):
        r.only("name", "description", "tools")
        role_tools = r.strings("tools", ())
        for i, t in enumerate(role_tools):
            if t not in tool_names:
                raise r.fail(f"tools[{i}]", f"one of the scenario's [[tools]] ({', '.join(tool_names) or 'none'})", t)
        roles.append(S.RoleSpec(r.string("name"), r.string("description", ""), role_tools))
    role_names = [x.name for x in roles]
    agents = []
    for r in top.tables("agents"):
        r.only("id", "role", "name", "at", "notes")
        role = r.string("role")
        if role not in role_names:
            raise r.fail("role", f"one of the roles ({', '.join(role_names)})", role)
        agents.append(S.AgentSpec(r.string("id"), role, r.string("name"), r.string("at"), r.string("notes", "")))
    items = []
    for r in top.tables("items", []):
        r.only("id", "kind", "name", "at", "container")
        items.append(S.ItemSpec(r.string("id"), r.string("kind"), r.string("name", r.data.get("kind", "")),
                                r.string("at"), r.get("container", bool, "a boolean", False)))
    structure_ids = [s.id for s in structures]
    for g, gate in gates:
        if gate.structure not in structure_ids:
            raise g.fail("structure", f"one of the structures ({', '.join(structure_ids) or 'none'})", gate.structure)
    objectives = []
    for r in top.tables("objectives"):
        r.only("id", "description", "structure", "field", "target", "deadline_ms")
        sid = r.string("structure")
        if sid not in structure_ids:
            raise r.fail("structure", f"one of the structures ({', '.join(structure_ids) or 'none'})", sid)
        objectives.append(S.ObjectiveSpec(r.string("id"), r.string("description"), sid, r.string("field"),
                                          r.integer("target", minimum=1), r.get("deadline_ms", int, "an integer", None)))
    _unique(top, "agents", [a.id for a in agents])
    _unique(top, "items", [i.id for i in items])
    _unique(top, "places", [p.name for p in places], "name")
    _unique(top, "structures", structure_ids)
    clash = set(a.id for a in agents) & set(i.id for i in items)
    if clash:
        raise top.fail("agents", f"ids distinct from item ids; both use {sorted(clash)}")
    spec = S.ScenarioSpec(
        name=top.string("name"), title=top.string("title", top.data.get("name", "")), premise=top.string("premise"),
        spaces=tuple(spaces), places=tuple(places), agents=tuple(agents), roles=tuple(roles),
        objectives=tuple(objectives), links=tuple(links), items=tuple(items), structures=tuple(structures),
        tools=tuple(tools), conventions=conv, params=declared, notes=top.string("notes", ""))
    try:
        World(spec, {r.name: () for r in roles})
    except WorldError as exc:
        raise ScenarioError(f"{top.file}: {exc}") from None
    return spec


def _within_grid(r: _Reader, p: S.PlaceSpec, spaces: list[S.SpaceSpec]) -> None:
    """A place lies on a declared space, wholly inside its grid (the error names the key to fix)."""
    space = next((s for s in spaces if s.name == p.space), None)
    if space is None:
        raise r.fail("space", f"one of the spaces ({', '.join(s.name for s in spaces)})", p.space)
    if p.x + p.w > space.width:
        raise r.fail("x", f"a column that keeps the place inside the {space.width}x{space.height} grid of "
                     f"{space.name} (x + w <= {space.width})", p.x)
    if p.y + p.h > space.height:
        raise r.fail("y", f"a row that keeps the place inside the {space.width}x{space.height} grid of "
                     f"{space.name} (y + h <= {space.height})", p.y)


def _unique(top: _Reader, key: str, ids: list[str], field: str = "id") -> None:
    seen: set[str] = set()
    for i, x in enumerate(ids):
        if x in seen:
            raise ScenarioError(f"{top.file}: {key}[{i}].{field}: expected a unique {field}, got {x!r} a second time")
        seen.add(x)
