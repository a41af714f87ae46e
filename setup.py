"""The one packaging detail pyproject.toml cannot say: ship the top-level ``scenarios/`` inside the wheel.

The scenarios live in the repository's top-level ``scenarios/`` (DESIGN section 7), and every install must
carry them: this maps that directory to the package ``warren_sim._bundled_scenarios`` (its scenario.toml,
solution.py and expand.py files are package data), for wheels and editable installs alike. The loader finds
them through that package name (``warren_sim.scenarios.loader.bundled_scenarios_dir``). Everything else is in
pyproject.toml.
"""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["warren_sim", "warren_sim.*"]), "warren_sim._bundled_scenarios"],
    package_dir={"warren_sim._bundled_scenarios": "scenarios"},
)
