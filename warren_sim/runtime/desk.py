"""The agents' desk of one run: claims, leases and their sidecar, briefings, submits and receipts.

Every request of a remote agent that is not a wait is answered here, at once. The rules of a lease are
:mod:`warren_sim.runtime.leases`'; the desk adds their effects on the run: a claim is journaled, the run
starts once every controlled agent was claimed, and the loop is told (``BatchWake``) when an answer
arrives or who blocks the batch may have changed. A submitted command is judged by the protocol's
ledger (:func:`~warren_sim.protocol.verdicts.judge`), its verdict journaled, and an accepted one handed
to the engine; its receipt's outcome is read from the engine when asked (``views.receipt_with_outcome``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import orjson

from ..engine import briefing
from ..protocol.models import ControlledAgents, Receipt, RoleSelector
from ..protocol.verdicts import Judgement, judge, record_acceptance
from .clock import unix_now
from .errors import CANNOT_CLAIM, RunError, run_ended
from .leases import RemoteAgent, check_lease, take_lease
from .state import RunState
from .views import receipt_with_outcome

__all__ = ["AgentDesk"]


def _redacted(j: Judgement, lease: str | None) -> Judgement:
    """``j`` with the lease token replaced by ``<your lease>`` wherever a detail quotes it."""
    if not lease or len(lease) < 8:
        return j
    if j.receipt is not None and lease in j.receipt.detail:
        j = attrs.evolve(j, receipt=attrs.evolve(j.receipt, detail=j.receipt.detail.replace(lease, "<your lease>")))
    if lease in j.problem_detail:
        j = attrs.evolve(j, problem_detail=j.problem_detail.replace(lease, "<your lease>"))
    return j


class AgentDesk:
    """Who holds which controlled agent, and what they sent: the synchronous side of the agent protocol."""

    def __init__(self, state: RunState, lease_file: Path | None) -> None:
        self.state = state
        self.remote = state.remote
        self.lease_file = lease_file  # SHA-256 digests of live tokens, so leases survive a restart
        self.claimed_once: set[str] = set()  # agents ever claimed: the run starts when all were
        self.briefings: dict[str, dict[str, Any]] = {}
        self.after_end_change: Callable[[], None] | None = None  # an ended run's view changed (a release)

    # -- leases -------------------------------------------------------------------------------------
    def agent(self, agent_id: str) -> RemoteAgent:
        ra = self.remote.get(agent_id)
        if ra is None:
            state = self.state
            config = state.config
            if agent_id in state.sim.world.agents:
                who = f"the npc policy {config.npc_policy!r}" if config.npc_policy != "none" \
                    else "nobody (npc_policy 'none': it no-ops)"
                raise RunError(409, f"{agent_id} is not a controlled agent of {state.run_id}; it is driven by "
                               f"{who}. Controlled agents: {', '.join(config.controlled) or 'none'}; "
                               "name agents in controlled_agents when creating a run to drive them remotely")
            raise RunError(404, f"{state.run_id} has no agent {agent_id!r}; its agents: "
                           f"{', '.join(state.sim.world.agent_ids)}")
        return ra

    def authenticate(self, agent_id: str, token: str | None) -> RemoteAgent:
        """Check the lease of a request and refresh its TTL (any authenticated request does)."""
        ra = self.agent(agent_id)
        check_lease(ra, token, self.state.config.lease_ttl, self.state.run_id)
        return ra

    @property
    def all_claimed(self) -> bool:
        """Every controlled agent was claimed at least once (a run without any never is)."""
        return bool(self.remote) and len(self.claimed_once) == len(self.remote)

    def _journal_claims(self, agent_ids: list[str]) -> None:
        # written at once: a run killed while still `created` comes back with the claims it had (restore)
        state = self.state
        t = state.sim.time
        state.journal.extend([{"kind": "claim", "t": t, "agent": aid} for aid in agent_ids])
        state.journal.flush()
        self.claimed_once.update(agent_ids)
        if state.status == "created" and self.all_claimed:
            state.start()  # every controlled agent has been claimed: nobody misses its start observation
        state.batch.leases_changed()

    def claim(self, agent_id: str, token: str | None, proposed: str | None = None) -> tuple[str, bool]:
        """A new or resumed lease: ``(token, resumed)``; ``proposed``: the token a fresh lease gets
        (:func:`take_lease`). The run starts once every controlled agent was claimed."""
        ra = self.agent(agent_id)
        state = self.state
        if state.is_ended:
            raise run_ended(state.run_id, state.status, CANNOT_CLAIM)
        token, resumed = take_lease(ra, token, state.config.lease_ttl, state.run_id, proposed)
        if resumed and agent_id in self.claimed_once:
            return token, True
        if not resumed:
            self.save_leases()
        # a resumed lease the journal never saw claimed (killed between the sidecar and its claim) counts now
        self._journal_claims([agent_id])
        return token, resumed

    def claim_many(self, selector: ControlledAgents) -> dict[str, str]:
        """Fresh leases on the controlled agents ``selector`` names, all or none: ``{agent_id: token}``.

        One request instead of one per agent (``POST /v1/runs/{run}/claim``): the lease sidecar is written
        once, the journal flushed once and the batch woken once, where N single claims did each N times. An
        agent held by a live lease refuses the whole claim (409) and nothing changes: its holder resumes it
        with its own token (``POST .../agents/{agent}/claim?lease=``).
        """
        state = self.state
        run_id = state.run_id
        if state.is_ended:
            raise run_ended(run_id, state.status, CANNOT_CLAIM)
        ids = self._select(selector)
        held = [aid for aid in ids if self.remote[aid].claimed]
        if held:
            shown = ", ".join(held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
            raise RunError(409, f"{len(held)} of the {len(ids)} agents selected are held by live leases ({shown}); "
                           "a bulk claim takes all or none, and nothing was claimed. Claim the others by naming "
                           "them ({\"agents\": [ids]}), or resume a held agent with its own token (POST "
                           f"/v1/runs/{run_id}/agents/{{agent}}/claim?lease=<token>)")
        leases = {aid: take_lease(self.remote[aid], None, state.config.lease_ttl, run_id)[0] for aid in ids}
        self.save_leases()
        self._journal_claims(ids)
        return leases

    def _select(self, selector: ControlledAgents) -> list[str]:
        """The controlled agents a bulk claim names (ids, ``"all"``, ``{"role": ROLE}``), in the run's order."""
        run_id = self.state.run_id
        if selector == "all":
            if not self.remote:
                raise RunError(409, f"{run_id} has no controlled agents; name agents in controlled_agents "
                               "when creating a run to drive them remotely")
            return list(self.remote)
        if isinstance(selector, RoleSelector):
            world = self.state.sim.world.agents
            picked = [aid for aid in self.remote if world[aid].role == selector.role]
            if not picked:
                roles = sorted({a.role for a in world.values()})
                if selector.role not in roles:
                    raise RunError(400, f"no agent of {run_id} has the role {selector.role!r}; its roles: "
                                   f"{', '.join(roles)}")
                raise RunError(409, f"no {selector.role} of {run_id} is a controlled agent; controlled: "
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
        state = self.state
        state.journal.append({"kind": "release", "t": state.sim.time, "agent": agent_id})
        if state.is_ended and self.after_end_change is not None:
            self.after_end_change()
        ra.poke()
        state.batch.leases_changed()

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
            f.write(orjson.dumps({"run_id": self.state.run_id, "sha256": held}))
            f.flush()
            if self.state.journal.fsync:
                os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.lease_file)

    # -- what an agent reads and sends --------------------------------------------------------------
    def briefing_for(self, agent_id: str) -> dict[str, Any]:
        if agent_id not in self.briefings:
            self.briefings[agent_id] = briefing(self.state.sim, agent_id)
        return self.briefings[agent_id]

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
        state = self.state
        sim = state.sim

        def validate(observation_id: str, payload: dict[str, Any]) -> str | None:
            return sim.validate(aid, payload)

        j = _redacted(judge(ra.ledger, body, validate), lease)
        if j.receipt is None:
            return j
        receipt = j.receipt
        if j.accept:
            assert j.payload is not None
            record_acceptance(ra.ledger, receipt, j.payload)
            ra.answered = True
            ra.observation_of_command[receipt.command_id] = receipt.observation_id
            sim.answer(aid, j.payload, source="remote")
            state.batch.answered(aid)
        elif receipt.status == "duplicate":
            receipt = receipt_with_outcome(sim, receipt)
            j = attrs.evolve(j, receipt=receipt)
        if receipt.status != "duplicate":
            ra.receipts[receipt.command_id] = receipt
        record: dict[str, Any] = {"kind": "verdict", "t": sim.time, "agent": aid,
                                  "command_id": receipt.command_id, "observation_id": receipt.observation_id,
                                  "status": receipt.status, "detail": receipt.detail}
        if j.accept:
            record["command"] = j.payload  # what a restarted server re-applies (runtime.restore)
        record["wall"] = {"unix": round(unix_now(), 3)}
        state.journal.append(record)
        if not j.accept:
            # every other verdict is written and shown to readers (GET .../journal, the streams) before its
            # receipt leaves: rare, and a client that compares its receipts with the journal finds them there
            # (docs/decisions.md); write=False defers accepted verdicts only
            state.journal.flush()
        elif write:
            state.journal.write_through()  # accepted means written: on the OS's side before the receipt leaves
        return j

    def receipt(self, ra: RemoteAgent, command_id: str) -> Receipt:
        original = ra.ledger.accepted.get(command_id)
        if original is not None:
            return receipt_with_outcome(self.state.sim, original)
        latest = ra.receipts.get(command_id)
        if latest is None:
            raise RunError(404, f"no command {command_id!r} was ever submitted for {ra.agent_id}; submit it "
                           f"with POST /v1/runs/{self.state.run_id}/agents/{ra.agent_id}/commands")
        return latest
