"""A command: its shape, stated once, and its validation against the observation it answers.

A command is exactly one of ``{"action": <tool>, "args": {...}}``, ``{"sleep_ms": n}`` (0..:data:`MAX_SLEEP_MS`)
or ``{"noop": true}``. The shape's names and bounds are defined here and nowhere else; the wire's parser
(``warren_sim.protocol.verdicts.normalize_command``) builds on them, adding the ids a served command carries.

Two entries, by who hands the engine a command:

- :func:`validate_payload` trusts the shape: the payload came from the wire's parser (a served agent's command,
  already normalized). It asks the tool's entry of the rules table (``rules.py``) and the observation's choices
  (``perception.py``) only.
- :func:`validate` is for an in-process answer (a headless policy, an NPC, a replayed journal): it parses the
  shape first (:func:`shape_error`, worded for the journal's ``invalid`` records), then validates the payload.

Validation judges against the observation's snapshot (its choices), never the world as other answers of the
batch changed it: that is adjudication's ``check`` (``rules.py``).
"""

from __future__ import annotations

from typing import Any

from .perception import Observation, Perceivable
from .schema import check_args
from .world import Agent

#: Longest sleep an agent may ask for, in ms (the largest integer every JSON client reads exactly).
MAX_SLEEP_MS = 2**53 - 1
#: The keys of which a command has exactly one: its decision.
DECISIONS = ("action", "sleep_ms", "noop")
#: Every key a command may carry (a served one adds its command_id and observation_id).
DECISION_FIELDS = (*DECISIONS, "args")


def shape_error(command: dict[str, Any]) -> str | None:
    """What is wrong with an in-process command's shape, or None (an action's tool and args are not judged)."""
    present = [k for k in DECISIONS if k in command]
    if len(present) != 1:
        return ("a command is exactly one of {\"action\": ..., \"args\": {...}}, {\"sleep_ms\": n} or "
                f"{{\"noop\": true}}; this one has {', '.join(present) or 'none of them'}")
    extra = [k for k in command if k not in DECISION_FIELDS]
    if extra:
        return f"unknown command field(s) {', '.join(sorted(extra))}; a command has action+args, sleep_ms or noop"
    if "noop" in command:
        if command["noop"] is not True:
            return f"noop must be true, got {command['noop']!r}"
        return None if "args" not in command else "a noop takes no args"
    if "sleep_ms" in command:
        ms = command["sleep_ms"]
        if "args" in command:
            return "a sleep takes no args"
        if not isinstance(ms, int) or isinstance(ms, bool):
            return f"sleep_ms must be an integer number of milliseconds, got {type(ms).__name__} {ms!r}"
        if not 0 <= ms <= MAX_SLEEP_MS:
            return f"sleep_ms must be between 0 and {MAX_SLEEP_MS}, got {ms}"
    return None


def validate(sim: Perceivable, agent: Agent, obs: Observation, command: dict[str, Any]) -> str | None:
    """An in-process command against ``obs``: its shape, then :func:`validate_payload`. A teaching error or None."""
    n = len(command)
    if "action" in command and (n == 1 or (n == 2 and "args" in command)):  # the commonest shape: an action
        return validate_payload(sim, agent, obs, command)
    if n == 1:  # the fast path of shape_error's sleep and noop
        ms = command.get("sleep_ms")
        if type(ms) is int and 0 <= ms <= MAX_SLEEP_MS:
            return None
        if command.get("noop") is True:
            return None
    err = shape_error(command)
    if err is not None or "action" not in command:
        return err
    return validate_payload(sim, agent, obs, command)


def validate_payload(sim: Perceivable, agent: Agent, obs: Observation, payload: dict[str, Any]) -> str | None:
    """A command of the right shape against ``obs``: a sleep or noop is valid; an action asks its tool's entry.

    The tool's fast path (``fast_valid``) answers first; when it cannot, :func:`explain` does.
    """
    if "action" not in payload:
        return None
    name = payload["action"]
    if type(name) is str and name in agent.tools:
        ok, resolved = sim.rules[name].fast_valid(sim, agent, payload)
        if ok:
            if resolved is not None:
                obs.parsed = (payload, resolved)
            return None
    return explain(sim, agent, obs, payload)


def explain(sim: Perceivable, agent: Agent, obs: Observation, payload: dict[str, Any]) -> str | None:
    """The full validation of an action, which words the refusal: the tool is one of the agent's, available
    now, its args fit the schema, then each value is among the observation's choices (or the tool's entry
    accepts it off them). What a tool's ``fast_valid`` accepts, this accepts too (tests/test_engine_fast_paths.py)."""
    name = payload["action"]
    if not isinstance(name, str):
        return f"action must be a tool name (a string), got {type(name).__name__} {name!r}; your tools: " \
               + ", ".join(agent.tools)
    if name not in agent.tools:
        return f"unknown action {name!r}; your tools are: {', '.join(agent.tools)}"
    params, why = obs.tool_choices(name)
    if params is None:
        return f"{name} is not available now: {why}"
    entry = sim.rules[name]
    args = payload.get("args", {})
    err = check_args(name, entry.tool.input_schema, args)
    if err:
        return err
    err = entry.precheck(sim, agent, args)
    if err:
        return err
    for param, choices in params.items():
        value = args[param]
        if choices is None or value in choices:
            continue
        err = entry.off_choices(sim, agent, param, value, choices, obs.view["you"]["place"])
        if err:
            return err
    return None
