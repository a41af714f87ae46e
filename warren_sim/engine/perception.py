"""What an agent perceives at a wake: the observation object, its affordances and its text.

The observation object is the wire truth (design rule 1 of warren-agent/0); ``text`` renders the
same facts for an LLM prompt and is built only when someone asks for it, so headless runs with
thousands of agents do not pay for prose nobody reads. Affordances list, per available tool, the
finite choices of each parameter and ready-to-send argument suggestions; they are also what a
command is validated against.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from .world import Agent, cell_name

if TYPE_CHECKING:
    from .sim import Simulation

MAX_SUGGESTIONS = 5
TELL_CHOICES_LIMIT = 64


@attrs.define(eq=False)
class Observation:
    """One wake of one agent: what the engine hands to a policy or a remote client."""

    agent_id: str
    observation_id: str
    seq: int
    time: int
    reason: str
    observation: dict[str, Any]
    affordances: list[dict[str, Any]]
    name: str = ""
    _text: str | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = render_text(self.observation, self.affordances, self.reason, self.name)
        return self._text


def _item_view(sim: Simulation, iid: str) -> dict[str, Any]:
    it = sim.world.items[iid]
    view: dict[str, Any] = {"id": it.id, "kind": it.kind, "name": it.name}
    if it.inside is not None:
        view["in"] = it.inside
    if it.container:
        view["container"] = True
    return view


def _agent_view(sim: Simulation, aid: str) -> dict[str, Any]:
    a = sim.world.agents[aid]
    busy = [x.tool for x in a.lanes.values() if x is not None]
    return {"id": a.id, "name": a.name, "role": a.role, "busy": busy}


def _structure_view(sim: Simulation, sid: str) -> dict[str, Any]:
    s = sim.world.structures[sid]
    return {"id": s.id, "kind": s.kind, "name": s.name, "fields": dict(s.fields), "maxima": dict(s.maxima)}


def inspect_choices(sim: Simulation, agent: Agent) -> list[str]:
    w = sim.world
    out = list(agent.inventory)
    out += w.items_in_reach(agent.cell)
    out += [a for a in w.agents_in_reach(agent.cell) if a != agent.id]
    out += w.structures_in_reach(agent.cell)
    place = w.place_of(agent.cell)
    if place is not None:
        out.append(place)
    return sorted(dict.fromkeys(out))


def observe(sim: Simulation, agent: Agent, reason: str
            ) -> tuple[Observation, dict[str, dict[str, list[str] | None]], dict[str, str]]:
    """Build the agent's observation from the world as it is at this instant."""
    w = sim.world
    conv = sim.conv
    cell = agent.cell
    place = w.place_of(cell)
    reach_items = w.items_in_reach(cell)
    reach_agents = [a for a in w.agents_in_reach(cell) if a != agent.id]
    reach_structs = w.structures_in_reach(cell)

    visible_agents: list[dict[str, Any]] = []
    visible_items: list[dict[str, Any]] = []
    if conv.sight_radius > 0:
        reach = set(w.reach_cells(cell))
        budget = conv.max_sight
        for c in w.in_sight(cell, conv.sight_radius):
            if budget <= 0:
                break
            if c in reach:
                continue
            dist = abs(c[1] - cell[1]) + abs(c[2] - cell[2])
            for aid in sorted(w.agents_at.get(c, ())):
                if budget > 0:
                    visible_agents.append({**_agent_view(sim, aid), "cell": cell_name(c), "distance": dist})
                    budget -= 1
            for iid in sorted(w.items_at.get(c, ())):
                if budget > 0:
                    visible_items.append({**_item_view(sim, iid), "cell": cell_name(c), "distance": dist})
                    budget -= 1

    busy = [{"lane": x.lane, "action": x.tool, "args": x.args, "started_ms": x.started, "until_ms": x.until}
            for x in agent.lanes.values() if x is not None]
    pdesc = w.places[place].description if place is not None else ""
    observation: dict[str, Any] = {
        "agent": agent.id,
        "time": sim.time,
        "busy": busy,
        "you": {"id": agent.id, "name": agent.name, "role": agent.role, "cell": cell_name(cell), "place": place,
                "inventory": [_item_view(sim, i) for i in agent.inventory],
                "capacity": conv.max_inventory},
        "place": {"name": place, "cell": cell_name(cell), "description": pdesc,
                  "items": [_item_view(sim, i) for i in reach_items],
                  "agents": [_agent_view(sim, a) for a in reach_agents],
                  "structures": [_structure_view(sim, s) for s in reach_structs]},
        "visible": {"agents": visible_agents, "items": visible_items},
        "messages": agent.messages,
        "messages_dropped": agent.messages_dropped,
        "events": agent.events,
        "events_dropped": agent.events_dropped,
        "objectives": sim.objective_views(),
    }
    agent.messages, agent.events = [], []
    agent.messages_dropped = agent.events_dropped = 0

    choices, unavailable, affordances = _affordances(sim, agent, place, reach_items, reach_agents, reach_structs)
    observation["tools"] = [
        {"action": t, "lane": sim.tools[t].lane, "durative": sim.tools[t].durative,
         "available": t not in unavailable, **({"why": unavailable[t]} if t in unavailable else {})}
        for t in agent.tools
    ]
    obs = Observation(agent.id, f"{agent.id}#{agent.seq}", agent.seq, sim.time, reason, observation,
                      affordances, agent.name)
    return obs, choices, unavailable


def _affordances(sim: Simulation, agent: Agent, place: str | None, reach_items: list[str],
                 reach_agents: list[str], reach_structs: list[str]
                 ) -> tuple[dict[str, dict[str, list[str] | None]], dict[str, str], list[dict[str, Any]]]:
    w = sim.world
    conv = sim.conv
    choices: dict[str, dict[str, list[str] | None]] = {}
    unavailable: dict[str, str] = {}
    affordances: list[dict[str, Any]] = []
    inventory = list(agent.inventory)
    full = len(inventory) >= conv.max_inventory

    def offer(tool: str, params: dict[str, list[str] | None], suggestions: list[dict[str, Any]]) -> None:
        choices[tool] = params
        shown = {p: ({"choices": c} if c is not None else {"type": "string"}) for p, c in params.items()}
        if tool == "move_to":
            shown["dest"]["or"] = "any cell '<space>:<x>,<y>'"
        affordances.append({"action": tool, "params": shown, "suggestions": suggestions[:MAX_SUGGESTIONS]})

    for tool in agent.tools:
        if tool == "move_to":
            dests = [p for p in w.place_names if p != place]
            offer(tool, {"dest": dests}, [{"dest": d} for d in dests])
        elif tool == "take":
            takeable = [i for i in reach_items if not w.items[i].container]
            if full:
                unavailable[tool] = f"your inventory is full ({conv.max_inventory} items)"
            elif not takeable:
                unavailable[tool] = "there is nothing to take within reach"
            else:
                offer(tool, {"item": takeable}, [{"item": i} for i in takeable])
        elif tool == "drop":
            if not inventory:
                unavailable[tool] = "you carry nothing"
            else:
                offer(tool, {"item": inventory}, [{"item": i} for i in inventory])
        elif tool == "give":
            if not inventory:
                unavailable[tool] = "you carry nothing"
            elif not reach_agents:
                unavailable[tool] = "nobody is within reach"
            else:
                offer(tool, {"item": inventory, "to": reach_agents},
                      [{"item": i, "to": a} for a in reach_agents for i in inventory])
        elif tool == "say":
            offer(tool, {"text": None}, [])
        elif tool == "tell":
            others = None
            if len(w.agent_ids) <= TELL_CHOICES_LIMIT:
                others = [a for a in w.agent_ids if a != agent.id]
            if others == []:
                unavailable[tool] = "there is nobody else in this world"
            else:
                offer(tool, {"to": others, "text": None}, [])
        elif tool == "inspect":
            offer(tool, {"target": inspect_choices(sim, agent)}, [])
        else:
            _work_affordance(sim, agent, tool, inventory, reach_structs, offer, unavailable)
    return choices, unavailable, affordances


def _work_affordance(sim: Simulation, agent: Agent, tool: str, inventory: list[str], reach_structs: list[str],
                     offer: Any, unavailable: dict[str, str]) -> None:
    w = sim.world
    spec = sim.tools[tool].work
    assert spec is not None
    held = [w.items[i].kind for i in inventory]
    missing = [k for k in spec.needs_held if k not in held]
    if missing:
        unavailable[tool] = f"you need to carry a {missing[0]}"
        return
    params: dict[str, list[str] | None] = {}
    if spec.structure_kinds:
        structs = [s for s in reach_structs if w.structures[s].kind in spec.structure_kinds]
        if not structs:
            kinds = " or ".join(spec.structure_kinds)
            unavailable[tool] = f"no {kinds} within reach"
            return
        params["structure"] = structs
    if spec.item_kinds:
        items = [i for i in inventory if w.items[i].kind in spec.item_kinds]
        if not items:
            unavailable[tool] = f"you carry no {' or '.join(spec.item_kinds)}"
            return
        params["item"] = items
    if spec.needs_code:
        params["code"] = None
    suggestions: list[dict[str, Any]] = []
    if not spec.needs_code:
        suggestions = [{}]
        for p, c in params.items():
            assert c is not None
            suggestions = [{**s, p: v} for s in suggestions for v in c]
    offer(tool, params, suggestions)


def _fmt_time(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms / 1000:.3f}s"


def _names(views: list[dict[str, Any]]) -> str:
    return ", ".join(f"{v['id']} ({v.get('kind') or v.get('role')})" for v in views) or "none"


def render_text(obs: dict[str, Any], affordances: list[dict[str, Any]], reason: str, name: str) -> str:
    """The observation as prose for an LLM prompt; every fact here is also in the object."""
    you, place = obs["you"], obs["place"]
    where = f"{place['name']} ({place['cell']})" if place["name"] else place["cell"]
    lines = [f"[t={_fmt_time(obs['time'])}] You are {name} ({you['id']}, role {you['role']}) at {where}. "
             f"You woke because: {reason}."]
    if place["description"]:
        lines.append(place["description"])
    inv = ", ".join(f"{i['id']} ({i['kind']})" for i in you["inventory"]) or "nothing"
    lines.append(f"You carry: {inv}.")
    for b in obs["busy"]:
        lines.append(f"You are busy: {b['action']} {b['args']} until t={_fmt_time(b['until_ms'])}.")
    lines.append(f"Within reach: items {_names(place['items'])}; agents {_names(place['agents'])}.")
    for s in place["structures"]:
        fields = ", ".join(f"{k} {v}" + (f"/{s['maxima'][k]}" if k in s["maxima"] else "")
                           for k, v in s["fields"].items())
        lines.append(f"Here stands {s['name']} ({s['id']}): {fields or 'no state'}.")
    vis = obs["visible"]
    if vis["agents"] or vis["items"]:
        seen = [f"{v['id']} at {v['cell']}" for v in vis["agents"] + vis["items"]]
        lines.append("In sight: " + ", ".join(seen) + ".")
    for m in obs["messages"]:
        verb = "says" if m["kind"] == "say" else "tells you"
        lines.append(f"[t={_fmt_time(m['time'])}] {m['from']} {verb}: \"{m['text']}\"")
    for e in obs["events"]:
        lines.append(f"[t={_fmt_time(e['time'])}] {e['text']}.")
    for o in obs["objectives"]:
        deadline = f", due by t={_fmt_time(o['deadline_ms'])}" if o["deadline_ms"] is not None else ""
        p = o["progress"]
        lines.append(f"Objective {o['id']}: {o['description']} {o['status']} {p['current']}/{p['target']}{deadline}.")
    can = []
    for a in affordances:
        params = ", ".join(
            f"{k}: " + ("|".join(v["choices"][:6]) + ("|..." if len(v["choices"]) > 6 else "")
                        if "choices" in v else "text")
            for k, v in a["params"].items())
        can.append(f"{a['action']}({params})")
    lines.append("You can: " + "; ".join(can) + ".")
    lines.append("Answer with exactly one command: an action with args, a sleep (sleep_ms), or a noop.")
    return "\n".join(lines)
