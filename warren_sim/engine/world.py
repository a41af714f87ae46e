"""World state: spaces, places, links, items, structures and agents, and where everything is.

This module owns positions and the indexes that answer "what is within reach / in sight of this
agent" and "how far is it from here to there". It has no rules of its own (those are in
``rules.py``) and no notion of time. Every iteration whose order can reach the trace runs over
sorted ids or insertion-ordered dicts filled in a deterministic order, never over sets.
"""

from __future__ import annotations

import heapq
from functools import lru_cache
from typing import Any

import attr

from .errors import WorldError
from .spec import LinkSpec, PlaceSpec, ScenarioSpec

Cell = tuple[str, int, int]


# Cells are immutable and few (one per cell a run touches), and every observation, event and move names
# them: memoized in C, bounded so a long-lived server does not grow with every run. (parse_cell is not:
# its input is a client's text.)
@lru_cache(maxsize=1 << 17)
def cell_name(cell: Cell) -> str:
    return f"{cell[0]}:{cell[1]},{cell[2]}"


def parse_cell(text: str) -> Cell | None:
    """``'village:3,4'`` -> ``('village', 3, 4)``; None when it is not a cell name."""
    space, sep, rest = text.partition(":")
    if not sep:
        return None
    xs, sep, ys = rest.partition(",")
    if not sep:
        return None
    try:
        return (space, int(xs), int(ys))
    except ValueError:
        return None


# The run's state classes are ``attr.s(auto_attribs=True)`` classes rather than ``attrs.define`` ones because
# mypyc compiles that spelling (as it does ``dataclasses.dataclass``) into a native class: the compiled engine
# reads their fields as C struct members, where a class made by ``attrs.define`` stays a Python class to mypyc
# and every ``agent.cell`` is a generic attribute lookup (issue 30: about a tenth of a headless decision). The
# same fields, constructor and attrs API (fields, asdict). Not ``slots=True``: attrs would rebuild the class,
# and the rebuilt class is not mypyc's.


@attr.s(auto_attribs=True, eq=False)
class Action:
    """A durative action holding a lane until ``until`` (sim ms)."""

    agent: str
    lane: str
    tool: str
    args: dict[str, Any]
    observation_id: str
    started: int
    until: int
    token: int
    dest: Cell | None = None


@attr.s(auto_attribs=True, eq=False)
class Agent:
    id: str
    role: str
    name: str
    notes: str
    cell: Cell
    tools: tuple[str, ...]
    inventory: list[str] = attr.Factory(list)
    lanes: dict[str, Action | None] = attr.Factory(lambda: {"body": None, "voice": None})
    seq: int = -1
    wake_time: int = -1
    wake_reason: str = ""
    wake_token: int = 0
    events: list[Any] = attr.Factory(list)  # dicts, or sim.OutcomeEvent still to be built
    events_dropped: int = 0
    messages: list[dict[str, Any]] = attr.Factory(list)
    messages_dropped: int = 0

    def idle(self) -> bool:
        """No action holds either lane: the one test of "idle" (idle wakes, event wakes, what perception lists)."""
        lanes = self.lanes
        return lanes["body"] is None and lanes["voice"] is None

    def busy(self) -> bool:
        return not self.idle()


@attr.s(auto_attribs=True, eq=False)
class Item:
    id: str
    kind: str
    name: str
    container: bool
    cell: Cell | None = None
    holder: str | None = None  # agent id carrying it
    inside: str | None = None  # container item id
    last_taker: tuple[int, str] | None = None  # (time, agent) of the last take, to explain conflicts


@attr.s(auto_attribs=True, eq=False)
class Structure:
    id: str
    kind: str
    name: str
    place: str
    fields: dict[str, int]
    maxima: dict[str, int]
    secret: str


class World:
    """Everything that exists, and where."""

    def __init__(self, spec: ScenarioSpec, tools_by_role: dict[str, tuple[str, ...]], *, populate: bool = True) -> None:
        """``populate=False``: the map and the structures, no agents or items (only the agents' ids), for a world
        given its state next (``Simulation(..., populate=False)``)."""
        self.spaces = {s.name: s for s in spec.spaces}
        self.places: dict[str, PlaceSpec] = {}
        self.place_cells: dict[str, list[Cell]] = {}
        self.cell_place: dict[Cell, str] = {}
        for p in spec.places:
            self._check_cell((p.space, p.x, p.y), f"place {p.name}")
            self._check_cell((p.space, p.x + p.w - 1, p.y + p.h - 1), f"place {p.name}")
            self.places[p.name] = p
            cells = [(p.space, x, y) for y in range(p.y, p.y + p.h) for x in range(p.x, p.x + p.w)]
            self.place_cells[p.name] = cells
            for c in cells:
                if c in self.cell_place:
                    raise WorldError(f"places {self.cell_place[c]} and {p.name} overlap at {cell_name(c)}")
                self.cell_place[c] = p.name
        self.place_names = sorted(self.places)
        self.links: list[LinkSpec] = list(spec.links)
        self.link_ends: list[tuple[Cell, Cell, LinkSpec]] = []
        for link in self.links:
            a, b = self.resolve_cell(link.a, f"link {link.id}"), self.resolve_cell(link.b, f"link {link.id}")
            self.link_ends.append((a, b, link))
        self.structures: dict[str, Structure] = {}
        for s in spec.structures:
            if s.place not in self.places:
                raise WorldError(f"structure {s.id} stands at unknown place {s.place!r}")
            self.structures[s.id] = Structure(s.id, s.kind, s.name, s.place, dict(s.fields), dict(s.maxima), s.secret)
        for link in self.links:
            if link.gate is not None and link.gate.structure not in self.structures:
                raise WorldError(f"link {link.id}: its gate names unknown structure {link.gate.structure!r}")
        self.structures_at: dict[str, list[str]] = {}
        for sid in sorted(self.structures):
            self.structures_at.setdefault(self.structures[sid].place, []).append(sid)
        self.agents: dict[str, Agent] = {}
        self.agents_at: dict[Cell, dict[str, Agent]] = {}  # cell -> {agent id: agent}, in arrival order
        self.items: dict[str, Item] = {}
        self.items_at: dict[Cell, dict[str, None]] = {}
        self.contents: dict[str, dict[str, None]] = {}
        if not populate:
            self.agent_ids = sorted(a.id for a in spec.agents)
            return
        for agent_spec in spec.agents:
            cell = self.resolve_cell(agent_spec.at, f"agent {agent_spec.id}")
            agent = Agent(agent_spec.id, agent_spec.role, agent_spec.name, agent_spec.notes, cell,
                          tools_by_role[agent_spec.role])
            self.agents[agent_spec.id] = agent
            self.agents_at.setdefault(cell, {})[agent_spec.id] = agent
        self.agent_ids = sorted(self.agents)
        for it in spec.items:
            item = Item(it.id, it.kind, it.name, it.container)
            self.items[it.id] = item
        for it in spec.items:
            item = self.items[it.id]
            if it.at in self.agents:
                item.holder = it.at
                self.agents[it.at].inventory.append(it.id)
            elif it.at in self.items:
                if not self.items[it.at].container:
                    raise WorldError(f"item {it.id} is inside {it.at}, which is not a container")
                item.inside = it.at
                self.contents.setdefault(it.at, {})[it.id] = None
            else:
                self.put(item, self.resolve_cell(it.at, f"item {it.id}"))

    # -- positions -------------------------------------------------------------------------------
    def _check_cell(self, cell: Cell, what: str) -> None:
        space = self.spaces.get(cell[0])
        if space is None:
            raise WorldError(f"{what}: unknown space {cell[0]!r}; spaces are {sorted(self.spaces)}")
        if not (0 <= cell[1] < space.width and 0 <= cell[2] < space.height):
            raise WorldError(f"{what}: cell {cell_name(cell)} is outside the {space.width}x{space.height} grid")

    def resolve_cell(self, where: str, what: str = "destination") -> Cell:
        """A place name or a cell name -> the cell (a place's anchor is its first cell)."""
        if where in self.places:
            p = self.places[where]
            return (p.space, p.x, p.y)
        cell = parse_cell(where)
        if cell is None:
            raise WorldError(f"{what}: {where!r} is neither a place ({', '.join(self.place_names)}) "
                             "nor a cell '<space>:<x>,<y>'")
        self._check_cell(cell, what)
        return cell

    def valid_cell(self, cell: Cell) -> bool:
        space = self.spaces.get(cell[0])
        return space is not None and 0 <= cell[1] < space.width and 0 <= cell[2] < space.height

    def put(self, item: Item, cell: Cell) -> None:
        item.cell, item.holder, item.inside = cell, None, None
        self.items_at.setdefault(cell, {})[item.id] = None

    def lift(self, item: Item) -> None:
        """Remove an item from wherever it is (ground, container or inventory)."""
        if item.cell is not None:
            del self.items_at[item.cell][item.id]
        elif item.holder is not None:
            self.agents[item.holder].inventory.remove(item.id)
        elif item.inside is not None:
            del self.contents[item.inside][item.id]
        item.cell = item.holder = item.inside = None

    def move_agent(self, agent: Agent, cell: Cell) -> None:
        """The agent leaves its cell for ``cell`` (arriving last there: ``agents_at`` keeps arrival order)."""
        agents_at = self.agents_at
        del agents_at[agent.cell][agent.id]
        agent.cell = cell
        there = agents_at.get(cell)
        if there is None:
            there = agents_at[cell] = {}
        there[agent.id] = agent

    def place_of(self, cell: Cell) -> str | None:
        return self.cell_place.get(cell)

    def reach_cells(self, cell: Cell) -> list[Cell]:
        """Cells within reach: the whole place you stand in, or just your cell."""
        place = self.cell_place.get(cell)
        return self.place_cells[place] if place is not None else [cell]

    def agents_in_reach(self, cell: Cell) -> list[str]:
        out: list[str] = []
        for c in self.reach_cells(cell):
            here = self.agents_at.get(c)
            if here:
                out.extend(here)
        out.sort()
        return out

    def items_in_reach(self, cell: Cell) -> list[str]:
        """Items on the ground within reach, and items inside containers on the ground within reach."""
        out: list[str] = []
        place = self.cell_place.get(cell)  # reach_cells(cell), inline
        for c in (self.place_cells[place] if place is not None else (cell,)):
            here = self.items_at.get(c)
            if here:
                for iid in here:
                    out.append(iid)
                    inner = self.contents.get(iid)
                    if inner:
                        out.extend(inner)
        out.sort()
        return out

    def structures_in_reach(self, cell: Cell) -> list[str]:
        place = self.cell_place.get(cell)
        return self.structures_at.get(place, []) if place is not None else []

    def in_sight(self, cell: Cell, radius: int) -> list[Cell]:
        """Cells of the same space within Manhattan distance ``radius``, nearest first (then y, x)."""
        space = self.spaces[cell[0]]
        _, cx, cy = cell
        out: list[tuple[int, int, int]] = []
        for y in range(max(0, cy - radius), min(space.height, cy + radius + 1)):
            span = radius - abs(y - cy)
            for x in range(max(0, cx - span), min(space.width, cx + span + 1)):
                out.append((abs(x - cx) + abs(y - cy), y, x))
        out.sort()
        return [(cell[0], x, y) for _, y, x in out]

    # -- movement --------------------------------------------------------------------------------
    def gate_open(self, link: LinkSpec) -> bool:
        if link.gate is None:
            return True
        s = self.structures[link.gate.structure]
        return s.fields.get(link.gate.field, 0) >= link.gate.at_least

    def route(self, src: Cell, dst: Cell) -> tuple[int, str]:
        """Steps of the shortest open path from ``src`` to ``dst`` and "" — or -1 and why not.

        Spaces are open grids, so within a space the distance is Manhattan; between spaces the
        path goes through links (Dijkstra over link ends, a handful of nodes).
        """
        if src[0] == dst[0]:
            return abs(src[1] - dst[1]) + abs(src[2] - dst[2]), ""
        best: dict[Cell, int] = {src: 0}
        heap: list[tuple[int, int, Cell]] = [(0, 0, src)]
        counter = 1
        closed: list[str] = []
        result = -1
        while heap:
            d, _, node = heapq.heappop(heap)
            if d > best.get(node, 1 << 62):
                continue
            if node[0] == dst[0]:
                total = d + abs(node[1] - dst[1]) + abs(node[2] - dst[2])
                if result < 0 or total < result:
                    result = total
            for a, b, link in self.link_ends:
                for near, far in ((a, b), (b, a)):
                    if near[0] != node[0]:
                        continue
                    if not self.gate_open(link):
                        if link.id not in closed:
                            closed.append(link.id)
                        continue
                    nd = d + abs(node[1] - near[1]) + abs(node[2] - near[2]) + link.steps
                    if nd < best.get(far, 1 << 62):
                        best[far] = nd
                        heapq.heappush(heap, (nd, counter, far))
                        counter += 1
        if result >= 0:
            return result, ""
        if closed:
            why = []
            for lid in closed:
                link = next(lk for lk in self.links if lk.id == lid)
                assert link.gate is not None
                s = self.structures[link.gate.structure]
                why.append(f"{link.id} is closed until {s.name} {link.gate.field} reaches "
                           f"{link.gate.at_least} (now {s.fields.get(link.gate.field, 0)})")
            return -1, "no open path: " + "; ".join(why)
        return -1, f"no path from space {src[0]} to space {dst[0]}"

    def where_name(self, cell: Cell) -> str:
        place = self.cell_place.get(cell)
        return f"{place} ({cell_name(cell)})" if place else cell_name(cell)
