"""Issue 32's real-clock checks through a real `warren serve` on loopback: ``deadline_unix`` under ``--rate 50`` is the
wall instant the deadline passes, and a long-poll under ``--lease-ttl 3`` returns with a full TTL.

They wait real seconds (about 3 s and 7 s), so they are marked slow; the same rules on the autojump clock, in
milliseconds, are in tests/test_protocol_corners.py.
"""

from __future__ import annotations

import time

import pytest
from reliability_helpers import Served

pytestmark = pytest.mark.slow


def _started(s: Served, **body):
    r = s.http.post("/v1/runs?scenario=bridge_repair&seed=3", json={"controlled_agents": ["engineer-1"], **body})
    assert r.status_code == 201, r.text
    run = r.json()["run_id"]
    r = s.http.post(f"/v1/runs/{run}/agents/engineer-1/claim")
    assert r.status_code == 200, r.text
    return run, r.json()["lease"]


def _poll(s: Served, run: str, lease: str, after: int, wait: float):
    return s.http.get(f"/v1/runs/{run}/agents/engineer-1/observations",
                      params={"after": after, "wait": wait, "lease": lease})


def _noop(s: Served, run: str, lease: str, cid: str, oid: str) -> dict:
    r = s.http.post(f"/v1/runs/{run}/agents/engineer-1/commands", params={"lease": lease},
                    json={"command_id": cid, "observation_id": oid, "noop": True})
    assert r.status_code == 200, r.text
    return r.json()


def _sleep_until(unix: float) -> None:
    time.sleep(max(0.0, unix - time.time()))


def test_deadline_unix_under_rate_50_is_the_real_time_left(tmp_path):
    """A 60 s deadline at --rate 50 reads now + 1.2 s (within 0.3 s); a noop 0.3 s before it is accepted, one 0.3 s
    after it is expired: ``deadline_unix - time.time()`` is the time left, on the client's own clock."""
    with Served(tmp_path, "--rate", "50") as s:
        run, lease = _started(s, decision_deadline_s=60)
        r = _poll(s, run, lease, -1, 25)  # 25 clock seconds: 0.5 s real at most
        received = time.time()
        assert r.status_code == 200, r.text
        env = r.json()
        left = env["deadline_unix"] - received
        assert 1.2 - 0.3 <= left <= 1.2 + 0.05, left  # issued just now; before the fix this read ~60 s
        _sleep_until(env["deadline_unix"] - 0.3)
        assert _noop(s, run, lease, "before", env["observation_id"])["status"] == "accepted"

        r = _poll(s, run, lease, env["seq"], 25)
        assert r.status_code == 200, r.text
        nxt = r.json()
        assert 1.2 - 0.3 <= nxt["deadline_unix"] - time.time() <= 1.2 + 0.05
        _sleep_until(nxt["deadline_unix"] + 0.3)
        receipt = _noop(s, run, lease, "after", nxt["observation_id"])
        assert receipt["status"] == "expired" and "decision deadline passed" in receipt["detail"], receipt


def test_a_long_poll_under_lease_ttl_3_returns_with_a_full_ttl_and_waits_below_it(tmp_path):
    """--lease-ttl 3 (and the default --max-wait 60): a poll that parks 2.5 s answers 204 with its lease good for 3 s
    more, so another client's claim 1.5 s later (4 s after the poll began, past the 3 s a refresh at its start gave)
    gets 409; a poll asking 60 s is capped at 2.7 s (0.9 x TTL) and leaves its lease alive; serve says so at start."""
    with Served(tmp_path, "--lease-ttl", "3", "--max-wait", "60") as s:
        run, lease = _started(s, decision_deadline_s=600)
        r = _poll(s, run, lease, -1, 0)
        assert r.status_code == 200, r.text
        seq = r.json()["seq"]
        began = time.monotonic()
        r = _poll(s, run, lease, seq, 2.5)
        assert r.status_code == 204, r.text
        assert 2.4 <= time.monotonic() - began < 2.7
        time.sleep(1.5)
        r = s.http.post(f"/v1/runs/{run}/agents/engineer-1/claim")
        assert r.status_code == 409 and "held by another lease" in r.json()["detail"], r.text

        began = time.monotonic()
        r = _poll(s, run, lease, seq, 60)
        assert r.status_code == 204, r.text
        assert 2.6 <= time.monotonic() - began < 3.0  # capped below the TTL, not 60 s
        r = s.http.get(f"/v1/runs/{run}/agents/engineer-1/briefing", params={"lease": lease})
        assert r.status_code == 200  # still ours
        s.stop()
    assert "long-polls wait at most 2.7 s, below --lease-ttl 3 s (--max-wait 60 s is capped)" in s.stderr
