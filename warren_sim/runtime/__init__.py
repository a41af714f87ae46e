"""The trio runtime: clocks, runs, leases, long-poll waiters, deadlines, journal and spectators.

Only :mod:`warren_sim.runtime.clock` reads wall time; everything else waits on the trio clock.
"""
