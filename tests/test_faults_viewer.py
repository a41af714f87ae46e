"""The viewer marks injected faults on its log and counts them by kind (real Chromium, a real faulted run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from chromium import chromium, chromium_path
from test_faults_wire import AGENTS, drive_http

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(chromium_path() is None, reason="needs Debian's chromium (.ci/run installs it)")]


@pytest.mark.warren(rate=100)
def test_the_viewer_marks_faults_on_its_log_and_counts_them_by_kind(warren_server, tmp_path: Path) -> None:
    import trio

    spec = "lost_reply=0.2,reset=0.1,restart=0.02"
    run = warren_server.create_run("bridge_repair", 2, AGENTS, faults={"spec": spec, "seed": 5},
                                   decision_deadline_s=3600)
    drive_http(warren_server.url, run.id, 2)
    run.wait_status("completed", 60)
    journal = run.journal()
    faults = [r for r in journal if r["kind"] == "fault"]
    counts: dict[str, int] = {}
    for f in faults:
        counts[f["fault"]] = counts.get(f["fault"], 0) + 1
    assert {"lost_reply", "reset", "restart"} <= set(counts), counts
    trace, out = tmp_path / "faulted.jsonl", tmp_path / "faulted.html"
    trace.write_text("".join(json.dumps(r) + "\n" for r in journal), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "warren_sim.cli", "replay", str(trace), "--html", str(out)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

    async def look() -> None:
        async with chromium(tmp_path / "profile") as browser, browser.page(out.as_uri()) as page:
            await page.wait_for(f"document.getElementById('state').dataset.cursor === '{len(journal) - 1}'")
            shown = json.loads(await page.evaluate("document.getElementById('faultcount').dataset.counts"))
            assert shown == counts
            assert "faults: " in await page.evaluate("document.getElementById('faultcount').textContent")
            # the log, filtered to fault records: every row marked, each naming the request it met
            await page.evaluate("(() => { const f = document.getElementById('fkind'); "
                                "if (![...f.options].some((o) => o.value === 'fault')) f.add(new Option('fault', "
                                "'fault')); f.value = 'fault'; f.dispatchEvent(new Event('change')); })()")
            await page.wait_for("(() => { const rows = [...document.querySelectorAll('#log div')]; "
                                "return rows.length > 0 && rows.every((d) => d.dataset.kind === 'fault'); })()")
            rows = json.loads(await page.evaluate(
                "JSON.stringify([...document.querySelectorAll('#log div')].map((d) => [d.className, "
                "d.dataset.fault, d.textContent]))"))
            assert rows and all(cls == "fault" for cls, _, _ in rows), rows[:3]
            newest = faults[-1]
            assert rows[0][1] == newest["fault"]
            assert f"{newest['fault']} met {newest['request']} #{newest['index']} of {newest['agent_id']}" in rows[0][2]
            assert page.errors == []

    trio.run(look)
