"""The event queue: entries ordered by ``(sim_time, priority, seq)``.

As in SimPy's core, ties on time break by a priority and then by a counter, so equal times run
first-in first-out and the order never depends on memory addresses, dict order or any task
scheduler. Entries are cancelled lazily: each carries a token that must still match its owner's.
"""

from __future__ import annotations

import heapq
from itertools import count
from typing import Any

# Priorities within one instant: actions complete first, then objective deadlines and the time
# limit are judged (so work finishing exactly at a deadline counts), then agents wake.
COMPLETION = 0
DEADLINE = 1
WAKE = 2


class Scheduler:
    __slots__ = ("heap", "next_seq")

    def __init__(self) -> None:
        # (time, priority, seq, key, token); public, with ``next_seq``, so that the simulation's hot paths push
        # and pop it directly (``heappush(heap, (time, priority, next_seq(), key, token))`` is ``push``)
        self.heap: list[tuple[int, int, int, str, Any]] = []
        self.next_seq = count(1).__next__

    def push(self, time: int, priority: int, key: str, token: Any) -> None:
        heapq.heappush(self.heap, (time, priority, self.next_seq(), key, token))

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
