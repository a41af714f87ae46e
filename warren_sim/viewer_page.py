"""The viewer page as a file: ``warren replay JOURNAL --html OUT.html`` and observation texts.

The page is the one ``warren serve`` serves (``warren_sim/http/viewer.html``, package data, read as
text, never imported), with the journal's records embedded in its ``warren-embedded`` script tag, so
the file opens from disk with no server and no network. The journal does not hold observation texts
(they are rendered lazily, and only for the agents that read them);
:func:`warren_sim.runtime.rebuild.observation_texts` rebuilds them from the recorded commands (the engine
is deterministic, so they are the texts the agents read).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from .runtime.rebuild import RebuildError, observation_texts

#: Above this many observations an embedded page keeps only each agent's newest text (file size).
MAX_EMBEDDED_TEXTS = 5000


def viewer_html() -> str:
    return resources.files("warren_sim.http").joinpath("viewer.html").read_text(encoding="utf-8")


def page_texts(records: list[dict[str, Any]]) -> dict[str, str]:
    """The texts to embed: every observation's, or each agent's newest when there are too many."""
    observations = [r for r in records if r.get("kind") == "observation" and isinstance(r.get("observation_id"), str)]
    if len(observations) <= MAX_EMBEDDED_TEXTS:
        return observation_texts(records)
    newest: dict[str, str] = {}
    for r in observations:
        newest[str(r.get("agent"))] = r["observation_id"]
    return observation_texts(records, set(newest.values()))


def embed(records: list[dict[str, Any]], texts: dict[str, str] | None = None) -> str:
    """The viewer page with ``records`` (and observation ``texts``) embedded: one self-contained file."""
    payload = json.dumps({"records": records, "texts": texts or {}}, ensure_ascii=False, separators=(",", ":"))
    payload = payload.replace("<", "\\u003c")  # no "</script>" can end the tag early; JSON reads it back as "<"
    page = viewer_html()
    marker = '<script id="warren-embedded" type="application/json">null</script>'
    if marker not in page:
        raise RuntimeError("viewer.html has lost its embedding marker")
    return page.replace(marker, f'<script id="warren-embedded" type="application/json">{payload}</script>', 1)


def write_html(records: list[dict[str, Any]], out: str) -> int:
    """Write the self-contained page for ``records`` to ``out``; returns its size in bytes.

    Raises :class:`~warren_sim.runtime.rebuild.RebuildError` for records that do not make a run."""
    if not any(r.get("kind") == "run" for r in records):
        raise RebuildError("the journal has no 'run' record: nothing to draw")
    text = embed(records, page_texts(records))
    data = text.encode("utf-8")
    with open(out, "wb") as f:
        f.write(data)
    return len(data)
