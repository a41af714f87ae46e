"""The run task: batches, pacing, NPC answers and decision deadlines.

It loops: advance the engine to the next batch, hand NPC wakes to their policies, publish remote agents'
envelopes, wait (a ``trio.move_on_at`` scope on the batch's decision deadline) until every *claimed*
agent of the batch has answered, record a noop for the rest, adjudicate, journal. Everything it waits on
is a deadline on the process's trio clock, so warped and autojump clocks work unchanged.

It learns of answers and lease changes through :class:`~warren_sim.runtime.state.BatchWake` (the desk
tells it) and hands what it publishes to the mailbox through ``deliver`` (the facade joins the two).
"""

from __future__ import annotations

import math
import traceback
from collections.abc import Callable

import trio

from ..engine import NOOP, Batch, Observation, Policy
from ..engine.headless import answer_or_noop
from ..observability.metrics import NO_METRICS, Metrics, NoMetrics
from .clock import wall_seconds
from .leases import RemoteAgent
from .state import RunState
from .views import WireEnvelope

__all__ = ["MAX_HELD", "RunLoop"]

MAX_HELD = 16  # batches of NPCs only an adjudicated outcome may wait for a batch with remote agents to ride on


class RunLoop:
    """Drives one run's engine from its first batch to its end (:meth:`main`, the run's task)."""

    metrics: Metrics | NoMetrics = NO_METRICS  # the app's, set by the manager: each batch's adjudication time

    def __init__(self, state: RunState, policies: dict[str, Policy], deliver: Callable[[list[str]], None]) -> None:
        self.state = state
        self.sim = state.sim
        self.journal = state.journal
        self.remote = state.remote
        self.policies = policies
        self._deliver = deliver  # the mailbox's: parked long-polls of the agents just published get their replies
        self.cancel_scope: trio.CancelScope | None = None
        # set by runtime.restore (Run.resume): the batch that was waiting for answers when the server died
        self.resume_batch: Batch | None = None

    def cancel(self, reason: str) -> None:
        state = self.state
        if state.is_ended:
            return
        state.cancel_reason = reason
        if self.cancel_scope is not None:
            self.cancel_scope.cancel()
        else:
            state.finish("cancelled", reason)

    async def main(self) -> None:
        """The run task. Whatever happens, the run ends in a terminal status and every waiter is released."""
        state = self.state
        try:
            with trio.CancelScope() as scope:
                self.cancel_scope = scope
                if state.dropped:  # dropped (a restart fault) before its task began
                    scope.cancel()
                await state.started.wait()
                if not state.is_ended:
                    await self._loop()
            if state.dropped:  # a restart fault: the run goes on in the Run rebuilt from its journal
                return
            if not state.is_ended:
                if scope.cancelled_caught:
                    state.finish("cancelled", state.cancel_reason or "cancelled")
                else:
                    state.finish(self.sim.status, self.sim.end_reason)
        except Exception as exc:  # a bug in a policy, a scenario or the engine: never a stale "running"
            detail = f"{type(exc).__name__}: {exc}"
            self.journal.append({"kind": "crash", "t": self.sim.time, "error": detail,
                                 "wall": {"traceback": traceback.format_exc(limit=8)}})
            state.finish("crashed", detail, error=detail)
        finally:
            if not state.is_ended and not state.dropped:  # cancelled from outside (server shutdown)
                state.finish("cancelled", state.cancel_reason or "the server shut down")
            self.journal.close()

    async def _loop(self) -> None:
        sim = self.sim
        config = self.state.config
        pace = config.pace
        # a resumed run's sim time already ran: pacing goes on from where it stood
        clock0 = trio.current_time() - (sim.time / 1000 / pace if pace else 0.0)
        settled: list[str] = []  # remote agents whose commands were adjudicated, not yet told (poked)
        held = 0  # batches without remote agents since they were adjudicated
        while True:
            if self.resume_batch is not None:
                batch: Batch | None = self.resume_batch
                self.resume_batch = None
                assert batch is not None
                deadline = trio.current_time() + config.decision_deadline_s
                waiting = self._reissue(batch, deadline)
            else:
                upcoming = sim.next_time()
                if pace is not None and upcoming is not None:
                    # sim time may not run ahead of pace x elapsed clock time: wait before advancing
                    self.journal.flush()  # the last adjudication's records, before waiting for the clock
                    until = clock0 + upcoming / 1000 / pace
                    if until > trio.current_time():  # a real wait: outcomes are not held back by the clock
                        settled, held = self._tell(settled), 0
                    await trio.sleep_until(until)
                batch = sim.advance()
                self.journal.extend(sim.drain_records())
                if batch is None:
                    return
                deadline = trio.current_time() + config.decision_deadline_s
                waiting = []
                for obs in batch.observations:
                    ra = self.remote.get(obs.agent_id)
                    if ra is None:
                        self.answer_npc(obs)
                    else:
                        self._publish(ra, obs, deadline)
                        waiting.append(obs.agent_id)
            # Told once the next batch with remote agents is published (no checkpoint in between): a
            # connection's sender wakes once for both, so the outcomes ride in the observations frame. Held
            # over at most MAX_HELD batches of NPCs only (those do not wait for anyone).
            if waiting or held >= MAX_HELD:
                settled, held = self._tell(settled), 0
            elif settled:
                held += 1
            self.journal.flush()
            if waiting:
                self._deliver(waiting)  # after the flush: nothing leaves before the journal has it
            waited = False
            if waiting:
                with trio.move_on_at(deadline):
                    waited = await self._wait_answers(waiting)
                self._close_unanswered(waiting)
            if not waited:  # nobody to wait for (NPCs, unclaimed agents): let the other tasks run
                await trio.lowlevel.checkpoint()
            began = wall_seconds()
            sim.adjudicate()
            self.metrics.adjudicated(wall_seconds() - began)
            # Not flushed here: nothing waits between this and the next batch's publication, whose flush
            # writes both batches' records in one write (and the run's end flushes the last ones).
            self.journal.extend(sim.drain_records())
            settled += waiting  # their outcomes changed (the run's end pokes everyone)

    def _tell(self, settled: list[str]) -> list[str]:
        """Poke the agents whose commands were adjudicated (their receipts changed); nothing is left to tell."""
        for aid in settled:
            self.remote[aid].poke()
        return []

    def _envelope(self, ra: RemoteAgent, obs: Observation, deadline: float) -> None:
        # built part by part when someone receives it (views.WireEnvelope): publishing costs no prose
        ra.envelope = WireEnvelope(self.state.run_id, obs, self.state.wallmap.to_unix(deadline))
        ra.envelope_seq = obs.seq

    def _reissue(self, batch: Batch, deadline: float) -> list[str]:
        """After a restart: the batch's unanswered remote agents get their envelopes again (same ids), with a
        decision deadline counted from now; the answers the journal holds were applied by runtime.restore."""
        unanswered = set(self.sim.unanswered())
        waiting = []
        for obs in batch.observations:
            ra = self.remote.get(obs.agent_id)
            if ra is None:
                continue
            self._envelope(ra, obs, deadline)
            ra.answered = obs.agent_id not in unanswered
            ra.poke()
            waiting.append(obs.agent_id)
        return waiting

    def answer_npc(self, obs: Observation) -> None:
        """Ask the agent's policy (a bad answer is journaled and becomes a noop)."""
        command, invalid = answer_or_noop(self.sim, obs.agent_id, obs.observation_id,
                                          self.policies[obs.agent_id].decide(obs))
        if invalid is not None:
            self.journal.append(invalid)
        self.sim.answer(obs.agent_id, command, source="npc" if invalid is None else "invalid")

    def _publish(self, ra: RemoteAgent, obs: Observation, deadline: float) -> None:
        ra.ledger.issue(obs.observation_id, obs.seq)
        self._envelope(ra, obs, deadline)
        ra.answered = False
        ra.poke()

    async def _wait_answers(self, waiting: list[str]) -> bool:
        """Wait until no claimed agent of the batch owes an answer; True if that meant waiting at all.

        Answers only shrink the blocking set, so they are applied incrementally (``BatchWake.answered_now``);
        the whole batch is rescanned only when leases changed (a claim, a release, a lease reaching
        its end). Rescanning on every answer made a 10,000-agent batch quadratic (bench/RESULTS.md).
        """
        wake = self.state.batch
        answered_now = wake.answered_now
        answered_now.clear()
        wake.rescan = True
        blocking: set[str] = set()
        lease_end = math.inf
        waited = False
        while True:
            if wake.rescan:
                wake.rescan = False
                answered_now.clear()
                blocking = set(self._blocking(waiting))
                lease_end = min((self.remote[a].lease.expires_at for a in blocking  # type: ignore[union-attr]
                                 ), default=math.inf)
            else:
                blocking.difference_update(answered_now)
                answered_now.clear()
            if not blocking:
                return waited
            changed = wake.changed
            waited = True
            with trio.move_on_at(lease_end) as scope:
                await changed.wait()
            if scope.cancelled_caught:
                wake.rescan = True  # a lease may have ended (or was refreshed): look again

    def _blocking(self, waiting: list[str]) -> list[str]:
        return [a for a in waiting if not self.remote[a].answered and self.remote[a].claimed]

    def _close_unanswered(self, waiting: list[str]) -> None:
        for aid in waiting:
            ra = self.remote[aid]
            if ra.answered:
                continue
            oid = ra.envelope.observation_id if ra.envelope is not None else ""
            if ra.claimed:
                ra.ledger.expire(oid, "deadline")
                source = "expired"
            else:
                # DESIGN 3: an unclaimed agent does not block; a noop is recorded and its next
                # observation supersedes this one (commands naming it get `stale`).
                ra.ledger.supersede(oid, by=None)
                source = "unclaimed"
            ra.answered = True
            self.journal.append({"kind": "closed", "t": self.sim.time, "agent": aid, "observation_ids": [oid],
                                 "why": source})
            self.sim.answer(aid, dict(NOOP), source=source)
