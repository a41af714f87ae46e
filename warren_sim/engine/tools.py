"""A tool's catalog entry: what an agent (or an LLM's function-calling) is told about it.

A tool is described the way LLM function-calling describes functions (name, description, JSON Schema of its
input) and adds the two facts the scheduler needs: its ``lane`` and whether it is ``durative``. Each entry of
the rules table (``rules.py``) holds its tool's catalog entry beside its rules; the generic tools' entries are
written there, a scenario tool's is made here from its ``WorkToolSpec``.
"""

from __future__ import annotations

from typing import Any

import attrs

from .spec import WorkToolSpec


@attrs.frozen
class Tool:
    name: str
    description: str
    lane: str
    durative: bool
    input_schema: dict[str, Any]
    work: WorkToolSpec | None = None

    def catalog_entry(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "lane": self.lane,
            "durative": self.durative,
            "input_schema": self.input_schema,
        }


def schema(**props: dict[str, Any]) -> dict[str, Any]:
    """The input schema of a tool whose parameters are all required (the only kind there is)."""
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


STR: dict[str, Any] = {"type": "string"}
TEXT: dict[str, Any] = {"type": "string", "maxLength": 500}


def work_tool(spec: WorkToolSpec) -> Tool:
    props: dict[str, Any] = {}
    if spec.structure_kinds:
        props["structure"] = STR
    if spec.item_kinds:
        props["item"] = STR
    if spec.needs_code:
        props["code"] = STR
    return Tool(spec.name, spec.description, spec.lane, spec.durative, schema(**props), work=spec)
