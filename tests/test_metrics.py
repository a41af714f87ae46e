"""GET /metrics: Prometheus text parsed with prometheus_client's own parser during served runs, over HTTP (the lane
and Quart's routes) and the WebSocket binding; every documented metric present, counters that move."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import trio
from prometheus_client.parser import text_string_to_metric_families
from sdkhelpers import real_server
from server_helpers import served
from test_client_ws import drive, ws_client

from warren_sim.engine import BUILD

DOCS = Path(__file__).resolve().parent.parent / "docs" / "operations.md"
POLL = "GET /v1/runs/<run_id>/agents/<agent_id>/observations"
SUBMIT = "POST /v1/runs/<run_id>/agents/<agent_id>/commands"
# every metric docs/operations.md lists (the families as the parser names them: counters without _total)
DOCUMENTED = ("warren_runs", "warren_leases", "warren_long_polls", "warren_spectators", "warren_decisions",
              "warren_request_duration_seconds", "warren_batch_adjudication_seconds", "warren_journal_written_bytes",
              "warren_journal_fsync_seconds", "warren_engine_build_info")


def parse(text: str) -> dict[str, Any]:
    """The exposition's families by name (prometheus_client's parser: it refuses what is not the text format)."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def value(families: dict[str, Any], sample: str, **labels: str) -> float:
    """The value of one sample (by its full name and labels), 0 when absent."""
    for family in families.values():
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return 0.0


async def scrape(api: Any) -> dict[str, Any]:
    r = await api.client.get("/metrics")
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return parse((await r.get_data()).decode())


async def test_a_served_run_moves_the_counters(tmp_path):
    """One decision over the HTTP lane: the scrape has every documented metric, the decision counted by verdict
    and transport, both hot routes timed, a batch adjudicated, journal bytes written, the run and its lease live."""
    async with served(tmp_path) as api:
        before = await scrape(api)
        assert set(DOCUMENTED) <= set(before), set(DOCUMENTED) - set(before)
        assert value(before, "warren_engine_build_info", engine=BUILD) == 1
        run = await api.create(controlled_agents=["engineer-1"], npc_policy="solution")
        lease = await api.claim(run)
        status, env = await api.poll(run, lease)
        assert status == 200
        status, receipt = await api.submit(run, lease, {"command_id": "c-1", "observation_id": env["observation_id"],
                                                        "action": "take", "args": {"item": "toolbox-1"}})
        assert status == 200 and receipt["status"] == "accepted"
        status, _ = await api.poll(run, lease, after=0)  # the batch is adjudicated before the next envelope
        assert status == 200
        after = await scrape(api)
        assert value(after, "warren_decisions_total", verdict="accepted", transport="http") == 1
        assert value(after, "warren_request_duration_seconds_count", transport="http", route=POLL) == 2
        assert value(after, "warren_request_duration_seconds_count", transport="http", route=SUBMIT) == 1
        claim = "POST /v1/runs/<run_id>/agents/<agent_id>/claim"  # a Quart route, timed by Quart's hooks
        assert value(after, "warren_request_duration_seconds_count", transport="http", route=claim) == 1
        assert value(after, "warren_batch_adjudication_seconds_count") >= 1
        assert value(after, "warren_journal_written_bytes_total") > value(before, "warren_journal_written_bytes_total")
        assert value(after, "warren_runs", status="running") == 1
        assert value(after, "warren_runs", status="completed") == 0
        assert value(after, "warren_leases") == 1 and value(after, "warren_long_polls") == 0


async def test_fsync_latency_is_observed_with_fsync(tmp_path):
    """With --fsync (ServerConfig.fsync) an accepted command's fsync is timed in warren_journal_fsync_seconds."""
    async with served(tmp_path, fsync=True) as api:
        run = await api.create(controlled_agents=["engineer-1"], npc_policy="solution")
        lease = await api.claim(run)
        _, env = await api.poll(run, lease)
        status, receipt = await api.submit(run, lease, {"command_id": "c-1", "observation_id": env["observation_id"],
                                                        "noop": True})
        assert status == 200 and receipt["status"] == "accepted"
        families = await scrape(api)
        assert value(families, "warren_journal_fsync_seconds_count") >= 1
        assert value(families, "warren_journal_fsync_seconds_sum") > 0


async def test_parked_long_polls_and_spectators_are_read_at_scrape_time(tmp_path):
    """A long-poll parked while the scrape runs is counted, and so is a spectator stream; both gone afterwards."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"], npc_policy="solution")
        lease = await api.claim(run)
        status, env = await api.poll(run, lease)
        seen: dict[str, Any] = {}
        async with api.client.websocket(f"/v1/runs/{run}/stream") as ws:
            await ws.receive()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(api.poll, run, lease, 0, 20)  # parks: engineer-1#0 is not answered yet
                await trio.sleep(0.1)
                seen = await scrape(api)
                status, _ = await api.submit(run, lease, {"command_id": "c-1", "observation_id": env["observation_id"],
                                                          "noop": True})  # the batch goes on: the poll is answered
                assert status == 200
        assert value(seen, "warren_long_polls") == 1 and value(seen, "warren_spectators") == 1
        assert value(await scrape(api), "warren_long_polls") == 0


async def test_no_metrics_serves_no_route_and_apps_keep_their_own_registries(tmp_path):
    """metrics=False (warren serve --no-metrics): /metrics is 404. Two apps in one process count apart."""
    async with served(tmp_path / "off", metrics=False) as off:
        r = await off.client.get("/metrics")
        assert r.status_code == 404
    async with served(tmp_path / "a") as a, served(tmp_path / "b") as b:
        await a.create(controlled_agents=["engineer-1"])
        assert value(await scrape(a), "warren_runs", status="created") == 1
        assert value(await scrape(b), "warren_runs", status="created") == 0


async def test_websocket_decisions_and_methods_are_counted_over_a_real_server(tmp_path):
    """The SDK over WS /v1/agent drives engineer-1 to completion against a real Hypercorn: its verdicts are counted
    under transport ws, each JSON-RPC method timed under its name; the run ends completed in the scrape."""
    async with real_server(tmp_path) as env:
        async with ws_client(env) as client:
            run = await client.create_run("bridge_repair", 3, controlled_agents=["engineer-1"])
            with trio.fail_after(20):
                async with client.claim(run.run_id, "engineer-1") as agent:
                    decisions = await drive(agent)
        async with httpx.AsyncClient(base_url=env.url) as http:
            for _ in range(50):  # the run's end is journaled by its task right after the last batch
                families = parse((await http.get("/metrics")).text)
                if value(families, "warren_runs", status="completed") == 1:
                    break
                await trio.sleep(0.05)
    assert value(families, "warren_runs", status="completed") == 1
    assert value(families, "warren_decisions_total", verdict="accepted", transport="ws") == decisions
    assert value(families, "warren_request_duration_seconds_count", transport="ws", route="agent.submit") >= decisions
    assert value(families, "warren_request_duration_seconds_count", transport="ws", route="agent.claim") == 1


def test_operations_doc_lists_every_metric():
    """docs/operations.md names every metric this test file checks, and the scrape config it promises."""
    text = DOCS.read_text()
    listed = set(re.findall(r"`(warren_[a-z_]+)`", text))
    for name in DOCUMENTED:
        assert any(n == name or n.startswith(name + "_") for n in listed), name
    assert "scrape_configs" in text and "metrics_path: /metrics" in text


def test_counted_families_are_what_prometheus_clients_own_metrics_write():
    """The plain-number counting (Metrics) scrapes as the same families, samples and values as prometheus_client's
    own Counter and Histogram given the same observations (only the ``_created`` timestamps differ), including a
    value on a bucket's bound (``le`` is less than or equal) and one past the last."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from warren_sim.observability import metrics as m
    from warren_sim.runtime.clock import unix_now

    ours = m.Metrics(version="v", engine="compiled", now=unix_now)
    reg = CollectorRegistry()
    requests = Histogram("warren_request_duration_seconds", m.REQUESTS_HELP, ["transport", "route"],
                         buckets=m.REQUEST_BUCKETS, registry=reg)
    decisions = Counter("warren_decisions", m.DECISIONS_HELP, ["verdict", "transport"], registry=reg)
    adjudication = Histogram("warren_batch_adjudication_seconds", m.ADJUDICATION_HELP,
                             buckets=m.ADJUDICATION_BUCKETS, registry=reg)
    written = Counter("warren_journal_written_bytes", m.JOURNAL_HELP, registry=reg)
    fsync = Histogram("warren_journal_fsync_seconds", m.FSYNC_HELP, buckets=m.FSYNC_BUCKETS, registry=reg)
    for seconds, route in ((0.0003, "agent.submit"), (0.001, "agent.submit"), (75.0, "agent.claim"),
                           (0.0, SUBMIT)):
        ours.request(route, "ws", seconds, verdict="accepted")
        requests.labels("ws", route).observe(seconds)
        decisions.labels("accepted", "ws").inc()
    ours.decision("stale", "http", 3)
    decisions.labels("stale", "http").inc(3)
    for seconds in (0.00005, 0.3, 9.0):
        ours.adjudicated(seconds)
        adjudication.observe(seconds)
        ours.fsynced(seconds)
        fsync.observe(seconds)
    ours.journal_written(1234)
    written.inc(1234)

    def samples(text: str) -> dict[str, list[tuple[str, tuple[tuple[str, str], ...], float]]]:
        return {f.name: sorted((s.name, tuple(sorted(s.labels.items())), s.value) for s in f.samples
                               if not s.name.endswith("_created"))
                for f in text_string_to_metric_families(text)}

    theirs = samples(generate_latest(reg).decode())
    mine = samples(ours.exposition()[0].decode())
    assert theirs and all(mine[name] == got for name, got in theirs.items())
    assert value(parse(ours.exposition()[0].decode()), "warren_decisions_created", verdict="stale",
                 transport="http") > 0
