"""Helpers shared by the engine tests (imported as ``simworld``): small worlds built from spec classes, and a batch driver.

``make_spec`` builds a ScenarioSpec from a few keyword arguments over a default world:

- space ``town`` (12x4) with places ``yard`` (town:0,0, 2x1), ``shed`` (town:5,0) and ``gate`` (town:11,0);
- space ``isle`` (4x4) with place ``dock`` (isle:2,2), joined by link ``ferry`` (town:11,0 <-> isle:0,0,
  3 steps) that is open only while ``wall.strength >= 1``;
- structures ``wall`` (kind wall, at gate, strength 0 of at most 2) and ``vault`` (kind vault, at shed,
  secret ``1234``);
- role ``worker`` with the work tools ``fix`` (durative 2000 ms, a plank held, needs a hammer,
  adds 1 to wall strength) and ``unlock`` (instant, needs the vault's code, opens it); role ``idler``
  has only the generic tools;
- agents ``alice``, ``bob`` (workers) and ``carol`` (idler), all in the yard;
- objective ``fortify``: wall strength 2.

Every argument replaces the corresponding default wholesale.
"""

from __future__ import annotations

from typing import Any

from warren_sim.engine import Batch, Simulation
from warren_sim.engine import spec as S

NOOP: dict[str, Any] = {"noop": True}

DEFAULT_TOOLS = (
    S.WorkToolSpec("fix", "Fix a wall within reach with a plank (needs a hammer).", "body", True, 2000,
                   structure_kinds=("wall",), item_kinds=("plank",), needs_held=("hammer",), field="strength"),
    S.WorkToolSpec("unlock", "Open a vault within reach with its code.", "body", False, 0,
                   structure_kinds=("vault",), needs_code=True, field="open"),
)


def agent(aid: str, at: str = "yard", role: str = "worker", name: str = "", notes: str = "") -> S.AgentSpec:
    return S.AgentSpec(aid, role, name or f"{aid.capitalize()} the {role}", at, notes)


def item(iid: str, at: str, kind: str = "", container: bool = False) -> S.ItemSpec:
    kind = kind or iid.split("-")[0]
    return S.ItemSpec(iid, kind, f"a {kind}", at, container)


def make_spec(**kw: Any) -> S.ScenarioSpec:
    """A small test world; see the module docstring for the defaults each keyword replaces."""
    conv = kw.pop("conventions", {})
    defaults: dict[str, Any] = {
        "name": "testworld",
        "title": "Test world",
        "premise": "A small world for tests.",
        "spaces": (S.SpaceSpec("town", 12, 4), S.SpaceSpec("isle", 4, 4)),
        "places": (S.PlaceSpec("yard", "town", 0, 0, 2, 1, "A yard."), S.PlaceSpec("shed", "town", 5, 0),
                   S.PlaceSpec("gate", "town", 11, 0), S.PlaceSpec("dock", "isle", 2, 2)),
        "links": (S.LinkSpec("ferry", "town:11,0", "isle:0,0", 3, S.GateSpec("wall", "strength", 1)),),
        "structures": (S.StructureSpec("wall", "wall", "the wall", "gate", (("strength", 0),), (("strength", 2),)),
                       S.StructureSpec("vault", "vault", "the vault", "shed", (("open", 0),), (("open", 1),),
                                       secret="1234")),
        "roles": (S.RoleSpec("worker", "Works.", ("fix", "unlock")), S.RoleSpec("idler", "Idles.", ())),
        "agents": (agent("alice"), agent("bob"), agent("carol", role="idler")),
        "items": (),
        "tools": DEFAULT_TOOLS,
        "objectives": (S.ObjectiveSpec("fortify", "Make the wall strong.", "wall", "strength", 2),),
    }
    unknown = set(kw) - set(defaults)
    assert not unknown, f"make_spec got unknown keywords {unknown}"
    defaults.update({k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})
    return S.ScenarioSpec(**defaults, conventions=S.Conventions(**conv))


def make_sim(seed: int = 0, **kw: Any) -> Simulation:
    return Simulation(make_spec(**kw), seed)


def play(sim: Simulation, commands: dict[str, dict[str, Any]] | None = None, *, check: bool = True) -> Batch:
    """Advance to the next batch, answer it (noop for agents not in ``commands``) and adjudicate.

    With ``check`` every command must pass validation first; without it, commands go straight to
    ``answer`` (to reach the reasons adjudication gives for commands validation would refuse).
    """
    commands = commands or {}
    batch = sim.advance()
    assert batch is not None, f"the run ended: {sim.status} ({sim.end_reason})"
    woken = [o.agent_id for o in batch.observations]
    assert set(commands) <= set(woken), f"commands for {sorted(set(commands) - set(woken))}, woken: {woken}"
    for obs in batch.observations:
        obs.observation, obs.affordances  # noqa: B018 - read before adjudication (observations are lazy)
        command = commands.get(obs.agent_id, NOOP)
        if check:
            err = sim.validate(obs.agent_id, command)
            assert err is None, f"{obs.agent_id}: {command} refused: {err}"
        sim.answer(obs.agent_id, command)
    sim.adjudicate()
    return batch


def obs_of(batch: Batch, agent_id: str) -> Any:
    found = [o for o in batch.observations if o.agent_id == agent_id]
    assert found, f"{agent_id} is not in the batch at t={batch.time}: {[o.agent_id for o in batch.observations]}"
    return found[0]


def outcome_of(sim: Simulation, batch: Batch, agent_id: str) -> tuple[str, str]:
    return sim.outcome_of(obs_of(batch, agent_id).observation_id)


def records(sim: Simulation, kind: str) -> list[dict[str, Any]]:
    return [r for r in sim.records if r["kind"] == kind]


def wakes(sim: Simulation) -> list[tuple[int, str, str]]:
    """(time, agent, reason) of every observation issued so far."""
    return [(r["t"], r["agent"], r["reason"]) for r in records(sim, "observation")]
