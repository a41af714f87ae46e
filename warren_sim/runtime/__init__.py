"""The trio runtime: clocks, runs, leases, long-poll waiters, deadlines, journal and spectators.

A live run is :mod:`.run`'s facade over :mod:`.state` (shared facts, the journaled lifecycle),
:mod:`.loop` (the run task), :mod:`.desk` (claims, leases, submits, receipts) and :mod:`.mailbox`
(long-polls); an ended one is :mod:`.stored`'s, answered from its files. Both implement :mod:`.api`'s
``RunAPI``, what the routes call. :mod:`.manager` holds them by id; :mod:`.restore` rebuilds a run from
its journal; :mod:`.views` is what a run shows.

Only :mod:`warren_sim.runtime.clock` reads wall time; everything else waits on the trio clock.
"""
