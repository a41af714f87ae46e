"""The layout of a world: what a viewer needs to draw it and to rebuild its state from records.

``layout(world, spec)`` is a pure function of the scenario (after its parameters shaped it): the
spaces with their sizes, places with coordinates, links with their resolved ends and initial
open/closed state, structures (never their secrets), items and agents where they start, the tools'
lanes and the objectives. The engine writes it into the journal's ``run`` record, so a journal file
is enough to draw its run (a scenario edited since does not redraw an old journal wrongly), and the
HTTP layer serves the same dict as ``layout`` in ``GET /v1/scenarios/{name}``.

Everything is listed in the spec's order, so the layout's bytes are as deterministic as the spec.
"""

from __future__ import annotations

from typing import Any

from .rules import catalog
from .spec import ScenarioSpec
from .world import Cell, World


def _cell(cell: Cell) -> dict[str, Any]:
    return {"space": cell[0], "x": cell[1], "y": cell[2]}


def layout(world: World, spec: ScenarioSpec) -> dict[str, Any]:
    """The world as it is before anything happens (call it on a fresh :class:`World`)."""
    tools = {name: entry.tool for name, entry in catalog(spec.tools).items()}
    items: list[dict[str, Any]] = []
    for it in spec.items:
        item = world.items[it.id]
        entry: dict[str, Any] = {"id": it.id, "kind": it.kind, "name": it.name}
        if item.holder is not None:
            entry["holder"] = item.holder
        elif item.inside is not None:
            entry["inside"] = item.inside
        elif item.cell is not None:
            entry.update(_cell(item.cell))
        items.append(entry)
    return {
        "spaces": [{"name": s.name, "width": s.width, "height": s.height, "description": s.description}
                   for s in spec.spaces],
        "places": [{"id": p.name, "space": p.space, "x": p.x, "y": p.y, "w": p.w, "h": p.h,
                    "description": p.description} for p in spec.places],
        "links": [{"id": link.id, "from": _cell(a), "to": _cell(b), "steps": link.steps,
                   "open": world.gate_open(link),
                   "gate": None if link.gate is None else {"structure": link.gate.structure, "field": link.gate.field,
                                                          "at_least": link.gate.at_least}}
                  for a, b, link in world.link_ends],
        "structures": [{"id": s.id, "kind": s.kind, "name": s.name, "place": s.place, "fields": dict(s.fields),
                        "maxima": dict(s.maxima)} for s in spec.structures],
        "items": items,
        "agents": [{"agent_id": a.id, "role": a.role, "name": a.name, "place": world.place_of(world.agents[a.id].cell),
                    **_cell(world.agents[a.id].cell)} for a in spec.agents],
        "tools": [{"name": t.name, "lane": t.lane, "durative": t.durative,
                   "consumes_item": bool(t.work is not None and t.work.item_kinds)} for t in tools.values()],
        "objectives": [{"id": o.id, "description": o.description, "structure": o.structure, "field": o.field,
                        "target": o.target, "deadline_ms": o.deadline_ms} for o in spec.objectives],
    }
