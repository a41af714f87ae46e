"""Briefings: what an agent is told once, before its first decision.

A briefing never changes during a run (revision 1), so clients cache it by revision and check it
by ``content_hash``: ``sha256:`` of its canonical JSON (sorted keys, no spaces, UTF-8) without the
hash field itself.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from .world import cell_name

if TYPE_CHECKING:
    from .sim import Simulation

REVISION = 1
DECISION = "answer each observation with exactly one command: an action, a sleep, or a noop"


def canonical_json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def content_hash(obj: dict[str, Any]) -> str:
    body = {k: v for k, v in obj.items() if k != "content_hash"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def briefing(sim: Simulation, agent_id: str) -> dict[str, Any]:
    w = sim.world
    agent = w.agents[agent_id]
    conv = sim.conv
    role = sim.roles[agent.role]
    out: dict[str, Any] = {
        "briefing_id": f"{sim.run_id}/{agent_id}",
        "revision": REVISION,
        "content_hash": "",
        "agent_id": agent_id,
        "role": agent.role,
        "name": agent.name,
        "scenario": sim.spec.name,
        "premise": sim.spec.premise,
        "objectives": [
            {"id": o.id, "description": o.description, "status": "pending", "deadline_ms": o.deadline_ms,
             "progress": {"current": 0, "target": o.target}}
            for o in sim.spec.objectives
        ],
        "tool_catalog": [sim.tools[t].catalog_entry() for t in agent.tools],
        "conventions": {
            "grid_naming": "cells are '<space>:<x>,<y>'; x grows east, y grows south",
            "sight_radius": conv.sight_radius,
            "budgets": {"max_sight": conv.max_sight, "max_messages": conv.max_messages,
                        "max_inventory": conv.max_inventory},
            "decision": DECISION,
            "time": (f"sim time is in milliseconds; a step takes {conv.step_ms} ms; instant actions and "
                     f"messages take effect {conv.tick_ms} ms later; with nothing else to wake you, you wake "
                     f"after {conv.idle_wake_ms} ms"),
            "time_limit_ms": conv.time_limit_ms,
        },
        "map": {
            "spaces": [{"name": s.name, "width": s.width, "height": s.height, "description": s.description}
                       for s in sim.spec.spaces],
            "places": [{"name": p.name, "cell": cell_name((p.space, p.x, p.y)), "size": [p.w, p.h],
                        "description": p.description} for p in sim.spec.places],
            "links": [{"id": lk.id, "a": lk.a, "b": lk.b, "steps": lk.steps,
                       "gate": None if lk.gate is None else
                       {"structure": lk.gate.structure, "field": lk.gate.field, "at_least": lk.gate.at_least}}
                      for lk in sim.spec.links],
        },
        "role_description": role.description,
        "notes": agent.notes,
    }
    out["content_hash"] = content_hash(out)
    return out
