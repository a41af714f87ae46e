"""The viewer in a real headless Chromium: served by a real `warren serve`, and as a file from `warren replay --html`.

The page exposes what it draws on ``#state`` as data- attributes (cursor, status, agents' cells, objectives and a
canonical snapshot of the whole state); the tests read them, and the visible DOM, over the DevTools protocol.
Set WARREN_SCREENSHOT=docs/viewer.png to refresh the README's screenshot from the served test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio
from chromium import Page, chromium, chromium_path

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(chromium_path() is None, reason="needs Debian's chromium (.ci/run installs it)")]

WARREN = [sys.executable, "-m", "warren_sim.cli"]
AGENTS = ["courier-1", "engineer-1", "medic-1"]


async def collect_live(page: Page, limit: float = 60.0) -> dict[int, str]:
    """Poll the page while it follows the run: {cursor: snapshot} of every state it showed, until the run ends."""
    seen: dict[int, str] = {}
    with trio.fail_after(limit):
        while True:
            state = await page.state()
            if state.get("snapshot") and int(state["cursor"]) >= 0:  # -1: drawn before the first record came
                seen[int(state["cursor"])] = state["snapshot"]
            if state.get("ended") == "true" and state.get("following") == "true":
                return seen
            await trio.sleep(0.04)


async def scrub_to(page: Page, cursor: int) -> dict[str, str]:
    """Move the scrubber to ``cursor`` as a user does (an input event on the slider); the state drawn there."""
    await page.evaluate(f"(() => {{ const s = document.getElementById('scrub'); s.value = '{cursor}'; "
                        "s.dispatchEvent(new Event('input')); })()")
    await page.wait_for(f"document.getElementById('state').dataset.cursor === '{cursor}'")
    return await page.state()


async def hover(page: Page, agent: str) -> str:
    """Move the mouse over ``agent``'s cell on the canvas (a real input event); the tooltip's text once complete."""
    state = await page.state()
    geometry = json.loads(state["geometry"])
    space, _, xy = json.loads(state["agents"])[agent].partition(":")
    x, y = (int(v) for v in xy.split(","))
    box = await page.evaluate("(() => { const r = document.getElementById('map').getBoundingClientRect(); "
                              "return [r.left, r.top]; })()")
    cell, origin = geometry["cell"], geometry["origin"][space]
    px, py = box[0] + origin["x"] + (x + 0.5) * cell, box[1] + origin["y"] + (y + 0.5) * cell
    await page.call("Input.dispatchMouseEvent", type="mouseMoved", x=px, y=py)
    return await page.wait_for("(() => { const t = document.getElementById('tip'); "
                               "return t.style.display === 'block' && t.innerText.includes('last observation') "
                               "&& !t.innerText.endsWith(':') ? t.innerText : ''; })()")


async def check_final(page: Page) -> dict[str, str]:
    """The DOM at the end of bridge_repair seed 3: every agent, both objectives met, the run completed."""
    state = await page.state()
    assert state["status"] == "completed"
    assert await page.evaluate("document.getElementById('status').innerText") == "completed"
    assert sorted(json.loads(state["agents"])) == AGENTS
    options = await page.evaluate("[...document.querySelectorAll('#fagent option')].map(o => o.value)")
    assert sorted(o for o in options if o) == AGENTS
    objectives = await page.evaluate("document.getElementById('objectives').innerText")
    assert "repair" in objectives and "2/2" in objectives and "resupply" in objectives and "3/3" in objectives
    assert state["objectives"] == "repair 2/2 completed; resupply 3/3 completed"
    log = await page.evaluate("document.getElementById('log').innerText")
    assert all(agent in log for agent in AGENTS)
    final = json.loads(state["snapshot"])
    assert final["agents"]["engineer-1"][0] == "village:11,4"  # it repaired the bridge and stayed there
    assert final["ground"] == {}  # planks used, medkits delivered, the toolbox carried
    assert final["agents"]["engineer-1"][1] == ["toolbox-1"]
    return state


async def test_viewer_follows_a_served_run_and_scrubs_back_to_what_it_showed(served, tmp_path):
    """A live run of bridge_repair seed 3 in Chromium: every agent, 2/2 and 3/3, completed; scrubbing rebuilds states."""
    async with httpx.AsyncClient(base_url=served) as http:
        created = await http.post("/v1/runs", params={"scenario": "bridge_repair", "seed": 3}, json={"pace": 8})
        assert created.status_code == 201
        run = created.json()["run_id"]
        async with chromium(tmp_path / "profile") as browser:
            async with browser.page(f"{served}/runs/{run}") as page:
                live = await collect_live(page)
                state = await check_final(page)
                last = int(state["cursor"])
                journal = (await http.get(f"/v1/runs/{run}/journal")).text.splitlines()
                assert last == len(journal) - 1  # the page holds the whole journal, resumed or not
                assert len([c for c in live if c < last]) >= 3, f"the page showed too few live states: {sorted(live)}"
                # Scrubbing: the state rebuilt from the journal at a cursor is the state the live spectator showed.
                for cursor in sorted(live)[:-1]:
                    assert (await scrub_to(page, cursor))["snapshot"] == live[cursor], f"cursor {cursor}"
                assert (await page.state())["following"] == "false"
                assert (await scrub_to(page, last))["snapshot"] == live[last]
                # Hover engineer-1: its last observation's text, rebuilt by the server, shows in the tooltip.
                tip = await hover(page, "engineer-1")
                assert "engineer-1 (engineer) at village:11,4" in tip and "carrying toolbox-1" in tip
                last_obs = [json.loads(line) for line in journal if '"kind":"observation"' in line
                            and '"agent":"engineer-1"' in line][-1]["observation_id"]
                assert f"last observation {last_obs}" in tip, tip
                served_text = (await http.get(f"/runs/{run}/observations/{last_obs.replace('#', '%23')}")).json()["text"]
                assert served_text and served_text in tip
                await page.call("Input.dispatchMouseEvent", type="mouseMoved", x=2, y=2)  # off the map again
                shot = Path(os.environ.get("WARREN_SCREENSHOT") or tmp_path / "viewer.png")
                await page.screenshot(shot)
                assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
                assert page.errors == []
            async with browser.page(f"{served}/") as page:  # the index: this server's runs, with links and status
                row = await page.wait_for(f"document.querySelector('tr[data-run=\"{run}\"]')?.innerText")
                assert "bridge_repair" in row and "completed" in row and "resupply 3/3" in row
                href = await page.evaluate(f"document.querySelector('tr[data-run=\"{run}\"] a').getAttribute('href')")
                assert href == f"/runs/{run}"
                assert page.errors == []


async def test_replay_html_is_the_viewer_with_the_journal_in_one_file(tmp_path):
    """`warren replay --html`: the file opens from disk with no server, shows the end state, plays and steps."""
    trace, out = tmp_path / "t.jsonl", tmp_path / "bridge.html"
    subprocess.run([*WARREN, "run", "bridge_repair", "--seed", "3", "--trace", str(trace), "--quiet"],
                   check=True, capture_output=True)
    proc = subprocess.run([*WARREN, "replay", str(trace), "--html", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "identical" in proc.stdout and str(out) in proc.stdout
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    async with chromium(tmp_path / "profile") as browser:
        async with browser.page(out.as_uri()) as page:
            await page.wait_for(f"document.getElementById('state').dataset.cursor === '{len(records) - 1}'")
            await check_final(page)
            # Step from the start: each step applies one record, as a spectator receives them.
            mid = await scrub_to(page, 40)
            await page.evaluate("document.getElementById('step').click()")
            await page.wait_for("document.getElementById('state').dataset.cursor === '41'")
            assert (await page.state())["snapshot"] != mid["snapshot"] or records[41]["kind"] in ("batch", "observation")
            # Play from the start runs to the end by itself.
            await scrub_to(page, 0)
            await page.evaluate("document.getElementById('play').click()")
            await page.wait_for(f"document.getElementById('state').dataset.cursor === '{len(records) - 1}'", 30)
            await check_final(page)
            # The hovered agent's last observation text is embedded (no server to ask).
            last_obs = [r for r in records if r["kind"] == "observation" and r["agent"] == "engineer-1"][-1]
            text = await page.evaluate("(() => { const j = JSON.parse(document.getElementById('warren-embedded')"
                                       f".textContent); return j.texts['{last_obs['observation_id']}']; }})()")
            assert text and "engineer-1" in text
            tip = await hover(page, "engineer-1")
            assert f"last observation {last_obs['observation_id']}" in tip and text in tip
            assert page.errors == []
