"""The chat messages of one decision: the briefing as the system message, a bounded history of the last
decisions with what became of them, and the observation's ``text`` as the user message.

Why a history with outcomes: a model that does not learn its ``take`` was rejected ("taken by courier-1
earlier in this batch") tries it again forever. Each past decision is kept as the exchange the model had
(its user message, its reply) followed by a ``tool`` message saying what happened: the receipt's verdict
when the policy got one (remote agents, through :meth:`LLMPolicy.on_receipt`), the outcomes that later
observations reported (``accepted``, ``completed``, ``rejected: <reason>``), or why the reply was not usable.
The roles alternate user / assistant / tool / user, which every chat template accepts; a reply with no
usable call gets its note at the head of the next user message instead of a ``tool`` message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .tools import describe_command

IGNORED_CALL = "ignored: one command per observation; only your first tool call was used"


@attrs.define
class Turn:
    """One past decision as the model saw it and what became of it."""

    observation_id: str
    user: str  # the user message sent (the observation's text, maybe after a note)
    reply: dict[str, Any]  # the assistant message as sent back: role, content, tool_calls
    call_id: str | None = None  # the tool call that was used (None: no usable call)
    command: dict[str, Any] | None = None
    invalid: str | None = None
    verdict: str | None = None  # from a receipt: "accepted", "rejected: ...", "stale: ..."
    outcomes: list[str] = attrs.Factory(list)  # "accepted", "completed", "rejected: ..."

    def add_outcome(self, outcome: str, reason: str = "") -> None:
        text = f"{outcome}: {reason}" if reason else outcome
        if text not in self.outcomes:
            self.outcomes.append(text)

    def result(self) -> str:
        """What the ``tool`` message (or the next user message's note) says about this decision."""
        if self.invalid is not None:
            return f"not used: {self.invalid}. It was recorded as a noop."
        parts = [f"command {describe_command(self.command or {})}"]
        if self.verdict is not None:
            parts.append(f"verdict {self.verdict}")
        if self.outcomes:
            parts.append("outcome " + ", then ".join(self.outcomes))
        if self.verdict is None and not self.outcomes:
            parts.append("sent (no verdict or outcome reported yet)")
        return "; ".join(parts)

    def messages(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "user", "content": self.user}, self.reply]
        for call in self.reply.get("tool_calls") or ():
            content = self.result() if call["id"] == self.call_id or self.call_id is None else IGNORED_CALL
            out.append({"role": "tool", "tool_call_id": call["id"], "content": content})
        return out


def note_after(turn: Turn | None) -> str:
    """The note that heads the next user message: why the previous reply was not used, if it was not."""
    if turn is None or turn.invalid is None:
        return ""
    return (f"(Your reply to {turn.observation_id} was not used: {turn.invalid}. It was recorded as a noop. "
            "Answer with exactly one tool call.)\n\n")


def system_message(briefing: Mapping[str, Any]) -> str:
    """The briefing in prose: who you are, the premise, your notes, the objectives, the conventions, the map."""
    lines = [
        f"You are {briefing.get('name', briefing.get('agent_id'))} ({briefing.get('agent_id')}, role "
        f"{briefing.get('role')}) in the WARREN scenario {briefing.get('scenario')!r}.",
        f"Premise: {briefing.get('premise', '')}",
    ]
    if briefing.get("role_description"):
        lines.append(f"Your role: {briefing['role_description']}")
    notes = briefing.get("notes")
    if notes:
        lines.append("Notes: " + (notes if isinstance(notes, str) else json.dumps(notes, ensure_ascii=False)))
    objectives = briefing.get("objectives") or []
    if objectives:
        lines.append("Objectives (shared by the team):")
        for o in objectives:
            target = (o.get("progress") or {}).get("target")
            deadline = f", by t={o['deadline_ms'] / 1000:g}s" if o.get("deadline_ms") is not None else ""
            lines.append(f"- {o.get('id')}: {o.get('description')} (target {target}{deadline})")
    conv = briefing.get("conventions") or {}
    for key in ("decision", "time", "grid_naming"):
        if conv.get(key):
            lines.append(f"Convention ({key}): {conv[key]}")
    if conv.get("time_limit_ms") is not None:
        lines.append(f"The run ends at t={conv['time_limit_ms'] / 1000:g}s of sim time at the latest.")
    places = (briefing.get("map") or {}).get("places") or []
    if places:
        lines.append("Places: " + "; ".join(f"{p.get('name')} ({p.get('description', '')})" for p in places))
    lines.append(
        "How to answer: each user message is what you observe now. Reply with exactly one tool call: one of "
        "the actions offered (their arguments are limited to what you can use now), sleep, or noop. After "
        "each of your calls you are told what became of it (accepted, rejected and why, completed). "
        "Durative actions (like move_to) take sim time; you wake again when they finish.")
    return "\n".join(lines)


def build_messages(system: str, history: Sequence[Turn], max_history: int, user: str) -> list[dict[str, Any]]:
    """System message, the last ``max_history`` turns, then the new user message."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    kept = list(history)[-max_history:] if max_history > 0 else []
    for turn in kept:
        messages.extend(turn.messages())
    messages.append({"role": "user", "content": user})
    return messages
