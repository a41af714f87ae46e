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
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from ..engine import NoopPolicy, Policy, RandomPolicy, Simulation, briefing
from .loader import LoadedScenario, ScenarioError

PolicyFactory = Callable[[str, str, dict[str, Any]], Any]

#: Built-in policy names that live in optional modules: name -> (``module:factory``, the extra to install).
REGISTRY: dict[str, tuple[str, str]] = {
    "llm": ("warren_sim.llm:factory", "llm"),
}

BUILTIN = ("solution", "random", "none")
FORMS = "'solution', 'random', 'none', " + ", ".join(repr(n) for n in REGISTRY) + " or 'module:factory'"
CONTRACT = ("a policy factory is factory(agent_id, role, briefing) -> an object with decide(observation) -> "
            "command (see docs/policies.md)")


class PolicyError(ScenarioError):
    """A ``--policy`` that cannot drive an agent; the message teaches the contract."""


def resolve_policy(spec: str, loaded: LoadedScenario | None = None, seed: int = 0) -> PolicyFactory:
    """``--policy SPEC`` -> a checked factory ``(agent_id, role, briefing) -> policy``.

    ``solution`` is the scenario's ``solution.py:make_policy`` (needs ``loaded``), ``random`` a seeded
    random policy per agent (from ``seed``), ``none`` the noop policy, a registry name (``llm``) its
    optional module, and ``module:factory`` any importable callable; the current directory is on the
    import path for it, so ``--policy mypolicy:factory`` finds ``./mypolicy.py``.
    """
    if spec == "solution":
        if loaded is None or loaded.solution is None:
            name = loaded.name if loaded is not None else "this scenario"
            raise PolicyError(f"scenario {name} has no solution.py; use --policy random, none or module:factory")
        factory = getattr(loaded.solution, "make_policy", None)
        if not callable(factory):
            raise PolicyError(f"{loaded.directory / 'solution.py'}: expected make_policy(agent_id, role, briefing)")
        return _checked(factory, f"{loaded.name}'s solution.py:make_policy")
    if spec == "random":
        return lambda agent_id, role, brief: RandomPolicy(seed * 1_000_003 + sum(map(ord, agent_id)))
    if spec == "none":
        return lambda agent_id, role, brief: NoopPolicy()
    if spec in REGISTRY:
        ref, extra = REGISTRY[spec]
        try:
            importlib.import_module(ref.partition(":")[0])
        except ImportError as exc:
            raise PolicyError(f"--policy {spec} needs an optional part of WARREN: pip install "
                              f"'warren-sim[{extra}]' ({exc})") from None
        return _checked(_load(ref), f"--policy {spec}")
    return _checked(_load(spec), f"--policy {spec}")


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


def _checked(factory: Any, what: str) -> PolicyFactory:
    """The factory, wrapped so a wrong signature or a product without ``decide`` is a PolicyError."""
    if not callable(factory):
        raise PolicyError(f"{what} is a {type(factory).__name__}, not callable; {CONTRACT}")
    try:
        inspect.signature(factory).bind("agent-1", "role", {})
    except TypeError as exc:
        raise PolicyError(f"{what} cannot be called as factory(agent_id, role, briefing): {exc}; {CONTRACT}") \
            from None
    except ValueError:  # no signature to inspect (a builtin): find out when it is called
        pass

    def make(agent_id: str, role: str, brief: dict[str, Any]) -> Any:
        policy = factory(agent_id, role, brief)
        if not callable(getattr(policy, "decide", None)):
            raise PolicyError(f"{what} returned {type(policy).__name__} {policy!r:.60}, which has no "
                              f"decide(observation) method; {CONTRACT}")
        return policy

    return make


def instantiate(loaded: LoadedScenario, seed: int, policy: str | PolicyFactory,
                controlled: Iterable[str] = (), *, record: bool = True,
                run_id: str = "headless") -> tuple[Simulation, dict[str, Policy]]:
    """A fresh simulation of ``loaded`` (its spec is shared, never changed) and a policy per agent.

    Agents in ``controlled`` get no policy (a remote client drives them). ``policy`` is a ``--policy``
    spec or an already resolved factory; every factory gets the agent's briefing of this simulation.
    """
    factory = resolve_policy(policy, loaded, seed) if isinstance(policy, str) else policy
    skip = set(controlled)
    sim = Simulation(loaded.spec, seed, run_id=run_id, params=loaded.params, record=record)
    policies = {a.id: factory(a.id, a.role, briefing(sim, a.id)) for a in loaded.spec.agents if a.id not in skip}
    return sim, policies
