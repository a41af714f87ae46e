"""The packaging details pyproject.toml cannot say.

1. Ship the top-level ``scenarios/`` inside the wheel. The scenarios live in the repository's top-level
   ``scenarios/`` (DESIGN section 7), and every install must carry them: this maps that directory to the package
   ``warren_sim._bundled_scenarios`` (its scenario.toml, solution.py and expand.py files are package data), for
   wheels and editable installs alike. The loader finds them through that package name
   (``warren_sim.scenarios.loader.bundled_scenarios_dir``).

2. A compiled engine, by default where it can be built (docs/decisions.md, "The compiled engine by default"): the
   engine's hot modules (``ENGINE_COMPILED``, the same list as ``warren_sim.engine.build.COMPILED``) are compiled
   with mypy's mypyc when a C compiler and Python's headers are at hand (pyproject's build requirements bring mypy
   and what it needs to type the engine). The SHA-256 of each compiled source goes into
   ``warren_sim/engine/_compiled_from.py``: the engine imports its compiled modules only while they match their
   sources (``warren_sim.engine.build``), so an edit after the build runs as plain Python, never as old code.

   Without a compiler or headers, or if compiling fails, a warning says so and the package is the plain Python
   one: the same modules, the same results (the pinned digests of tests/test_trace_digests.py and
   tests/test_engine_perception_digests.py hold on both builds), about 1.7 times slower headless.
   ``WARREN_MYPYC=0`` skips compiling (a quick install, or a platform mypyc does not support); ``WARREN_MYPYC=1``
   makes a failure to compile an error instead of a warning. ``python -m bench engine`` says which build it
   measured (``warren_sim.engine.BUILD``).

Everything else is in pyproject.toml.
"""

import hashlib
import os
import shutil
import sys
import sysconfig

from setuptools import find_packages, setup
from setuptools.command.build_ext import build_ext

# The modules a decision runs through, plain typed Python that mypyc compiles as is. Compiled, their type hints are
# checked at run time: a value of another type than declared raises TypeError there (tests/test_compiled_build.py
# runs the engine's tests and pinned digests on both builds). The same list as warren_sim.engine.build.COMPILED.
ENGINE_COMPILED = ["sim", "rules", "world", "scheduler", "headless", "perception", "effects", "command"]
ENGINE = os.path.join("warren_sim", "engine")
RECORD = os.path.join(ENGINE, "_compiled_from.py")
MODE = os.environ.get("WARREN_MYPYC", "auto").strip().lower() or "auto"  # "auto" (the default), "1" or "0"
PLAIN = "installing the plain Python engine"
# The setup.py commands that build modules (pip's PEP 517 hooks run bdist_wheel or editable_wheel; the metadata
# hook runs dist_info, which needs no compiling).
BUILDING = {"build", "build_ext", "bdist_wheel", "editable_wheel", "develop", "install", "bdist"}


def plain(why: str) -> list:
    """No compiled engine: say why (unless not asked for), forget any earlier record of one, build plain Python."""
    if MODE == "1":
        raise SystemExit(f"WARREN_MYPYC=1 but {why}")
    if why:
        print(f"warren-sim: {why}: {PLAIN} (WARREN_MYPYC=0 skips this check)", file=sys.stderr)
    if os.path.exists(RECORD):
        os.remove(RECORD)
    return []


def compiled_engine() -> list:
    """The mypyc extension modules, and the record of their sources; [] for the plain Python engine."""
    if MODE in ("0", "no", "false", "off"):
        return plain("")
    if not BUILDING.intersection(sys.argv[1:]):  # metadata only (pip runs setup.py once for it): nothing to compile
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        return plain("mypyc is not importable (pip installs it for the build from pyproject's [build-system]; "
                     "with --no-build-isolation, install mypy first)")
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None or not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        return plain(f"no C compiler ({cc}) or no Python.h (Debian: apt-get install gcc python3-dev)")
    sources = [os.path.join(ENGINE, f"{m}.py") for m in ENGINE_COMPILED]
    try:
        # One shared library inside the package (group_name), so that editable installs find it too.
        extensions = mypycify(sources, opt_level="3", group_name="warren_sim.engine._compiled")
    except (Exception, SystemExit) as e:  # mypyc exits on a type error it cannot compile
        return plain(f"mypyc could not compile the engine ({e!r:.200})")
    digests = {}
    for m, path in zip(ENGINE_COMPILED, sources, strict=True):
        with open(path, "rb") as f:
            digests[m] = hashlib.sha256(f.read()).hexdigest()
    with open(RECORD, "w", encoding="utf-8") as f:
        f.write('"""Written by setup.py: the sources the compiled engine was built from (warren_sim.engine.build)."""\n\n'
                f"SOURCES = {digests!r}\n")
    return extensions


class OptionalBuildExt(build_ext):
    """Compile the engine, or fall back to plain Python when the C compiler fails (all modules or none)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as e:  # distutils' CompileError, LinkError, a missing compiler...
            if MODE == "1":
                raise
            for ext in self.extensions:  # (in place or in build_lib, wherever this build writes them)
                if os.path.isfile(path := self.get_ext_fullpath(ext.name)):
                    os.remove(path)
            for where in (RECORD, os.path.join(self.build_lib, RECORD)):
                if os.path.exists(where):
                    os.remove(where)
            print(f"warren-sim: compiling the engine failed ({e!r:.200}): {PLAIN}", file=sys.stderr)


setup(
    packages=[*find_packages(include=["warren_sim", "warren_sim.*"]), "warren_sim._bundled_scenarios"],
    package_dir={"warren_sim._bundled_scenarios": "scenarios"},
    ext_modules=compiled_engine(),
    cmdclass={"build_ext": OptionalBuildExt},
)
