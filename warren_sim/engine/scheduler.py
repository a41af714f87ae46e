"""The event queue: entries ordered by ``(sim_time, priority, seq)``.

As in SimPy's core, ties on time break by a priority and then by a counter, so equal times run
first-in first-out and the order never depends on memory addresses, dict order or any task
scheduler. Entries are cancelled lazily: each carries a token that must still match its owner's.
"""

from __future__ import annotations

import heapq
from typing import Any

# Priorities within one instant: actions complete first, then objective deadlines and the time
# limit are judged (so work finishing exactly at a deadline counts), then agents wake.
COMPLETION = 0
DEADLINE = 1
WAKE = 2


class Scheduler:
    __slots__ = ("heap", "_seq")

    def __init__(self) -> None:
        # (time, priority, seq, key, token); public so that Simulation.advance, the hot loop, pops it directly
        self.heap: list[tuple[int, int, int, str, Any]] = []
        self._seq = 0

    def push(self, time: int, priority: int, key: str, token: Any) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (time, priority, self._seq, key, token))

    def peek_time(self) -> int | None:
        return self.heap[0][0] if self.heap else None

    def top(self) -> tuple[int, int, str, Any]:
        time, priority, _, key, token = self.heap[0]
        return time, priority, key, token

    def pop(self) -> tuple[int, int, str, Any]:
        time, priority, _, key, token = heapq.heappop(self.heap)
        return time, priority, key, token

    def __len__(self) -> int:
        return len(self.heap)
