"""Every example of README.md and docs/*.md runs as written (issue 33): a doc example that breaks fails CI.

One test per page runs its blocks in order, in one temporary directory (so a page's later blocks find the
files its earlier ones wrote: a trace, ``mypolicy.py``), with the package's ``warren`` first on PATH and HOME
set to that directory (``~/worlds`` is the page's own):

- shell blocks run under ``bash -eo pipefail``; curl is told ``--fail-with-body`` (by a ``.curlrc`` in that
  HOME), so an HTTP error such as a 415 fails the block as it would fail its reader. ``localhost:8000`` becomes
  a free port. A page's ``warren serve`` line starts a real server there, in the background, as its reader's
  other terminal would; a page that talks to a server without starting one gets one (``warren serve`` on a
  fresh data directory, started by the test). ``pip install`` lines are not run (the test environment has
  every extra): the extras they name must exist in pyproject.toml. ``OPENAI_BASE_URL`` pointed at a local
  Ollama is pointed at tests/llm_stub.py's scripted model instead, which plays the scenario's solution.
- python blocks run as scripts (``python FILE``), written under the name their first line gives.
- json, toml and ini blocks must parse; transcripts (``$ command`` then its output) are run and each shown
  output line must appear in order (numbers and ``...`` match anything: times and counts vary).

Blocks that need what CI cannot have are marked ``<!-- not-run: why -->``; blocks another test runs are
marked ``<!-- run-by: tests/... -->``. The terminal summary lists how many blocks ran and why the others did
not (tests/conftest.py).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from docblocks import ROOT, Block, blocks, pages

from warren_sim.runtime.clock import wall_seconds

PORT = re.compile(r"\b(localhost|127\.0\.0\.1):8000\b")
OLLAMA = "http://localhost:11434/v1"
SERVE = re.compile(r"^(\s*)warren serve\b(.*?)\s*(&)?\s*(#.*)?$")
EXIT = re.compile(r"#.*\bexits (\d+)\b")
PIP = re.compile(r"^\s*(?:\.venv/bin/)?pip install\b(.*?)\s*(#.*)?$")
BIN = Path(sys.executable).parent
BLOCK_TIMEOUT_S = 300
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
             ["optional-dependencies"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@attrs.define
class Page:
    """One page's run: its directory, its port, what it started (process groups, the model stand-in)."""

    name: str
    dir: Path
    port: int
    slow: bool
    procs: list[subprocess.Popen[bytes]] = attrs.Factory(list)
    model: Any = None
    served: bool = False
    ran: Counter[str] = attrs.Factory(Counter)
    out: list[str] = attrs.Factory(list)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WARREN_", "PYTEST_"))}
        env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(self.dir), PYTHONUNBUFFERED="1",
                   CURL_HOME=str(self.dir), WARREN_PROGRESS_EVERY="60")
        return env

    def spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, cwd=self.dir, env=self.env(), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        """End everything the page started: each block's process group (its background servers too)."""
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.model is not None:
            self.model.__exit__(None, None, None)


def _wait_listening(port: int) -> str:
    """A loop for a shell script: until the server on ``port`` answers (a reader would wait as long)."""
    return (f"for _ in $(seq 600); do curl -s -o /dev/null http://127.0.0.1:{port}/v1 2>/dev/null && break; "
            "sleep 0.1; done")


def _logical_lines(text: str) -> list[str]:
    """Shell lines with backslash continuations joined."""
    out: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    return out


def _check_pip(args: str, where: str) -> None:
    """A ``pip install`` line is not run; each extra it names (``'warren-sim[rl]'``, ``'.[plot]'``) must exist."""
    for word in shlex.split(args):
        found = re.match(r"^(?:warren-sim|\.)\[([\w,-]+)\]$", word)
        if found:
            missing = [e for e in found.group(1).split(",") if e not in EXTRAS]
            assert not missing, f"{where}: pip install names extras pyproject.toml does not have: {missing}"


def _model(page: Page) -> str:
    """The suite's stand-in for a local model server: a scripted model playing bridge_repair's solution."""
    if page.model is None:
        from llm_stub import ScriptedModel, play_solution, solution_table

        page.model = ScriptedModel(play_solution(solution_table("bridge_repair", range(5))),
                                   models=("llama3.1",)).__enter__()
    return f"{page.model.url}/v1" if not page.model.url.endswith("/v1") else page.model.url


def shell_script(block: Block, page: Page) -> str:
    lines = ["set -eo pipefail", "PS4='+ [${SECONDS}s] '", "set -x"]
    for line in _logical_lines(block.text):
        line = PORT.sub(lambda m: f"{m.group(1)}:{page.port}", line)
        if OLLAMA in line:
            line = line.replace(OLLAMA, _model(page))
        if (pip := PIP.match(line)) is not None:
            _check_pip(pip.group(1), block.where)
            page.ran["pip install lines checked, not run"] += 1
            lines.append(f": {shlex.quote(line.strip())}")
            continue
        serve = SERVE.match(line)
        if serve is not None:
            args = serve.group(2).replace("--port 8000", f"--port {page.port}")
            if "--port" not in args:
                args += f" --port {page.port}"
            log = page.dir / f"serve-{block.line}.log"
            if page.served:  # the page's server is up already: the reader's other terminal
                lines.append(": already serving")
                continue
            page.served = True
            lines.append(f"{serve.group(1)}warren serve {args} > {log} 2>&1 &")
            lines.append(_wait_listening(page.port))
            continue
        expected = EXIT.search(line)
        if expected is not None and not line.lstrip().startswith("#"):  # "# exits 1: ..." is checked
            code = expected.group(1)
            lines.append(f"{{ {line.split(' #')[0].strip()} ; }} && rc=0 || rc=$?")
            lines.append(f'[ "$rc" -eq {code} ] || {{ echo "expected exit {code}, got $rc"; exit 1; }}')
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def _run_logged(block: Block, page: Page, argv: list[str], what: str, shown: str = "") -> None:
    """Run one block's program with its output logged; it must exit 0 within BLOCK_TIMEOUT_S."""
    log = page.dir / f"block-{block.line}.log"
    proc = page.spawn(argv, log)
    try:
        code = proc.wait(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        code = None
    output = log.read_text(encoding="utf-8", errors="replace")
    page.out.append(f"--- {block.where}\n{output}")
    assert code == 0, (f"{block.where}: the {what} block {'timed out' if code is None else f'exited {code}'}:\n"
                       f"{shown}{output[-4000:]}")


def run_sh(block: Block, page: Page) -> None:
    script = page.dir / f"block-{block.line}.sh"
    script.write_text(shell_script(block, page), encoding="utf-8")
    _run_logged(block, page, ["bash", str(script)], "shell", f"{script.read_text()}\n--- its output:\n")


def run_python(block: Block, page: Page) -> None:
    name = block.file_name or f"block_{block.line}.py"
    path = page.dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(PORT.sub(lambda m: f"{m.group(1)}:{page.port}", block.text), encoding="utf-8")
    _run_logged(block, page, [sys.executable, str(path)], "python")


def check_data(block: Block) -> None:
    try:
        if block.lang == "json":
            try:
                json.loads(block.text)
            except ValueError:  # JSON Lines: one document a line
                for line in filter(str.strip, block.text.splitlines()):
                    json.loads(line)
        elif block.lang == "toml":
            tomllib.loads(block.text)
        else:
            configparser.ConfigParser().read_string(block.text)
    except ValueError as exc:
        raise AssertionError(f"{block.where}: the {block.lang} block does not parse: {exc}") from None


def _pattern(shown: str) -> re.Pattern[str]:
    """A shown output line as a pattern: whitespace runs are any whitespace, numbers any number, ``...``
    anything."""
    parts = []
    for piece in shown.strip().split("..."):
        escaped = re.escape(" ".join(piece.split()))
        escaped = re.sub(r"\d+(?:(?:\\\.|,)\d+)*", r"[\\d,.]+", escaped).replace(r"\ ", r"\s+")
        parts.append(escaped)
    return re.compile(".*".join(parts))


def run_transcript(block: Block, page: Page) -> None:
    steps: list[tuple[str, list[str]]] = []
    for line in block.text.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps and line.strip():
            steps[-1][1].append(line)
    for command, shown in steps:
        command = PORT.sub(lambda m: f"{m.group(1)}:{page.port}", command)
        done = subprocess.run(["bash", "-c", command], cwd=page.dir, env=page.env(), capture_output=True,
                              text=True, timeout=BLOCK_TIMEOUT_S)
        actual = [" ".join(line.split()) for line in (done.stdout + done.stderr).splitlines()]
        page.out.append(f"--- {block.where} $ {command}\n{done.stdout}{done.stderr}")
        at = 0
        for line in shown:
            pattern = _pattern(line)
            hit = next((k for k in range(at, len(actual)) if pattern.search(actual[k])), None)
            assert hit is not None, (f"{block.where}: `{command}` did not print {line.strip()!r} (in order); "
                                     f"it printed:\n" + "\n".join(actual[:60]))
            at = hit + 1


def run_by(block: Block) -> None:
    target = ROOT / block.markers["run-by"]
    assert target.is_file(), f"{block.where}: run-by names {block.markers['run-by']}, which does not exist"
    assert block.page in target.read_text(encoding="utf-8"), \
        f"{block.where}: {block.markers['run-by']} does not name {block.page}, so it cannot be what runs it"


def run_page(name: str, slow: bool, tmp_path: Path) -> Counter[str]:
    """Run every block of ``name``; the counts by what was done."""
    page = Page(name, tmp_path, free_port(), slow)
    (tmp_path / ".curlrc").write_text("--fail-with-body\n", encoding="utf-8")
    found = blocks(name)
    runs = [b for b in found if not b.markers.get("not-run") and (slow or "slow" not in b.markers)]
    needs_server = any(PORT.search(b.text) for b in runs)
    starts_server = any(SERVE.match(line) for b in runs if b.kind == "sh" for line in b.text.splitlines())
    counts: Counter[str] = Counter()
    try:
        if needs_server and not starts_server:
            page.spawn([str(BIN / "warren"), "serve", "--port", str(page.port), "--data-dir",
                        str(tmp_path / "warren-data")], tmp_path / "serve.log")
            subprocess.run(["bash", "-c", _wait_listening(page.port)], check=True, timeout=90)
            page.served = True
        for block in found:
            began = wall_seconds()
            run_block(block, page, slow, counts)
            print(f"  {block.where} {block.kind}: {wall_seconds() - began:.1f} s")
    finally:
        page.stop()
    counts.update(page.ran)
    return counts


def run_block(block: Block, page: Page, slow: bool, counts: Counter[str]) -> None:
    if "not-run" in block.markers:
        counts[f"not run: {block.markers['not-run']}"] += 1
    elif "run-by" in block.markers:
        run_by(block)
        counts[f"run by {block.markers['run-by']}"] += 1
    elif "slow" in block.markers and not slow:
        counts[f"slow tier only: {block.markers['slow']}"] += 1
    elif block.kind == "sh":
        run_sh(block, page)
        counts["ran: shell"] += 1
    elif block.kind == "python":
        run_python(block, page)
        counts["ran: python"] += 1
    elif block.kind == "transcript":
        run_transcript(block, page)
        counts["ran: transcript, output compared"] += 1
    elif block.kind == "data":
        check_data(block)
        counts[f"parsed: {block.lang}"] += 1
    else:
        counts["output or listing shown, nothing to run"] += 1


def _params() -> Iterator[Any]:
    for name in pages():
        has_slow = any("slow" in b.markers for b in blocks(name))
        yield pytest.param(name, False, id=name)
        if has_slow:
            yield pytest.param(name, True, id=f"{name}-slow", marks=pytest.mark.slow)


@pytest.mark.parametrize(("page", "slow"), list(_params()))
def test_every_example_of_the_page_runs(page: str, slow: bool, tmp_path: Path,
                                        record_property: Any) -> None:
    counts = run_page(page, slow, tmp_path)
    record_property("docs_blocks", json.dumps({"page": page, "counts": dict(counts)}))
    print(f"{page}: " + ", ".join(f"{n} {what}" for what, n in sorted(counts.items())))


def test_every_block_is_accounted_for() -> None:
    """Every block is run, parsed, shown output, or marked with a reason; markers name real things."""
    for name in pages():
        for block in blocks(name):
            unknown = set(block.markers) - {"not-run", "run-by", "slow"}
            assert not unknown, f"{block.where}: unknown markers {unknown}"
            assert not ("not-run" in block.markers and "run-by" in block.markers), block.where
            if block.kind == "shown":
                assert not block.text.lstrip().startswith(("warren ", "curl ", "python")), \
                    f"{block.where}: a command in a block without a language: label it sh so it runs"


def test_the_mcp_configurations_agree() -> None:
    """README and docs/llm.md show the same MCP server key (issue 33, item 10)."""
    keys = set()
    for name in pages():
        for block in blocks(name):
            if block.lang == "json" and "mcpServers" in block.text:
                keys |= set(json.loads(block.text)["mcpServers"])
    assert keys == {"warren"}, keys


def test_docs_cite_only_the_repository() -> None:
    """No page sends its reader outside the repository (issue 33, item 5)."""
    for name in pages():
        text = (ROOT / name).read_text(encoding="utf-8")
        for bad in ("shared/", "DESIGN section", "DESIGN.md"):
            assert bad not in text, f"{name} cites {bad!r}, which is not in the repository"


def test_a_curl_without_its_content_type_fails_the_block(tmp_path: Path) -> None:
    """Item 1's regression, caught by this harness: README's old `curl -d` (a form body) gets 415, and the block
    fails with the server's teaching detail, where curl alone would have exited 0."""
    page = Page("README.md", tmp_path, free_port(), slow=False)
    (tmp_path / ".curlrc").write_text("--fail-with-body\n", encoding="utf-8")
    old = Block("README.md", 1, "sh", "warren serve --port 8000 &\ncurl -X POST "
                "'localhost:8000/v1/runs?scenario=bridge_repair&seed=3' -d '{\"controlled_agents\": [\"engineer-1\"]}'\n",
                {})
    try:
        with pytest.raises(AssertionError) as failed:
            run_sh(old, page)
    finally:
        page.stop()
    assert "exited 22" in str(failed.value) and "415" in str(failed.value)
    assert "Content-Type: application/json" in str(failed.value)
