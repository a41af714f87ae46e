"""The pure, synchronous, deterministic core of WARREN (no trio, no I/O, no clock).

See ``sim.Simulation`` for the three calls that drive it. Its modules, from the top down (each imports only
modules below it: pyproject's import-linter contract for the engine):

- ``headless``: the loop of in-process policies; ``briefing``: what an agent is told once;
- ``sim``: the simulation (batches, the seeded order, wakes, outcomes, objectives, records);
- ``command``: a command's shape (defined once) and its validation against an observation; ``layout``;
  ``snapshot``: a run's copy (``Simulation.fork``) and its state for a snapshot beside a journal;
- ``perception``: the observation, its lazy fields, affordances and text;
- ``rules``: the rules of every tool, one table entry per tool (its prose at the top);
- ``effects``: what a rule may do to the run (audience, notify, tell, deliver, emit, structure_changed);
  ``tools``: a tool's catalog entry;
- ``world`` (positions, reach, routes), ``scheduler``, ``schema``, ``policy``, ``records``; ``spec``, ``errors``.
"""

# First: which build of the hot modules runs (compiled when installed and built from these sources; see build.py).
from .build import BUILD, WHY  # isort: skip
from . import command, effects, headless, perception, rules, scheduler, sim, world  # noqa: F401  (engine.sim...: the hot modules)
from .briefing import briefing, canonical_json, content_hash
from .headless import run_headless
from .layout import layout
from .perception import Observation
from .policy import NOOP, NoopPolicy, Policy, RandomPolicy
from .sim import END_STATUSES, WAKE_REASONS, Batch, EngineError, Simulation
from .spec import ScenarioSpec
from .world import WorldError

__all__ = [
    "BUILD", "END_STATUSES", "NOOP", "WAKE_REASONS", "WHY", "Batch", "EngineError", "NoopPolicy", "Observation",
    "Policy", "RandomPolicy", "ScenarioSpec", "Simulation", "WorldError", "briefing", "canonical_json",
    "content_hash", "layout", "run_headless",
]
