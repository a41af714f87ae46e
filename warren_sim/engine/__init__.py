"""The pure, synchronous, deterministic core of WARREN (no trio, no I/O, no clock).

See ``sim.Simulation`` for the three calls that drive it.
"""

from . import headless, perception, rules, scheduler, sim, world
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


def _stale_compiled_modules() -> list[str]:
    """Compiled modules older than their source (an edit after the build): Python imports the compiled one.

    (Paths from this package's directory: a compiled module's ``__file__`` is not where it lies.)
    """
    import importlib.machinery
    import os

    here = os.path.dirname(__file__)
    stale = []
    for mod in (headless, perception, rules, scheduler, sim, world):
        if (mod.__file__ or "").endswith(".py"):
            continue
        name = mod.__name__.rsplit(".", 1)[-1]
        source = os.path.join(here, name + ".py")
        built = [path for suffix in importlib.machinery.EXTENSION_SUFFIXES
                 if os.path.exists(path := os.path.join(here, name + suffix))]
        if built and os.path.exists(source) and os.path.getmtime(source) > os.path.getmtime(built[0]):
            stale.append(source)
    return stale


if BUILD == "mypyc" and (_stale := _stale_compiled_modules()):
    import warnings

    warnings.warn(f"the compiled engine is older than {', '.join(_stale)}: it runs the old code; rebuild it "
                  "(WARREN_MYPYC=1 pip install --no-build-isolation -e .) or delete warren_sim/engine/*.so",
                  stacklevel=2)

__all__ = [
    "BUILD", "END_STATUSES", "NOOP", "WAKE_REASONS", "Batch", "EngineError", "NoopPolicy", "Observation", "Policy",
    "RandomPolicy", "ScenarioSpec", "Simulation", "WorldError", "briefing", "canonical_json", "content_hash",
    "layout", "run_headless",
]
