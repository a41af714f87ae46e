"""The viewer's "fork from here" in a real headless Chromium, on a real `warren serve`: the scrubber's cursor and the
checked agents become POST /v1/runs/{run}/fork, and the page opens the new run, which says what it forked from."""

from __future__ import annotations

import json

import httpx
import pytest
import trio
from chromium import chromium, chromium_path
from test_viewer_e2e import scrub_to

pytestmark = [pytest.mark.skipif(chromium_path() is None, reason="needs Debian's chromium (.ci/run installs it)")]


async def ended(http: httpx.AsyncClient, run: str) -> dict:
    with trio.fail_after(60):
        while True:
            view = (await http.get(f"/v1/runs/{run}")).json()
            if view["result"] is not None:
                return view
            await trio.sleep(0.05)


async def test_fork_from_here_posts_the_fork_and_opens_the_new_run(served, tmp_path):
    async with httpx.AsyncClient(base_url=served) as http:
        # engineer-1 remote and never claimed: started anyway, it noops (the run fails at its time limit)
        created = await http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3},
                                  json={"controlled_agents": ["engineer-1"]})
        run = created.json()["run_id"]
        assert (await http.post(f"/v1/runs/{run}/start")).status_code == 200
        await ended(http, run)
        before = {r["run_id"] for r in (await http.get("/v1/runs")).json()["runs"]}
        async with chromium(tmp_path / "profile") as browser:
            async with browser.page(f"{served}/runs/{run}") as page:
                await page.wait_for("document.getElementById('state').dataset.ended === 'true'")
                assert await page.evaluate("!document.getElementById('fork').hidden")
                await scrub_to(page, 40)
                await page.evaluate("document.getElementById('fork').click()")
                await page.wait_for("!document.getElementById('forkpanel').hidden")
                assert await page.evaluate("document.getElementById('forkcursor').innerText") == "40"
                boxes = await page.wait_for("(() => { const b = [...document.querySelectorAll('#forkagents input')]; "
                                            "return b.length ? b.map(i => [i.dataset.agent, i.checked]) : null; })()")
                # the parent's remote agent is checked at first; the others run their policies
                assert dict(boxes) == {"courier-1": False, "engineer-1": True, "medic-1": False}
                await page.evaluate("document.querySelector('#forkagents input[data-agent=\"medic-1\"]').click()")
                await page.evaluate("document.getElementById('forkgo').click()")
                url = await page.wait_for(f"location.pathname !== '/runs/{run}' && location.pathname")
                fork = url.rsplit("/", 1)[-1]
                assert fork not in before
                shown = await page.wait_for("document.getElementById('state').dataset.forkedFrom")
                header = await page.evaluate("document.getElementById('forkedfrom').innerText")
                assert f"forked from {run} at cursor 40" in header
                assert page.errors == []
            view = (await http.get(f"/v1/runs/{fork}")).json()
            assert view["forked_from"] == json.loads(shown) and view["forked_from"]["cursor"] == 40
            assert view["forked_from"]["run_id"] == run and view["status"] == "created"
            assert sorted(a["agent_id"] for a in view["agents"] if a["controlled"]) == ["engineer-1", "medic-1"]
            await http.delete(f"/v1/runs/{fork}")
            # a refused fork (here an agent the world does not have, slipped into the panel) shows the server's
            # reason and opens nothing
            async with browser.page(f"{served}/runs/{run}") as page:
                await page.wait_for("document.getElementById('state').dataset.ended === 'true'")
                await page.evaluate("document.getElementById('fork').click()")
                await page.wait_for("document.querySelectorAll('#forkagents input').length === 3")
                await page.evaluate("(() => { const i = document.querySelector('#forkagents input'); "
                                    "i.dataset.agent = 'nobody'; i.checked = true; "
                                    "document.getElementById('forkgo').click(); })()")
                error = await page.wait_for("document.getElementById('error').innerText")
                assert "fork refused (HTTP 400)" in error and "'nobody'" in error
                assert await page.evaluate("location.pathname") == f"/runs/{run}"
            after = {r["run_id"] for r in (await http.get("/v1/runs")).json()["runs"]}
            assert after == before | {fork}
