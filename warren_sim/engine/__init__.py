"""The pure, synchronous, deterministic core of WARREN (no trio, no I/O, no clock).

See ``sim.Simulation`` for the three calls that drive it.
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
