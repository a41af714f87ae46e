"""Leases: who may act for a controlled agent, until when.

A token has 192 random bits, is compared in constant time, and never leaves this module except in
the claim response: journals, logs and streams only ever see the agent id. Expiry is a deadline on
the process's trio clock, so a 300 s TTL passes in microseconds under the autojump clock.
"""

from __future__ import annotations

import hmac
import secrets

import attrs
import trio

TOKEN_BYTES = 24


def new_token() -> str:
    return "l-" + secrets.token_urlsafe(TOKEN_BYTES)


@attrs.define(eq=False)
class Lease:
    agent_id: str
    token: str = attrs.field(repr=False)
    expires_at: float
    polls: int = 0  # long-polls waiting on this lease right now (capped per lease by the run)

    def live(self) -> bool:
        return trio.current_time() < self.expires_at

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(self.token.encode(), token.encode())

    def refresh(self, ttl: float) -> None:
        self.expires_at = trio.current_time() + ttl
