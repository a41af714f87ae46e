"""Running a simulation with in-process policies only: no trio, no task per agent.

This is the fast path of ``warren run`` and ``warren eval``: a plain loop over batches. A policy
command that fails validation is recorded as a noop (source ``invalid``) with the error, so a buggy
policy shows up in the trace instead of stalling the run. That rule, :func:`answer_or_noop`, is the
one the served runtime applies to its NPCs too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .command import validate
from .policy import NOOP, Policy
from .sim import Simulation


def answer_or_noop(sim: Simulation, agent_id: str, observation_id: str,
                   answer: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The policy-answer-or-noop rule: ``(command to answer with, invalid record or None)``.

    A valid command is answered as is. Anything else becomes a noop plus an ``invalid`` record holding
    what the policy returned and why it was refused: a command the engine rejects, a value that is
    not a command dict, or a policy's own ``{"invalid": "<reason>", "raw": ...}`` ("I have no usable
    command", e.g. an LLM's unparsable reply), whose reason becomes the record's ``error``. The caller
    journals the record and answers with source ``invalid``; a bad answer never stalls a run.
    """
    if isinstance(answer, dict) and "invalid" in answer and set(answer) <= {"invalid", "raw"}:
        err: str | None = str(answer["invalid"]) or "the policy had no usable command"
    elif not isinstance(answer, dict):
        err = f"a policy's decide() must return a command dict, got {type(answer).__name__} {answer!r:.60}"
        answer = repr(answer)
    else:
        err = sim.validate(agent_id, answer)
    if err is None:
        return answer, None
    return dict(NOOP), {"kind": "invalid", "t": sim.time, "agent": agent_id, "observation_id": observation_id,
                        "command": answer, "error": err}


def tell_rejected(policy: Any, observation_id: str, answer: Any, error: str) -> None:
    """A policy with ``on_receipt`` (the remote clients' hook, docs/policies.md) hears that the rules refused
    its command, as a remote one would from its receipt; its own ``{"invalid": ...}`` it knows already."""
    hook = getattr(policy, "on_receipt", None)
    if callable(hook) and not (isinstance(answer, dict) and "invalid" in answer):
        hook({"command_id": None, "observation_id": observation_id, "status": "rejected", "detail": error,
              "outcome": None, "outcome_reason": ""})


def run_headless(sim: Simulation, policies: Mapping[str, Policy], *,
                 on_batch: Callable[[Simulation], None] | None = None,
                 max_batches: int | None = None) -> dict[str, Any]:
    batches = 0
    while (batch := sim.advance()) is not None:
        for obs in batch.observations:
            policy = policies[obs.agent_id]
            answer = policy.decide(obs)
            # answer_or_noop and sim.answer for a command dict that validates, inline (the hot path); anything
            # else takes answer_or_noop (a policy's {"invalid": ...} never validates: it is no command). The
            # observation is fresh: it has no answer yet.
            if type(answer) is dict and validate(sim, obs._agent, obs, answer) is None:
                obs.answer, obs.source = answer, "policy"
                continue
            command, invalid = answer_or_noop(sim, obs.agent_id, obs.observation_id, answer)
            if invalid is not None:
                sim.answer(obs.agent_id, command, source="invalid")
                sim.emit(invalid)
                tell_rejected(policy, obs.observation_id, answer, invalid["error"])
            else:
                sim.answer(obs.agent_id, command)
        sim.adjudicate()
        batches += 1
        if on_batch is not None:
            on_batch(sim)
        if max_batches is not None and batches >= max_batches:
            break
    return sim.summary()
