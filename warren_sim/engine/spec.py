"""Scenario specifications: the validated, immutable description of a world before it runs.

The loader (``warren_sim.scenarios``) turns scenario files into these classes; the engine only
ever sees them, so it never parses files and never needs to know where a scenario came from.
Every collection is a tuple, so a spec can be shared by many runs without any of them changing it.
"""

from __future__ import annotations

import attrs

LANES = ("body", "voice")


@attrs.frozen
class SpaceSpec:
    """A rectangular grid of cells named ``<space>:<x>,<y>`` (x grows east, y grows south)."""

    name: str
    width: int
    height: int
    description: str = ""


@attrs.frozen
class PlaceSpec:
    """A named cell, or a rectangle of cells, that agents can walk to by name."""

    name: str
    space: str
    x: int
    y: int
    w: int = 1
    h: int = 1
    description: str = ""


@attrs.frozen
class GateSpec:
    """A link is open only while ``structure.field >= at_least``."""

    structure: str
    field: str
    at_least: int


@attrs.frozen
class LinkSpec:
    """Joins two cells of different spaces; crossing it costs ``steps`` steps."""

    id: str
    a: str
    b: str
    steps: int = 1
    gate: GateSpec | None = None


@attrs.frozen
class ItemSpec:
    """An item; ``at`` is a place name, a cell, an agent id or a container item id."""

    id: str
    kind: str
    name: str
    at: str
    container: bool = False


@attrs.frozen
class StructureSpec:
    """A scenario structure with integer state (a bridge's integrity, a clinic's stock)."""

    id: str
    kind: str
    name: str
    place: str
    fields: tuple[tuple[str, int], ...] = ()
    maxima: tuple[tuple[str, int], ...] = ()
    secret: str = ""


@attrs.frozen
class AgentSpec:
    id: str
    role: str
    name: str
    at: str
    notes: str = ""


@attrs.frozen
class RoleSpec:
    name: str
    description: str
    tools: tuple[str, ...]


@attrs.frozen
class ObjectiveSpec:
    """``structure.field`` must reach ``target`` (before ``deadline_ms`` when given)."""

    id: str
    description: str
    structure: str
    field: str
    target: int
    deadline_ms: int | None = None


@attrs.frozen
class WorkToolSpec:
    """A scenario tool that works on a structure at your place (repair, deliver, unlock...).

    The shape covers what scenarios need without scenario code in the engine: it may take a
    ``structure`` argument (a structure of ``structure_kinds`` within reach), an ``item`` argument
    (an item of ``item_kinds`` you carry, consumed when the work completes), a ``code`` argument
    that must equal the structure's secret, and it adds ``add`` to ``structure.field`` (capped by
    the field's maximum) when it completes.
    """

    name: str
    description: str
    lane: str = "body"
    durative: bool = True
    duration_ms: int = 1000
    structure_kinds: tuple[str, ...] = ()
    item_kinds: tuple[str, ...] = ()
    needs_held: tuple[str, ...] = ()
    needs_code: bool = False
    field: str = ""
    add: int = 1


@attrs.frozen
class Conventions:
    sight_radius: int = 0
    max_sight: int = 40
    max_messages: int = 12
    max_inventory: int = 20
    step_ms: int = 1000
    tick_ms: int = 1000
    idle_wake_ms: int = 30_000
    time_limit_ms: int = 3_600_000


@attrs.frozen
class ParamSpec:
    """A scenario parameter with its type, default and bounds (``type`` is int, float, str or bool)."""

    name: str
    type: str
    default: int | float | str | bool
    description: str = ""
    minimum: int | float | None = None
    maximum: int | float | None = None
    choices: tuple[str, ...] = ()


@attrs.frozen
class ScenarioSpec:
    name: str
    title: str
    premise: str
    spaces: tuple[SpaceSpec, ...]
    places: tuple[PlaceSpec, ...]
    agents: tuple[AgentSpec, ...]
    roles: tuple[RoleSpec, ...]
    objectives: tuple[ObjectiveSpec, ...]
    links: tuple[LinkSpec, ...] = ()
    items: tuple[ItemSpec, ...] = ()
    structures: tuple[StructureSpec, ...] = ()
    tools: tuple[WorkToolSpec, ...] = ()
    conventions: Conventions = Conventions()
    params: tuple[ParamSpec, ...] = ()
    notes: str = ""
