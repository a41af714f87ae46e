"""README.md's commands stay true: its test command is the one `.ci/run` runs, and the fresh-machine commands exist.

A newcomer copies README's commands; CI runs `.ci/run`. If the two drift apart, CI checks something the newcomer
never runs (or the reverse), so both are parsed here and compared token by token.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CI_RUN = ROOT / ".ci" / "run"
CI_MARKER = "# README's test command"


def _section(title: str) -> str:
    """The text of README's `## title` section, up to the next `## ` heading."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert match, f"README.md has no '## {title}' section"
    return match.group(1)


def _sh_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)]


def _fresh_machine_commands() -> list[str]:
    blocks = _sh_blocks(_section("Two commands that do everything on a fresh machine"))
    assert len(blocks) == 2, f"expected two fresh-machine commands, found {len(blocks)}: {blocks}"
    for block in blocks:
        assert "\n" not in block, f"a fresh-machine command is one line to copy, got {block!r}"
    return blocks


def _steps(command: str) -> list[str]:
    return [step.strip() for step in command.split(" && ")]


def _is_setup(step: str) -> bool:
    """Making the venv, installing into it, activating it: what comes before the test command proper."""
    words = shlex.split(step)
    return ("-m" in words and "venv" in words) or words[0].endswith("pip") or words[0] in (".", "source")


def readme_test_command() -> list[str]:
    """README's test command: the second fresh-machine command without its venv/install/activate steps."""
    steps = _steps(_fresh_machine_commands()[1])
    assert any(s.startswith("python3 -m venv") for s in steps), steps
    return shlex.split(" && ".join(s for s in steps if not _is_setup(s)))


def ci_test_command() -> list[str]:
    """The command on the first line after `.ci/run`'s "README's test command" comment."""
    lines = CI_RUN.read_text(encoding="utf-8").splitlines()
    marker = next((i for i, line in enumerate(lines) if line.startswith(CI_MARKER)), None)
    assert marker is not None, f".ci/run lost its {CI_MARKER!r} comment (this test finds the command by it)"
    command = next(line for line in lines[marker + 1:] if line.strip() and not line.lstrip().startswith("#"))
    return shlex.split(command)


def test_ci_runs_readmes_test_command() -> None:
    """`.ci/run` runs exactly README's test command: lint, layer contracts, types, then the whole suite."""
    readme, ci = readme_test_command(), ci_test_command()
    assert ci == readme, f".ci/run runs {shlex.join(ci)!r}, README says {shlex.join(readme)!r}"
    for tool in ("ruff", "lint-imports", "mypy", "pytest"):
        assert tool in readme, f"README's test command does not run {tool}"
    # The whole suite: no marker selection, so `-m "not slow"` stays the edit-test loop only.
    assert readme[-1] == "pytest", readme


def test_fresh_machine_commands_present() -> None:
    """The two fresh-machine commands: install + run the main job, install the test extra + the test command."""
    run, tests = _fresh_machine_commands()
    assert "python3 -m venv .venv" in run and "pip install -e ." in run, run
    assert "warren run bridge_repair --seed 3" in run, run
    assert "python3 -m venv .venv" in tests and "pip install -e '.[test]'" in tests, tests
    assert "activate" in tests, "the test command runs bare ruff/pytest, so the venv must be activated first"


def test_readme_states_both_tiers() -> None:
    """README's Tests section names the fast tier and the full run, each with how long it takes here."""
    lines = {line.split("#")[0].strip(): line for block in _sh_blocks(_section("Tests")) for line in block.splitlines()}
    duration = re.compile(r"#.*\b\d+(\.\d+)?\s*(s|min|minutes)\b")
    for tier in ('pytest -m "not slow"', "pytest"):
        assert tier in lines, f"README's Tests section does not show {tier!r}"
        assert duration.search(lines[tier]), f"README does not say how long {tier!r} takes: {lines[tier]!r}"
    assert "WARREN_FULL_TESTS=1" in _section("Tests")


def test_ci_run_is_a_valid_executable_script() -> None:
    """`.ci/run` parses as bash, is executable, builds a fresh venv and installs the test extra."""
    assert CI_RUN.stat().st_mode & 0o111, ".ci/run is not executable"
    subprocess.run(["bash", "-n", str(CI_RUN)], check=True)
    text = CI_RUN.read_text(encoding="utf-8")
    assert "-m venv" in text and "pip install -q -e '.[test]'" in text
