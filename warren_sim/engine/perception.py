"""What an agent perceives at a wake: the observation object, its affordances and its text.

The observation object is the wire truth (design rule 1 of warren-agent/0); ``text`` renders the
same facts for an LLM prompt and is built only when someone asks for it, so headless runs with
thousands of agents do not pay for prose nobody reads. Affordances list, per available tool, the
finite choices of each parameter and ready-to-send argument suggestions; they are also what a
command is validated against (``command.py``).

Perception names no tool: each tool's choices, and the hints its affordance shows, are its entry of the rules
table (``rules.py``), asked through :func:`_tool_choices`. What it reads of the run is :class:`Perceivable`
(the simulation, which subclasses it), so this module never imports ``sim.py``.
"""

from __future__ import annotations

from collections.abc import Callable, ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Protocol

from .effects import Effects
from .errors import StaleObservation
from .rules import GENERIC, TELL_CHOICES_LIMIT, ChoicesOrWhy, ToolRules
from .world import Agent, World, cell_name

MAX_SUGGESTIONS = 5
_NONE: tuple[()] = ()  # "no messages/events since the last wake", shared (a field built from it is a new [])


class Perceivable(Effects):
    """What perception reads of a run besides what the rules read (:class:`Effects`): the rules table it asks
    for each tool's choices, the batch an observation belongs to, the batch's shared choices, the objectives.
    ``Simulation`` is the one implementation (it subclasses this class), so perception never imports it."""

    rules: dict[str, ToolRules]
    batch_no: int
    perceived_batch: int
    perceived_table: dict[Any, Any]

    def shared_objective_views(self) -> list[dict[str, Any]]:
        raise NotImplementedError


class _Source(Protocol):
    """What a field's builder reads: the simulation and the agent (an :class:`Observation` or a nested view)."""

    _sim: Perceivable
    _agent: Agent


class ObservationView(Mapping[str, Any]):
    """A nested field of an observation (``place``), its own fields built on first access and kept.

    A read-only mapping, so a policy written against the plain dict (``o["place"]["items"]``) reads it
    unchanged; building a field for the first time after the batch was adjudicated raises
    ``StaleObservation``, as for the whole object. It holds the simulation and the agent, not the observation:
    the observation holds it (among its built fields), and a reference back would make every observation
    that read ``place`` a reference cycle, freed by the cyclic garbage collector instead of at once.
    """

    __slots__ = ("_agent", "_batch", "_builders", "_built", "_gone", "_sim")

    def __init__(self, o: Observation, builders: dict[str, Callable[[Any], Any]]) -> None:
        self._sim, self._agent, self._batch, self._gone = o._sim, o._agent, o._batch, o.observation_id
        self._builders = builders
        self._built: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        built = self._built
        if key in built:  # not try/except: most reads are first reads, and a raised KeyError costs more
            return built[key]
        build = self._builders[key]  # KeyError for a field that does not exist, as for a dict
        if self._sim.batch_no != self._batch:
            raise StaleObservation(f"{self._gone} was first read after its batch was adjudicated; "
                                   "read an observation before answering it")
        value = built[key] = build(self)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._builders)

    def __len__(self) -> int:
        return len(self._builders)

    def __repr__(self) -> str:
        return f"ObservationView({self.to_dict()!r})"

    def to_dict(self) -> dict[str, Any]:
        """Every field, as a plain dict, in the wire order."""
        return {k: self[k] for k in self._builders}


class Observation:
    """One wake of one agent: what the engine hands to a policy or a remote client, and, once given, its answer.

    Built lazily: the observation object, the affordances and the text are made on first access,
    and the choices a command is validated against only when asked. The world does not change
    between a batch's ``advance()`` and its ``adjudicate()``, so a lazy view is the same view;
    reading it for the first time after adjudication raises ``StaleObservation`` instead of
    showing a later world.

    The same object is the engine's record of the outstanding wake (``Simulation.pending``): ``answer`` and
    ``source`` are set by ``Simulation.answer``, and ``parsed`` carries what validation resolved (a move's
    destination cell) to adjudication, as ``(command, value)``, so that it is not derived twice.
    """

    __slots__ = ("_agent", "_batch", "_built", "_captured", "_lazy", "_sim", "agent_id", "answer", "observation_id",
                 "parsed", "reason", "seq", "source", "time")

    def __init__(self, sim: Perceivable, agent: Agent, reason: str) -> None:
        self._sim, self._agent, self._batch = sim, agent, sim.batch_no
        aid = self.agent_id = agent.id
        seq = self.seq = agent.seq
        self.time, self.reason = sim.time, reason
        self.observation_id = f"{aid}#{seq}"
        # What arrived since the last wake is handed over; an empty list stays the agent's (nothing to hand).
        messages: list[dict[str, Any]] | tuple[()] = agent.messages
        events: list[Any] | tuple[()] = agent.events
        if messages:
            agent.messages = []
        else:
            messages = _NONE
        if events:
            agent.events = []
        else:
            events = _NONE
        self._captured = (messages, agent.messages_dropped, events, agent.events_dropped)
        agent.messages_dropped = agent.events_dropped = 0
        # The fields read through ``view`` so far (None until ``view`` is first read): see ``view``.
        self._built: dict[str, Any] | None = None
        # What a served or LLM reader asks for, made on first access and kept: "observation", "affordances",
        # "text", "unavailable", and "tools" (each tool's choices). One slot: a headless run rarely needs it.
        self._lazy: dict[str, Any] | None = None
        self.answer: dict[str, Any] | None = None
        self.source = ""
        self.parsed: tuple[dict[str, Any], Any] | None = None

    @property
    def name(self) -> str:
        return self._agent.name

    def _kept(self, key: str | None = None, factory: Callable[[], Any] | None = None) -> Any:
        """The lazily made things (``key=None``), or the one named ``key``, made by ``factory`` if missing."""
        lazy = self._lazy
        if lazy is None:
            lazy = self._lazy = {}
        if key is None:
            return lazy
        found = lazy.get(key)
        if found is None:
            assert factory is not None
            found = lazy[key] = factory()
        return found

    def _check_fresh(self) -> None:
        if self._sim.batch_no != self._batch:
            raise StaleObservation(f"{self.observation_id} was first read after its batch was adjudicated; "
                                   "read an observation before answering it")

    def tool_choices(self, tool: str) -> tuple[dict[str, list[str] | None] | None, str]:
        """A tool's parameter choices (None: free text) as of this observation, or None and why not."""
        tools = self._kept("tools", dict)
        found = tools.get(tool)
        if found is None:
            self._check_fresh()
            found = tools[tool] = _tool_choices(self._sim, self._agent, tool)
        return found

    def _shared(self) -> Perceived:
        """Every tool's choices and what is made of them, shared with the batch's other observations that
        perceive the same (see ``Perceived``); this observation's own ``tool_choices`` are filled from it."""
        lazy = self._kept()
        found: Perceived | None = lazy.get("perceived")
        if found is None:
            self._check_fresh()
            found = lazy["perceived"] = perceived(self._sim, self._agent)
            tools = lazy.get("tools")
            lazy["tools"] = dict(found.choices) if tools is None else {**found.choices, **tools}
        return found

    def unavailable(self) -> dict[str, str]:
        """Why each unavailable tool is unavailable."""
        return self._shared().unavailable

    def choices(self) -> dict[str, dict[str, list[str] | None]]:
        """Every available tool's parameter choices."""
        return self._shared().available

    @property
    def view(self) -> Observation:
        """The observation object as a lazy mapping: each field (and each of ``place``'s) is built when first
        read. In-process policies read this: a forager that looks at ``busy`` and ``you`` never pays for
        ``tools`` (every tool's availability) or the agents around it. ``dict(view)`` equals ``observation``
        except that ``place`` stays a view (an ``ObservationView``).

        The mapping is this observation itself (``__getitem__``, ``keys``...: the fields, in the wire order):
        a separate view object would hold the observation that holds it, a reference cycle per observation
        read, or cost a detach per decision to break it (bench/results/r5-perf-engine2.md)."""
        if self._built is None:
            self._built = {}
        return self

    # -- the read-only mapping of the observation's fields (``view``) ----------------------------------------
    def __getitem__(self, key: str) -> Any:
        built = self._built
        if built is None:
            built = self._built = {}
        elif key in built:  # not try/except: most reads are first reads, and a raised KeyError costs more
            return built[key]
        build = OBSERVATION_FIELDS[key]  # KeyError for a field that does not exist, as for a dict
        if self._sim.batch_no != self._batch:
            self._check_fresh()
        value = built[key] = build(self)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(OBSERVATION_FIELDS)

    def __len__(self) -> int:
        return len(OBSERVATION_FIELDS)

    def __contains__(self, key: object) -> bool:
        return key in OBSERVATION_FIELDS

    def keys(self) -> KeysView[str]:
        return KeysView(self)

    def items(self) -> ItemsView[str, Any]:
        return ItemsView(self)

    def values(self) -> ValuesView[Any]:
        return ValuesView(self)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in OBSERVATION_FIELDS else default

    def to_dict(self) -> dict[str, Any]:
        """Every field, as plain dicts (nested views too), in the wire order."""
        return {k: (v.to_dict() if isinstance(v, ObservationView) else v) for k in OBSERVATION_FIELDS
                for v in (self[k],)}

    @property
    def observation(self) -> dict[str, Any]:
        """The whole observation object (the wire truth), built from the same fields as ``view``: directly,
        field after field, unless the view already built some (those are reused: one object per field)."""
        lazy = self._kept()
        found: dict[str, Any] | None = lazy.get("observation")
        if found is None:
            found = lazy["observation"] = self.observation_unkept()
        return found

    def observation_unkept(self) -> dict[str, Any]:
        """``observation``, not kept if it was not already: for a reader that serializes it at once (a served
        envelope). Why: 10,000 envelopes' dicts kept alive until their batch ends are ~150,000 containers,
        and allocating that many live objects sets off the cycle collector's full passes over the server's
        whole heap (about half of a served batch's build time, measured); a dict freed as soon as it is
        serialized never counts towards a collection. Built again on a later read: the same object, since the
        world does not change while the batch is open."""
        lazy = self._lazy
        if lazy is not None:
            found: dict[str, Any] | None = lazy.get("observation")
            if found is not None:
                return found
        self._check_fresh()
        if self._built is None:
            return {k: build(self) for k, build in OBSERVATION_FIELDS_DIRECT.items()}
        return self.to_dict()

    @property
    def kept_text(self) -> str | None:
        """``text`` if it was made already, else None (made by ``text`` or ``text_of``)."""
        lazy = self._lazy
        return None if lazy is None else lazy.get("text")

    def text_of(self, observation: dict[str, Any]) -> str:
        """``text``, rendered from ``observation`` (this observation's object, kept or not) and kept: a string
        holds no references, so keeping it costs the collector nothing."""
        lazy = self._kept()
        found: str | None = lazy.get("text")
        if found is None:
            shared = self._shared()
            found = lazy["text"] = render_text(observation, shared.affordances, self.reason, self.name,
                                               can=shared.can)
        return found

    @property
    def affordances(self) -> list[dict[str, Any]]:
        """Per available tool its choices and suggestions: shared with the observations that perceive the same."""
        return self._shared().affordances

    @property
    def text(self) -> str:
        lazy = self._kept()
        found: str | None = lazy.get("text")
        if found is None:
            found = self.text_of(self.observation)
        return found


def _item_views(w: World, ids: Iterable[str]) -> list[dict[str, Any]]:
    """What an agent is shown of each of these items (one loop per field, not a call per item: the hot path)."""
    items = w.items
    out = []
    for i in ids:
        it = items[i]
        view: dict[str, Any] = {"id": it.id, "kind": it.kind, "name": it.name}
        if it.inside is not None:
            view["in"] = it.inside
        if it.container:
            view["container"] = True
        out.append(view)
    return out


def _agent_view(sim: Perceivable, aid: str) -> dict[str, Any]:
    a = sim.world.agents[aid]
    busy = [x.tool for x in a.lanes.values() if x is not None]
    return {"id": a.id, "name": a.name, "role": a.role, "busy": busy}


def _structure_view(sim: Perceivable, sid: str) -> dict[str, Any]:
    s = sim.world.structures[sid]
    return {"id": s.id, "kind": s.kind, "name": s.name, "fields": dict(s.fields), "maxima": dict(s.maxima)}


# The observation's fields, each built from the Observation on first access (see Observation.view). The
# order is the wire order of the object: ``Observation.observation`` lists them in this order.
def _f_busy(o: Observation) -> list[dict[str, Any]]:
    agent = o._agent
    if agent.idle():  # the commonest wake: nothing to list
        return []
    out = []
    for x in agent.lanes.values():  # a loop, not a comprehension: one call fewer, at most two lanes
        if x is not None:
            out.append({"lane": x.lane, "action": x.tool, "args": x.args, "started_ms": x.started,
                        "until_ms": x.until})
    return out


def _f_you(o: Observation) -> dict[str, Any]:
    sim, agent = o._sim, o._agent
    w = sim.world
    return {"id": agent.id, "name": agent.name, "role": agent.role, "cell": cell_name(agent.cell),
            "place": w.cell_place.get(agent.cell), "inventory": _item_views(w, agent.inventory),
            "capacity": sim.conv.max_inventory}


def _p_name(o: _Source) -> str | None:
    return o._sim.world.place_of(o._agent.cell)


def _p_cell(o: _Source) -> str:
    return cell_name(o._agent.cell)


def _p_description(o: _Source) -> str:
    w = o._sim.world
    place = w.place_of(o._agent.cell)
    return w.places[place].description if place is not None else ""


def _p_items(o: _Source) -> list[dict[str, Any]]:
    w = o._sim.world
    return _item_views(w, w.items_in_reach(o._agent.cell))


def _p_agents(o: _Source) -> list[dict[str, Any]]:
    sim, me = o._sim, o._agent.id
    return [_agent_view(sim, a) for a in sim.world.agents_in_reach(o._agent.cell) if a != me]


def _p_structures(o: _Source) -> list[dict[str, Any]]:
    sim = o._sim
    return [_structure_view(sim, s) for s in sim.world.structures_in_reach(o._agent.cell)]


PLACE_FIELDS: dict[str, Callable[[_Source], Any]] = {
    "name": _p_name, "cell": _p_cell, "description": _p_description,
    "items": _p_items, "agents": _p_agents, "structures": _p_structures,
}


def _f_place(o: Observation) -> ObservationView:
    return ObservationView(o, PLACE_FIELDS)


def _f_visible(o: Observation) -> dict[str, Any]:
    sim, agent = o._sim, o._agent
    w = sim.world
    conv = sim.conv
    cell = agent.cell
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
            for view in _item_views(w, sorted(w.items_at.get(c, ()))):
                if budget > 0:
                    visible_items.append({**view, "cell": cell_name(c), "distance": dist})
                    budget -= 1
    return {"agents": visible_agents, "items": visible_items}


def _f_tools(o: Observation) -> list[dict[str, Any]]:
    return o._shared().tools


def _f_agent(o: Observation) -> str:
    return o.agent_id


def _f_time(o: Observation) -> int:
    return o.time


def _f_messages(o: Observation) -> list[dict[str, Any]]:
    return o._captured[0] or []


def _f_messages_dropped(o: Observation) -> int:
    return o._captured[1]


def _f_events(o: Observation) -> list[dict[str, Any]]:
    """Events as dicts: an outcome kept as its facts (``sim.OutcomeFacts``) is built now, when first read."""
    return [e if type(e) is dict else outcome_event(e) for e in o._captured[2]]


def outcome_event(facts: tuple[int, str, str, str, str]) -> dict[str, Any]:
    """An outcome event's dict and prose, from the facts ``Simulation`` keeps: ``(time, observation id, tool,
    outcome, reason)``. Most outcomes of a headless run are never read as prose (a policy looks at its
    inventory, not at "your move_to (a#3) was completed"), so they are built here, when first read."""
    time, observation_id, tool, outcome, reason = facts
    text = f"your {tool} ({observation_id}) was {outcome}" + (f": {reason}" if reason else "")
    return {"time": time, "kind": "outcome", "observation_id": observation_id, "action": tool,
            "outcome": outcome, "reason": reason, "text": text}


def _f_events_dropped(o: Observation) -> int:
    return o._captured[3]


def _f_objectives(o: Observation) -> list[dict[str, Any]]:
    return o._sim.shared_objective_views()


def _place_dict(o: Observation) -> dict[str, Any]:
    """``place`` as a plain dict, in one pass (what ``PLACE_FIELDS`` build one by one through the view)."""
    sim, agent = o._sim, o._agent
    w = sim.world
    cell = agent.cell
    place = w.cell_place.get(cell)
    me = agent.id
    return {"name": place, "cell": cell_name(cell),
            "description": w.places[place].description if place is not None else "",
            "items": _p_items(o), "agents": [_agent_view(sim, a) for a in w.agents_in_reach(cell) if a != me],
            "structures": [_structure_view(sim, s) for s in w.structures_in_reach(cell)]}


OBSERVATION_FIELDS: dict[str, Callable[[Observation], Any]] = {
    "agent": _f_agent,
    "time": _f_time,
    "busy": _f_busy,
    "you": _f_you,
    "place": _f_place,
    "visible": _f_visible,
    "messages": _f_messages,
    "messages_dropped": _f_messages_dropped,
    "events": _f_events,
    "events_dropped": _f_events_dropped,
    "objectives": _f_objectives,
    "tools": _f_tools,
}
# The same fields for the whole object at once (``Observation.observation``): ``place`` a plain dict.
OBSERVATION_FIELDS_DIRECT: dict[str, Callable[[Observation], Any]] = {**OBSERVATION_FIELDS, "place": _place_dict}
Mapping.register(Observation)  # ``view``: a read-only mapping of the fields, like the plain dict


class Perceived:
    """What every tool offers an agent, and what is made of it (affordances, the ``tools`` field, the text's
    "You can" line), for one batch and one *signature*: the agent's tools, place, inventory and what is within
    its reach (items, other agents, structures). Two agents with the same signature are offered the same
    choices (``_tool_choices`` reads nothing else), so a batch of 10,000 foragers, most of them carrying
    nothing with nothing in reach, builds a handful of these instead of 10,000. Shared, so read-only, like
    ``Simulation.shared_objective_views``."""

    __slots__ = ("_affordances", "_can", "_rules", "available", "choices", "tools", "unavailable")

    def __init__(self, sim: Perceivable, agent: Agent) -> None:
        rules = self._rules = sim.rules
        choices = self.choices = {t: rules[t].choices(sim, agent) for t in agent.tools}
        self.available = {t: params for t, (params, _) in choices.items() if params is not None}
        self.unavailable = {t: why for t, (params, why) in choices.items() if params is None}
        unavailable = self.unavailable
        self.tools = [{"action": t, "lane": rules[t].lane, "durative": rules[t].durative,
                       "available": t not in unavailable, **({"why": unavailable[t]} if t in unavailable else {})}
                      for t in agent.tools]
        self._affordances: list[dict[str, Any]] | None = None
        self._can: str | None = None

    @property
    def affordances(self) -> list[dict[str, Any]]:
        if self._affordances is None:
            self._affordances = _build_affordances(self.available, self._rules)
        return self._affordances

    @property
    def can(self) -> str:
        if self._can is None:
            self._can = _can_line(self.affordances)
        return self._can


def perceived(sim: Perceivable, agent: Agent) -> Perceived:
    """The choices ``agent`` is offered now, shared by the batch's agents of the same signature. Call only while
    the batch is open (``Observation._shared`` checks): the simulation's table is kept for one batch (a new batch
    starts a new one: the world changed). The table lives on the simulation, not here: served runs perceive in
    turn and the viewer's worker threads replay their own simulations."""
    batch = sim.batch_no
    if sim.perceived_batch != batch:
        sim.perceived_batch, sim.perceived_table = batch, {}
    table: dict[tuple[Any, ...], Perceived] = sim.perceived_table
    w = sim.world
    cell = agent.cell
    me = agent.id
    near = w.agents_in_reach(cell)
    if len(near) > 1:
        near = [a for a in near if a != me]
    elif near and near[0] == me:
        near = []
    # tell's choices name every other agent in a small world: then the agent itself is part of the signature
    who = me if len(w.agent_ids) <= TELL_CHOICES_LIMIT else None
    key = (agent.tools, w.cell_place.get(cell), tuple(agent.inventory), tuple(w.items_in_reach(cell)), tuple(near),
           tuple(w.structures_in_reach(cell)), who)
    found = table.get(key)
    if found is None:
        found = table[key] = Perceived(sim, agent)
    return found


def _build_affordances(choices: dict[str, dict[str, list[str] | None]],
                       rules: dict[str, ToolRules] = GENERIC) -> list[dict[str, Any]]:
    """Per available tool: each parameter's choices (or its type, and the entry's ``hints`` of what else it
    takes) and ready-to-send suggestions (unless the entry says not to). ``rules``: the table; a scenario tool
    missing from it (the generic table, the default) has neither hints nor a refusal of suggestions."""
    out: list[dict[str, Any]] = []
    for tool, params in choices.items():
        shown: dict[str, Any] = {p: ({"choices": c} if c is not None else {"type": "string"}) for p, c in params.items()}
        entry = rules.get(tool)
        if entry is not None:
            for p, hint in entry.hints.items():
                shown[p]["or"] = hint
        suggestions: list[dict[str, Any]] = []
        if params and all(c is not None for c in params.values()) and (entry is None or entry.suggests):
            suggestions = [{}]
            for p, c in params.items():
                assert c is not None
                suggestions = [{**sug, p: v} for v in c for sug in suggestions][: MAX_SUGGESTIONS * 4]
        out.append({"action": tool, "params": shown, "suggestions": suggestions[:MAX_SUGGESTIONS]})
    return out


def _tool_choices(sim: Perceivable, agent: Agent, tool: str) -> ChoicesOrWhy:
    """One tool's parameter choices now, or None and why it is not available: its entry of the rules table."""
    return sim.rules[tool].choices(sim, agent)


def _fmt_time(ms: int) -> str:
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms / 1000:.3f}s"


def _names(views: list[dict[str, Any]]) -> str:
    return ", ".join(f"{v['id']} ({v.get('kind') or v.get('role')})" for v in views) or "none"


def _can_line(affordances: list[dict[str, Any]]) -> str:
    """The text's "You can: ..." line, from the affordances (shared with them: see ``Perceived.can``)."""
    can = []
    for a in affordances:
        params = ", ".join(
            f"{k}: " + ("|".join(v["choices"][:6]) + ("|..." if len(v["choices"]) > 6 else "")
                        if "choices" in v else "text")
            for k, v in a["params"].items())
        can.append(f"{a['action']}({params})")
    return "You can: " + "; ".join(can) + "."


def render_text(obs: dict[str, Any], affordances: list[dict[str, Any]], reason: str, name: str,
                can: str | None = None) -> str:
    """The observation as prose for an LLM prompt; every fact here is also in the object. ``can``: the
    "You can" line if made already (it depends on the affordances only)."""
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
    lines.append(can if can is not None else _can_line(affordances))
    lines.append("Answer with exactly one command: an action with args, a sleep (sleep_ms), or a noop.")
    return "\n".join(lines)
