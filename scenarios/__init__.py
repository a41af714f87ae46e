"""WARREN's bundled scenarios, one directory each (scenario.toml, solution.py, optional expand.py).

Installed as the package ``warren_sim._bundled_scenarios`` (see setup.py); the loader lists the
directories here, it never imports this package's modules by name. docs/scenarios.md describes the files.
"""
