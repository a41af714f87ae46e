"""RunError: the one way the runtime refuses a request (an HTTP status and a teaching detail)."""

from __future__ import annotations

__all__ = ["CANNOT_CLAIM", "NO_MORE_OBSERVATIONS", "RunError", "no_more_observations", "restarted", "run_ended",
           "too_many_spectators"]


class RunError(Exception):
    """A request the run refuses; ``status`` is the HTTP status, ``detail`` teaches.

    ``retry_after`` (seconds) is set on refusals by a cap (429): the HTTP layer sends it as ``Retry-After``;
    the agent WebSocket carries ``status`` as its JSON-RPC error code. ``run_status`` is set on the 410 of an
    ended run (:func:`run_ended`): the transports carry it as data (the problem body's ``run_status`` member, the
    JSON-RPC error's ``data.run_status``), so a client reads the terminal status without parsing the detail.
    """

    def __init__(self, status: int, detail: str, *, retry_after: int | None = None,
                 run_status: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after
        self.run_status = run_status


CANNOT_CLAIM = "it cannot be claimed"
NO_MORE_OBSERVATIONS = "there will be no more observations"


def run_ended(run_id: str, status: str, then: str | None = None, error: str | None = None) -> RunError:
    """The 410 of a request on an ended run, whatever asked (a claim, a poll, a start...), live run or stored one:
    one wording, ``then`` saying what that means for the request (:data:`CANNOT_CLAIM`, :data:`NO_MORE_OBSERVATIONS`)
    and ``error`` the failed run's error, and the terminal status as data (``run_status``)."""
    return RunError(410, f"{run_id} has ended with status {status}" + (f" ({error})" if error else "")
                    + (f"; {then}" if then else ""), run_status=status)


def too_many_spectators(run_id: str, cap: int) -> RunError:
    """The 429 for a run (live or stored) whose spectator streams are at the server's cap: one wording for both."""
    return RunError(429, f"{run_id} already has {cap} spectators (the server's cap per run); close a stream you "
                    f"no longer watch, or read the run's journal with GET /v1/runs/{run_id}/journal, and retry later",
                    retry_after=5)


def no_more_observations(run_id: str, status: str, error: str | None) -> RunError:
    """The 410 a poll on an ended run gets: one wording for a live run that ended and a stored one."""
    return run_ended(run_id, status, NO_MORE_OBSERVATIONS, error)


def restarted(run_id: str) -> RunError:
    """The 503 a request gets when the run it reached was dropped by a ``restart`` fault while it was in flight:
    the run was restored from its journal meanwhile, and the same request sent again reaches it."""
    return RunError(503, f"{run_id} was restarted while this request was in flight (an injected fault: restart; "
                    "docs/faults.md); retry the same request: the run was restored from its journal",
                    retry_after=0)
