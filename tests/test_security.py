"""Lease tokens (entropy, constant-time comparison, never written anywhere) and the loopback-only default bind."""

from __future__ import annotations

import base64
import json
import re
import signal
import threading

import httpx
from reliability_helpers import PROTO, Served
from server_helpers import served

from warren_sim.runtime import leases


def test_lease_tokens_carry_at_least_128_random_bits():
    """Tokens are 'l-' + base64url of TOKEN_BYTES (>= 16) random bytes from secrets; 10,000 are all distinct."""
    assert leases.TOKEN_BYTES * 8 >= 128
    tokens = {leases.new_token() for _ in range(10_000)}
    assert len(tokens) == 10_000
    for token in list(tokens)[:100]:
        assert re.fullmatch(r"l-[A-Za-z0-9_-]+", token)
        raw = base64.urlsafe_b64decode(token[2:] + "=" * (-len(token[2:]) % 4))
        assert len(raw) == leases.TOKEN_BYTES


async def test_lease_tokens_are_compared_in_constant_time(autojump_clock, tmp_path, monkeypatch):
    """Every lease check goes through hmac.compare_digest (no early-exit ==), wrong tokens and odd bytes alike."""
    calls = []
    real = leases.hmac.compare_digest

    def spy(a, b):
        calls.append((type(a), type(b)))
        return real(a, b)

    monkeypatch.setattr(leases.hmac, "compare_digest", spy)
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"])
        token = await api.claim(run)
        for probe, expected in ((token, 200), ("l-" + "A" * 32, 403), (token[:-1], 403), ("%ED%A0%80", 403),
                                ("%C3%A9" * 8, 403), ("x" * 5000, 403)):
            calls.clear()
            status, _ = await api.call("GET", f"/v1/runs/{run}/agents/engineer-1/briefing?lease={probe}")
            assert status == expected and calls == [(bytes, bytes)], (probe, status, calls)


def _session(s: Served) -> list[str]:
    """A served session that touches every place a token could leak to; returns every token it was given."""
    h = s.http
    tokens = []
    run = h.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                 json={"controlled_agents": ["engineer-1", "medic-1"]}).json()["run_id"]
    stream_frames: list[str] = []

    def spectate() -> None:
        with httpx.Client(base_url=s.url, headers=PROTO, timeout=30) as c, \
                c.stream("GET", f"/v1/runs/{run}/events") as r:
            for line in r.iter_lines():
                stream_frames.append(line)
                if '"kind":"terminal"' in line or "event: terminal" in line:
                    return

    spectator = threading.Thread(target=spectate, daemon=True)
    spectator.start()
    for agent in ("engineer-1", "medic-1"):
        tokens.append(h.post(f"/v1/runs/{run}/agents/{agent}/claim").json()["lease"])
    eng, med = tokens
    assert h.post(f"/v1/runs/{run}/agents/engineer-1/claim").status_code == 409  # conflict detail: no token
    assert h.post(f"/v1/runs/{run}/agents/engineer-1/claim", params={"lease": eng}).json()["lease"] == eng
    h.get(f"/v1/runs/{run}/agents/engineer-1/briefing", params={"lease": eng})
    env = h.get(f"/v1/runs/{run}/agents/engineer-1/observations", params={"wait": 5, "lease": eng}).json()
    for body in ({"command_id": "bad", "observation_id": env["observation_id"], "action": "take",
                  "args": {"item": "plank-9"}},  # rejected: the verdict and its detail are journaled
                 {"command_id": "c1", "observation_id": env["observation_id"], "noop": True}):
        h.post(f"/v1/runs/{run}/agents/engineer-1/commands", params={"lease": eng}, json=body)
    h.get(f"/v1/runs/{run}/agents/engineer-1/commands/c1", params={"lease": eng})
    assert h.get(f"/v1/runs/{run}/agents/engineer-1/briefing", params={"lease": med}).status_code == 403
    h.post(f"/v1/runs/{run}/agents/medic-1/release", params={"lease": med})
    tokens.append(h.post(f"/v1/runs/{run}/agents/medic-1/claim").json()["lease"])
    listing = h.get("/v1/runs").text + h.get(f"/v1/runs/{run}").text + h.get(f"/v1/runs/{run}/journal").text
    h.delete(f"/v1/runs/{run}")
    spectator.join(10)
    return tokens + [listing, "\n".join(stream_frames)]


def test_tokens_never_reach_journals_logs_or_streams(tmp_path):
    """After a served session, no lease token appears in the data dir, the server's stdout/stderr or any stream."""
    s = Served(tmp_path)
    *tokens, views, frames = _session(s)
    code, err = s.stop(signal.SIGTERM)
    assert code == 0, err
    written = "".join(p.read_text(errors="replace") for p in sorted(s.data_dir.rglob("*")) if p.is_file())
    assert '"kind":"claim"' in written and "cancelled" in frames  # the stream saw the whole run
    for token in tokens:
        secret = token.removeprefix("l-")
        assert len(secret) >= 22
        for where, text in (("data dir", written), ("stderr", err), ("stdout", s.stdout), ("run views", views),
                            ("stream", frames)):
            assert secret not in text, f"lease token leaked into {where}"
    # lease events are journaled by agent id only
    records = [json.loads(line) for line in (s.data_dir / "run-1.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "verdict" and r["command_id"] == "bad" for r in records)
    assert {r["kind"] for r in records} >= {"claim", "release", "verdict", "status"}
    assert all(set(r) <= {"cursor", "kind", "t", "agent"} for r in records if r["kind"] in ("claim", "release"))


def test_binding_beyond_loopback_prints_a_warning(tmp_path):
    """`warren serve --host 0.0.0.0 --port 0` warns on stderr that the server is exposed; it still serves."""
    s = Served(tmp_path, "--host", "0.0.0.0")
    try:
        assert s.url.startswith("http://0.0.0.0:")
        port = s.address[1]
        assert httpx.get(f"http://127.0.0.1:{port}/v1", headers=PROTO, timeout=10).status_code == 200
    finally:
        code, err = s.stop()
    assert code == 0
    assert "warning: binding 0.0.0.0 exposes WARREN beyond this machine" in err, err
