"""The viewer's server side, in process: the layout (scenario description, run record), the pages, observation texts."""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from server_helpers import served

from warren_sim.engine.records import dumps_record
from warren_sim.http.viewer_routes import viewer_page
from warren_sim.protocol.schema_registry import validation_errors
from warren_sim.runtime.rebuild import observation_texts
from warren_sim.scenarios import instantiate, load_scenario
from warren_sim.viewer_page import embed, page_texts


async def test_scenario_layout_follows_params_and_fits_its_schema(tmp_path):
    """GET /v1/scenarios/warren?params=...: the layout of 2,000 foragers (spaces, places, starts), schema-valid.

    (2,000, not 10,000: validating a 20,000-entry document against its schema took 5 s of the fast tier; the
    layout code has no size-dependent branch, and the 10,000-agent viewer is measured in docs/viewer.md.)"""
    async with served(tmp_path) as api:
        params = quote(json.dumps({"agents": 2000}))
        status, body = await api.call("GET", f"/v1/scenarios/warren?params={params}")
        assert status == 200
        assert validation_errors(body, "scenario") == []
        layout = body["layout"]
        assert body["params"] == {"agents": 2000, "layout": 0}
        assert len(layout["agents"]) == 2000 and len(layout["items"]) == 2000
        space = layout["spaces"][0]
        assert space["name"] == "warren" and space["width"] > 40
        assert all(0 <= a["x"] < space["width"] and 0 <= a["y"] < space["height"] for a in layout["agents"])
        assert [p["id"] for p in layout["places"]] == ["larder"]
        assert layout["structures"][0]["place"] == "larder"

        status, body = await api.call("GET", "/v1/scenarios/bridge_repair")
        layout = body["layout"]
        assert [(s["name"], s["width"], s["height"]) for s in layout["spaces"]] == [("village", 12, 8), ("east", 8, 8)]
        assert {p["id"]: (p["space"], p["x"], p["y"]) for p in layout["places"]}["clinic"] == ("east", 4, 4)
        link = layout["links"][0]
        assert link["id"] == "bridge-crossing" and link["open"] is False
        assert link["from"] == {"space": "village", "x": 11, "y": 4} and link["to"] == {"space": "east", "x": 0, "y": 4}
        assert link["gate"] == {"structure": "bridge", "field": "integrity", "at_least": 2}
        starts = {a["agent_id"]: (a["place"], a["space"], a["x"], a["y"]) for a in layout["agents"]}
        assert starts == {"engineer-1": ("workshop", "village", 1, 1), "courier-1": ("depot", "village", 6, 1),
                          "medic-1": ("square", "village", 6, 4)}
        assert {s["id"]: s["place"] for s in layout["structures"]} == {"bridge": "bridge", "clinic-store": "clinic"}
        assert "secret" not in json.dumps(layout)

        for query, want in [("params=%7B%22agents%22%3A0%7D", "must be between 1 and 100000"),
                            ("params=%7B%22agnets%22%3A5%7D", "did you mean 'agents'?"),
                            ("params=%5B1%5D", "must be a JSON object"),
                            ("params=%7Bagents", "must be a JSON object")]:
            status, body = await api.call("GET", f"/v1/scenarios/warren?{query}")
            assert status == 400 and want in body["detail"], (query, body)


async def test_run_record_carries_the_layout_of_the_scenario_description(tmp_path):
    """A served journal's run record holds the same layout as GET /v1/scenarios/{name} with the run's params."""
    async with served(tmp_path) as api:
        run = await api.create("relay", seed=1, params={"couriers": 3}, pace=None)
        record = next(r for r in api.journal(run) if r["kind"] == "run")
        _, described = await api.call("GET", f"/v1/scenarios/relay?params={quote(json.dumps({'couriers': 3}))}")
        assert record["layout"] == described["layout"]
        assert record["params"] == described["params"]


def test_headless_traces_stay_byte_identical_with_the_layout():
    """The layout is part of the deterministic run record: two traces of the same run are the same bytes."""
    def trace() -> str:
        sim, policies = instantiate(load_scenario("warren", {"agents": 30}), 2, "solution")
        from warren_sim.engine import run_headless

        run_headless(sim, policies)
        return "\n".join(dumps_record(r) for r in sim.drain_records())

    first = trace()
    assert first == trace()
    assert len(json.loads(first.splitlines()[0])["layout"]["agents"]) == 30


async def test_pages_are_one_static_file_with_nothing_from_elsewhere(tmp_path):
    """GET / and /runs/{run} serve viewer.html under a CSP that allows only this server; no URL to another host."""
    page = viewer_page()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "http://" not in page.replace("http://www.w3.org", "") and "https://" not in page
    async with served(tmp_path) as api:
        for path in ("/",):
            r = await api.client.get(path)
            assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
            assert "connect-src 'self'" in r.headers["Content-Security-Policy"]
            assert await r.get_data(as_text=True) == page
        run = await api.create()
        r = await api.client.get(f"/runs/{run}")
        assert r.status_code == 200 and await r.get_data(as_text=True) == page
        r = await api.client.get("/runs/run-99")
        assert r.status_code == 404 and "known runs" in json.loads(await r.get_data())["detail"]


async def test_hover_text_is_the_observation_text_the_agent_read(tmp_path):
    """GET /runs/{run}/observations/{id} rebuilds the text by replay: equal to the envelope the remote agent got."""
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=["engineer-1"])
        lease = await api.claim(run)
        status, envelope = await api.poll(run, lease)
        assert status == 200
        oid = envelope["observation_id"]
        r = await api.client.get(f"/runs/{run}/observations/{quote(oid, safe='')}")
        assert r.status_code == 200
        body = json.loads(await r.get_data())
        assert body == {"run_id": run, "observation_id": oid, "text": envelope["text"]}
        r = await api.client.get(f"/runs/{run}/observations/{quote('engineer-1#99', safe='')}")
        assert r.status_code == 404 and "no observation" in json.loads(await r.get_data())["detail"]
        # NPCs' texts too (courier-1 is driven by the run's solution policy)
        r = await api.client.get(f"/runs/{run}/observations/{quote('courier-1#0', safe='')}")
        assert r.status_code == 200 and "courier-1" in json.loads(await r.get_data())["text"]


def test_embedded_page_round_trips_records_and_cannot_be_broken_out_of(tmp_path):
    """embed(): the records come back from the page's JSON exactly, even with '</script>' in a message."""
    sim, policies = instantiate(load_scenario("bridge_repair"), 3, "solution")
    from warren_sim.engine import run_headless

    run_headless(sim, policies)
    records = [{"cursor": i, **r} for i, r in enumerate(sim.drain_records())]
    records.append({"cursor": len(records), "kind": "message", "t": 1, "from": "x", "to": None,
                    "text": "</script><script>alert(1)</script>"})
    texts = page_texts(records[:-1])
    assert texts == observation_texts(records[:-1])
    assert set(texts) == {r["observation_id"] for r in records if r["kind"] == "observation"}
    html = embed(records, texts)
    assert html.count("</script>") == viewer_page().count("</script>")
    payload = re.search(r'<script id="warren-embedded" type="application/json">(.*?)</script>', html, re.S)
    assert payload is not None
    data = json.loads(payload.group(1))
    assert data["records"] == records and data["texts"] == texts
