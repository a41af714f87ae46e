"""docs/rl.md's snippets run and print exactly what the page says they print."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "rl.md"


def snippet(heading: str) -> tuple[str, str]:
    """The first python block and the first text block of the section under ``heading``."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end != -1 else len(text)]
    code = re.search(r"```python\n(.*?)\n```", section, re.S)
    output = re.search(r"```text\n(.*?)\n```", section, re.S)
    assert code and output, f"docs/rl.md section {heading!r} needs a python block and a text block"
    return code.group(1), output.group(1)


def run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.rstrip("\n")


def test_random_rollout_snippet_prints_what_the_doc_says():
    code, output = snippet("A random-policy rollout")
    assert len(code.splitlines()) <= 20
    assert run(code) == output


def test_fork_snippet_prints_what_the_doc_says():
    """env.fork(): four futures of one state, the same actions giving the same future (the snippet asserts it)."""
    code, output = snippet("Forks")
    assert run(code) == output


@pytest.mark.slow
def test_masked_random_baseline_snippet_prints_what_the_doc_says():
    """Ten episodes of each scenario (about 6 s of CPU)."""
    code, output = snippet("A masked-random baseline over seeds")
    assert run(code) == output


def test_masked_random_baseline_reduced():
    """The fast tier's version: the same snippet on one scenario prints that scenario's row of the table."""
    code, output = snippet("A masked-random baseline over seeds")
    loop = re.search(r"for scenario, params in (\[.*?\]):", code, re.S)
    assert loop is not None
    reduced = code.replace(loop.group(1), '[("deadline", {})]')
    lines = output.splitlines()
    assert run(reduced).splitlines() == [lines[0], next(row for row in lines if row.startswith("deadline"))]


def test_readme_rl_snippet_runs():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    code = next(block for block in re.findall(r"```python\n(.*?)\n```", readme, re.S) if "warren_sim.rl" in block)
    run(code + "\nassert set(rewards) == set(env.possible_agents) and all(o['action_mask'][0] == 1 for o in obs.values())")


def test_entry_points_block_runs():
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Entry points\n"):text.index("\n## Spaces")]
    code = re.search(r"```python\n(.*?)\n```", section, re.S)
    assert code is not None
    run(code.group(1) + "\nassert env.spec.id == 'warren/Contention-v0' and env.reset(seed=1)[0]['action_mask'][0] == 1")
