"""The fenced blocks of README.md and docs/*.md, as tests/test_docs_examples.py runs them.

A block is what sits between two ``` fences; the HTML comments on the lines right above its opening fence are
its markers (invisible on GitHub):

- ``<!-- not-run: why -->``: not run, for a reason CI cannot meet (a hosted model, a Ray cluster); reported.
- ``<!-- run-by: tests/test_x.py -->``: another test runs it (it must exist and name this page); reported.
- ``<!-- slow: why -->``: run in the slow tier only (its page's quick run leaves it out; reported).

What a block is follows from its info string and first lines: ``sh`` blocks are shell scripts, ``python``
blocks are programs (the file name a block gives on its first line, ``# my_agent.py`` or
``\"\"\"mypolicy.py: ...``, is where it is written, so later blocks can import it), ``json``/``toml``/``ini``
blocks are documents that must parse, an unlabelled or ``text`` block whose lines start with ``$ `` is a
transcript (its commands are run and its output compared), and any other ``text`` block is output shown
or a listing, not something to run.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!-- (not-run|run-by|slow): (.+?) -->$")
FILE_NAME = re.compile(r'^(?:# |"""|\'\'\')([\w./-]+\.py)\b')


@attrs.frozen
class Block:
    page: str  # README.md, docs/client.md
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    markers: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def kind(self) -> str:
        """sh, python, data (json/toml/ini), transcript, or shown (output or a listing)."""
        if self.lang in ("sh", "bash", "shell", "console"):
            return "sh"
        if self.lang == "python":
            return "python"
        if self.lang in ("json", "toml", "ini"):
            return "data"
        if self.text.lstrip().startswith("$ "):
            return "transcript"
        return "shown"

    @property
    def file_name(self) -> str | None:
        """The file a python block says it is (``# my_agent.py`` on its first line), if any."""
        first = self.text.lstrip().splitlines()[0] if self.text.strip() else ""
        found = FILE_NAME.match(first)
        return found.group(1) if found else None


def pages() -> list[str]:
    return ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


def blocks(page: str) -> list[Block]:
    """Every fenced block of ``page`` in order, with its markers."""
    lines = (ROOT / page).read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{i + 1}: a fence that is never closed")
        markers: dict[str, str] = {}
        k = i - 1
        while k >= 0 and (m := MARKER.match(lines[k].strip())):
            markers[m.group(1)] = m.group(2)
            k -= 1
        found.append(Block(page, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n", markers))
        i = end + 1
    return found
