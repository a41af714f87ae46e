"""The engine's exceptions, in a module of their own.

They are re-exported where they were first defined (``sim.EngineError``, ``world.WorldError``,
``perception.StaleObservation``). Kept apart because the compiled build (setup.py)
compiles ``sim``, ``rules``, ``world``, ``scheduler``, ``headless`` and ``perception`` with mypyc, which cannot
compile a subclass of ``RuntimeError`` or ``ValueError``: this module always stays plain Python.
"""

from __future__ import annotations


class EngineError(RuntimeError):
    """The engine was driven out of order (answering twice, adjudicating with answers missing...)."""


class WorldError(ValueError):
    """A spec that cannot form a world (unknown place, cell outside its grid...)."""


class StaleObservation(RuntimeError):
    """An observation was read for the first time after its batch was adjudicated."""
