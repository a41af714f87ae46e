"""The rules of every tool, as one table: :data:`GENERIC` plus an entry per scenario tool (:func:`catalog`).

The rules, in prose (each entry below is this text, for its tool):

- A tool is offered to an agent with a finite set of choices per parameter (``None``: free text), or not at all,
  with the reason why not (``choices``). Perception lists them as affordances; validation accepts a value outside
  the choices only where the entry says so (a move to any cell of the map).
- Two moments are distinct, as in any simultaneous-move game. Validation judges a command against the
  observation the agent answered, so that a well-formed command for that snapshot is never refused because of
  someone else's answer. ``check`` judges it against the world at adjudication, after the answers ordered
  before it in the batch were applied: that is where conflicts lose, with a reason naming the winner, and
  ``conflict`` says the same for machines (``{"winner": agent, "resource": item}``).
- An item is within reach when it lies on a cell within the agent's reach, or inside a container that does
  (one level): :func:`within_reach`, the one statement of it. Reach is the whole place you stand in, or your
  cell where there is no place (``World.reach_cells``).
- ``move_to`` walks to a place or to any cell of the map; it takes ``step_ms`` per step of the shortest open
  path (Manhattan within a space, links between spaces, a gated link closed until its gate's field reaches its
  threshold), at least 1 ms, and fails if you are there already or no path is open, when it starts and again
  when it ends. Those within reach of either end hear "left" and "arrived".
- ``take`` lifts an item within reach that is no container, while your inventory has room; a take earlier in
  the same batch wins (the loser's rejection names the winner). ``drop`` puts a carried item on your cell;
  ``give`` hands one to an agent within reach whose inventory has room. Those within reach hear of each.
- ``say`` is heard by everyone within reach; ``tell`` by its one addressee, anywhere, never yourself. Both are
  recorded as messages and wake the hearer a tick later.
- ``inspect`` looks at an item, agent, structure or place you can see (in reach) and tells you what is public
  about it.
- A scenario tool (``WorkToolSpec``) works on a structure of its kinds within reach, consuming a carried item
  of its kinds, after a code equal to the structure's secret if it asks for one, while you carry every kind it
  ``needs_held``; it adds ``add`` to the structure's field, capped by the field's maximum (refused once the
  field is at its maximum). Durative by default: checked when it starts and again when it ends.
- An instant tool takes effect when adjudicated (``apply``); a durative one holds its lane for ``plan``'s
  duration and takes effect at ``finish``. A new command on a busy lane interrupts the action holding it.

Each entry is a :class:`ToolRules`: its catalog entry (``tool``: name, description, lane, durative, input
schema) and its choices, check, plan (check plus duration), apply/finish and conflict rule. Perception asks an
entry for its choices (``perception.py``); validation asks it whether a value off the choices is acceptable
(``command.py``); adjudication asks it to plan, apply and finish (``sim.py``). Nothing in the engine branches on
a tool's name: adding a tool is adding its entry (``tests/test_engine_new_tool.py`` shows it).

Fast paths: ``fast_valid`` (validation) and ``passes`` (adjudication) answer True only when the full path would
accept, without building the choices or the reasons; False means "ask the full path", which words the refusal.
They are built on the same helpers as the full path (``within_reach``, ``one_text_arg``...), and
``tests/test_engine_fast_paths.py`` checks on random worlds that both agree.

Rules read and change the world and act on the run only through :class:`~warren_sim.engine.effects.Effects`.
"""

from __future__ import annotations

from typing import Any

from .effects import Effects
from .spec import WorkToolSpec
from .tools import STR, TEXT, Tool, schema, work_tool
from .world import Action, Agent, Cell, Item, World, cell_name, parse_cell

try:  # an entry may be defined outside this module (a test's new tool): mypyc needs to be told it may
    from mypy_extensions import mypyc_attr
except ImportError:  # pragma: no cover  (the plain engine without mypy installed: the attribute means nothing)
    def mypyc_attr(*_attrs: str, **_kwattrs: object) -> Any:  # type: ignore[misc]
        return lambda cls: cls

TELL_CHOICES_LIMIT = 64  # tell's choices name every other agent only in a world this small
Choices = dict[str, list[str] | None]
ChoicesOrWhy = tuple[Choices | None, str]


# -- the helpers every entry is built on ------------------------------------------------------------------

def item_cell(w: World, item: Item) -> Cell | None:
    """The cell an item lies on for reach: its own, or its container's (one level); None when carried."""
    if item.inside is not None:
        return w.items[item.inside].cell
    return item.cell


def within_reach(w: World, cell: Cell, item: Item) -> bool:
    """The item or its container is within reach of ``cell``."""
    where = item_cell(w, item)
    return where is not None and where in w.reach_cells(cell)


def one_text_arg(args: Any, key: str) -> Any:
    """``args[key]`` when ``args`` is exactly ``{key: <non-empty str>}`` (what check_args accepts for a tool whose
    only parameter is a string without maxLength), else None."""
    if type(args) is dict and len(args) == 1:
        value = args.get(key)
        if type(value) is str and value:
            return value
    return None


def inventory_full(fx: Effects, agent: Agent) -> bool:
    return len(agent.inventory) >= fx.conv.max_inventory


def _list(choices: list[str], limit: int = 12) -> str:
    shown = choices[:limit]
    more = f" and {len(choices) - limit} more" if len(choices) > limit else ""
    return "[" + ", ".join(repr(c) for c in shown) + "]" + more


@mypyc_attr(allow_interpreted_subclasses=True)
class ToolRules:
    """One entry of the table: a tool's catalog entry and its rules. The defaults are an instant tool's with
    no fast paths and no conflicts; an entry overrides what its tool decides differently."""

    def __init__(self, tool: Tool, hints: dict[str, str] | None = None, suggests: bool = True) -> None:
        self.tool = tool
        self.name = tool.name
        self.durative = tool.durative
        self.lane = tool.lane
        #: free-form alternatives to a parameter's choices, shown in its affordance (``{"dest": "any cell ..."}``)
        self.hints: dict[str, str] = hints or {}
        #: whether the affordance lists ready-to-send suggestions when every parameter has finite choices
        self.suggests = suggests

    # perception -----------------------------------------------------------------------------------------
    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        """Each parameter's choices now (None: free text), or None and why the tool is not available."""
        raise NotImplementedError

    # validation -----------------------------------------------------------------------------------------
    def fast_valid(self, fx: Effects, agent: Agent, command: dict[str, Any]) -> tuple[bool, Any]:
        """``(True, resolved)`` when the full validation would accept this command (``resolved``: what it
        worked out for adjudication, e.g. a move's cell, kept on the observation); ``(False, None)``: ask it."""
        return False, None

    def precheck(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        """A refusal worded before the choices are compared (args fit the schema already), or None."""
        return None

    def off_choices(self, fx: Effects, agent: Agent, param: str, value: Any, choices: list[str],
                    place: str | None) -> str | None:
        """``value`` of ``param`` is not among ``choices``: why that is refused, or None when it is acceptable
        anyway. ``place``: where the agent stands, as its observation says."""
        return f"args.{param}: {value!r} is not a valid {param} for {self.name} now; choose one of {_list(choices)}"

    # adjudication ---------------------------------------------------------------------------------------
    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        """Why this action fails against the world as it is now, or None."""
        return None

    def passes(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> bool:
        """True when :meth:`check` would find nothing wrong; False means "ask check"."""
        return False

    def duration(self) -> int:
        """How long a durative action holds its lane (ms, at least 1); 0 for an instant tool."""
        return 0

    def plan(self, fx: Effects, agent: Agent, args: dict[str, Any],
             resolved: Any) -> tuple[str | None, int, Cell | None]:
        """``check`` and the duration in one pass: (why it fails or None, duration ms, destination cell)."""
        if self.passes(fx, agent, args):
            return None, self.duration(), None
        err = self.check(fx, agent, args)
        if err:
            return err, 0, None
        return None, self.duration(), None

    def conflict(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> dict[str, str] | None:
        """The same-batch conflict behind a failed check, machine-readable (``{"winner", "resource"}``)."""
        return None

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        """An instant tool's effect (adjudication accepted it)."""
        raise NotImplementedError

    def finish(self, fx: Effects, agent: Agent, action: Action) -> str | None:
        """A durative action completes: apply its effect, or say why it could not complete."""
        err = self.check(fx, agent, action.args)
        if err:
            return err
        self.apply(fx, agent, action.args)
        return None


# -- move_to ------------------------------------------------------------------------------------------------

def open_grid_move(w: World, cell: Cell, dest: Cell) -> bool:
    """A move within one space to another place (or off any place): the commonest, ``move_check``'s
    ``(None, Manhattan steps)`` without asking it (the fast path of ``plan`` and ``finish``)."""
    if dest[0] != cell[0] or dest == cell:
        return False
    place = w.cell_place.get(dest)
    return place is None or place != w.cell_place.get(cell)


def move_check(w: World, cell: Cell, dest: Cell) -> tuple[str | None, int]:
    """A move from ``cell`` to ``dest`` now: ``(None, steps)``, or ``("", 0)`` when it is already there (the
    caller words it) or ``(why, 0)`` when no path is open."""
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


def move(fx: Effects, agent: Agent, dest: Cell) -> None:
    """A completed move: the agent leaves its cell for ``dest``; those within reach of each end are told."""
    # Each event is built only if someone hears it or the run is recorded (audience first).
    w = fx.world
    origin = agent.cell
    aid = agent.id
    cell_place = w.cell_place
    # Alone on a cell that is no place (a burrow, a patch): nobody to tell; the audience otherwise.
    who = [] if len(w.agents_at[origin]) == 1 and cell_place.get(origin) is None else fx.audience(origin, aid)
    if who or fx.record:
        where = w.where_name(origin)
        fx.notify(who, {"kind": "left", "agent": aid, "where": where, "text": f"{aid} left {where}"})
    w.move_agent(agent, dest)
    who = [] if len(w.agents_at[dest]) == 1 and cell_place.get(dest) is None else fx.audience(dest, aid)
    if who or fx.record:
        where = w.where_name(dest)
        fx.notify(who, {"kind": "arrived", "agent": aid, "where": where, "text": f"{aid} arrived at {where}"})


class MoveTo(ToolRules):
    def __init__(self) -> None:
        super().__init__(Tool("move_to", "Walk to a place, however far.", "body", True, schema(dest=STR)),
                         hints={"dest": "any cell '<space>:<x>,<y>'"})

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        w = fx.world
        place = w.place_of(agent.cell)
        return {"dest": [p for p in w.place_names if p != place]}, ""

    def fast_valid(self, fx: Effects, agent: Agent, command: dict[str, Any]) -> tuple[bool, Any]:
        # A move to another place or a cell of the map; the destination cell is kept for adjudication.
        w = fx.world
        dest = one_text_arg(command.get("args"), "dest")
        if dest is None or dest == w.cell_place.get(agent.cell):
            return False, None
        place = w.places.get(dest)
        if place is not None:
            return True, (place.space, place.x, place.y)
        cell = parse_cell(dest)
        if cell is not None and w.valid_cell(cell):
            return True, cell
        return False, None

    def off_choices(self, fx: Effects, agent: Agent, param: str, value: Any, choices: list[str],
                    place: str | None) -> str | None:
        if value == place:
            return f"args.dest: you are already at {value}; choose another place ({_list(choices)}) or a cell"
        cell = parse_cell(value)
        if cell is not None and fx.world.valid_cell(cell):
            return None
        return f"args.dest: {value!r} is neither a place ({_list(choices)}) nor a cell of the map ('<space>:<x>,<y>')"

    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        err, _ = move_check(fx.world, agent.cell, fx.world.resolve_cell(args["dest"]))
        if err is not None:
            return err or f"you are already at {args['dest']}"
        return None

    def plan(self, fx: Effects, agent: Agent, args: dict[str, Any],
             resolved: Any) -> tuple[str | None, int, Cell | None]:
        w = fx.world
        dest: Cell = w.resolve_cell(args["dest"]) if resolved is None else resolved
        cell = agent.cell
        if open_grid_move(w, cell, dest):
            return None, max(1, (abs(cell[1] - dest[1]) + abs(cell[2] - dest[2])) * fx.conv.step_ms), dest
        err, steps = move_check(w, cell, dest)
        if err is not None:
            return (err or f"you are already at {args['dest']}"), 0, None
        return None, max(1, steps * fx.conv.step_ms), dest

    def finish(self, fx: Effects, agent: Agent, action: Action) -> str | None:
        # check on the destination plan() resolved (the cell resolve_cell gives for args.dest), then move
        dest = action.dest
        assert dest is not None
        cell = agent.cell
        if open_grid_move(fx.world, cell, dest):
            move(fx, agent, dest)
            return None
        err, _ = move_check(fx.world, cell, dest)
        if err is not None:
            return err or f"you are already at {action.args['dest']}"
        move(fx, agent, dest)
        return None


# -- take, drop, give ---------------------------------------------------------------------------------------

def _taken_this_batch(fx: Effects, agent: Agent, item_id: str) -> str | None:
    """The other agent holding ``item_id`` after a take earlier in this batch (same sim time), or None."""
    item = fx.world.items[item_id]
    if item.holder is None or item.holder == agent.id:
        return None
    if item.last_taker and item.last_taker[0] == fx.time:
        return item.holder
    return None


class Take(ToolRules):
    def __init__(self) -> None:
        super().__init__(Tool("take", "Pick up an item within reach (at your cell or your place).", "body", False,
                              schema(item=STR)))

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        if inventory_full(fx, agent):
            return None, f"your inventory is full ({fx.conv.max_inventory} items)"
        w = fx.world
        takeable = [i for i in w.items_in_reach(agent.cell) if not w.items[i].container]
        return ({"item": takeable}, "") if takeable else (None, "there is nothing to take within reach")

    def fast_valid(self, fx: Effects, agent: Agent, command: dict[str, Any]) -> tuple[bool, Any]:
        item_id = one_text_arg(command.get("args"), "item")
        if item_id is None or inventory_full(fx, agent):
            return False, None
        item = fx.world.items.get(item_id)
        return item is not None and not item.container and within_reach(fx.world, agent.cell, item), None

    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        item_id = args["item"]
        item = fx.world.items[item_id]
        if item.holder is not None:
            who = item.holder
            if who == agent.id:
                return f"you already carry {item_id}"
            when = " earlier in this batch" if _taken_this_batch(fx, agent, item_id) else ""
            return f"{item_id} is no longer here: {who} has it{when}"
        if not within_reach(fx.world, agent.cell, item):
            return f"{item_id} is no longer within reach"
        if item.container:
            return f"{item_id} is a container and cannot be carried; take what is inside it"
        if inventory_full(fx, agent):
            return f"your inventory is full ({fx.conv.max_inventory} items); drop or give something first"
        return None

    def passes(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> bool:
        item = fx.world.items[args["item"]]
        return (item.holder is None and not item.container and not inventory_full(fx, agent)
                and within_reach(fx.world, agent.cell, item))

    def conflict(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> dict[str, str] | None:
        winner = _taken_this_batch(fx, agent, args["item"])
        return None if winner is None else {"winner": winner, "resource": args["item"]}

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        w = fx.world
        item = w.items[args["item"]]
        w.lift(item)
        item.holder = agent.id
        item.last_taker = (fx.time, agent.id)
        agent.inventory.append(item.id)
        who = fx.audience(agent.cell, agent.id)
        if who or fx.record:
            fx.notify(who, {"kind": "took", "agent": agent.id, "item": item.id, "text": f"{agent.id} took {item.id}"})


def _still_carried(agent: Agent, args: dict[str, Any]) -> str | None:
    return None if args["item"] in agent.inventory else f"you no longer carry {args['item']}"


class Drop(ToolRules):
    def __init__(self) -> None:
        super().__init__(Tool("drop", "Put down an item you carry, here.", "body", False, schema(item=STR)))

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        return ({"item": list(agent.inventory)}, "") if agent.inventory else (None, "you carry nothing")

    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        return _still_carried(agent, args)

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        w = fx.world
        item = w.items[args["item"]]
        w.lift(item)
        w.put(item, agent.cell)
        fx.notify(fx.audience(agent.cell, agent.id), {"kind": "dropped", "agent": agent.id, "item": item.id,
                                                      "text": f"{agent.id} dropped {item.id}"})


class Give(ToolRules):
    def __init__(self) -> None:
        super().__init__(Tool("give", "Hand an item you carry to an agent within reach.", "body", False,
                              schema(item=STR, to=STR)))

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        if not agent.inventory:
            return None, "you carry nothing"
        reach_agents = [a for a in fx.world.agents_in_reach(agent.cell) if a != agent.id]
        if not reach_agents:
            return None, "nobody is within reach"
        return {"item": list(agent.inventory), "to": reach_agents}, ""

    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        err = _still_carried(agent, args)
        if err:
            return err
        to = args["to"]
        if to not in fx.world.agents_in_reach(agent.cell):
            return f"{to} is no longer within reach"
        if len(fx.world.agents[to].inventory) >= fx.conv.max_inventory:
            return f"{to} cannot carry more ({fx.conv.max_inventory} items)"
        return None

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        w = fx.world
        item, to = w.items[args["item"]], w.agents[args["to"]]
        w.lift(item)
        item.holder = to.id
        to.inventory.append(item.id)
        fx.notify(fx.audience(agent.cell, agent.id), {"kind": "gave", "agent": agent.id, "item": item.id,
                                                      "to": to.id, "text": f"{agent.id} gave {item.id} to {to.id}"})


# -- say, tell ------------------------------------------------------------------------------------------------

def _speak(fx: Effects, agent: Agent, kind: str, to: str | None, text: str) -> dict[str, Any]:
    """Record a message and return it as its hearers receive it."""
    fx.emit({"kind": "message", "t": fx.time, "from": agent.id, "to": to, "text": text})
    return {"time": fx.time, "from": agent.id, "kind": kind, "text": text}


class Say(ToolRules):
    def __init__(self) -> None:
        super().__init__(Tool("say", "Speak aloud; everyone at your place hears it.", "voice", False,
                              schema(text=TEXT)))

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        return {"text": None}, ""

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        msg = _speak(fx, agent, "say", None, args["text"])
        w = fx.world
        for aid in w.agents_in_reach(agent.cell):
            if aid != agent.id:
                fx.deliver(w.agents[aid], msg)


class Tell(ToolRules):
    def __init__(self) -> None:
        # free text beside a finite addressee: no ready-to-send arguments
        super().__init__(Tool("tell", "Send a direct message to one agent, wherever it is.", "voice", False,
                              schema(to=STR, text=TEXT)), suggests=False)

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        ids = fx.world.agent_ids
        if len(ids) <= 1:
            return None, "there is nobody else in this world"
        others = [a for a in ids if a != agent.id] if len(ids) <= TELL_CHOICES_LIMIT else None
        return {"to": others, "text": None}, ""

    def precheck(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        # before the choices, which leave out the teller: say why, not just "not valid"
        to = args["to"]
        if to == agent.id:
            return "args.to: you cannot tell yourself; name another agent"
        if to not in fx.world.agents:
            return f"args.to: there is no agent {to!r}; agents you know of are in place.agents and visible.agents"
        return None

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        fx.deliver(fx.world.agents[args["to"]], _speak(fx, agent, "tell", args["to"], args["text"]))


# -- inspect --------------------------------------------------------------------------------------------------

def inspect_choices(w: World, agent: Agent) -> list[str]:
    """What an agent can inspect: what it carries, and the items, agents, structures and place within reach."""
    out = list(agent.inventory)
    out += w.items_in_reach(agent.cell)
    out += [a for a in w.agents_in_reach(agent.cell) if a != agent.id]
    out += w.structures_in_reach(agent.cell)
    place = w.place_of(agent.cell)
    if place is not None:
        out.append(place)
    return sorted(dict.fromkeys(out))


def describe(w: World, target: str) -> dict[str, Any]:
    """What a close look reveals: everything public about an entity."""
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


class Inspect(ToolRules):
    def __init__(self) -> None:
        super().__init__(Tool("inspect", "Look closely at an item, agent, structure or place you can see.", "body",
                              False, schema(target=STR)))

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        return {"target": inspect_choices(fx.world, agent)}, ""

    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        target = args["target"]
        return None if target in inspect_choices(fx.world, agent) else f"{target} is no longer in sight"

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        target = args["target"]
        fx.tell(agent, {"kind": "inspected", "target": target, "details": describe(fx.world, target),
                        "text": f"you inspected {target}"})


# -- a scenario's work tools ----------------------------------------------------------------------------------

class Work(ToolRules):
    """The rules of every scenario tool, read from its ``WorkToolSpec`` (no scenario code in the engine)."""

    def __init__(self, spec: WorkToolSpec) -> None:
        super().__init__(work_tool(spec))
        self.spec = spec
        # the fast paths cover the commonest shape: a structure and a carried item, no held kinds, no code
        self.simple = bool(spec.structure_kinds and spec.item_kinds and not spec.needs_held and not spec.needs_code)

    def choices(self, fx: Effects, agent: Agent) -> ChoicesOrWhy:
        w = fx.world
        spec = self.spec
        inventory = agent.inventory
        if spec.needs_held:
            held = [w.items[i].kind for i in inventory]
            missing = [k for k in spec.needs_held if k not in held]
            if missing:
                return None, f"you need to carry a {missing[0]}"
        params: Choices = {}
        if spec.structure_kinds:
            structs = [s for s in w.structures_in_reach(agent.cell) if w.structures[s].kind in spec.structure_kinds]
            if not structs:
                return None, f"no {' or '.join(spec.structure_kinds)} within reach"
            params["structure"] = structs
        if spec.item_kinds:
            items = [i for i in inventory if w.items[i].kind in spec.item_kinds]
            if not items:
                return None, f"you carry no {' or '.join(spec.item_kinds)}"
            params["item"] = items
        if spec.needs_code:
            params["code"] = None
        return params, ""

    def fast_valid(self, fx: Effects, agent: Agent, command: dict[str, Any]) -> tuple[bool, Any]:
        # on its structure and item (what the choices offer): no needs_held, no code
        if not self.simple:
            return False, None
        args = command.get("args")
        if type(args) is not dict or len(args) != 2:
            return False, None
        sid, item_id = args.get("structure"), args.get("item")
        if type(sid) is not str or type(item_id) is not str or not sid or not item_id:
            return False, None
        w = fx.world
        spec = self.spec
        if sid not in w.structures_in_reach(agent.cell) or w.structures[sid].kind not in spec.structure_kinds:
            return False, None
        return item_id in agent.inventory and w.items[item_id].kind in spec.item_kinds, None

    def _below_maximum(self, fx: Effects, sid: str) -> int | None:
        """The field's maximum when the structure's field reached it already, else None."""
        s = fx.world.structures[sid]
        top = s.maxima.get(self.spec.field)
        return top if top is not None and s.fields.get(self.spec.field, 0) >= top else None

    def check(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> str | None:
        w = fx.world
        spec = self.spec
        held_kinds = [w.items[i].kind for i in agent.inventory]
        for kind in spec.needs_held:
            if kind not in held_kinds:
                return f"{self.name} needs a {kind} in your inventory"
        if spec.item_kinds:
            err = _still_carried(agent, args)
            if err:
                return err
        if spec.structure_kinds:
            sid = args["structure"]
            if sid not in w.structures_in_reach(agent.cell):
                return f"{sid} is not within reach; go to {w.structures[sid].place} first"
            s = w.structures[sid]
            if spec.needs_code and args["code"] != s.secret:
                return f"the code {args['code']!r} does not work on {sid}"
            if spec.field:
                top = self._below_maximum(fx, sid)
                if top is not None:
                    return f"{s.name} {spec.field} is already at its maximum ({top})"
        return None

    def passes(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> bool:
        if not self.simple:
            return False
        if args["item"] not in agent.inventory or args["structure"] not in fx.world.structures_in_reach(agent.cell):
            return False
        return not self.spec.field or self._below_maximum(fx, args["structure"]) is None

    def duration(self) -> int:
        return max(1, self.spec.duration_ms) if self.durative else 0

    def apply(self, fx: Effects, agent: Agent, args: dict[str, Any]) -> None:
        w = fx.world
        spec = self.spec
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
            who = fx.audience(agent.cell, agent.id)
            if who or fx.record:
                text = f"{agent.id} used {self.name} on {s.id}{used}"
                if spec.field:
                    text += f": {s.name} {spec.field} is now {s.fields[spec.field]}"
                fx.notify(who, {"kind": "worked", "agent": agent.id, "tool": self.name,
                                "structure": s.id, "fields": dict(s.fields), "text": text})
            fx.structure_changed(s.id)


# -- the table ---------------------------------------------------------------------------------------------

#: The generic tools every world has, in the catalog's order (a test may add one: tests/test_engine_new_tool.py).
GENERIC: dict[str, ToolRules] = {e.name: e for e in (MoveTo(), Take(), Drop(), Give(), Say(), Tell(), Inspect())}


def generic_names() -> tuple[str, ...]:
    return tuple(GENERIC)


def catalog(work_tools: tuple[WorkToolSpec, ...]) -> dict[str, ToolRules]:
    """Every tool of a world by name, generic ones first, in a fixed order: the table a simulation consults."""
    table = dict(GENERIC)
    for spec in work_tools:
        table[spec.name] = Work(spec)
    return table
