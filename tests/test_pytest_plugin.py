"""The pytest plugin for users (warren_sim.testing), run as a user has it: installed, loaded from its ``pytest11``
entry point, in a fresh directory with no conftest of ours (``pytester.runpytest_subprocess``).

docs/testing.md's examples are not copied here: every block of it that starts with a file name is written into
the pytester directory and run as it stands, so the docs are the tests.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import trio

from warren_sim.testing import WarrenServer, WarrenTestError, assert_replays, verdicts, wait_status
from warren_sim.testing.inprocess import open_in_process

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
#: A fenced block whose first line names a file (``# my_agent.py``) is that file.
FILE_BLOCK = re.compile(r"```(?:python|ini)\n# ([\w.]+)\n(.*?)```", re.S)
#: Options of every user-like run: our test extra's other pytest plugins (schemathesis, hypothesis, anyio) take
#: seconds to load here and are not what a user of the plugin has; pytest-trio stays (warren_app needs it).
USER = ["-p", "no:cacheprovider", "-p", "no:schemathesis", "-p", "no:hypothesispytest", "-p", "no:anyio"]
#: ... and pytest-trio off too when measuring the plugin's import cost (it imports trio itself).
BARE = [*USER, "-p", "no:trio"]
#: What must not be imported by loading the plugin (each import of one would be a cost for every user).
HEAVY = ("trio", "httpx", "httpcore", "quart", "quart_trio", "hypercorn", "attrs", "cattrs", "werkzeug",
         "warren_sim.http", "warren_sim.runtime", "warren_sim.client", "warren_sim.engine", "warren_sim.protocol")


def doc_files() -> dict[str, str]:
    files = {name: body for name, body in FILE_BLOCK.findall(DOC.read_text(encoding="utf-8"))}
    assert {"pytest.ini", "my_agent.py", "my_trio_agent.py", "test_lease_expiry.py", "test_decision_deadline.py",
            "test_trio_agent.py", "test_never_stale.py", "test_subprocess_agent.py", "test_restart.py"} <= set(files), sorted(files)
    return files


def write_doc_files(pytester: pytest.Pytester) -> None:
    for name, body in doc_files().items():
        (pytester.path / name).write_text(body, encoding="utf-8")


def junit_times(path: Path) -> dict[str, tuple[str, float]]:
    """``{test id: (outcome, seconds of setup + call + teardown)}`` from a JUnit XML report."""
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = tag
        out[f"{case.get('classname')}::{case.get('name')}"] = (outcome, float(case.get("time", "nan")))
    return out


# ------------------------------------------------------------------------------------ the docs are the tests


@pytest.mark.slow
def test_docs_examples_run_as_written_and_each_expiry_takes_under_two_seconds(pytester: pytest.Pytester) -> None:
    """Every test of docs/testing.md (but the restart one, below) passes in a user's directory; the blocking httpx
    agent and the trio SDK agent each get through a 300 s lease expiry and a 60 s decision deadline in < 2 s of
    wall time (setup, call and teardown, from pytest's JUnit report)."""
    write_doc_files(pytester)
    report = pytester.path / "report.xml"
    result = pytester.runpytest_subprocess(*USER, "--ignore=test_restart.py",
                                           f"--junitxml={report}")
    result.assert_outcomes(passed=9)
    times = junit_times(report)
    timed = {
        "test_lease_expiry::test_my_agent_reclaims_after_its_lease_expires",
        "test_decision_deadline::test_my_agent_answers_before_the_decision_deadline[30-accepted]",
        "test_decision_deadline::test_my_agent_answers_before_the_decision_deadline[75-expired]",
        "test_trio_agent::test_my_trio_agent_reclaims_after_its_lease_expires",
        "test_trio_agent::test_my_trio_agent_answers_before_the_decision_deadline[59-accepted]",
        "test_trio_agent::test_my_trio_agent_answers_before_the_decision_deadline[61-expired]",
    }
    assert timed <= set(times), sorted(times)
    slow = {name: t for name, (outcome, t) in times.items() if name in timed and not (outcome == "passed" and t < 2.0)}
    assert not slow, f"over 2 s of wall time (or not passed): {slow}"


def test_docs_trio_examples_in_process(pytester: pytest.Pytester) -> None:
    """The fast tier's share of the docs check: docs/testing.md's trio examples (autojump, no sockets) pass,
    run in this process (the full subprocess run above is in the slow tier)."""
    write_doc_files(pytester)
    result = pytester.runpytest(*USER, "test_trio_agent.py", "test_never_stale.py::"
                                "test_my_agents_commands_are_never_stale")
    result.assert_outcomes(passed=4)


@pytest.mark.slow
def test_docs_restart_example_resumes_the_agent(pytester: pytest.Pytester) -> None:
    """docs/testing.md's "my agent resumes after a server restart" passes: kill + restart on the same data dir
    and port, and the agent carries on with its lease."""
    write_doc_files(pytester)
    result = pytester.runpytest_subprocess(*USER, "test_restart.py")
    result.assert_outcomes(passed=1)


# ------------------------------------------------------------------------------------ clean up, no trio mode

CLEANUP_TEST = '''
import os
import tempfile
import threading

import httpx
import pytest
import trio

SEEN = {}


def sockets():
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            out.append(target)
    return sorted(out)


def test_0_baseline(request):
    assert request.config.pluginmanager.get_plugin("warren") is not None  # loaded from the pytest11 entry point
    assert request.config.getini("trio_mode") is False  # the plugin never turns trio mode on
    SEEN.update(threads=set(threading.enumerate()), sockets=sockets(), tmp=sorted(os.listdir(tempfile.gettempdir())))


@pytest.mark.warren(rate=1000, max_wait_s=3600, lease_ttl=7200)  # a long-poll may wait an hour of the clock (3.6 s): below the TTL, not capped
def test_1_server_with_a_hanging_poll_a_crash_and_a_restart(warren_server):
    SEEN["data_dir"] = warren_server.data_dir
    assert warren_server.data_dir.is_dir() and len(threading.enumerate()) == len(SEEN["threads"]) + 1
    run = warren_server.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1"], pace=1)
    with httpx.Client(base_url=f"{run.url}/agents/engineer-1") as http:
        lease = http.post("/claim").json()["lease"]
        assert http.get("/observations", params={"lease": lease, "wait": 30}).status_code == 200
    warren_server.restart()
    assert len(threading.enumerate()) == len(SEEN["threads"]) + 1
    run = warren_server.create_run("bridge_repair", seed=4, controlled_agents=["engineer-1"], decision_deadline_s=3600)
    http = httpx.Client(base_url=f"{run.url}/agents/engineer-1", timeout=30)
    lease = http.post("/claim").json()["lease"]

    def poll():
        try:
            SEEN["answer"] = http.get("/observations", params={"lease": lease, "after": 0, "wait": 3600}).status_code
        finally:
            http.close()

    SEEN["poll"] = threading.Thread(target=poll)
    SEEN["poll"].start()  # a long-poll still waiting when the test ends: teardown must answer it
    warren_server.sleep(500)  # 0.5 s of wall time for the poll to arrive


@pytest.mark.trio
async def test_2_app(autojump_clock, warren_app, warren_run):
    run = await warren_run("bridge_repair", seed=3, controlled_agents=["engineer-1"])
    agent = await warren_app.client.claim(run.id, "engineer-1")
    await agent.next_observation()
    await trio.sleep(1000)  # and leave the run live


@pytest.mark.trio
@pytest.mark.warren(rate=100)
async def test_2b_trio_sdk_against_the_served_thread_on_the_real_clock(warren_server):
    from warren_sim.client import AsyncAgentClient

    run = warren_server.create_run("bridge_repair", seed=3, controlled_agents=["engineer-1"])
    async with AsyncAgentClient.open(warren_server.url) as client:
        async with client.claim(run.id, "engineer-1") as agent:
            obs = await agent.next_observation()
            assert (await agent.submit(obs, {"noop": True})).status == "accepted"


def test_3_nothing_left_behind():
    SEEN["poll"].join(10)
    assert SEEN["answer"] == 410, SEEN["answer"]  # the teardown answered it: the run ended with the server
    assert set(threading.enumerate()) == SEEN["threads"]
    assert sockets() == SEEN["sockets"]
    assert not SEEN["data_dir"].exists()
    assert sorted(os.listdir(tempfile.gettempdir())) == SEEN["tmp"]
'''


@pytest.mark.slow  # 15-35 s of wall time: outside the edit-test loop, in every full run
def test_fixtures_leave_no_thread_socket_or_directory(pytester: pytest.Pytester,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """After a warren_server test (with a crash, a restart and a long-poll left waiting), a warren_app test (a run
    left live) and a trio SDK test against warren_server on the real clock, the user's process has the threads, sockets and temp entries it had before."""
    tmp = pytester.mkdir("tmp")
    monkeypatch.setenv("TMPDIR", str(tmp))
    pytester.makeini("[pytest]\nfilterwarnings = error\n")  # and the plugin raises no warning a strict user would see
    pytester.makepyfile(test_cleanup=CLEANUP_TEST)
    result = pytester.runpytest_subprocess(*USER)
    result.assert_outcomes(passed=5)
    assert list(tmp.iterdir()) == []


def test_marker_and_ini_option_are_registered_and_checked(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``--strict-markers`` accepts ``warren`` (so it is registered); ``warren_rate`` sets the rate; the marker
    overrides it; a bad option or rate fails the test with a teaching message; nothing is left in the temp
    directory, failed setups included."""
    tmp = pytester.mkdir("tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # in-process: where mkdtemp makes data directories
    pytester.makeini("[pytest]\nwarren_rate = 250\n")
    pytester.makepyfile(test_options='''
import pytest

def test_ini_rate(warren_server):
    assert warren_server.rate == 250

@pytest.mark.warren(rate=2000, lease_ttl=5)
def test_marker_wins(warren_server):
    assert warren_server.rate == 2000 and warren_server.options == {"lease_ttl": 5}

@pytest.mark.warren(lease_tll=5)
def test_typo(warren_server):
    pass

@pytest.mark.warren(rate=-1)
def test_bad_rate(warren_server):
    pass
''')
    result = pytester.runpytest(*USER, "--strict-markers", "-rE")  # in-process: nothing here needs isolation
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["*unknown WARREN server option(s) lease_tll*known:*lease_ttl*",
                                 "*clock rate must be a finite number > 0*"])
    assert list(tmp.iterdir()) == []


# ------------------------------------------------------------------------------------ costs nothing unused


def _importtime(args: list[str], cwd: Path) -> dict[str, tuple[int, int]]:
    """Modules a command imports: ``{name: (self, cumulative)}`` import times in microseconds (``-X importtime``)."""
    done = subprocess.run([sys.executable, "-X", "importtime", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = {}
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            _, self_us, cumulative_us, name = (part.strip() for part in re.split(r"[:|]", line, maxsplit=3))
            out[name] = (int(self_us), int(cumulative_us))
    return out


def test_loading_the_plugin_imports_only_its_own_modules() -> None:
    """The fast tier's version of the check below: in a fresh interpreter that has pytest, importing the plugin
    module adds exactly warren_sim, warren_sim.testing and the plugin (no trio, httpx or server code)."""
    code = ("import sys, pytest; before = set(sys.modules); import warren_sim.testing.plugin; "
            "print(sorted(set(sys.modules) - before))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['warren_sim', 'warren_sim.testing', 'warren_sim.testing.plugin']"


@pytest.mark.slow
def test_a_test_file_without_warren_fixtures_pays_nothing(pytester: pytest.Pytester) -> None:
    """Side by side, ``pytest --collect-only`` of a plain test file with the plugin and with ``-p no:warren``
    (pytest's heavy third-party plugins off in both, so nothing else imports trio or httpx): the plugin adds
    no heavy module and, with its own three modules, under 50 ms of import time (medians of 3 runs)."""
    pytester.makepyfile(test_plain="def test_plain():\n    assert 1 + 1 == 2\n")
    base = ["-m", "pytest", "--collect-only", "-q", "-s", *BARE]
    extra_us, added = [], set()
    for _ in range(3):
        with_plugin = _importtime(base, pytester.path)
        without = _importtime([*base, "-p", "no:warren"], pytester.path)
        new = set(with_plugin) - set(without)
        added |= new
        # pytest imports entry points with importlib.import_module, which -X importtime does not log (only what
        # they import in turn): time the plugin module itself in a process where pytest is already imported.
        own = _importtime(["-c", "import pytest; import warren_sim.testing.plugin"], pytester.path)
        extra_us.append(sum(with_plugin[m][0] for m in new) + own["warren_sim.testing.plugin"][1])
    heavy = sorted(m for m in added if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert heavy == [], f"loading the plugin imported {heavy}"
    print(f"plugin import cost (us, 3 runs): {extra_us}; modules added: {sorted(added)}")
    assert statistics.median(extra_us) < 50_000, (extra_us, sorted(added))


# ------------------------------------------------------------------------------------ the helpers, in-process


async def test_helpers_on_an_in_process_run(autojump_clock: trio.abc.Clock) -> None:
    """verdicts lists an agent's verdicts in order; assert_replays passes on a real journal and names the first
    diverging record of a tampered one; wait_status returns the view, fails at once on another end status, and
    times out on the trio clock."""
    async with open_in_process() as warren:
        run = await warren.create_run("bridge_repair", 3, ["engineer-1"])
        with pytest.raises(WarrenTestError, match=r"still created after 5 s of the trio clock"):
            await wait_status(run, "running", timeout=5)
        agent = await warren.client.claim(run.id, "engineer-1")
        obs = await agent.next_observation()
        assert (await agent.submit(obs, {"noop": True})).status == "accepted"
        assert (await agent.submit(obs, {"noop": True})).status in ("stale", "expired", "duplicate")
        view = await wait_status(run, "running", timeout=5)
        assert view["run_id"] == run.id
        await run.cancel()
        with pytest.raises(WarrenTestError, match=r"ended cancelled .*not completed"):
            await wait_status(run, "completed")
        journal = await warren.journal(run)
    answers = verdicts(journal, "engineer-1")
    assert answers[0] == "accepted" and len(answers) == 2 and verdicts(journal, "medic-1") == []
    assert_replays(journal)
    tampered = [dict(r, seed=99) if r["kind"] == "run" else r for r in journal]
    with pytest.raises(AssertionError, match=r"does not replay at engine record"):
        assert_replays(tampered)


def test_kill_is_a_crash_and_stop_is_a_shutdown(tmp_path: Path) -> None:
    """``kill()`` leaves the data directory as it was on disk (the live run's journal does not say it ended);
    ``stop()`` journals the run ``cancelled``; ``restart()`` serves again on the same port and data dir."""
    server = WarrenServer.open(rate=100, data_dir=tmp_path)
    try:
        url = server.url
        # paced (sim time no faster than the server's clock, 100x here): unpaced, its unclaimed agent noops at once
        # and the run can reach its time limit before the kill (0.3 s), which is a race and not what is tested
        run = server.create_run("bridge_repair", 3, ["engineer-1"], pace=1.0)
        run.start()
        wait_status(run, "running", timeout=60)
        server.kill()
        with pytest.raises(WarrenTestError, match="not running"):
            server.create_run("bridge_repair")
        on_disk = server.journal(run)  # read from the data directory while the server is down
        assert [r["status"] for r in on_disk if r["kind"] == "status"] == ["created", "running"]
        server.restart()
        assert server.url == url
        second = server.create_run("bridge_repair", 3, ["engineer-1"])
        assert second.id != run.id  # the new server numbers runs after the journals it found
        server.stop()
        assert [r["status"] for r in server.journal(second) if r["kind"] == "status"][-1] == "cancelled"
    finally:
        server.close()
    assert tmp_path.is_dir()  # a data directory the test gave is the test's to delete
