"""The policy protocol in one place: what ``--policy`` names, and a simulation wired to its policies.

A *policy factory* is ``factory(agent_id, role, briefing) -> policy``; a *policy* is any object with
``decide(observation) -> command``, where a command is ``{"action": str, "args": {...}}``,
``{"sleep_ms": int}`` or ``{"noop": True}`` (or ``{"invalid": "<reason>", "raw": ...}``: "I have no
usable command", recorded as a noop; see :func:`warren_sim.engine.headless.answer_or_noop`).
docs/policies.md is the user's description, with a tested example.

:func:`resolve_policy` is the only reader of a ``--policy`` spec (``warren run``, ``eval``, ``agent``
and the server's NPCs all call it), and :func:`instantiate` the only place a simulation is built together
with its policies (the CLI, the runtime, replay, bench and tests). A bad spec, a factory with the wrong
signature or a factory whose product has no ``decide`` is a :class:`PolicyError` that says what the
contract is, never a traceback.

A *team* gives agents different policies: ``SPEC`` is every agent's default, ``ROLE=SPEC`` a role's and
``AGENT=SPEC`` one agent's (an agent's beats its role's, which beats the default); :func:`parse_team` reads
the command line's repeated ``--policy``, and a mapping (``{"courier": "solution", "*": "none"}``, a served
run's ``npc_policy``) says the same with ``*`` for the default. A *population* is a policy file shipped in
``scenarios/<name>/populations/NAME.py`` (``population:NAME``) or anywhere else (``path/to/NAME.py``): the
partners a focal agent is benchmarked with (docs/benchmarking.md).
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import inspect
import os
import random
import shlex
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from ..engine import NoopPolicy, Policy, RandomPolicy, Simulation, briefing
from .loader import LoadedScenario, ScenarioError

PolicyFactory = Callable[[str, str, dict[str, Any]], Any]

#: Built-in policy names that live in optional modules: name -> (``module:factory``, the extra to install).
REGISTRY: dict[str, tuple[str, str]] = {
    "llm": ("warren_sim.llm:factory", "llm"),
}

BUILTIN = ("solution", "random", "none")
FORMS = ("'solution', 'random', 'none', " + ", ".join(repr(n) for n in REGISTRY)
         + " or 'module:factory' (or 'population:NAME', 'path/to/file.py[:factory]')")
POPULATIONS = "populations"  # scenarios/<name>/populations/NAME.py: the bundled partner populations
POPULATION_PREFIX = "population:"
#: Every agent's policy in a team mapping (``{"*": "none", "courier": "solution"}``).
DEFAULT_KEY = "*"
#: What a team may be given as: one spec, a resolved factory, ``{key: spec}`` or ``["SPEC", "ROLE=SPEC", ...]``.
TeamSpec = str | PolicyFactory | Mapping[str, str] | Sequence[str]
CONTRACT = ("a policy factory is factory(agent_id, role, briefing) -> an object with decide(observation) -> "
            "command (see docs/policies.md)")


class PolicyError(ScenarioError):
    """A ``--policy`` that cannot drive an agent; the message teaches the contract."""


def resolve_policy(spec: str, loaded: LoadedScenario | None = None, seed: int = 0) -> PolicyFactory:
    """``--policy SPEC`` -> a checked factory ``(agent_id, role, briefing) -> policy``.

    ``solution`` is the scenario's ``solution.py:make_policy`` (needs ``loaded``), ``random`` a seeded
    random policy per agent (from ``seed``), ``none`` the noop policy, a registry name (``llm``) its
    optional module, ``population:NAME`` the scenario's bundled population, ``path/file.py[:factory]``
    a policy file anywhere (``factory`` by default), and ``module:factory`` any importable callable; the
    current directory is on the import path for it, so ``--policy mypolicy:factory`` finds ``./mypolicy.py``.
    A factory that takes an ``rng`` keyword gets a ``random.Random`` seeded by the run's seed and the agent
    (as ``random`` is): a noisy policy stays deterministic.
    """
    if spec == "solution":
        if loaded is None or loaded.solution is None:
            name = loaded.name if loaded is not None else "this scenario"
            raise PolicyError(f"scenario {name} has no solution.py; use --policy random, none or module:factory")
        factory = getattr(loaded.solution, "make_policy", None)
        if not callable(factory):
            raise PolicyError(f"{loaded.directory / 'solution.py'}: expected make_policy(agent_id, role, briefing)")
        return _checked(factory, f"{loaded.name}'s solution.py:make_policy", seed)
    if spec == "random":
        return lambda agent_id, role, brief: RandomPolicy(seed * 1_000_003 + sum(map(ord, agent_id)))
    if spec == "none":
        return lambda agent_id, role, brief: NoopPolicy()
    if spec.startswith(POPULATION_PREFIX):
        name = spec[len(POPULATION_PREFIX):]
        found = population_files(loaded) if loaded is not None else {}
        if name not in found:
            where = loaded.name if loaded is not None else "this scenario"
            raise PolicyError(f"policy {spec!r}: {where} has no population {name!r}; its populations: "
                              f"{', '.join(found) or 'none'} (scenarios/<name>/populations/NAME.py)")
        return _checked(_load_file(found[name], "factory"), f"population {name}", seed)
    if _is_file_spec(spec):
        path, _, attr = spec.rpartition(":") if not spec.endswith(".py") else (spec, ":", "factory")
        return _checked(_load_file(Path(path).expanduser(), attr or "factory"), f"policy {spec!r}", seed)
    if spec in REGISTRY:
        ref, extra = REGISTRY[spec]
        try:
            importlib.import_module(ref.partition(":")[0])
        except ImportError as exc:
            raise PolicyError(f"--policy {spec} needs an optional part of WARREN: pip install "
                              f"'warren-sim[{extra}]' ({exc})") from None
        return _checked(_load(ref), f"--policy {spec}", seed)
    return _checked(_load(spec), f"--policy {spec}", seed)


def _is_file_spec(spec: str) -> bool:
    """``x.py`` or ``x.py:attr`` (a path, not a module name): a policy file outside any package."""
    path = spec if spec.endswith(".py") else spec.rpartition(":")[0]
    return path.endswith(".py")


_FILES: dict[tuple[str, int, int], ModuleType] = {}


def _load_file(path: Path, attr: str) -> Callable[..., Any]:
    """``attr`` of the Python file at ``path``, executed once per content (sweeps resolve it per seed)."""
    try:
        st = path.stat()
    except OSError as exc:
        raise PolicyError(f"policy file {path}: cannot read it ({exc.strerror or exc})") from None
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    module = _FILES.get(key)
    if module is None:
        digest = hashlib.sha256(key[0].encode()).hexdigest()[:12]
        spec = importlib.util.spec_from_file_location(f"warren_policy_{path.stem}_{digest}", path)
        if spec is None or spec.loader is None:
            raise PolicyError(f"policy file {path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:  # the file raised while loading: show it, not a traceback
            raise PolicyError(f"policy file {path}: loading it raised {type(exc).__name__}: {exc}") from None
        _FILES[key] = module
    target = getattr(module, attr, None)
    if target is None:
        raise PolicyError(f"policy file {path} has no {attr!r}; {CONTRACT}")
    return target


def population_files(loaded: LoadedScenario | None) -> dict[str, Path]:
    """The scenario's bundled populations by name, sorted: ``<scenario dir>/populations/NAME.py``."""
    if loaded is None:
        return {}
    folder = loaded.directory / POPULATIONS
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")}


def describe_population(path: Path) -> str:
    """The first paragraph of a population file's docstring (what it does), read without running the file."""
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return ""
    first = doc.strip().split("\n\n")[0] if doc else ""
    return " ".join(line.strip() for line in first.splitlines())


def _load(ref: str) -> Callable[..., Any]:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name or not attr:
        raise PolicyError(f"policy {ref!r}: expected {FORMS}; {CONTRACT}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)  # a policy module next to the user is found, as `python -m` would
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyError(f"policy {ref!r}: cannot import {module_name} ({exc}); the module must be importable "
                          f"from the current directory ({cwd}) or an installed package") from None
    except Exception as exc:  # the user's module raised while importing: show it, not a traceback
        raise PolicyError(f"policy {ref!r}: importing {module_name} raised {type(exc).__name__}: {exc}") from None
    target = getattr(module, attr, None)
    if target is None:
        raise PolicyError(f"policy {ref!r}: module {module_name} has no attribute {attr!r}; {CONTRACT}")
    return target


def _checked(factory: Any, what: str, seed: int = 0) -> PolicyFactory:
    """The factory, wrapped so a wrong signature or a product without ``decide`` is a PolicyError; one that
    takes an ``rng`` keyword gets the agent's seeded generator."""
    if not callable(factory):
        raise PolicyError(f"{what} is a {type(factory).__name__}, not callable; {CONTRACT}")
    wants_rng = False
    try:
        signature = inspect.signature(factory)
        wants_rng = "rng" in signature.parameters
        signature.bind("agent-1", "role", {}, **({"rng": None} if wants_rng else {}))
    except TypeError as exc:
        raise PolicyError(f"{what} cannot be called as factory(agent_id, role, briefing): {exc}; {CONTRACT}") \
            from None
    except ValueError:  # no signature to inspect (a builtin): find out when it is called
        pass

    def make(agent_id: str, role: str, brief: dict[str, Any]) -> Any:
        if wants_rng:
            policy = factory(agent_id, role, brief, rng=random.Random(agent_seed(seed, agent_id)))
        else:
            policy = factory(agent_id, role, brief)
        if not callable(getattr(policy, "decide", None)):
            raise PolicyError(f"{what} returned {type(policy).__name__} {policy!r:.60}, which has no "
                              f"decide(observation) method; {CONTRACT}")
        return policy

    return make


def agent_seed(seed: int, agent_id: str) -> int:
    """The seed of one agent's generator in a run (``random`` and the ``rng`` keyword both use it)."""
    return seed * 1_000_003 + sum(map(ord, agent_id))


def parse_team(specs: str | Sequence[str]) -> dict[str, str]:
    """``["solution", "engineer=mypolicy:factory"]`` -> ``{"*": "solution", "engineer": "mypolicy:factory"}``.

    Each text is ``SPEC`` (every agent's default) or ``KEY=SPEC`` with a role or an agent id as KEY (a
    spec itself never holds ``=``). A key given twice is an error; no default means ``solution``.
    """
    texts = [specs] if isinstance(specs, str) else list(specs)
    team: dict[str, str] = {}
    for text in texts:
        key, sep, spec = text.partition("=")
        key, spec = (key.strip(), spec.strip()) if sep else (DEFAULT_KEY, text.strip())
        if not key or not spec:
            raise PolicyError(f"--policy {text!r}: expected SPEC, ROLE=SPEC or AGENT=SPEC (for example "
                              "--policy engineer=mypolicy:factory)")
        if key in team:
            what = "a default policy" if key == DEFAULT_KEY else f"a policy for {key}"
            raise PolicyError(f"--policy {text!r}: {what} is given twice ({team[key]!r} and {spec!r}); give it once")
        team[key] = spec
    return team


def team_text(team: Mapping[str, str]) -> str:
    """A team as one text of ``--policy`` words, the default first (``solution engineer=mypolicy:factory``,
    shell-quoted): what a sweep's task carries, and what :func:`as_factory` reads back."""
    ordered = sorted(team.items(), key=lambda kv: (kv[0] != DEFAULT_KEY, kv[0]))
    return shlex.join(spec if key == DEFAULT_KEY else f"{key}={spec}" for key, spec in ordered)


def _cast(loaded: LoadedScenario) -> str:
    roles = ", ".join(r.name for r in loaded.spec.roles)
    ids = [a.id for a in loaded.spec.agents]
    agents = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
    return f"{loaded.name}'s roles: {roles}; its agents: {agents}"


def resolve_team(team: Mapping[str, str], loaded: LoadedScenario, seed: int = 0) -> PolicyFactory:
    """A team mapping -> one factory that gives each agent its policy: its own entry, else its role's, else
    ``*`` (``solution`` when absent). A key that is neither a role nor an agent, or a spec that does not
    resolve, is a PolicyError naming the scenario's roles and agents."""
    roles = {r.name for r in loaded.spec.roles}
    agents = {a.id for a in loaded.spec.agents}
    factories: dict[str, PolicyFactory] = {}
    for key, spec in team.items():
        if key != DEFAULT_KEY and key not in roles and key not in agents:
            raise PolicyError(f"--policy {key}={spec}: {key!r} is neither a role nor an agent of {loaded.name}; "
                              f"{_cast(loaded)} (write SPEC for every agent, ROLE=SPEC or AGENT=SPEC)")
        try:
            factories[key] = resolve_policy(spec, loaded, seed)
        except PolicyError as exc:
            shown = spec if key == DEFAULT_KEY else f"{key}={spec}"
            raise PolicyError(f"--policy {shown}: {exc} ({_cast(loaded)})") from None
    default = factories.get(DEFAULT_KEY) or resolve_policy("solution", loaded, seed)

    def make(agent_id: str, role: str, brief: dict[str, Any]) -> Any:
        return factories.get(agent_id, factories.get(role, default))(agent_id, role, brief)

    return make


def npc_team(npc_policy: str | Mapping[str, str], loaded: LoadedScenario) -> TeamSpec:
    """A served run's ``npc_policy`` as a team: ``"solution"`` (``"none"`` when the scenario has no solution),
    ``"none"``, or a mapping whose missing ``*`` is that same default."""
    fallback = "solution" if loaded.solution is not None else "none"
    if isinstance(npc_policy, str):
        return fallback if npc_policy == "solution" else "none"
    return {DEFAULT_KEY: fallback, **npc_policy}


def as_factory(policy: TeamSpec, loaded: LoadedScenario, seed: int = 0) -> PolicyFactory:
    """Any way of giving a team -> one factory (a plain spec goes through :func:`resolve_policy` as before)."""
    if isinstance(policy, str):
        if "=" not in policy:
            return resolve_policy(policy, loaded, seed)
        return resolve_team(parse_team(shlex.split(policy)), loaded, seed)
    if isinstance(policy, Mapping):
        return resolve_team(policy, loaded, seed)
    if isinstance(policy, Sequence):
        team = parse_team(list(policy))
        if list(team) == [DEFAULT_KEY]:
            return resolve_policy(team[DEFAULT_KEY], loaded, seed)
        return resolve_team(team, loaded, seed)
    return policy


def instantiate(loaded: LoadedScenario, seed: int, policy: TeamSpec,
                controlled: Iterable[str] = (), *, record: bool = True,
                run_id: str = "headless") -> tuple[Simulation, dict[str, Policy]]:
    """A fresh simulation of ``loaded`` (its spec is shared, never changed) and a policy per agent.

    Agents in ``controlled`` get no policy (a remote client drives them). ``policy`` is a ``--policy``
    spec, a team (a mapping or ``["SPEC", "ROLE=SPEC", ...]``: :func:`parse_team`) or an already
    resolved factory; every factory gets the agent's briefing of this simulation.
    """
    factory = as_factory(policy, loaded, seed)
    skip = set(controlled)
    sim = Simulation(loaded.spec, seed, run_id=run_id, params=loaded.params, record=record)
    policies = {a.id: factory(a.id, a.role, briefing(sim, a.id)) for a in loaded.spec.agents if a.id not in skip}
    return sim, policies


def make_policy(loaded: LoadedScenario, kind: str, agent_id: str, role: str, briefing: dict[str, Any],
                seed: int = 0) -> Policy:
    """One agent's policy of ``loaded`` from a ``--policy`` spec (:func:`resolve_policy`), for callers that drive
    one agent themselves (a remote client, a test)."""
    policy: Policy = resolve_policy(kind, loaded, seed)(agent_id, role, briefing)
    return policy
