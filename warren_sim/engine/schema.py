"""A small JSON Schema checker for tool arguments.

Tool input schemas are the flat objects LLM function-calling uses (``type: object``, string and
integer properties, ``required``, ``additionalProperties: false``). Checking that subset here keeps
the engine free of dependencies and lets every error say exactly which argument was wrong and what
would be right.
"""

from __future__ import annotations

from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "boolean": (bool,), "number": (int, float)}


def check_args(tool: str, schema: dict[str, Any], args: object) -> str | None:
    """Return a teaching error for ``args`` against ``schema``, or None when they fit."""
    if not isinstance(args, dict):
        return f"args must be a JSON object for {tool}, got {type(args).__name__}; e.g. {example(schema)}"
    props: dict[str, Any] = schema.get("properties", {})
    for key in args:
        if key not in props:
            valid = ", ".join(props) or "none"
            return f"{tool} has no argument {key!r}; its arguments are: {valid}"
    for key in schema.get("required", ()):
        if key not in args:
            return f"{tool} needs argument {key!r}; e.g. {example(schema)}"
    for key, value in args.items():
        want = props[key].get("type", "string")
        ok = isinstance(value, _TYPES[want]) and not (want != "boolean" and isinstance(value, bool))
        if not ok:
            return f"args.{key} of {tool} must be a {want}, got {type(value).__name__} {value!r}"
        if want == "string":
            limit = props[key].get("maxLength")
            if limit is not None and len(value) > limit:
                return f"args.{key} of {tool} is {len(value)} characters long; at most {limit} are allowed"
            if not value:
                return f"args.{key} of {tool} must not be empty"
    return None


def example(schema: dict[str, Any]) -> str:
    """A one-line example body for error messages."""
    parts = []
    for key in schema.get("required", ()):
        want = schema["properties"][key].get("type", "string")
        parts.append(f'"{key}": ' + ('"..."' if want == "string" else "0"))
    return "{" + ", ".join(parts) + "}"
