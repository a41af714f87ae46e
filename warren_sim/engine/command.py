"""A command: its shape, stated once, and its validation against the observation it answers.

A command is exactly one of ``{"action": <tool>, "args": {...}}``, ``{"sleep_ms": n}`` (0..:data:`MAX_SLEEP_MS`)
or ``{"noop": true}``. The shape's names, bounds and its one parser (:func:`parse_command`) are here and
nowhere else: the engine is the lowest layer, so the wire (``warren_sim.protocol.verdicts.normalize_command``,
which adds the ids a served command carries) and the in-process policies of every layer parse with it.

Two entries, by who hands the engine a command:

- :func:`validate_payload` trusts the shape: the payload came from the wire's parser (a served agent's command,
  already normalized). It asks the tool's entry of the rules table (``rules.py``) and the observation's choices
  (``perception.py``) only.
- :func:`validate` is for an in-process answer (a headless policy, an NPC, a replayed journal): it parses the
  shape first with the same parser as the wire's (:func:`parse_command`: a policy's malformed answer is
  refused in the words a served agent reads), then validates the payload.

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
#: The three shapes, as refusals spell them.
COMMAND_SHAPES = '{"action": "<tool>", "args": {...}}, {"sleep_ms": <ms>} or {"noop": true}'


def json_type_name(value: object) -> str:
    """The JSON word for a Python value's type, for messages ("got a string", not "got <class 'str'>")."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def show_json(value: object) -> str:
    """A value as a refusal quotes it: its JSON type and, for a scalar, the value (``a number 7``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        text = repr(value)
        return f"{json_type_name(value)} {text if len(text) <= 40 else text[:37] + '...'}"
    return json_type_name(value)


def parse_command(body: dict[str, Any], fields: tuple[str, ...] = DECISION_FIELDS,
                  ) -> tuple[dict[str, Any] | None, str | None]:
    """The one parser of a command's shape: ``(payload, None)`` or ``(None, teaching_error)``.

    Shape only: exactly one of action/sleep_ms/noop; ``noop`` true; ``action`` a string with ``args`` an
    object (default ``{}``); ``sleep_ms`` an integer in 0..:data:`MAX_SLEEP_MS`; no keys outside ``fields``
    (the wire's parser, ``protocol.verdicts.normalize_command``, adds the ids a served command carries).
    Whether the action is a tool of the agent's with valid args is :func:`validate_payload`'s to say. A served
    agent's command and a headless policy's answer are refused in the same words.
    """
    unknown = sorted(key for key in body if key not in fields)
    if unknown:
        noun = "field" if len(unknown) == 1 else "fields"
        return None, (f"unknown {noun} {', '.join(repr(k) for k in unknown)} in the command; valid fields: "
                      f"{', '.join(sorted(fields))}")
    present = [key for key in DECISIONS if key in body]
    if not present:
        return None, f"the command has no decision; send exactly one of {COMMAND_SHAPES}"
    if len(present) > 1:
        return None, f"the command has {' and '.join(present)}; send exactly one of {COMMAND_SHAPES}"
    kind = present[0]
    if kind != "action" and "args" in body:
        return None, f"args belongs with action; a {kind} command takes no args"
    value = body[kind]
    if kind == "noop":
        if value is not True:
            return None, f"noop must be true, got {show_json(value)}; to act send action, to wait send sleep_ms"
        return {"noop": True}, None
    if kind == "sleep_ms":
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_SLEEP_MS:
            return None, f"sleep_ms must be an integer number of milliseconds from 0 to {MAX_SLEEP_MS}, got " \
                         f"{show_json(value)}"
        return {"sleep_ms": value}, None
    if not isinstance(value, str):
        return None, f"action must be a string naming one of your tools, got {show_json(value)}"
    args = body.get("args", {})
    if not isinstance(args, dict):
        return None, ("args must be an object of the tool's arguments (for example {\"item\": \"toolbox-1\"}), "
                      f"got {show_json(args)}")
    return {"action": value, "args": dict(args)}, None


def validate(sim: Perceivable, agent: Agent, obs: Observation, command: dict[str, Any]) -> str | None:
    """An in-process command against ``obs``: its shape, then :func:`validate_payload`. A teaching error or None."""
    n = len(command)
    if type(command.get("action")) is str and (n == 1 or (n == 2 and type(command.get("args")) is dict)):
        return validate_payload(sim, agent, obs, command)  # the commonest shape, parse_command's action, inline
    if n == 1:  # the fast path of parse_command's sleep and noop
        ms = command.get("sleep_ms")
        if type(ms) is int and 0 <= ms <= MAX_SLEEP_MS:
            return None
        if command.get("noop") is True:
            return None
    payload, err = parse_command(command)
    if payload is None or "action" not in payload:
        return err
    return validate_payload(sim, agent, obs, payload)


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
