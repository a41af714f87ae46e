"""The tool catalog: generic tools every world has, plus a scenario's work tools.

A tool is described the way LLM function-calling describes functions (name, description,
JSON Schema of its input) and adds the two facts the scheduler needs: its ``lane`` and whether it
is ``durative``. The rules of each tool live in ``warren_sim.engine.rules``.
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


def _schema(**props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props),
        "additionalProperties": False,
    }


_STR = {"type": "string"}
_TEXT = {"type": "string", "maxLength": 500}

GENERIC_TOOLS: tuple[Tool, ...] = (
    Tool("move_to", "Walk to a place, however far.", "body", True, _schema(dest=_STR)),
    Tool("take", "Pick up an item within reach (at your cell or your place).", "body", False, _schema(item=_STR)),
    Tool("drop", "Put down an item you carry, here.", "body", False, _schema(item=_STR)),
    Tool("give", "Hand an item you carry to an agent within reach.", "body", False, _schema(item=_STR, to=_STR)),
    Tool("say", "Speak aloud; everyone at your place hears it.", "voice", False, _schema(text=_TEXT)),
    Tool("tell", "Send a direct message to one agent, wherever it is.", "voice", False, _schema(to=_STR, text=_TEXT)),
    Tool("inspect", "Look closely at an item, agent, structure or place you can see.", "body", False,
         _schema(target=_STR)),
)

GENERIC_NAMES = tuple(t.name for t in GENERIC_TOOLS)


def work_tool(spec: WorkToolSpec) -> Tool:
    props: dict[str, Any] = {}
    if spec.structure_kinds:
        props["structure"] = _STR
    if spec.item_kinds:
        props["item"] = _STR
    if spec.needs_code:
        props["code"] = _STR
    return Tool(spec.name, spec.description, spec.lane, spec.durative, _schema(**props), work=spec)


def catalog(work_tools: tuple[WorkToolSpec, ...]) -> dict[str, Tool]:
    """Every tool of a world by name, generic ones first, in a fixed order."""
    tools = {t.name: t for t in GENERIC_TOOLS}
    for spec in work_tools:
        tools[spec.name] = work_tool(spec)
    return tools
