"""The pure, synchronous, deterministic core of WARREN (no trio, no I/O, no clock).

See ``sim.Simulation`` for the three calls that drive it.
"""

from . import sim
from .briefing import briefing, canonical_json, content_hash
from .headless import run_headless
from .layout import layout
from .perception import Observation
from .policy import NOOP, NoopPolicy, Policy, RandomPolicy
from .sim import END_STATUSES, WAKE_REASONS, Batch, EngineError, Simulation
from .spec import ScenarioSpec
from .world import WorldError

# "mypyc" when the engine's hot modules were compiled at install time (setup.py: WARREN_MYPYC=1, opt-in), else
# "python"; benchmarks say which one they measured.
BUILD = "python" if sim.__file__ is None or sim.__file__.endswith(".py") else "mypyc"

__all__ = [
    "BUILD", "END_STATUSES", "NOOP", "WAKE_REASONS", "Batch", "EngineError", "NoopPolicy", "Observation", "Policy",
    "RandomPolicy", "ScenarioSpec", "Simulation", "WorldError", "briefing", "canonical_json", "content_hash",
    "layout", "run_headless",
]
