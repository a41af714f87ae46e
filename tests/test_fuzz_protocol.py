"""A model-based fuzz of warren-agent/0 over the in-process app on a virtual clock (Hypothesis state machine).

How the synchronous state machine drives the async app: one ``trio.run`` in a worker thread serves the real
app (under ``test_app()``) on a ``MockClock`` that stands still between rules (``autojump_threshold = inf``).
A rule hands one coroutine to that thread (``trio.from_thread.run``); rules that wait (long-polls, "advance
time") switch autojump on (threshold 0) for their duration, so a 60 s wait or a 300 s lease TTL passes at
once. After each rule the clock stops again and every task settles (``wait_all_tasks_blocked``), so the
invariants are checked on a quiescent server and a "nothing changed" digest taken before a request is
comparable with one taken after it. Each example creates its own run; its teardown ends and forgets every
run, so the next example starts on a server with none (one app for all examples: building one costs ~20 ms).

Sizes: 2,000 examples of up to 20 steps (marked slow); WARREN_FULL_TESTS=1 runs 10,000, WARREN_FUZZ_EXAMPLES=N
any number; the fast tier (`-m "not slow"`) runs the same machine at 60 examples.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from server_helpers import Api
from tiers import full

from warren_sim.http.app import create_app
from warren_sim.runtime.manager import ServerConfig

AGENTS = ("engineer-1", "medic-1")
VERDICTS = {"accepted", "duplicate", "rejected", "stale", "expired"}
EXAMPLES = int(os.environ.get("WARREN_FUZZ_EXAMPLES", 10_000 if full() else 2_000))
QUICK_EXAMPLES = 60  # the fast tier (tests/tiers.py)
STEPS = 20


class TrioThread:
    """One ``trio.run`` (virtual clock, the real app under ``test_app()``) in a worker thread, driven by calls."""

    def __init__(self) -> None:
        self.clock = trio.testing.MockClock(autojump_threshold=math.inf)
        self.ready = threading.Event()
        self.failure: BaseException | None = None
        self.api: Api | None = None
        self.thread = threading.Thread(target=self._thread, daemon=True)
        self.thread.start()
        self.ready.wait(30)
        if self.failure is not None:
            raise self.failure

    def _thread(self) -> None:
        try:
            trio.run(self._main, clock=self.clock)
        except BaseException as exc:  # surfaced by run()/close()
            self.failure = exc
            self.ready.set()

    async def _main(self) -> None:
        app = create_app(ServerConfig(data_dir=None))
        self.stop = trio.Event()
        async with app.test_app():
            self.api = Api(app, app.test_client())
            self.token = trio.lowlevel.current_trio_token()
            self.ready.set()
            await self.stop.wait()
            for run in self.api.manager.runs.values():  # end the runs so test_app's nursery can close
                run.cancel("test over")

    def run(self, fn: Callable[..., Awaitable[Any]], *args: Any, autojump: bool = False) -> Any:
        async def call() -> Any:
            if autojump:
                self.clock.autojump_threshold = 0
            try:
                return await fn(*args)
            finally:
                self.clock.autojump_threshold = math.inf
                await trio.testing.wait_all_tasks_blocked()

        return trio.from_thread.run(call, trio_token=self.token)

    def close(self) -> None:
        if self.api is not None:
            trio.from_thread.run_sync(self.stop.set, trio_token=self.token)
        self.thread.join(30)
        assert not self.thread.is_alive(), "the app did not shut down"
        if self.failure is not None:
            raise self.failure


_SHARED: list[TrioThread] = []


def shared_trio() -> TrioThread:
    """One app for all examples (building a Quart app costs ~20 ms); each example gets its own run."""
    if not _SHARED:
        _SHARED.append(TrioThread())
    return _SHARED[0]


@pytest.fixture(autouse=True, scope="module")
def _close_shared_trio() -> Any:
    yield
    while _SHARED:
        _SHARED.pop().close()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
RAW_GARBAGE = [b"{", b"[]", b"null", b'"x"', b'{"a":1,"a":2}', b'{"sleep_ms": NaN}', b"[" * 70 + b"]" * 70,
               b'{"command_id": "c", "observation_id": "x", "sleep_ms": 9007199254740992}', b"\xff\xfe",
               b"\xef\xbb\xbf{}", b'{"command_id": "\\ud800", "observation_id": "a#0", "noop": true}', b"",
               b"HUGE"]
HUGE = b'{"x": "' + b"a" * 70_000 + b'"}'  # over 64 KiB: 413 (kept out of RAW_GARBAGE so reprs stay short)


def _expand(raw: bytes) -> bytes:
    return HUGE if raw == b"HUGE" else raw


class ProtocolMachine(RuleBasedStateMachine):
    """Two controlled agents of one bridge_repair run, claimed, polled, commanded and abandoned at random."""

    def __init__(self) -> None:
        super().__init__()
        self.t = shared_trio()
        self.api: Api = self.t.api  # type: ignore[assignment]
        self.run_id = ""
        self.leases: dict[str, str | None] = dict.fromkeys(AGENTS)
        self.last_seq: dict[str, int] = dict.fromkeys(AGENTS, -1)
        self.envelopes: dict[str, list[dict[str, Any]]] = {a: [] for a in AGENTS}
        self.accepted: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
        self.refused: dict[tuple[str, str], dict[str, Any]] = {}  # non-accepted command ids, to correct later
        self.next_id = 0

    def teardown(self) -> None:
        """End this example's runs and forget them: the next example starts on a server with no runs."""
        async def end_all() -> None:
            manager = self.api.manager
            for run in list(manager.runs.values()):
                run.cancel("example over")
                await run.ended.wait()
            manager.runs.clear()

        self.t.run(end_all, autojump=True)

    # -- plumbing --------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             autojump: bool = False) -> tuple[int, Any]:
        if raw is None:
            return self.t.run(self.api.call, method, path, body, autojump=autojump)
        return self.t.run(self._raw, method, path, raw, autojump=autojump)

    async def _raw(self, method: str, path: str, raw: bytes) -> tuple[int, Any]:
        return await self.api.call(method, path, raw=raw)

    @property
    def run(self) -> Any:
        return self.api.manager.runs[self.run_id]

    def ended(self) -> bool:
        return self.run.is_ended

    def digest(self) -> tuple[Any, ...]:
        """Everything a non-accepted verdict must leave alone (a submit may refresh its lease: not included)."""
        run = self.run
        records = sum(1 for r in run.journal.records if r["kind"] != "verdict")
        ledgers = tuple((aid, tuple((o.observation_id, o.status, o.answered_by) for o in ra.ledger.observations.values()),
                         tuple(sorted(ra.ledger.accepted)), ra.answered, ra.envelope_seq)
                        for aid, ra in run.remote.items())
        return records, ledgers, run.sim.time, run.sim.decisions, run.status, len(self.api.manager.runs)

    def agent_path(self, agent: str, tail: str) -> str:
        return f"/v1/runs/{self.run_id}/agents/{agent}/{tail}"

    def lease_q(self, agent: str) -> str:
        lease = self.leases[agent]
        return "" if lease is None else f"lease={lease}"

    def mint(self) -> str:
        self.next_id += 1
        return f"c{self.next_id}"

    # -- rules -----------------------------------------------------------------------------------
    @initialize(deadline=st.sampled_from([5, 60]), claim_first=st.sampled_from([True, True, True, False]))
    def create(self, deadline: int, claim_first: bool) -> None:
        status, run = self.call("POST", "/v1/runs?scenario=bridge_repair&seed=3",
                                {"controlled_agents": list(AGENTS), "npc_policy": "solution",
                                 "decision_deadline_s": deadline})
        assert status == 201 and run["status"] == "created"
        self.run_id = run["run_id"]
        if claim_first:
            for agent in AGENTS:
                self.claim(agent, False)

    @rule(agent=st.sampled_from(AGENTS), resume=st.booleans())
    def claim(self, agent: str, resume: bool) -> None:
        ended = self.ended()
        held = self.run.remote[agent].lease
        live = held is not None and held.expires_at > self.t.clock.current_time()
        ours = live and held.token == self.leases[agent]
        q = f"?{self.lease_q(agent)}" if resume and self.leases[agent] else ""
        status, body = self.call("POST", self.agent_path(agent, f"claim{q}"))
        event(f"claim: {status}")
        if ended:
            assert status == 410 and self.run.status in body["detail"], (status, body)
            return
        if live and not (q and ours):
            assert status == 409 and "held by another lease" in body["detail"], (status, body)
            return
        assert status == 200, (status, body)
        if q and ours:
            assert body["lease"] == self.leases[agent]  # a live lease resumes with the same token
        else:
            assert body["lease"] != self.leases[agent]  # otherwise a fresh token
        self.leases[agent] = body["lease"]

    @rule(agent=st.sampled_from(AGENTS))
    def release(self, agent: str) -> None:
        status, body = self.call("POST", self.agent_path(agent, f"release?{self.lease_q(agent)}"))
        assert status in (200, 401, 403), (status, body)
        if status == 200:
            self.leases[agent] = None

    @rule(agent=st.sampled_from(AGENTS), wait=st.sampled_from([0, 0.5, 5, 30, 60]), redeliver=st.booleans())
    def poll(self, agent: str, wait: float, redeliver: bool) -> None:
        ended = self.ended()
        after = -1 if redeliver else self.last_seq[agent]
        status, body = self.call("GET", self.agent_path(agent, f"observations?after={after}&wait={wait}&"
                                                         f"{self.lease_q(agent)}"), autojump=True)
        assert status in (200, 204, 401, 403, 410), (status, body)
        event(f"poll: {status}")
        if status in (401, 403):
            assert self.leases[agent] is None or "lease" in body["detail"]
            return
        if ended:
            assert status == 410, (status, body)  # an ended run answers 410 to every authenticated poll
        if status == 410:
            assert self.ended() and self.run.status in body["detail"]
            return
        if status == 200:
            assert body["seq"] > after and body["agent_id"] == agent
            assert body["observation_id"] == f"{agent}#{body['seq']}"
            assert body["seq"] >= self.last_seq[agent]
            self.last_seq[agent] = body["seq"]
            self.envelopes[agent].append(body)

    def _submit(self, agent: str, body: Any, raw: bytes | None = None) -> tuple[int, Any]:
        before = self.digest()
        path = self.agent_path(agent, f"commands?{self.lease_q(agent)}")
        status, r = self.call("POST", path, body, raw=raw)
        assert status in (200, 400, 401, 403, 413, 422), (status, r)
        if status != 200 or r["status"] != "accepted":
            assert self.digest() == before, (status, r)  # a non-accepted verdict changes nothing
        if status == 200:
            assert r["status"] in VERDICTS
            assert set(r) == {"command_id", "observation_id", "status", "detail", "outcome", "outcome_reason",
                              "conflict"}
        event(f"submit: {r['status'] if status == 200 else status}")
        return status, r

    def _known_oid(self, agent: str, pick: int) -> str:
        envs = self.envelopes[agent]
        if not envs:
            return f"{agent}#0"
        return envs[-1 - pick % len(envs)]["observation_id"]

    @rule(agent=st.sampled_from(AGENTS), pick=st.integers(0, 3),
          decision=st.sampled_from(["noop", "sleep", "act", "bad_sleep", "bad_action", "bad_args"]))
    def submit_new(self, agent: str, pick: int, decision: str) -> None:
        oid = self._known_oid(agent, pick)
        env = next((e for e in self.envelopes[agent] if e["observation_id"] == oid), None)
        cmd: dict[str, Any] = {"command_id": self.mint(), "observation_id": oid}
        if decision == "noop":
            cmd["noop"] = True
        elif decision == "sleep":
            cmd["sleep_ms"] = 1000 * (1 + pick)
        elif decision == "act" and env and env["affordances"] and env["affordances"][0].get("suggestions"):
            aff = env["affordances"][pick % len(env["affordances"])]
            cmd.update(action=aff["action"], args=(aff.get("suggestions") or [{}])[0])
        elif decision == "bad_sleep":
            cmd["sleep_ms"] = -5
        elif decision == "bad_action":
            cmd["action"] = "levitate"
        else:
            cmd.update(action="take", args={"item": "the-moon"})
        ended = self.ended()
        status, r = self._submit(agent, cmd)
        if status != 200:
            return
        assert r["status"] != "duplicate"  # a fresh command_id can never be a duplicate
        if ended:
            assert r["status"] in ("expired", "rejected", "stale"), r
        if r["status"] == "accepted":
            self.accepted[(agent, cmd["command_id"])] = (cmd, r)
        else:
            self.refused[(agent, cmd["command_id"])] = cmd

    @precondition(lambda self: self.accepted)
    @rule(data=st.data(), same_body=st.booleans())
    def submit_duplicate(self, data: st.DataObject, same_body: bool) -> None:
        (agent, cid), (cmd, original) = data.draw(st.sampled_from(sorted(self.accepted.items())))
        body = dict(cmd) if same_body else {"command_id": cid, "observation_id": cmd["observation_id"],
                                             "sleep_ms": 123456}
        status, r = self._submit(agent, body)
        if status != 200:
            return
        assert r["status"] == "duplicate", r  # an accepted id stays accepted: the original receipt is replayed
        assert (r["command_id"], r["observation_id"]) == (original["command_id"], original["observation_id"])
        if same_body:
            assert r["detail"] == original["detail"]
        else:
            assert "original command stands" in r["detail"]
        assert r["outcome"] in ("pending", "accepted", "rejected", "completed", "interrupted")

    @precondition(lambda self: self.refused)
    @rule(data=st.data())
    def submit_corrected(self, data: st.DataObject) -> None:
        (agent, cid), cmd = data.draw(st.sampled_from(sorted(self.refused.items())))
        body = {"command_id": cid, "observation_id": self._known_oid(agent, 0), "noop": True}
        status, r = self._submit(agent, body)
        if status == 200 and r["status"] == "accepted":  # re-judged against the current state
            del self.refused[(agent, cid)]
            self.accepted[(agent, cid)] = (body, r)
        elif status == 200:
            assert r["status"] != "duplicate"

    @rule(agent=st.sampled_from(AGENTS), value=json_values, cid=st.sampled_from(["keep", "int", "none", "drop"]))
    def submit_garbage(self, agent: str, value: Any, cid: str) -> None:
        body: Any = value
        if isinstance(value, dict):
            body = dict(value)
            if cid == "keep":
                body["command_id"] = self.mint()
                body["observation_id"] = self._known_oid(agent, 0)
            elif cid == "int":
                body["command_id"] = 7
        status, r = self._submit(agent, body)
        if status == 200 and r["status"] == "accepted":
            self.accepted[(agent, body["command_id"])] = (body, r)

    @rule(agent=st.sampled_from(AGENTS), raw=st.sampled_from(RAW_GARBAGE) | st.binary(max_size=40))
    def submit_raw(self, agent: str, raw: bytes) -> None:
        status, r = self._submit(agent, None, raw=_expand(raw))
        assert status != 200 or r["status"] != "accepted"

    @rule(raw=st.sampled_from(RAW_GARBAGE) | st.binary(max_size=40) | json_values.map(lambda v: json.dumps(v).encode()))
    def create_garbage(self, raw: bytes) -> None:
        runs = len(self.api.manager.runs)
        status, r = self.call("POST", "/v1/runs?scenario=bridge_repair", raw=_expand(raw))
        assert status in (201, 400, 413), (status, r)
        if status == 201:  # e.g. {} is a valid run creation: cancel it so only our run is live
            self.call("DELETE", f"/v1/runs/{r['run_id']}")
        else:
            assert len(self.api.manager.runs) == runs

    @rule(seconds=st.sampled_from([0.5, 4.9, 5.1, 59, 61, 299, 301]))
    def advance(self, seconds: float) -> None:
        self.t.run(trio.sleep, seconds, autojump=True)

    @rule(coin=st.integers(0, 3))
    def view_or_cancel(self, coin: int) -> None:
        """Mostly look at the run (GET); one time in four cancel it (DELETE), which ends the example's story."""
        if coin:
            status, view = self.call("GET", f"/v1/runs/{self.run_id}")
            assert status == 200 and view["status"] == self.run.status
            return
        was = self.run.status
        status, view = self.call("DELETE", f"/v1/runs/{self.run_id}")
        assert status == 200 and view["status"] in ("cancelled", "completed", "failed")
        if was in ("completed", "failed", "cancelled"):
            assert view["status"] == was

    # -- invariants ------------------------------------------------------------------------------
    @invariant()
    def at_most_one_accepted_command_per_observation(self) -> None:
        if not self.run_id:
            return
        seen: set[tuple[str, str]] = set()
        accepted = 0
        for rec in self.run.journal.records:
            if rec["kind"] == "verdict" and rec["status"] == "accepted":
                key = (rec["agent"], rec["observation_id"])
                assert key not in seen, f"two accepted commands for {key}"
                seen.add(key)
                accepted += 1
        assert accepted == sum(len(ra.ledger.accepted) for ra in self.run.remote.values())

    @invariant()
    def seq_grows_without_gaps(self) -> None:
        if not self.run_id:
            return
        for aid, ra in self.run.remote.items():
            seqs = [o.seq for o in ra.ledger.observations.values()]
            assert seqs == list(range(len(seqs))), (aid, seqs)
            assert all(o.observation_id == f"{aid}#{o.seq}" for o in ra.ledger.observations.values())
            outstanding = [o for o in ra.ledger.observations.values() if o.status == "outstanding"]
            assert len(outstanding) <= 1 and (not outstanding or outstanding[0].seq == seqs[-1])
        for agent, envs in self.envelopes.items():
            fresh = [e["seq"] for e in envs]
            assert fresh == sorted(fresh), (agent, fresh)

    @invariant()
    def ended_runs_hold_nothing_outstanding(self) -> None:
        if self.run_id and self.ended():
            for ra in self.run.remote.values():
                assert ra.ledger.outstanding() is None


def _machine_settings(examples: int) -> settings:
    return settings(
        max_examples=examples, stateful_step_count=STEPS, derandomize=True, database=None, deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


class TestProtocolMachine(ProtocolMachine.TestCase):
    """The state machine: claim/release/poll/submit/garbage/advance/cancel; invariants hold."""

    settings = _machine_settings(EXAMPLES)
    pytestmark = pytest.mark.slow


class TestProtocolMachineQuick(ProtocolMachine.TestCase):
    """The same machine and invariants at QUICK_EXAMPLES examples: the fast tier's fuzz."""

    settings = _machine_settings(QUICK_EXAMPLES)
