"""Leases: who may act for a controlled agent, until when, and how a request proves it.

A token has 192 random bits and never leaves this module except in the claim response: journals, logs
and streams only ever see the agent id. The server keeps only the token's SHA-256 digest (compared in
constant time), which is also what the lease sidecar file holds, so a restarted server resumes the
lease of a token it never stored (DESIGN section 11). Expiry is a deadline on
the process's trio clock, so a 300 s TTL passes in microseconds under the autojump clock.

This module owns the rules (:func:`take_lease`, :func:`check_lease`, :func:`poll_slot`); the run
(:mod:`warren_sim.runtime.run`) owns their effects on the run: journaling a claim, starting the run
once every agent was claimed, waking the batch when who-blocks-it changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import trio

from ..protocol.models import Receipt
from ..protocol.verdicts import AgentLedger
from .errors import RunError

__all__ = ["Delivery", "Lease", "RemoteAgent", "check_lease", "digest", "new_token", "poll_slot", "take_lease"]

TOKEN_BYTES = 24


def new_token() -> str:
    return "l-" + secrets.token_urlsafe(TOKEN_BYTES)


def digest(token: str) -> str:
    """The SHA-256 hex digest of a token: all the server keeps of it, in memory and in the sidecar file."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@attrs.define(eq=False)
class Lease:
    agent_id: str
    token_digest: str = attrs.field(repr=False)
    expires_at: float
    polls: int = 0  # long-polls waiting on this lease right now (capped per lease by poll_slot)

    def live(self) -> bool:
        return trio.current_time() < self.expires_at

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(self.token_digest.encode(), digest(token).encode())

    def refresh(self, ttl: float) -> None:
        self.expires_at = trio.current_time() + ttl

    def seconds_left(self) -> float:
        return max(0.0, self.expires_at - trio.current_time())


@attrs.define(eq=False)
class Delivery:
    """A parked long-poll's way to get its reply written by the run task (``Run.wait_observation``'s ``deliver``):
    the envelope after ``after`` goes to ``deliver`` (its bytes); ``sent`` keeps them once written (a Fragment)."""

    after: int
    deliver: Callable[[bytes], bool]
    sent: Any = None


@attrs.define(eq=False)
class RemoteAgent:
    """Server-side state of one controlled agent: its lease, its ledger, its newest envelope and receipts."""

    agent_id: str
    ledger: AgentLedger = attrs.Factory(AgentLedger)
    lease: Lease | None = None
    envelope: Any = None  # the newest envelope issued (a views.WireEnvelope, built part by part)
    envelope_seq: int = -1
    answered: bool = True  # the newest envelope was answered (or closed)
    changed: trio.Event = attrs.Factory(trio.Event)
    receipts: dict[str, Receipt] = attrs.Factory(dict)  # latest receipt per command id (all verdicts)
    observation_of_command: dict[str, str] = attrs.Factory(dict)
    # called on every poke, in the poking task: a WebSocket connection notes the wake without a task of its own,
    # and a multi-agent poll (Run.wait_observations) sets its one event, however many agents it covers
    listeners: list[Callable[[], None]] = attrs.Factory(list)
    deliveries: list[Delivery] = attrs.Factory(list)  # parked long-polls the run task writes to (Mailbox.deliver)

    @property
    def claimed(self) -> bool:
        """Someone holds a live lease on this agent (so the run waits for its answers)."""
        return self.lease is not None and self.lease.live()

    def poke(self) -> None:
        self.changed.set()
        self.changed = trio.Event()
        for listener in self.listeners:
            listener()


def _paths(run_id: str, agent_id: str) -> str:
    return f"/v1/runs/{run_id}/agents/{agent_id}"


def take_lease(ra: RemoteAgent, token: str | None, ttl: float, run_id: str) -> tuple[str, bool]:
    """Claim ``ra``: ``(token, resumed)``. A live lease is resumed by its own token and refused (409) otherwise."""
    lease = ra.lease
    if lease is not None and lease.live():
        if token and lease.matches(token):
            lease.refresh(ttl)
            return token, True
        raise RunError(409, f"{ra.agent_id} is held by another lease for up to {lease.seconds_left():.0f} s more "
                       "unless it is refreshed; resume with that lease's token (?lease=), or wait for it to be "
                       f"released (POST {_paths(run_id, ra.agent_id)}/release?lease=<token>) or to expire")
    token = new_token()
    ra.lease = Lease(ra.agent_id, digest(token), trio.current_time() + ttl)
    return token, False


def check_lease(ra: RemoteAgent, token: str | None, ttl: float, run_id: str) -> None:
    """A request's ``?lease=`` must be the live lease of ``ra``; any request that passes refreshes its TTL.

    Each refusal says what to do next, and never advises a claim that would be refused: while another
    live lease holds the agent, a claim gets 409, so the 403 names both ways out instead.
    """
    where = _paths(run_id, ra.agent_id)
    if not token:
        raise RunError(401, f"this request needs ?lease=<token>; claim {ra.agent_id} with POST {where}/claim to "
                       "get one")
    lease = ra.lease
    if lease is None:
        raise RunError(403, f"that lease token does not hold {ra.agent_id}, and no lease holds it now (it was "
                       f"released or expired); claim it with POST {where}/claim for a fresh token")
    if not lease.matches(token):
        if lease.live():
            raise RunError(403, f"that lease token does not hold {ra.agent_id}; another lease does, for up to "
                           f"{lease.seconds_left():.0f} s more unless it is refreshed (TTL {ttl:g} s). Either "
                           f"resume with the token you hold for it (POST {where}/claim?lease=<that token> gives it "
                           f"back), or wait for that lease to expire or be released (POST {where}/release?lease="
                           "<that token>), then claim the agent")
        raise RunError(403, f"that lease token does not hold {ra.agent_id}; its last lease expired, so claim it "
                       f"with POST {where}/claim for a fresh token")
    if not lease.live():
        raise RunError(403, f"your lease on {ra.agent_id} expired (no request for {ttl:g} s); claim the agent "
                       f"again with POST {where}/claim for a fresh token")
    lease.refresh(ttl)


@contextlib.contextmanager
def poll_slot(ra: RemoteAgent, cap: int) -> Iterator[None]:
    """Hold one of a lease's ``cap`` concurrent long-polls while waiting; 429 with Retry-After when all are taken.

    A client needs one poll per agent, a few more only after reconnects; more are a leak.
    """
    lease = ra.lease
    if lease is not None and lease.polls >= cap:
        raise RunError(429, f"{cap} long-polls are already waiting on this lease of {ra.agent_id} (the "
                       f"server's cap per lease); one poll at a time per agent is enough: let one return "
                       "(at most its wait, or 204) or poll with wait=0, then retry", retry_after=1)
    if lease is not None:
        lease.polls += 1
    try:
        yield
    finally:
        if lease is not None:
            lease.polls -= 1
