"""Exceptions of the warren-agent/0 client SDK.

The hierarchy (catch a branch to handle all of it)::

    WarrenError
    ├── TransportError              the request never completed (connection refused or dropped, timeout) even
    │                               after the SDK's retries; ``__cause__`` is the httpx exception
    ├── ProtocolError               the server answered, but not as warren-agent/0 says: a response without
    │   │                           ``X-Warren-Protocol: warren-agent/0``, a body that is not strict JSON or
    │   │                           not the documented shape, a status the endpoint never answers
    │   └── BriefingHashMismatch    the briefing's ``content_hash`` is not the sha256 of its canonical JSON
    ├── ServerError                 the server refused the request with an ``application/problem+json`` error;
    │   │                           ``status_code``, ``problem`` (the body), ``detail`` (what to do about it)
    │   ├── BadRequest              400  bad query parameter or body
    │   ├── LeaseError                   the lease does not authorize this request
    │   │   ├── LeaseRequired       401  no lease was sent
    │   │   └── LeaseRejected       403  wrong, released or expired lease: resume with yours, or claim
    │   ├── NotFound                404  unknown run, agent, command, scenario
    │   ├── Conflict                409  protocol mismatch, agent held by another lease, agent not controlled
    │   ├── RunEnded                410  the run has ended; ``status`` is its terminal status (data)
    │   ├── PayloadTooLarge         413
    │   ├── UnprocessableCommand    422  command_id/observation_id not strings: the command cannot be
    │   │                                deduplicated, so the server did not judge it
    │   ├── TooManyRequests         429  a server cap (live runs, long-polls per lease); ``retry_after`` s
    │   └── InternalServerError     5xx  a bug in the server
    │       └── ServiceUnavailable  503  nothing was done; ``retry_after`` s (the SDK retries it)
    └── WaitTimeout                 ``wait_outcome``/``wait_run_ended`` gave up (also a ``TimeoutError``)

Verdicts are not exceptions: a ``rejected``, ``stale`` or ``expired`` receipt is an ordinary answer (HTTP 200)
that says why; ``duplicate`` is success (the command had been accepted; the receipt is the original's).
"""

from __future__ import annotations

from typing import Any

from warren_sim.protocol.models import TERMINAL_RUN_STATUSES

__all__ = [
    "BadRequest",
    "BriefingHashMismatch",
    "Conflict",
    "InternalServerError",
    "LeaseError",
    "LeaseRejected",
    "LeaseRequired",
    "NotFound",
    "PayloadTooLarge",
    "ProtocolError",
    "RunEnded",
    "ServerError",
    "ServiceUnavailable",
    "TooManyRequests",
    "TransportError",
    "UnprocessableCommand",
    "WaitTimeout",
    "WarrenError",
    "error_for_status",
]


class WarrenError(Exception):
    """Base class of every exception the SDK raises."""


class TransportError(WarrenError):
    """The request could not be completed (after the SDK's retries, where it retries); see ``__cause__``."""


class ProtocolError(WarrenError):
    """The server's answer breaks warren-agent/0 (a wrong header, body, shape or status)."""


class BriefingHashMismatch(ProtocolError):
    """The briefing's ``content_hash`` does not match its content: it was altered or built wrongly."""


class WaitTimeout(WarrenError, TimeoutError):
    """A ``wait_*`` call gave up before the awaited state came."""


class ServerError(WarrenError):
    """The server refused the request with a problem+json body.

    ``status_code`` is the HTTP status, ``problem`` the RFC 9457 body (``type, title, status, detail``),
    ``detail`` its teaching text, ``request`` a short ``"METHOD /path"``.
    """

    def __init__(self, status_code: int, problem: dict[str, Any], request: str = "") -> None:
        self.status_code = status_code
        self.problem = problem
        self.detail = str(problem.get("detail", ""))
        self.request = request
        where = f" ({request})" if request else ""
        super().__init__(f"{status_code} {problem.get('title', '')}{where}: {self.detail}")


class BadRequest(ServerError):
    """400: a query parameter or the body is not acceptable."""


class LeaseError(ServerError):
    """401/403: the lease does not authorize this request."""


class LeaseRequired(LeaseError):
    """401: the request carried no lease."""


class LeaseRejected(LeaseError):
    """403: the lease token is wrong, released or expired.

    If another live lease holds the agent, a claim gets 409: resume with the token you hold (``client.claim(run,
    agent, lease=token)``), or wait for that lease to expire or be released; the ``detail`` says which applies.
    """


class NotFound(ServerError):
    """404: no such run, agent, command, scenario or schema."""


class Conflict(ServerError):
    """409: protocol mismatch, the agent is held by another live lease, or it is not a controlled agent."""


class RunEnded(ServerError):
    """410: the run has ended. ``status`` is its terminal status (``completed``, ``failed``, ``cancelled``,
    ``crashed``), read from the problem's ``run_status`` member (over the WebSocket: the error's
    ``data.run_status``), never from the prose of its detail.

    A server that does not send the member leaves ``status`` None here; an agent operation that meets such a 410
    then asks the run itself (``GET /v1/runs/{run}``) and fills ``status`` in before raising, so ``status`` is
    None only when that failed too (the handle's ``run_status`` then reads ``"ended"``)."""

    def __init__(self, status_code: int, problem: dict[str, Any], request: str = "") -> None:
        super().__init__(status_code, problem, request)
        status = problem.get("run_status")
        self.status: str | None = status if status in TERMINAL_RUN_STATUSES else None


class PayloadTooLarge(ServerError):
    """413: the body is larger than the server accepts."""


class UnprocessableCommand(ServerError):
    """422: the command's ids are not strings, so the server could not judge (or deduplicate) it."""


class TooManyRequests(ServerError):
    """429: a server cap was reached; ``retry_after`` (seconds, or None) says when trying again makes sense.
    The SDK waits and retries by itself where it retries transport errors."""

    def __init__(self, status_code: int, problem: dict[str, Any], request: str = "",
                 retry_after: float | None = None) -> None:
        super().__init__(status_code, problem, request)
        self.retry_after = retry_after


class InternalServerError(ServerError):
    """5xx: the server failed; this is a server bug, not the client's fault."""


class ServiceUnavailable(InternalServerError):
    """503: the server did not process the request (it is starting, or an injected ``unavailable`` fault:
    docs/faults.md); ``retry_after`` (seconds, or None) says when to try again. The SDK waits and retries by
    itself, whatever the request: nothing was done."""

    def __init__(self, status_code: int, problem: dict[str, Any], request: str = "",
                 retry_after: float | None = None) -> None:
        super().__init__(status_code, problem, request)
        self.retry_after = retry_after


_BY_STATUS: dict[int, type[ServerError]] = {
    400: BadRequest,
    401: LeaseRequired,
    403: LeaseRejected,
    404: NotFound,
    409: Conflict,
    410: RunEnded,
    413: PayloadTooLarge,
    422: UnprocessableCommand,
    429: TooManyRequests,
    503: ServiceUnavailable,
}


def error_for_status(status_code: int, problem: dict[str, Any], request: str = "") -> ServerError:
    """The exception for an error status: the class of the table above, ``ServerError`` for the rest."""
    cls = _BY_STATUS.get(status_code) or (InternalServerError if status_code >= 500 else ServerError)
    return cls(status_code, problem, request)
