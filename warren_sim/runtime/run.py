"""One served run: the engine, its remote agents' ledgers and leases, and the task that drives it.

The run task loops: advance the engine to the next batch, hand NPC wakes to their policies, publish
remote agents' envelopes, wait (a ``trio.move_on_at`` scope on the batch's decision deadline) until
every *claimed* agent of the batch has answered, record a noop for the rest, adjudicate, journal.
Everything it waits on is a deadline on the process's trio clock, so warped and autojump clocks
work unchanged. HTTP and WebSocket handlers call the ``*_request`` methods, which never wait except
``wait_observation`` (long-poll).
"""

from __future__ import annotations

import contextlib
import math
import os
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import orjson
import trio

from ..engine import NOOP, Batch, Observation, Policy, Simulation, briefing
from ..engine.headless import answer_or_noop
from ..protocol.models import TERMINAL_RUN_STATUSES, ControlledAgents, Receipt, RoleSelector
from ..protocol.verdicts import Judgement, judge, record_acceptance
from .clock import WallMap, unix_now
from .errors import CANNOT_CLAIM, NO_MORE_OBSERVATIONS, RunError, run_ended, too_many_spectators
from .journal import Journal
from .leases import Delivery, RemoteAgent, check_lease, poll_slot, poll_wait, still_held, take_lease
from .views import WireEnvelope, current_wire, receipt_with_outcome, run_view

__all__ = ["Run", "RunConfig"]

DELIVERY_CHUNK = 256  # parked long-polls' replies built, then written, at a time (Run._deliver)
MAX_HELD = 16  # batches of NPCs only an adjudicated outcome may wait for a batch with remote agents to ride on


def no_more_observations(run_id: str, status: str, error: str | None) -> RunError:
    """The 410 a poll on an ended run gets: one wording for a live run that ended and a stored one."""
    return run_ended(run_id, status, NO_MORE_OBSERVATIONS, error)


def _redacted(j: Judgement, lease: str | None) -> Judgement:
    """``j`` with the lease token replaced by ``<your lease>`` wherever a detail quotes it."""
    if not lease or len(lease) < 8:
        return j
    if j.receipt is not None and lease in j.receipt.detail:
        j = attrs.evolve(j, receipt=attrs.evolve(j.receipt, detail=j.receipt.detail.replace(lease, "<your lease>")))
    if lease in j.problem_detail:
        j = attrs.evolve(j, problem_detail=j.problem_detail.replace(lease, "<your lease>"))
    return j


@attrs.define(eq=False)
class RunConfig:
    run_id: str
    scenario: str
    seed: int
    controlled: tuple[str, ...]
    npc_policy: str
    pace: float | None
    decision_deadline_s: float
    params: dict[str, Any]
    lease_ttl: float
    max_polls_per_lease: int = 4  # concurrent long-polls one lease may hold (429 beyond)
    max_spectators: int = 64  # concurrent spectator streams of this run (429 beyond)


class Run:
    def __init__(self, config: RunConfig, sim: Simulation, policies: dict[str, Policy], journal: Journal,
                 wallmap: WallMap, *, lease_file: Path | None = None, restored: bool = False) -> None:
        self.config = config
        self.run_id = config.run_id
        self.sim = sim
        self.policies = policies
        self.journal = journal
        self.wallmap = wallmap
        self.status = "created"
        self.error: str | None = None
        self.remote = {aid: RemoteAgent(aid) for aid in config.controlled}
        self.started = trio.Event()
        self.ended = trio.Event()
        self.batch_changed = trio.Event()
        self._reply_turn = trio.Lock()  # one multi-agent poll builds its reply at a time (wait_observations)
        self._claimed_once: set[str] = set()
        self._answered_now: list[str] = []
        self._rescan = True
        self.cancel_scope: trio.CancelScope | None = None
        self.cancel_reason = ""
        self.briefings: dict[str, dict[str, Any]] = {}
        self.spectators = 0  # open spectator streams (see spectator_slot)
        self.lease_file = lease_file  # SHA-256 digests of live tokens, so leases survive a restart
        self.after_end_change: Any = None  # called when an ended run's view changes (a release): rewrites it
        # set by runtime.restore: the batch that was waiting for answers when the server died
        self.resume_batch: Batch | None = None
        self.clock0_offset = 0.0
        if restored:
            return
        self.journal.append({"kind": "config", "controlled_agents": list(config.controlled),
                             "npc_policy": config.npc_policy, "pace": config.pace,
                             "decision_deadline_s": config.decision_deadline_s})
        self.journal.extend(sim.drain_records())
        self._status_record()
        self.journal.flush()
        if not config.controlled:
            self.start()

    # -- lifecycle ---------------------------------------------------------------------------------
    def _status_record(self) -> None:
        rec: dict[str, Any] = {"kind": "status", "t": self.sim.time, "status": self.status}
        if self.error:
            rec["error"] = self.error
        self.journal.append(rec)

    def start(self) -> None:
        if self.status == "created":
            self.status = "running"
            self._status_record()
            self.journal.flush()
            self.started.set()

    @property
    def is_ended(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES

    def cancel(self, reason: str = "cancelled by an operator") -> None:
        if self.is_ended:
            return
        self.cancel_reason = reason
        if self.cancel_scope is not None:
            self.cancel_scope.cancel()
        else:
            self._finish("cancelled", reason)

    def _finish(self, status: str, reason: str, error: str | None = None) -> None:
        if self.is_ended:
            return
        if status == "cancelled":
            self.sim.cancel(reason)
        self.journal.extend(self.sim.drain_records())
        self.status = status
        self.error = error
        self._status_record()
        for ra in self.remote.values():
            closed = ra.ledger.mark_run_ended()
            if closed:
                self.journal.append({"kind": "closed", "t": self.sim.time, "agent": ra.agent_id,
                                     "observation_ids": closed, "why": "run_ended"})
            ra.poke()
        self.journal.flush()
        self.ended.set()
        self.started.set()
        self._poke_batch()

    async def main(self) -> None:
        """The run task. Whatever happens, the run ends in a terminal status and every waiter is released."""
        try:
            with trio.CancelScope() as scope:
                self.cancel_scope = scope
                await self.started.wait()
                if not self.is_ended:
                    await self._loop()
            if not self.is_ended:
                if scope.cancelled_caught:
                    self._finish("cancelled", self.cancel_reason or "cancelled")
                else:
                    self._finish(self.sim.status, self.sim.end_reason)
        except Exception as exc:  # a bug in a policy, a scenario or the engine: never a stale "running"
            detail = f"{type(exc).__name__}: {exc}"
            self.journal.append({"kind": "crash", "t": self.sim.time, "error": detail,
                                 "wall": {"traceback": traceback.format_exc(limit=8)}})
            self._finish("crashed", detail, error=detail)
        finally:
            if not self.is_ended:  # cancelled from outside (server shutdown)
                self._finish("cancelled", self.cancel_reason or "the server shut down")
            self.journal.close()

    async def _loop(self) -> None:
        sim = self.sim
        pace = self.config.pace
        # a resumed run's sim time already ran: pacing goes on from where it stood
        clock0 = trio.current_time() - (sim.time / 1000 / pace if pace else 0.0)
        settled: list[str] = []  # remote agents whose commands were adjudicated, not yet told (poked)
        held = 0  # batches without remote agents since they were adjudicated
        while True:
            if self.resume_batch is not None:
                batch: Batch | None = self.resume_batch
                self.resume_batch = None
                assert batch is not None
                deadline = trio.current_time() + self.config.decision_deadline_s
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
                deadline = trio.current_time() + self.config.decision_deadline_s
                waiting = []
                for obs in batch.observations:
                    ra = self.remote.get(obs.agent_id)
                    if ra is None:
                        self._answer_npc(obs)
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
            sim.adjudicate()
            # Not flushed here: nothing waits between this and the next batch's publication, whose flush
            # writes both batches' records in one write (and the run's end flushes the last ones).
            self.journal.extend(sim.drain_records())
            settled += waiting  # their outcomes changed (the run's end pokes everyone)

    def _tell(self, settled: list[str]) -> list[str]:
        """Poke the agents whose commands were adjudicated (their receipts changed); nothing is left to tell."""
        for aid in settled:
            self.remote[aid].poke()
        return []

    def _reissue(self, batch: Batch, deadline: float) -> list[str]:
        """After a restart: the batch's unanswered remote agents get their envelopes again (same ids), with a
        decision deadline counted from now; the answers the journal holds were applied by runtime.restore."""
        unanswered = set(self.sim.unanswered())
        waiting = []
        for obs in batch.observations:
            ra = self.remote.get(obs.agent_id)
            if ra is None:
                continue
            ra.envelope = WireEnvelope(self.run_id, obs, self.wallmap.to_unix(deadline))
            ra.envelope_seq = obs.seq
            ra.answered = obs.agent_id not in unanswered
            ra.poke()
            waiting.append(obs.agent_id)
        return waiting

    def _answer_npc(self, obs: Observation) -> None:
        command, invalid = answer_or_noop(self.sim, obs.agent_id, obs.observation_id,
                                          self.policies[obs.agent_id].decide(obs))
        if invalid is not None:
            self.journal.append(invalid)
        self.sim.answer(obs.agent_id, command, source="npc" if invalid is None else "invalid")

    def _publish(self, ra: RemoteAgent, obs: Observation, deadline: float) -> None:
        ra.ledger.issue(obs.observation_id, obs.seq)
        # built part by part when someone receives it (views.WireEnvelope): publishing costs no prose
        ra.envelope = WireEnvelope(self.run_id, obs, self.wallmap.to_unix(deadline))
        ra.envelope_seq = obs.seq
        ra.answered = False
        ra.poke()

    def _deliver(self, published: list[str]) -> None:
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
                # unclaimed (its lease ended): this step closes its envelope unanswered (_close_unanswered)
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

    async def _wait_answers(self, waiting: list[str]) -> bool:
        """Wait until no claimed agent of the batch owes an answer; True if that meant waiting at all.

        Answers only shrink the blocking set, so they are applied incrementally (``_answered_now``);
        the whole batch is rescanned only when leases changed (a claim, a release, a lease reaching
        its end). Rescanning on every answer made a 10,000-agent batch quadratic (bench/RESULTS.md).
        """
        self._answered_now.clear()
        self._rescan = True
        blocking: set[str] = set()
        lease_end = math.inf
        waited = False
        while True:
            if self._rescan:
                self._rescan = False
                self._answered_now.clear()
                blocking = set(self._blocking(waiting))
                lease_end = min((self.remote[a].lease.expires_at for a in blocking  # type: ignore[union-attr]
                                 ), default=math.inf)
            else:
                blocking.difference_update(self._answered_now)
                self._answered_now.clear()
            if not blocking:
                return waited
            wake = self.batch_changed
            waited = True
            with trio.move_on_at(lease_end) as scope:
                await wake.wait()
            if scope.cancelled_caught:
                self._rescan = True  # a lease may have ended (or was refreshed): look again

    def _blocking(self, waiting: list[str]) -> list[str]:
        return [a for a in waiting if not self.remote[a].answered and self.remote[a].claimed]

    def _close_unanswered(self, waiting: list[str]) -> None:
        for aid in waiting:
            ra = self.remote[aid]
            if ra.answered:
                continue
            oid = ra.envelope.observation_id if ra.envelope is not None else ""
            if self.remote[aid].claimed:
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

    def _poke_batch(self) -> None:
        self.batch_changed.set()
        self.batch_changed = trio.Event()

    # -- requests ------------------------------------------------------------------------------------
    def agent(self, agent_id: str) -> RemoteAgent:
        ra = self.remote.get(agent_id)
        if ra is None:
            if agent_id in self.sim.world.agents:
                who = f"the npc policy {self.config.npc_policy!r}" if self.config.npc_policy != "none" \
                    else "nobody (npc_policy 'none': it no-ops)"
                raise RunError(409, f"{agent_id} is not a controlled agent of {self.run_id}; it is driven by "
                               f"{who}. Controlled agents: {', '.join(self.config.controlled) or 'none'}; "
                               "name agents in controlled_agents when creating a run to drive them remotely")
            raise RunError(404, f"{self.run_id} has no agent {agent_id!r}; its agents: "
                           f"{', '.join(self.sim.world.agent_ids)}")
        return ra

    def authenticate(self, agent_id: str, token: str | None) -> RemoteAgent:
        """Check the lease of a request and refresh its TTL (any authenticated request does)."""
        ra = self.agent(agent_id)
        check_lease(ra, token, self.config.lease_ttl, self.run_id)
        return ra

    def claim(self, agent_id: str, token: str | None) -> tuple[str, bool]:
        """A new or resumed lease: ``(token, resumed)``. The run starts once every controlled agent was claimed."""
        ra = self.agent(agent_id)
        if self.is_ended:
            raise run_ended(self.run_id, self.status, CANNOT_CLAIM)
        token, resumed = take_lease(ra, token, self.config.lease_ttl, self.run_id)
        if resumed and agent_id in self._claimed_once:
            return token, True
        if not resumed:
            self.save_leases()
        # written at once: a run killed while still `created` comes back with the claims it had (restore);
        # a resumed lease the journal never saw claimed (killed between the sidecar and this) counts now
        self.journal.append({"kind": "claim", "t": self.sim.time, "agent": agent_id})
        self.journal.flush()
        self._claimed_once.add(agent_id)
        if self.status == "created" and len(self._claimed_once) == len(self.remote):
            self.start()  # every controlled agent has been claimed: nobody misses its start observation
        self._rescan = True
        self._poke_batch()
        return token, resumed

    def claim_many(self, selector: ControlledAgents) -> dict[str, str]:
        """Fresh leases on the controlled agents ``selector`` names, all or none: ``{agent_id: token}``.

        One request instead of one per agent (``POST /v1/runs/{run}/claim``): the lease sidecar is written
        once, the journal flushed once and the batch woken once, where N single claims did each N times. An
        agent held by a live lease refuses the whole claim (409) and nothing changes: its holder resumes it
        with its own token (``POST .../agents/{agent}/claim?lease=``).
        """
        if self.is_ended:
            raise run_ended(self.run_id, self.status, CANNOT_CLAIM)
        ids = self._select(selector)
        held = [aid for aid in ids if self.remote[aid].claimed]
        if held:
            shown = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
            raise RunError(409, f"{len(held)} of the {len(ids)} agents selected are held by live leases ({shown}); "
                           "a bulk claim takes all or none, and nothing was claimed. Claim the others by naming "
                           "them ({\"agents\": [ids]}), or resume a held agent with its own token (POST "
                           f"/v1/runs/{self.run_id}/agents/{{agent}}/claim?lease=<token>)")
        leases = {aid: take_lease(self.remote[aid], None, self.config.lease_ttl, self.run_id)[0] for aid in ids}
        self.save_leases()
        t = self.sim.time
        self.journal.extend([{"kind": "claim", "t": t, "agent": aid} for aid in ids])
        self.journal.flush()
        self._claimed_once.update(ids)
        if self.status == "created" and len(self._claimed_once) == len(self.remote):
            self.start()
        self._rescan = True
        self._poke_batch()
        return leases

    def _select(self, selector: ControlledAgents) -> list[str]:
        """The controlled agents a bulk claim names (ids, ``"all"``, ``{"role": ROLE}``), in the run's order."""
        if selector == "all":
            if not self.remote:
                raise RunError(409, f"{self.run_id} has no controlled agents; name agents in controlled_agents "
                               "when creating a run to drive them remotely")
            return list(self.remote)
        if isinstance(selector, RoleSelector):
            world = self.sim.world.agents
            picked = [aid for aid in self.remote if world[aid].role == selector.role]
            if not picked:
                roles = sorted({a.role for a in world.values()})
                if selector.role not in roles:
                    raise RunError(400, f"no agent of {self.run_id} has the role {selector.role!r}; its roles: "
                                   f"{', '.join(roles)}")
                raise RunError(409, f"no {selector.role} of {self.run_id} is a controlled agent; controlled: "
                               f"{', '.join(list(self.remote)[:20]) or 'none'}")
            return picked
        if not selector:
            raise RunError(400, 'agents is an empty list; name at least one controlled agent, or use "all" or '
                           '{"role": ROLE}')
        for aid in selector:
            self.agent(aid)  # 404 for an agent the world does not have, 409 for one that is not controlled
        return list(selector)

    def release(self, agent_id: str, token: str | None) -> None:
        ra = self.authenticate(agent_id, token)
        ra.lease = None
        self.save_leases()
        self.journal.append({"kind": "release", "t": self.sim.time, "agent": agent_id})
        if self.is_ended and self.after_end_change is not None:
            self.after_end_change()
        ra.poke()
        self._rescan = True
        self._poke_batch()

    def save_leases(self) -> None:
        """Write the digests of the held leases to the sidecar file, atomically and readable by the owner only.

        As durable as the journal it sits next to: on the OS's side before the claim's reply leaves (a killed
        server finds it), fsynced too only under ``--fsync`` (a lost machine). An fsync per claim was most of
        a claim's cost, and of short runs' (bench/results/r4-perf-wire.md).
        """
        if self.lease_file is None:
            return
        held = {aid: ra.lease.token_digest for aid, ra in self.remote.items() if ra.lease is not None}
        tmp = self.lease_file.with_name(self.lease_file.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:  # orjson: json.dump's encoder was a third of a claim (64 in a file)
            f.write(orjson.dumps({"run_id": self.run_id, "sha256": held}))
            f.flush()
            if self.journal.fsync:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.lease_file)

    def briefing_for(self, agent_id: str) -> dict[str, Any]:
        if agent_id not in self.briefings:
            self.briefings[agent_id] = briefing(self.sim, agent_id)
        return self.briefings[agent_id]

    async def wait_observation(self, ra: RemoteAgent, after: int, wait: float,
                               deliver: Callable[[bytes], bool] | None = None) -> orjson.Fragment | None:
        """The outstanding envelope with ``seq > after`` (serialized, once per envelope: ``WireEnvelope.whole``),
        waiting up to ``wait`` s (at most 0.9 of the lease TTL: ``leases.poll_wait``); None on timeout.

        At most ``max_polls_per_lease`` of these run at once per lease (call right after ``authenticate``);
        one more is refused with 429 (:func:`~warren_sim.runtime.leases.poll_slot`).

        ``deliver``: called by the run task with the envelope's bytes (``whole_bytes``) when the batch that brings it is
        published, while this poll is parked (:meth:`_deliver`); it writes the reply then and there and
        returns True, or returns False and the reply is this caller's to send, as without it. Once it
        returned True, this returns those bytes whatever else happened meanwhile (the wait ran out, the run
        ended): they are what the client received.
        """
        entry = None if deliver is None else Delivery(after, deliver)
        ttl = self.config.lease_ttl
        wait = poll_wait(wait, ttl)  # below the lease TTL, whatever --max-wait allows (leases.poll_wait)
        try:
            # the poll holds its lease while parked and refreshes it as it returns (leases.poll_slot); a lease
            # that ended meanwhile (released) answers 403, not an envelope or a 204 (leases.still_held)
            with poll_slot(ra, self.config.max_polls_per_lease, wait, ttl) as held, trio.move_on_after(wait):
                while True:
                    if entry is not None and entry.sent is not None:
                        return entry.sent
                    if self.is_ended:
                        raise no_more_observations(self.run_id, self.status, self.error)
                    still_held(ra, held, self.run_id)
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
        if not self.is_ended:
            still_held(ra, held, self.run_id)  # the wait ran out: a 204 only while the lease still holds
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
        wait = poll_wait(wait, self.config.lease_ttl)  # below the lease TTL, as wait_observation's
        with contextlib.ExitStack() as slots:
            # each lease held while parked and refreshed as the poll returns; 403 if one ended (wait_observation)
            held = [(ra, slots.enter_context(poll_slot(ra, self.config.max_polls_per_lease, wait,
                                                       self.config.lease_ttl))) for ra, _ in wanted]
            with trio.move_on_after(wait):
                while True:
                    if self.is_ended:
                        raise no_more_observations(self.run_id, self.status, self.error)
                    for ra, lease in held:
                        still_held(ra, lease, self.run_id)
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
            if not self.is_ended:
                for ra, lease in held:
                    still_held(ra, lease, self.run_id)
        return []

    @contextlib.contextmanager
    def spectator_slot(self) -> Iterator[None]:
        """Hold one of the run's ``max_spectators`` stream slots while a spectator is connected; 429 when full.

        Use it around a spectator stream: ``with run.spectator_slot(): ...`` (refuse before accepting).
        """
        cap = self.config.max_spectators
        if self.spectators >= cap:
            raise too_many_spectators(self.run_id, cap)
        self.spectators += 1
        try:
            yield
        finally:
            self.spectators -= 1

    def submit(self, ra: RemoteAgent, body: object, lease: str | None = None, *, write: bool = True) -> Judgement:
        """Judge a command, record the verdict, and hand an accepted one to the engine.

        ``lease`` is the request's token: a client that pasted it into its command does not get it echoed in
        the verdict's detail (nor written to the journal). A verdict other than accepted is flushed here (on
        disk and visible to journal readers before its receipt leaves); an accepted one is written through
        (on disk; readers see it with its batch's flush). ``write=False`` leaves the accepted verdict's write
        to the caller, which must call ``journal.write_through()`` before any receipt leaves (WS
        ``agent.submit_many``: one write for all the commands of one request).
        """
        aid = ra.agent_id

        def validate(observation_id: str, payload: dict[str, Any]) -> str | None:
            return self.sim.validate(aid, payload)

        j = _redacted(judge(ra.ledger, body, validate), lease)
        if j.receipt is None:
            return j
        receipt = j.receipt
        if j.accept:
            assert j.payload is not None
            record_acceptance(ra.ledger, receipt, j.payload)
            ra.answered = True
            ra.observation_of_command[receipt.command_id] = receipt.observation_id
            self.sim.answer(aid, j.payload, source="remote")
            self._answered_now.append(aid)
            self._poke_batch()
        elif receipt.status == "duplicate":
            receipt = receipt_with_outcome(self.sim, receipt)
            j = attrs.evolve(j, receipt=receipt)
        if receipt.status != "duplicate":
            ra.receipts[receipt.command_id] = receipt
        record: dict[str, Any] = {"kind": "verdict", "t": self.sim.time, "agent": aid,
                                  "command_id": receipt.command_id, "observation_id": receipt.observation_id,
                                  "status": receipt.status, "detail": receipt.detail}
        if j.accept:
            record["command"] = j.payload  # what a restarted server re-applies (runtime.restore)
        record["wall"] = {"unix": round(unix_now(), 3)}
        self.journal.append(record)
        if not j.accept:
            # every other verdict is written and shown to readers (GET .../journal, the streams) before its
            # receipt leaves: rare, and a client that compares its receipts with the journal finds them there
            # (docs/decisions.md); write=False defers accepted verdicts only
            self.journal.flush()
        elif write:
            self.journal.write_through()  # accepted means written: on the OS's side before the receipt leaves
        return j

    def receipt(self, ra: RemoteAgent, command_id: str) -> Receipt:
        original = ra.ledger.accepted.get(command_id)
        if original is not None:
            return receipt_with_outcome(self.sim, original)
        latest = ra.receipts.get(command_id)
        if latest is None:
            raise RunError(404, f"no command {command_id!r} was ever submitted for {ra.agent_id}; submit it "
                           f"with POST /v1/runs/{self.run_id}/agents/{ra.agent_id}/commands")
        return latest

    # -- views ---------------------------------------------------------------------------------------
    def view(self) -> dict[str, Any]:
        """The run as ``GET /v1/runs/{id}`` shows it (see :func:`~warren_sim.runtime.views.run_view`)."""
        return run_view(self)
