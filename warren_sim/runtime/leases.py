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
import re
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import trio

from ..protocol.models import Receipt
from ..protocol.verdicts import AgentLedger
from .errors import RunError

__all__ = ["POLL_SHARE_OF_TTL", "Delivery", "Lease", "RemoteAgent", "check_lease", "check_proposal", "digest",
           "new_token", "poll_slot", "poll_wait", "proposal_ok", "still_held", "take_lease"]

TOKEN_BYTES = 24
#: A long-poll waits at most this share of the lease TTL, whatever ``wait`` and ``--max-wait`` say (docs/decisions.md).
POLL_SHARE_OF_TTL = 0.9


#: A client-made token a fresh claim proposes (``proposed_lease``, a WARREN extension): it becomes the lease's
#: token, so it must be as hard to guess as one the server makes (32 URL-safe characters: 192 bits if random).
PROPOSAL = re.compile(r"[A-Za-z0-9_-]{32,128}")


def new_token() -> str:
    return "l-" + secrets.token_urlsafe(TOKEN_BYTES)


def proposal_ok(proposed: str | None) -> bool:
    """``proposed`` is a token a claim may propose (:data:`PROPOSAL`)."""
    return isinstance(proposed, str) and PROPOSAL.fullmatch(proposed) is not None


def check_proposal(proposed: str | None) -> None:
    """400 for a ``proposed_lease`` that could not be a lease token; None (none proposed) passes."""
    if proposed is None or proposal_ok(proposed):
        return
    shown = proposed[:40] + ("..." if len(proposed) > 40 else "")
    raise RunError(400, f"proposed_lease must be 32 to 128 characters drawn from A-Z, a-z, 0-9, '_' and '-', made "
                   f"at random (for example \"l-\" + secrets.token_urlsafe(24)), got {shown!r} ({len(proposed)} "
                   "characters): it becomes the lease's token, so it must be as hard to guess as one the server "
                   "makes. Leave it out to have the server make the token")


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

    def expire(self) -> None:
        """End the lease now (an ``expire`` fault, warren_sim.runtime.faults): its holder must claim again."""
        self.expires_at = trio.current_time()

    def refresh(self, ttl: float) -> None:
        self.expires_at = trio.current_time() + ttl

    def hold(self, wait: float, ttl: float) -> None:
        """Keep the lease live through a long-poll of up to ``wait`` s that starts now: it cannot end before the
        poll returns, which then refreshes it (:func:`poll_slot`). Longer, never shorter, than it was."""
        self.expires_at = max(self.expires_at, trio.current_time() + wait + ttl)

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


def take_lease(ra: RemoteAgent, token: str | None, ttl: float, run_id: str,
               proposed: str | None = None) -> tuple[str, bool]:
    """Claim ``ra``: ``(token, resumed)``. A live lease is resumed by its own token and refused (409) otherwise.

    ``proposed`` (a WARREN extension, ``proposed_lease``) is the token a fresh lease gets instead of one made
    here, and a live lease it names is resumed as by ``token``: a fresh claim whose reply was lost (a reset
    after the grant, a server restart) is sent again as it was and gets the same lease back, where without it
    the agent stays held by a token its client never saw until the TTL ends (docs/faults.md)."""
    check_proposal(proposed)
    lease = ra.lease
    if lease is not None and lease.live():
        for held in (token, proposed):
            if held and lease.matches(held):
                lease.refresh(ttl)
                return held, True
        raise RunError(409, f"{ra.agent_id} is held by another lease for up to {lease.seconds_left():.0f} s more "
                       "unless it is refreshed; resume with that lease's token (?lease=), or wait for it to be "
                       f"released (POST {_paths(run_id, ra.agent_id)}/release?lease=<token>) or to expire")
    token = proposed or new_token()
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


def poll_wait(wait: float, ttl: float) -> float:
    """A long-poll's wait, capped below the lease TTL (at ``POLL_SHARE_OF_TTL`` of it).

    Why a cap although a parked poll holds its lease (:func:`poll_slot`): the hold lets a client that vanished
    mid-poll keep its agent until the poll ends plus a TTL; capped, that is under two TTLs, whatever
    ``--max-wait`` is, so a ``--lease-ttl 3`` server with the default ``--max-wait 60`` needs no other setting.
    A 204 before the asked ``wait`` is already what a capped wait looks like to a client (``--max-wait``).
    """
    return min(wait, ttl * POLL_SHARE_OF_TTL)


@contextlib.contextmanager
def poll_slot(ra: RemoteAgent, cap: int, wait: float = 0.0, ttl: float | None = None) -> Iterator[Lease | None]:
    """Hold one of a lease's ``cap`` concurrent long-polls while waiting; 429 with Retry-After when all are taken.

    A client needs one poll per agent, a few more only after reconnects; more are a leak.

    With ``ttl`` (a live run's polls), the poll also keeps its lease alive: held through the ``wait``
    (:meth:`Lease.hold`) and refreshed to a full TTL when the poll returns, however it returns (an envelope, a
    timeout, a 410, the client gone), as if the request had only just arrived. Without it a lease refreshed
    when the poll began could end while the poll was parked, and its holder lose the agent without a sign.
    Yields the lease held, for :func:`still_held`.
    """
    lease = ra.lease
    if lease is not None and lease.polls >= cap:
        raise RunError(429, f"{cap} long-polls are already waiting on this lease of {ra.agent_id} (the "
                       f"server's cap per lease); one poll at a time per agent is enough: let one return "
                       "(at most its wait, or 204) or poll with wait=0, then retry", retry_after=1)
    if lease is not None:
        lease.polls += 1
        if ttl is not None:
            lease.hold(wait, ttl)
    try:
        yield lease
    finally:
        if lease is not None:
            lease.polls -= 1
            if ttl is not None and ra.lease is lease:  # not released (or replaced) while it waited
                lease.refresh(ttl)


def still_held(ra: RemoteAgent, held: Lease | None, run_id: str) -> None:
    """403 for a parked poll whose lease ended while it waited (released by its holder's other request, perhaps
    claimed by someone else since): the poll must not hand its holder an envelope, nor a 204 that reads as
    "keep polling". A held lease cannot expire meanwhile (:func:`poll_slot`), so release is the way it ends."""
    if held is None or (ra.lease is held and held.live()):
        return
    where = _paths(run_id, ra.agent_id)
    if ra.lease is held:  # cannot happen while poll_slot holds it; worded all the same
        raise RunError(403, f"your lease on {ra.agent_id} expired while this poll waited; claim the agent again "
                       f"with POST {where}/claim for a fresh token")
    if ra.lease is not None and ra.lease.live():  # a claim would be refused (409): say what will work
        raise RunError(403, f"your lease on {ra.agent_id} ended while this poll waited (it was released), and "
                       f"another lease holds the agent now for up to {ra.lease.seconds_left():.0f} s more unless it "
                       f"is refreshed; wait for that lease to be released or to expire, then claim the agent with "
                       f"POST {where}/claim")
    raise RunError(403, f"your lease on {ra.agent_id} ended while this poll waited (it was released, and no lease "
                   f"holds the agent now); claim it again with POST {where}/claim for a fresh token")
