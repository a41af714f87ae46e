"""The packaging details pyproject.toml cannot say.

1. Ship the top-level ``scenarios/`` inside the wheel. The scenarios live in the repository's top-level
   ``scenarios/`` (DESIGN section 7), and every install must carry them: this maps that directory to the package
   ``warren_sim._bundled_scenarios`` (its scenario.toml, solution.py and expand.py files are package data), for
   wheels and editable installs alike. The loader finds them through that package name
   (``warren_sim.scenarios.loader.bundled_scenarios_dir``).

2. An opt-in compiled engine (docs/performance.md): with ``WARREN_MYPYC=1`` at install time, and mypy's mypyc
   and a C compiler at hand, the engine's hot modules (``ENGINE_COMPILED``) are compiled with mypyc; the build
   needs mypy (it comes with the ``test`` extra) and setuptools >= 70.1 in the environment, so install with
   ``--no-build-isolation``::

       WARREN_MYPYC=1 pip install --no-build-isolation -e '.[test]'

   Without the variable, or without mypyc or a compiler (a warning says which), the package is the plain Python
   one, as ever: the same modules, the same results (the pinned digests of tests/test_trace_digests.py and
   tests/test_engine_perception_digests.py hold on both builds).
   ``python -m bench engine`` says which build it measured (``warren_sim.engine.BUILD``); an engine module edited
   after the build warns at import (the compiled one runs): rebuild, or delete ``warren_sim/engine/*.so``.

Everything else is in pyproject.toml.
"""

import os
import shutil
import sys
import sysconfig

from setuptools import find_packages, setup

# The modules a decision runs through, plain typed Python that mypyc compiles as is. Compiled, their type hints are
# checked at run time: a value of another type than declared raises TypeError there (tests/test_compiled_build.py
# runs the engine's tests and pinned digests on this build).
ENGINE_COMPILED = ["sim", "rules", "world", "scheduler", "headless", "perception"]


def compiled_engine() -> list:
    """The mypyc extension modules when ``WARREN_MYPYC=1`` and they can be built; else [] (plain Python)."""
    if os.environ.get("WARREN_MYPYC") != "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        print("WARREN_MYPYC=1 but mypyc is not importable (install mypy in the build environment and pass "
              "--no-build-isolation): building the plain Python engine", file=sys.stderr)
        return []
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None or not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        print(f"WARREN_MYPYC=1 but no C compiler ({cc}) or no Python.h: building the plain Python engine",
              file=sys.stderr)
        return []
    # One shared library inside the package (group_name), so that editable installs find it too.
    return mypycify([f"warren_sim/engine/{m}.py" for m in ENGINE_COMPILED], opt_level="3",
                    group_name="warren_sim.engine._compiled")


setup(
    packages=[*find_packages(include=["warren_sim", "warren_sim.*"]), "warren_sim._bundled_scenarios"],
    package_dir={"warren_sim._bundled_scenarios": "scenarios"},
    ext_modules=compiled_engine(),
)
