"""The rules of every tool: what makes a command valid, what makes it fail, what it changes.

Two moments are distinct, as in any simultaneous-move game:
- ``validate`` judges a command against the observation the agent answered (its affordances), so
  that a well-formed command for that snapshot is never refused because of someone else's answer;
- ``check`` judges it against the world at adjudication, after the answers ordered before it in
  the batch were applied. That is where conflicts lose, with a reason naming the winner, and
  :func:`conflict` says the same for machines (``{"winner": agent, "resource": item}``), so that no
  consumer has to read the reason's prose.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .schema import check_args
from .tools import Tool
from .world import Agent, Cell, cell_name, parse_cell

if TYPE_CHECKING:
    from .perception import Observation
    from .sim import Simulation

MAX_SLEEP_MS = 2**53 - 1
COMMAND_KEYS = ("action", "sleep_ms", "noop")
COMMAND_FIELDS = (*COMMAND_KEYS, "args")


def validate(sim: Simulation, agent: Agent, obs: Observation, command: dict[str, Any]) -> str | None:
    # Fast paths for the well-formed shapes; anything else takes the full path below, which says what is wrong.
    n = len(command)
    if "action" in command and (n == 1 or (n == 2 and "args" in command)):
        name = command["action"]
        if name == "move_to" and "move_to" in agent.tools:  # the commonest: _fast_valid's move, inline
            args = command.get("args")
            if type(args) is dict and len(args) == 1:
                w = sim.world
                dest = args.get("dest")
                if type(dest) is str and dest and dest != w.cell_place.get(agent.cell):
                    place = w.places.get(dest)
                    if place is not None:
                        obs.parsed = (command, (place.space, place.x, place.y))
                        return None
                    cell = parse_cell(dest)
                    if cell is not None:
                        space = w.spaces.get(cell[0])
                        if space is not None and 0 <= cell[1] < space.width and 0 <= cell[2] < space.height:
                            obs.parsed = (command, cell)
                            return None
        elif type(name) is str and name in agent.tools and _fast_valid(sim, agent, obs, name, command):
            return None
        return _validate_action(sim, agent, obs, command)
    if n == 1:
        ms = command.get("sleep_ms")
        if type(ms) is int and 0 <= ms <= MAX_SLEEP_MS:
            return None
        if command.get("noop") is True:
            return None
    present = [k for k in COMMAND_KEYS if k in command]
    if len(present) != 1:
        return ("a command is exactly one of {\"action\": ..., \"args\": {...}}, {\"sleep_ms\": n} or "
                f"{{\"noop\": true}}; this one has {', '.join(present) or 'none of them'}")
    extra = [k for k in command if k not in COMMAND_FIELDS]
    if extra:
        return f"unknown command field(s) {', '.join(sorted(extra))}; a command has action+args, sleep_ms or noop"
    if "noop" in command:
        if command["noop"] is not True:
            return f"noop must be true, got {command['noop']!r}"
        return None if "args" not in command else "a noop takes no args"
    if "sleep_ms" in command:
        ms = command["sleep_ms"]
        if "args" in command:
            return "a sleep takes no args"
        if not isinstance(ms, int) or isinstance(ms, bool):
            return f"sleep_ms must be an integer number of milliseconds, got {type(ms).__name__} {ms!r}"
        if not 0 <= ms <= MAX_SLEEP_MS:
            return f"sleep_ms must be between 0 and {MAX_SLEEP_MS}, got {ms}"
        return None
    return _validate_action(sim, agent, obs, command)


def _one_text_arg(args: Any, key: str) -> Any:
    """``args[key]`` when ``args`` is exactly ``{key: <non-empty str>}`` (what check_args accepts for a tool whose
    only parameter is a string without maxLength), else None."""
    if type(args) is dict and len(args) == 1:
        value = args.get(key)
        if type(value) is str and value:
            return value
    return None


def _fast_valid(sim: Simulation, agent: Agent, obs: Observation, name: str, command: dict[str, Any]) -> bool:
    """True when the full path below would accept this command; False means "ask the full path", which words
    the refusal. The commonest commands are judged here without building the observation's choices: a
    move to another place or a cell of the map (the destination cell is kept on ``obs.parsed`` for
    adjudication), a take of an item within reach, a work tool on its structure and item."""
    w = sim.world
    if name == "move_to":  # always available
        args = command.get("args")  # _one_text_arg(args, "dest"), inline
        if type(args) is not dict or len(args) != 1:
            return False
        dest = args.get("dest")
        if type(dest) is not str or not dest or dest == w.cell_place.get(agent.cell):
            return False
        place = w.places.get(dest)
        if place is not None:
            cell: Cell | None = (place.space, place.x, place.y)
        else:
            cell = parse_cell(dest)
            if cell is None:
                return False
            space = w.spaces.get(cell[0])  # w.valid_cell(cell), inline
            if space is None or not (0 <= cell[1] < space.width and 0 <= cell[2] < space.height):
                return False
        obs.parsed = (command, cell)
        return True
    if name == "take":
        item_id = _one_text_arg(command.get("args"), "item")
        if item_id is None or len(agent.inventory) >= sim.conv.max_inventory:
            return False
        item = w.items.get(item_id)
        if item is None or item.container:
            return False
        where = item.cell
        if where is None and item.inside is not None:  # inside a container on the ground (one level)
            where = w.items[item.inside].cell
        return where is not None and where in w.reach_cells(agent.cell)
    tool = sim.tools[name]
    spec = tool.work
    if spec is None or spec.needs_held or spec.needs_code or not spec.structure_kinds or not spec.item_kinds:
        return False
    args = command.get("args")
    if type(args) is not dict or len(args) != 2:
        return False
    sid, item_id = args.get("structure"), args.get("item")
    if type(sid) is not str or type(item_id) is not str or not sid or not item_id:
        return False
    if sid not in w.structures_in_reach(agent.cell) or w.structures[sid].kind not in spec.structure_kinds:
        return False
    return item_id in agent.inventory and w.items[item_id].kind in spec.item_kinds


def _validate_action(sim: Simulation, agent: Agent, obs: Observation, command: dict[str, Any]) -> str | None:
    name = command["action"]
    if type(name) is str and name in agent.tools and _fast_valid(sim, agent, obs, name, command):
        return None
    if not isinstance(name, str):
        return f"action must be a tool name (a string), got {type(name).__name__} {name!r}; your tools: " \
               + ", ".join(agent.tools)
    if name not in agent.tools:
        return f"unknown action {name!r}; your tools are: {', '.join(agent.tools)}"
    params, why = obs.tool_choices(name)
    if params is None:
        return f"{name} is not available now: {why}"
    tool = sim.tools[name]
    args = command.get("args", {})
    err = check_args(name, tool.input_schema, args)
    if err:
        return err
    if name == "tell":  # before the choices, which leave out the teller: say why, not just "not valid"
        to = args["to"]
        if to == agent.id:
            return "args.to: you cannot tell yourself; name another agent"
        if to not in sim.world.agents:
            return f"args.to: there is no agent {to!r}; agents you know of are in place.agents and visible.agents"
    for param, choices in params.items():
        value = args[param]
        if choices is None:
            continue
        if value in choices:
            continue
        if name == "move_to" and param == "dest":
            if value == obs.view["you"]["place"]:
                return f"args.dest: you are already at {value}; choose another place ({_list(choices)}) or a cell"
            cell = parse_cell(value)
            if cell is not None and sim.world.valid_cell(cell):
                continue
            return (f"args.dest: {value!r} is neither a place ({_list(choices)}) nor a cell of the map "
                    "('<space>:<x>,<y>')")
        return f"args.{param}: {value!r} is not a valid {param} for {name} now; choose one of {_list(choices)}"
    return None


def _list(choices: list[str], limit: int = 12) -> str:
    shown = choices[:limit]
    more = f" and {len(choices) - limit} more" if len(choices) > limit else ""
    return "[" + ", ".join(repr(c) for c in shown) + "]" + more


def _taken_this_batch(sim: Simulation, agent: Agent, item_id: str) -> str | None:
    """The other agent holding ``item_id`` after a take earlier in this batch (same sim time), or None."""
    item = sim.world.items[item_id]
    if item.holder is None or item.holder == agent.id:
        return None
    if item.last_taker and item.last_taker[0] == sim.time:
        return item.holder
    return None


def conflict(sim: Simulation, agent: Agent, tool: Tool, args: dict[str, Any]) -> dict[str, str] | None:
    """The same-batch conflict behind a failed :func:`check`, machine-readable; None if it was no conflict.

    A conflict is another agent's action, accepted earlier in this batch's order, that took the resource
    this action needs: ``{"winner": that agent, "resource": the item}``. Outcome records and receipts carry it
    as ``conflict`` so that evaluations count conflicts without reading prose.
    """
    if tool.name == "take":
        winner = _taken_this_batch(sim, agent, args["item"])
        if winner is not None:
            return {"winner": winner, "resource": args["item"]}
    return None


def _reach_item(sim: Simulation, agent: Agent, item_id: str) -> str | None:
    """Why ``item_id`` is not within the agent's reach any more, naming who took it."""
    item = sim.world.items[item_id]
    if item.holder is not None:
        who = item.holder
        if who == agent.id:
            return f"you already carry {item_id}"
        when = " earlier in this batch" if _taken_this_batch(sim, agent, item_id) else ""
        return f"{item_id} is no longer here: {who} has it{when}"
    cells = sim.world.reach_cells(agent.cell)
    cell = item.cell
    if item.inside is not None:
        cell = sim.world.items[item.inside].cell
    if cell is None or cell not in cells:
        return f"{item_id} is no longer within reach"
    return None


def check(sim: Simulation, agent: Agent, tool: Tool, args: dict[str, Any]) -> str | None:
    """Why this action fails against the world as it is now, or None."""
    w = sim.world
    name = tool.name
    if name == "move_to":
        dest = w.resolve_cell(args["dest"])
        if dest == agent.cell or (w.place_of(dest) is not None and w.place_of(dest) == w.place_of(agent.cell)):
            return f"you are already at {args['dest']}"
        steps, why = w.route(agent.cell, dest)
        return why or None
    if name == "take":
        err = _reach_item(sim, agent, args["item"])
        if err:
            return err
        if w.items[args["item"]].container:
            return f"{args['item']} is a container and cannot be carried; take what is inside it"
        if len(agent.inventory) >= sim.conv.max_inventory:
            return f"your inventory is full ({sim.conv.max_inventory} items); drop or give something first"
        return None
    if name in ("drop", "give"):
        if args["item"] not in agent.inventory:
            return f"you no longer carry {args['item']}"
        if name == "give":
            to = args["to"]
            if to not in w.agents_in_reach(agent.cell):
                return f"{to} is no longer within reach"
            if len(w.agents[to].inventory) >= sim.conv.max_inventory:
                return f"{to} cannot carry more ({sim.conv.max_inventory} items)"
        return None
    if name == "say" or name == "tell":
        return None
    if name == "inspect":
        return None if _inspectable(sim, agent, args["target"]) else f"{args['target']} is no longer in sight"
    return _check_work(sim, agent, tool, args)


def _passes(sim: Simulation, agent: Agent, tool: Tool, args: dict[str, Any]) -> bool:
    """True when :func:`check` would find nothing wrong with a take or a work tool (on its structure and item,
    without needs_held or a code); False means "ask check", which says what is wrong."""
    w = sim.world
    name = tool.name
    if name == "take":  # _reach_item, the container and the room in the inventory
        item = w.items[args["item"]]
        if item.holder is not None or item.container or len(agent.inventory) >= sim.conv.max_inventory:
            return False
        where = item.cell
        if item.inside is not None:
            where = w.items[item.inside].cell
        return where is not None and where in w.reach_cells(agent.cell)
    spec = tool.work
    if spec is None or spec.needs_held or spec.needs_code or not spec.item_kinds or not spec.structure_kinds:
        return False
    if args["item"] not in agent.inventory or args["structure"] not in w.structures_in_reach(agent.cell):
        return False
    if spec.field:
        s = w.structures[args["structure"]]
        top = s.maxima.get(spec.field)
        return top is None or s.fields.get(spec.field, 0) < top
    return True


def _check_work(sim: Simulation, agent: Agent, tool: Tool, args: dict[str, Any]) -> str | None:
    w = sim.world
    spec = tool.work
    assert spec is not None
    held_kinds = [w.items[i].kind for i in agent.inventory]
    for kind in spec.needs_held:
        if kind not in held_kinds:
            return f"{tool.name} needs a {kind} in your inventory"
    if spec.item_kinds and args["item"] not in agent.inventory:
        return f"you no longer carry {args['item']}"
    if spec.structure_kinds:
        sid = args["structure"]
        if sid not in w.structures_in_reach(agent.cell):
            return f"{sid} is not within reach; go to {w.structures[sid].place} first"
        s = w.structures[sid]
        if spec.needs_code and args["code"] != s.secret:
            return f"the code {args['code']!r} does not work on {sid}"
        if spec.field:
            top = s.maxima.get(spec.field)
            if top is not None and s.fields.get(spec.field, 0) >= top:
                return f"{s.name} {spec.field} is already at its maximum ({top})"
    return None


def plan(sim: Simulation, agent: Agent, tool: Tool, args: dict[str, Any],
         dest: Cell | None = None) -> tuple[str | None, int, Cell | None]:
    """``check`` and ``start`` in one pass, for adjudication: (why it fails or None, duration ms, destination).

    A move resolves its destination (unless validation did: ``dest``) and routes once here, where ``check``
    then ``start`` did both twice. The duration is 0 for instant tools.
    """
    if tool.name == "move_to":
        w = sim.world
        if dest is None:
            dest = w.resolve_cell(args["dest"])
        cell = agent.cell
        if dest[0] == cell[0] and dest != cell and (  # one open grid, another place: _move_check, inline
                (place := w.cell_place.get(dest)) is None or place != w.cell_place.get(cell)):
            return None, max(1, (abs(cell[1] - dest[1]) + abs(cell[2] - dest[2])) * sim.conv.step_ms), dest
        err, steps = _move_check(w, cell, dest)
        if err is not None:
            return (err or f"you are already at {args['dest']}"), 0, None
        return None, max(1, steps * sim.conv.step_ms), dest
    if _passes(sim, agent, tool, args):
        return None, (max(1, tool.work.duration_ms) if tool.durative and tool.work is not None else 0), None
    err = check(sim, agent, tool, args)
    if err or not tool.durative:
        return err, 0, None
    assert tool.work is not None
    return None, max(1, tool.work.duration_ms), None


def _move_check(w: Any, cell: Cell, dest: Cell) -> tuple[str | None, int]:
    """A move from ``cell`` to ``dest`` now: ``(None, steps)``, or ``("", 0)`` when it is already there (the
    caller words it) or ``(why, 0)`` when no path is open. ``check``'s move_to, on a resolved destination."""
    cell_place = w.cell_place
    if dest == cell:
        return "", 0
    place = cell_place.get(dest)
    if place is not None and place == cell_place.get(cell):
        return "", 0
    if dest[0] == cell[0]:  # one open grid: Manhattan, what route() answers
        return None, abs(cell[1] - dest[1]) + abs(cell[2] - dest[2])
    steps, why = w.route(cell, dest)
    return (why or None), steps


def finish(sim: Simulation, agent: Agent, action: Any) -> str | None:
    """Complete a durative action: apply its effect, or say why it could not complete."""
    if action.tool == "move_to" and action.dest is not None:
        # check()'s move_to on the destination plan() resolved (the same cell resolve_cell gives for args.dest)
        err, _ = _move_check(sim.world, agent.cell, action.dest)
        if err is not None:
            return err or f"you are already at {action.args['dest']}"
        move(sim, agent, action.dest)
        return None
    tool = sim.tools[action.tool]
    err = check(sim, agent, tool, action.args)
    if err:
        return err
    if tool.name == "move_to":
        move(sim, agent, action.dest)
        return None
    _apply_work(sim, agent, tool, action.args)
    return None


def move(sim: Simulation, agent: Agent, dest: Cell) -> None:
    """A completed move: the agent leaves its cell for ``dest``; those within reach of each end are told."""
    # Each event is built only if someone hears it or the run is recorded (sim.audience first).
    w = sim.world
    origin = agent.cell
    aid = agent.id
    cell_place, agents_at = w.cell_place, w.agents_at
    here = agents_at[origin]
    # Alone on a cell that is no place (a burrow, a patch): nobody to tell; sim.audience otherwise.
    who = [] if len(here) == 1 and cell_place.get(origin) is None else sim.audience(origin, aid)
    if who or sim.record:
        where = w.where_name(origin)
        sim.notify(who, {"kind": "left", "agent": aid, "where": where, "text": f"{aid} left {where}"})
    del here[aid]  # w.move_agent(agent, dest), inline
    agent.cell = dest
    there = agents_at.get(dest)
    if there is None:
        there = agents_at[dest] = {}
    there[aid] = agent
    who = [] if len(there) == 1 and cell_place.get(dest) is None else sim.audience(dest, aid)
    if who or sim.record:
        where = w.where_name(dest)
        sim.notify(who, {"kind": "arrived", "agent": aid, "where": where, "text": f"{aid} arrived at {where}"})


def apply_instant(sim: Simulation, agent: Agent, tool: Tool, args: dict[str, Any]) -> None:
    w = sim.world
    name = tool.name
    here = agent.cell
    if name == "take":
        item = w.items[args["item"]]
        w.lift(item)
        item.holder = agent.id
        item.last_taker = (sim.time, agent.id)
        agent.inventory.append(item.id)
        who = sim.audience(here, agent.id)
        if who or sim.record:
            sim.notify(who, {"kind": "took", "agent": agent.id, "item": item.id,
                             "text": f"{agent.id} took {item.id}"})
    elif name == "drop":
        item = w.items[args["item"]]
        w.lift(item)
        w.put(item, here)
        sim.notify_place(here, {"kind": "dropped", "agent": agent.id, "item": item.id,
                                "text": f"{agent.id} dropped {item.id}"}, agent.id)
    elif name == "give":
        item, to = w.items[args["item"]], w.agents[args["to"]]
        w.lift(item)
        item.holder = to.id
        to.inventory.append(item.id)
        sim.notify_place(here, {"kind": "gave", "agent": agent.id, "item": item.id, "to": to.id,
                                "text": f"{agent.id} gave {item.id} to {to.id}"}, agent.id)
    elif name == "say":
        msg = {"time": sim.time, "from": agent.id, "kind": "say", "text": args["text"]}
        sim._emit({"kind": "message", "t": sim.time, "from": agent.id, "to": None, "text": args["text"]})
        for aid in w.agents_in_reach(here):
            if aid != agent.id:
                sim.deliver_message(w.agents[aid], msg)
    elif name == "tell":
        msg = {"time": sim.time, "from": agent.id, "kind": "tell", "text": args["text"]}
        sim._emit({"kind": "message", "t": sim.time, "from": agent.id, "to": args["to"], "text": args["text"]})
        sim.deliver_message(w.agents[args["to"]], msg)
    elif name == "inspect":
        sim.tell_event(agent, {"kind": "inspected", "target": args["target"],
                               "details": describe(sim, args["target"]),
                               "text": f"you inspected {args['target']}"})
    else:
        _apply_work(sim, agent, tool, args)


def _apply_work(sim: Simulation, agent: Agent, tool: Tool, args: dict[str, Any]) -> None:
    w = sim.world
    spec = tool.work
    assert spec is not None
    used = ""
    if spec.item_kinds:
        item = w.items[args["item"]]
        w.lift(item)
        del w.items[item.id]
        used = f" using {item.id}"
    if spec.structure_kinds:
        s = w.structures[args["structure"]]
        if spec.field:
            value = s.fields.get(spec.field, 0) + spec.add
            top = s.maxima.get(spec.field)
            s.fields[spec.field] = min(value, top) if top is not None else value
        who = sim.audience(agent.cell, agent.id)
        if who or sim.record:
            text = f"{agent.id} used {tool.name} on {s.id}{used}"
            if spec.field:
                text += f": {s.name} {spec.field} is now {s.fields[spec.field]}"
            sim.notify(who, {"kind": "worked", "agent": agent.id, "tool": tool.name,
                             "structure": s.id, "fields": dict(s.fields), "text": text})
        sim.structure_changed(s.id)


def _inspectable(sim: Simulation, agent: Agent, target: str) -> bool:
    from .perception import inspect_choices

    return target in inspect_choices(sim, agent)


def describe(sim: Simulation, target: str) -> dict[str, Any]:
    """What a close look reveals: everything public about an entity."""
    w = sim.world
    if target in w.items:
        it = w.items[target]
        where = it.holder or it.inside or (cell_name(it.cell) if it.cell else None)
        out: dict[str, Any] = {"id": it.id, "kind": it.kind, "name": it.name, "at": where}
        if it.container:
            out["contains"] = list(w.contents.get(it.id, {}))
        return out
    if target in w.agents:
        a = w.agents[target]
        return {"id": a.id, "name": a.name, "role": a.role, "cell": cell_name(a.cell),
                "carrying": list(a.inventory),
                "busy": [x.tool for x in a.lanes.values() if x is not None]}
    if target in w.structures:
        s = w.structures[target]
        return {"id": s.id, "kind": s.kind, "name": s.name, "place": s.place, "fields": dict(s.fields),
                "maxima": dict(s.maxima)}
    p = w.places[target]
    return {"name": p.name, "cell": f"{p.space}:{p.x},{p.y}", "size": [p.w, p.h], "description": p.description,
            "structures": w.structures_at.get(p.name, [])}
