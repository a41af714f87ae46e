"""WARREN's benchmarks: ``python -m bench [engine|protocol|scale|warp|ws|rl ...] [--quick] [--out bench/out]``.

One module per sub-benchmark, each with ``run(opts) -> dict`` that prints its table (median with the
min-max over repeats) and returns what ``__main__`` writes to ``<out>/<name>.json``:

- ``engine``   headless decisions/s of the ``warren`` scenario next to a SimPy replay of the same wakes;
- ``protocol`` remote agents over real loopback HTTP next to a trivial JSON endpoint on the same stack;
- ``scale``    10,000 long-polls held by one server (RSS, wake latency) and a 100,000-agent headless run;
- ``warp``     wall time of the expiry tests under pytest-trio's autojump clock;
- ``ws``       the WebSocket binding (one connection, or one per agent) next to HTTP.

Servers and load generators run in their own processes (``bench/loadgen.py``, ``bench/trivial_app.py``,
``bench/served.py``), talk only to 127.0.0.1, and every loop is bounded in count and in time.
"""
