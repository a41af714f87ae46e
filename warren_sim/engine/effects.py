"""What a tool's rules may read and do: the narrow interface between the rules table and the simulation.

The rules (``rules.py``) judge and apply one command against the world; what an applied command changes beyond
the world's own state (who hears of it, which messages are delivered, what is recorded, which objectives move)
is the simulation's business. :class:`Effects` names those few things, and the rules see nothing else: not the
scheduler, not the pending observations, not the records list. ``Simulation`` is the one implementation (it
subclasses this class), so the rules import this module and never ``sim.py``: the engine's modules import
each other in one direction only (pyproject's import-linter contracts check it).

A base class rather than a ``typing.Protocol``: the compiled engine (mypyc) calls a native class's methods
directly and reads its attributes from a struct; through a Protocol every call would be a Python-level lookup.
"""

from __future__ import annotations

from typing import Any

from .spec import Conventions
from .world import Agent, Cell, World


class Effects:
    """The world, the conventions, the clock, and the five effects a rule may have."""

    world: World
    conv: Conventions
    time: int
    record: bool  # whether the run is recorded: a rule builds an event nobody hears only if it is

    def audience(self, cell: Cell, actor: str | None) -> list[Agent]:
        """Who is told of what happens at ``cell``: every agent within reach of it but the actor."""
        raise NotImplementedError

    def notify(self, audience: list[Agent], event: dict[str, Any]) -> None:
        """Tell ``audience`` what changed (one shared event dict), record it, wake the idle ones."""
        raise NotImplementedError

    def tell(self, agent: Agent, event: dict[str, Any]) -> None:
        """Tell one agent (the actor itself: what its inspect revealed), stamped with the time."""
        raise NotImplementedError

    def deliver(self, to: Agent, message: dict[str, Any]) -> None:
        """Put a message in ``to``'s mailbox and wake it a tick later."""
        raise NotImplementedError

    def emit(self, record: dict[str, Any]) -> None:
        """Append a record to the run's journal (a no-op when the run is not recorded)."""
        raise NotImplementedError

    def structure_changed(self, structure_id: str) -> None:
        """A structure's fields changed: objectives that watch it are brought up to date."""
        raise NotImplementedError
