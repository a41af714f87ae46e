"""RunError: the one way the runtime refuses a request (an HTTP status and a teaching detail)."""

from __future__ import annotations

__all__ = ["RunError", "no_more_observations", "too_many_spectators"]


class RunError(Exception):
    """A request the run refuses; ``status`` is the HTTP status, ``detail`` teaches.

    ``retry_after`` (seconds) is set on refusals by a cap (429): the HTTP layer sends it as ``Retry-After``;
    the agent WebSocket carries ``status`` as its JSON-RPC error code.
    """

    def __init__(self, status: int, detail: str, *, retry_after: int | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


def too_many_spectators(run_id: str, cap: int) -> RunError:
    """The 429 for a run (live or stored) whose spectator streams are at the server's cap: one wording for both."""
    return RunError(429, f"{run_id} already has {cap} spectators (the server's cap per run); close a stream you "
                    f"no longer watch, or read the run's journal with GET /v1/runs/{run_id}/journal, and retry later",
                    retry_after=5)


def no_more_observations(run_id: str, status: str, error: str | None) -> RunError:
    """The 410 a poll on an ended run gets: one wording for a live run that ended and a stored one."""
    return RunError(410, f"{run_id} has ended with status {status}" + (f" ({error})" if error else "")
                    + "; there will be no more observations")
