"""The mailbox of one run: agents waiting for their next envelope, and the replies written to them early.

A long-poll parks here until its agent's outstanding envelope is newer than what it has seen
(:meth:`Mailbox.wait_observation`), several agents' polls wait on one event
(:meth:`Mailbox.wait_observations`), and the loop hands the mailbox each batch it publishes
(:meth:`Mailbox.deliver`), which writes the parked polls' replies from the run task itself. WebSocket
subscriptions wait on the same thing another way: a listener on each agent (``RemoteAgent.listeners``),
called on every poke. What an envelope looks like is :mod:`warren_sim.runtime.views`'.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import orjson
import trio

from .errors import no_more_observations, restarted
from .leases import Delivery, RemoteAgent, poll_slot, poll_wait, still_held
from .state import RunState
from .views import WireEnvelope, current_wire

__all__ = ["DELIVERY_CHUNK", "Mailbox"]

DELIVERY_CHUNK = 256  # parked long-polls' replies built, then written, at a time (Mailbox.deliver)


class Mailbox:
    """Where remote agents wait for envelopes; the run task puts them in (:meth:`deliver`)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.remote = state.remote
        self._reply_turn = trio.Lock()  # one multi-agent poll builds its reply at a time (wait_observations)

    def deliver(self, published: list[str]) -> None:
        """Hand each parked long-poll of the agents just published its envelope's bytes, in this task, one after
        another (:meth:`wait_observation`'s ``deliver``).

        Why here: the batch's handlers wake together, and trio runs each one to its next checkpoint before the
        next starts, so a poll's reply used to wait for every handler before it to do its framework's
        bookkeeping too (~0.3-0.5 ms each: p99 ~ the whole sum at 10,000 polls). Delivered from this pass, the
        replies leave at the cost of building and writing them only; the handlers do the rest afterwards. A
        delivery that declines (returns False) leaves that reply to its handler, as before.

        Built ``DELIVERY_CHUNK`` at a time, then written back to back: a write that wakes a reader asleep costs
        the writer more than one whose reader is awake (a cross-CPU wake-up), and builds back to back run
        warmer; measured at 10,000 polls (bench/results/r5-perf-poll.md), the writes' time halves from one at a
        time to 64, and p99 drops further at 256. The first reply waits for 256 builds (~12 ms).
        """
        chunk: list[tuple[RemoteAgent, Delivery, WireEnvelope]] = []
        for aid in published:
            ra = self.remote[aid]
            if not ra.deliveries or not ra.claimed:
                # unclaimed (its lease ended): the loop closes its envelope unanswered (_close_unanswered)
                # before any handler runs, so no poll ever got it; it must not leave from here either
                continue
            for entry in ra.deliveries:
                env = current_wire(ra, entry.after)
                if env is not None:
                    env.whole_bytes()
                    chunk.append((ra, entry, env))
            if len(chunk) >= DELIVERY_CHUNK:
                self._write_out(chunk)
        self._write_out(chunk)

    @staticmethod
    def _write_out(chunk: list[tuple[RemoteAgent, Delivery, WireEnvelope]]) -> None:
        for ra, entry, env in chunk:
            try:
                written = entry.deliver(env.whole_bytes())
            except Exception:  # noqa: BLE001 - a writer's failure is its handler's to meet, not the run's
                written = False
            if written:
                entry.sent = env.whole()
                ra.deliveries.remove(entry)
        chunk.clear()

    async def wait_observation(self, ra: RemoteAgent, after: int, wait: float,
                               deliver: Callable[[bytes], bool] | None = None) -> orjson.Fragment | None:
        """The outstanding envelope with ``seq > after`` (serialized, once per envelope: ``WireEnvelope.whole``),
        waiting up to ``wait`` s (at most 0.9 of the lease TTL: ``leases.poll_wait``); None on timeout.

        At most ``max_polls_per_lease`` of these run at once per lease (call right after ``authenticate``);
        one more is refused with 429 (:func:`~warren_sim.runtime.leases.poll_slot`).

        ``deliver``: called by the run task with the envelope's bytes (``whole_bytes``) when the batch that brings it is
        published, while this poll is parked (:meth:`deliver`); it writes the reply then and there and
        returns True, or returns False and the reply is this caller's to send, as without it. Once it
        returned True, this returns those bytes whatever else happened meanwhile (the wait ran out, the run
        ended): they are what the client received.
        """
        state = self.state
        entry = None if deliver is None else Delivery(after, deliver)
        ttl = state.config.lease_ttl
        wait = poll_wait(wait, ttl)  # below the lease TTL, whatever --max-wait allows (leases.poll_wait)
        try:
            # the poll holds its lease while parked and refreshes it as it returns (leases.poll_slot); a lease
            # that ended meanwhile (released) answers 403, not an envelope or a 204 (leases.still_held)
            with poll_slot(ra, state.config.max_polls_per_lease, wait, ttl) as held, trio.move_on_after(wait):
                while True:
                    if entry is not None and entry.sent is not None:
                        return entry.sent
                    if state.is_ended:
                        raise no_more_observations(state.run_id, state.status, state.error)
                    if state.dropped:  # a restart fault while this poll was parked: retry reaches the new run
                        raise restarted(state.run_id)
                    still_held(ra, held, state.run_id)
                    env = current_wire(ra, after)
                    if env is not None:
                        return env.whole()
                    if entry is not None and entry not in ra.deliveries:
                        ra.deliveries.append(entry)
                    await ra.changed.wait()
        finally:
            if entry is not None and entry in ra.deliveries:
                ra.deliveries.remove(entry)
        if entry is not None and entry.sent is not None:
            return entry.sent
        if not state.is_ended:
            still_held(ra, held, state.run_id)  # the wait ran out: a 204 only while the lease still holds
        return None

    async def wait_observations(self, wanted: list[tuple[RemoteAgent, int]], wait: float,
                                parts: tuple[str, ...] | None = None) -> list[WireEnvelope]:
        """Several agents' outstanding envelopes (each with ``seq`` after its own ``after``), waiting up to
        ``wait`` s for at least one; ``[]`` on timeout (``POST /v1/runs/{run}/observations``).

        One task and one event wait for all of them (a listener on each agent), so a batch of N agents
        polled this way wakes N / (agents per poll) tasks. Each lease holds one of its poll slots meanwhile.

        With ``parts``, the envelopes are also serialized in that shape (``WireEnvelope.shaped``) before they are
        returned, one poll at a time: the polls a batch wakes together then reply one after another, each
        reply's bytes written while the next one is built, instead of all of them built first and written
        last (trio runs every woken task to its next checkpoint before any reaches its socket). The last reply
        leaves no later; the others leave earlier, and their readers work meanwhile.
        """
        state = self.state
        ttl = state.config.lease_ttl
        wait = poll_wait(wait, ttl)  # below the lease TTL, as wait_observation's
        with contextlib.ExitStack() as slots:
            # each lease held while parked and refreshed as the poll returns; 403 if one ended (wait_observation)
            held = [(ra, slots.enter_context(poll_slot(ra, state.config.max_polls_per_lease, wait, ttl)))
                    for ra, _ in wanted]
            with trio.move_on_after(wait):
                while True:
                    if state.is_ended:
                        raise no_more_observations(state.run_id, state.status, state.error)
                    if state.dropped:
                        raise restarted(state.run_id)
                    for ra, lease in held:
                        still_held(ra, lease, state.run_id)
                    ready = [env for ra, after in wanted if (env := current_wire(ra, after)) is not None]
                    if ready:
                        if parts is not None:
                            async with self._reply_turn:
                                for env in ready:
                                    env.shaped(parts)
                        return ready
                    wake = trio.Event()
                    for ra, _ in wanted:
                        ra.listeners.append(wake.set)
                    try:
                        await wake.wait()
                    finally:
                        for ra, _ in wanted:
                            ra.listeners.remove(wake.set)
            if not state.is_ended:
                for ra, lease in held:
                    still_held(ra, lease, state.run_id)
        return []
