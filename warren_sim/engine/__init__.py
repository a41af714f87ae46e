"""The pure, synchronous, deterministic core of WARREN (no trio, no I/O, no clock).

See ``sim.Simulation`` for the three calls that drive it.
"""

from .briefing import briefing, canonical_json, content_hash
from .headless import run_headless
from .layout import layout
from .perception import Observation
from .policy import NOOP, NoopPolicy, Policy, RandomPolicy
from .sim import END_STATUSES, WAKE_REASONS, Batch, EngineError, Simulation
from .spec import ScenarioSpec
from .world import WorldError

__all__ = [
    "END_STATUSES", "NOOP", "WAKE_REASONS", "Batch", "EngineError", "NoopPolicy", "Observation", "Policy",
    "RandomPolicy", "ScenarioSpec", "Simulation", "WorldError", "briefing", "canonical_json", "content_hash",
    "layout", "run_headless",
]
