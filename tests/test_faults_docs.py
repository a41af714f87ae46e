"""docs/faults.md as a user runs it: its test files (with docs/testing.md's agent) pass under faults, and a naive
agent that does not retry a lost reply fails with a report that names the fault and the request it met."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parent.parent / "docs"
FILE_BLOCK = re.compile(r"```(?:python|ini)\n# ([\w.]+)\n(.*?)```", re.S)
USER = ["-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest", "-p", "no:anyio"]


@pytest.fixture(autouse=True)
def _this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocess imports WARREN from this checkout, whichever one the environment installed."""
    monkeypatch.setenv("PYTHONPATH", str(DOCS.parent))


def _files(page: str) -> dict[str, str]:
    return dict(FILE_BLOCK.findall((DOCS / page).read_text(encoding="utf-8")))


NAIVE = '''
import httpx
import pytest


@pytest.mark.warren(rate=100, faults="lost_reply=0.5", fault_seed=1)
def test_a_naive_agent(warren_server):
    run = warren_server.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1"])
    base = f"{warren_server.url}/v1/runs/{run}/agents/engineer-1"
    with httpx.Client(timeout=10) as http:  # no retry: a lost reply is an error
        lease = http.post(f"{base}/claim").json()["lease"]
        for n in range(100):
            obs = http.get(f"{base}/observations", params={"lease": lease, "after": -1, "wait": 30}).json()
            http.post(f"{base}/commands", params={"lease": lease},
                      json={"command_id": f"c-{n}", "observation_id": obs["observation_id"], "noop": True})
'''


def test_the_faults_docs_pass_with_the_testing_docs_agent(pytester: pytest.Pytester) -> None:
    files = {**_files("testing.md"), **_files("faults.md")}
    for name in ("pytest.ini", "my_agent.py", "test_lost_replies.py", "test_restarts.py"):
        (pytester.path / name).write_text(files[name], encoding="utf-8")
    result = pytester.runpytest_subprocess(*USER, "test_lost_replies.py", "test_restarts.py")
    result.assert_outcomes(passed=2)


def test_a_naive_agent_is_caught_and_the_report_names_the_fault(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_naive=NAIVE)
    result = pytester.runpytest_subprocess(*USER, "test_naive.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*WARREN faults met*",
                                 "run-1: lost_reply met * #* of engineer-1 (faults 'lost_reply=0.5', fault_seed 1)"])
    again = pytester.runpytest_subprocess(*USER, "test_naive.py")  # the same seed: the same faults, again
    again.assert_outcomes(failed=1)
    first = [line for line in result.outlines if "lost_reply met" in line]
    assert first and first == [line for line in again.outlines if "lost_reply met" in line]
