"""The briefing's tool catalog as chat-completions ``tools``, and a model's tool call back as a command.

Why narrow per decision: the catalog says what an agent could ever do; the observation's affordances say
what it can do now and with which handles (``take(item: toolbox-1)``). Offering only the available tools,
with each finite choice as a JSON Schema ``enum``, lets a model (or a server's grammar-constrained decoding)
pick valid handles instead of inventing them, and lets us reject anything outside them before it costs a
round trip. A parameter whose affordance says ``or`` (``move_to`` also takes any cell) keeps its free type,
with the choices named in its description; the server judges those.

A tool call becomes ``{"action", "args"}``; ``sleep`` becomes ``{"sleep_ms"}`` and ``noop`` ``{"noop": true}``.
Anything else (no call, a tool that was not offered, arguments that are not JSON or do not fit the narrowed
schema) becomes :class:`Invalid` with a reason that says what would have been right.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

SLEEP, NOOP = "sleep", "noop"
MAX_SLEEP_MS = 2**53 - 1

SLEEP_TOOL: dict[str, Any] = {
    "name": SLEEP,
    "description": "Do nothing until sleep_ms of sim time have passed, or until something wakes you earlier "
                   "(a message, an event at your place).",
    "input_schema": {"type": "object", "properties": {"sleep_ms": {
        "type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS,
        "description": "milliseconds of sim time"}}, "required": ["sleep_ms"], "additionalProperties": False},
}
NOOP_TOOL: dict[str, Any] = {
    "name": NOOP,
    "description": "Do nothing this time (an action already under way goes on); you wake again when it finishes, "
                   "when something happens, or after the idle interval.",
    "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
}


@attrs.frozen
class Invalid:
    """A reply that names no usable command; ``reason`` teaches what would have been right."""

    reason: str


def check_catalog(catalog: Sequence[Mapping[str, Any]]) -> None:
    """A catalog tool named ``sleep`` or ``noop`` would shadow the protocol's own commands."""
    for tool in catalog:
        if tool.get("name") in (SLEEP, NOOP):
            raise ValueError(f"the briefing's tool catalog has a tool named {tool['name']!r}, which the LLM "
                             "policy reserves for the protocol's own command of that name")


def narrowed_tools(catalog: Sequence[Mapping[str, Any]], affordances: Sequence[Mapping[str, Any]]
                   ) -> list[dict[str, Any]]:
    """The tools offered for one decision, as internal dicts ``{name, description, input_schema}``.

    Catalog tools appear only when an affordance lists them (in the catalog's order); ``sleep`` and ``noop``
    are always there.
    """
    by_action = {a["action"]: a for a in affordances}
    out = []
    for tool in catalog:
        afford = by_action.get(tool["name"])
        if afford is None:
            continue
        schema = copy.deepcopy(dict(tool["input_schema"]))
        # One property dict per parameter: catalogs may share one schema object between parameters
        # (deepcopy keeps that sharing), and an enum set on one must not land on the other.
        props = schema["properties"] = {k: dict(v) for k, v in (schema.get("properties") or {}).items()}
        for param, shown in (afford.get("params") or {}).items():
            prop = props.get(param)
            choices = shown.get("choices") if isinstance(shown, Mapping) else None
            if prop is None or choices is None:
                continue
            listed = "|".join(str(c) for c in choices)
            if shown.get("or"):
                prop["description"] = f"one of {listed}, or {shown['or']}"
            else:
                prop["enum"] = list(choices)
        out.append({"name": tool["name"], "description": tool.get("description", ""), "input_schema": schema})
    out.append(copy.deepcopy(SLEEP_TOOL))
    out.append(copy.deepcopy(NOOP_TOOL))
    return out


def openai_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Internal tool dicts in the chat-completions ``tools`` form (``type: function``)."""
    return [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                              "parameters": t["input_schema"]}} for t in tools]


def schema_error(schema: Mapping[str, Any], args: Any) -> str | None:
    """The first way ``args`` fails ``schema`` (JSON Schema, any draft the validator knows), or None."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    if not errors:
        return None
    err = errors[0]
    where = ".".join(str(p) for p in err.path)
    return f"{where}: {err.message}" if where else err.message


def to_command(name: str | None, arguments: str | None, tools: Sequence[Mapping[str, Any]]) -> dict[str, Any] | Invalid:
    """One tool call (its name and its JSON arguments text) -> a command, or :class:`Invalid`."""
    offered = {t["name"]: t for t in tools}
    names = ", ".join(offered)
    if not name:
        return Invalid(f"the tool call names no tool; call one of: {names}")
    tool = offered.get(name)
    if tool is None:
        return Invalid(f"tool {name!r} was not offered for this decision; call one of: {names}")
    text = arguments if arguments not in (None, "") else "{}"
    try:
        args = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        return Invalid(f"the arguments of {name} are not JSON ({exc}): {str(text)[:200]!r}")
    error = schema_error(tool["input_schema"], args)
    if error is not None:
        return Invalid(f"the arguments of {name} do not fit its schema: {error}")
    if name == SLEEP:
        return {"sleep_ms": args["sleep_ms"]}
    if name == NOOP:
        return {"noop": True}
    return {"action": name, "args": args}


def describe_command(command: Mapping[str, Any]) -> str:
    """A command in one line, for history notes and logs."""
    if "action" in command:
        return f"{command['action']} {json.dumps(command.get('args', {}), ensure_ascii=False, sort_keys=True)}"
    if "sleep_ms" in command:
        return f"sleep {command['sleep_ms']} ms"
    return "noop"
