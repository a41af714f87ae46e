"""``python -m bench.report [--out bench/out]``: the tables of bench/RESULTS.md, as Markdown, from the JSON files.

So the figures in RESULTS.md are copied from a run's files, never typed: run the benchmarks, run this, paste.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.common import REPO, fmt_num, fmt_stat


def _table(headers: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _stat(s: dict[str, Any] | None, digits: int = 0) -> str:
    return "-" if not s else fmt_stat(s, digits)


def _targets(data: dict[str, Any]) -> str:
    rows = []
    for t in data.get("targets", []):
        value = t["value"]
        shown = fmt_num(value, 3 if abs(value) < 1 else (2 if abs(value) < 100 else 0))
        rows.append([t["name"], f"{shown}{t['unit']}", f"{t['op']} {fmt_num(t['threshold'], 2 if t['threshold'] < 100 else 0)}"
                     f"{t['unit']}", "**met**" if t["met"] else "**missed**"])
    return _table(["target", "measured", "wanted", "verdict"], rows)


def _load(data: dict[str, Any]) -> str:
    before, after = data.get("loadavg_before") or ["?"], data.get("loadavg_after") or ["?"]
    return f"(load average {before[0]} before, {after[0]} after; {data.get('elapsed_s', 0):.0f} s)"


def engine(d: dict[str, Any]) -> str:
    rows = [[f"{r['agents']:,}", f"{r['decisions']:,}", _stat(r["decisions_per_s"]), _stat(r["simpy_events_per_s"]),
             _stat(r["ratio"], 3), _stat(r.get("cpu_ratio"), 3)] for r in d["results"]]
    return _table(["agents", "decisions", "engine decisions/s", "SimPy events/s", "ratio (wall)", "ratio (CPU)"], rows)


def protocol(d: dict[str, Any]) -> str:
    rows = [[str(r["agents"]), ("1 (?wait=)" if r.get("next_wait") else "2")
             + (f", {r['seeds']} trips" if r.get("seeds") else "") + (", echo" if r.get("scenario") == "echo" else ""),
             _stat(r["decisions_per_s"]), _stat(r.get("requests_per_decision"), 2),
             _stat(r["latency_p50_ms"], 1), _stat(r["latency_p99_ms"], 1),
             _stat(r["server_cpu_us_per_decision"]), _stat(r["ceiling_requests_per_s"]),
             _stat(r["ceiling_server_cpu_us_per_request"]), _stat(r.get("request_ratio"), 2),
             _stat(r["efficiency"], 2)] for r in d["results"]]
    return _table(["K", "requests", "decisions/s", "req/decision", "p50 ms", "p99 ms", "server CPU us/decision",
                   "ceiling req/s", "ceiling server CPU us/req", "req/s / ceiling", "efficiency"], rows)


def ws(d: dict[str, Any]) -> str:
    rows = [[r["mode"], _stat(r["decisions_per_s"]), _stat(r["latency_p50_ms"], 1), _stat(r["latency_p99_ms"], 1),
             _stat(r["server_cpu_us_per_decision"]), _stat(r["speedup_vs_http"], 2)] for r in d["results"]]
    return _table(["transport", "decisions/s", "p50 ms", "p99 ms", "server CPU us/decision", "x HTTP"], rows)


def scale(d: dict[str, Any]) -> str:
    s, h = d["served"], d["headless"]
    rss, lat = s["server_rss"], s["wake_latency_ms"]
    mib = lambda k: f"{(rss.get(k) or 0) / 1024:,.0f} MiB"  # noqa: E731
    rows = [["agents claimed and long-polling", f"{s['agents']:,}"],
            [f"claiming them ({s.get('claim_how', '64 single claims at a time')})", f"{s['claim_s']:.2f} s"],
            ["server RSS: run created / polls held / after the batch / peak (VmHWM)",
             f"{mib('created_run_kib')} / {mib('holding_kib')} / {mib('after_kib')} / {mib('peak_kib')}"],
            ["wake latency p50 / p99 / max (publish -> client has the envelope)",
             f"{fmt_num(lat['p50'])} / {fmt_num(lat['p99'])} / {fmt_num(lat['max'])} ms (n = {lat['n']:,})"],
            ["then answering every envelope (noop), 64 in flight",
             f"{fmt_num(s.get('answer_phase_s') or float('nan'), 1)} s: "
             + ", ".join(f"{k} {v:,}" for k, v in (s.get("answer_verdicts") or {}).items())],
            [f"headless `warren run warren --param agents={h['agents']}`: decisions, decisions/s",
             f"{h['decisions']:,}, {fmt_num(h['decisions_per_s'] or float('nan'))}/s"],
            ["headless: wall of the process / max RSS (ru_maxrss)", f"{h['wall_s']:.1f} s / {h['maxrss_kib'] / 1024:,.0f} MiB"]]
    return _table(["measure", "value"], rows)


def warp(d: dict[str, Any]) -> str:
    rows = [["wall, whole pytest subprocess", _stat(d["wall_s"], 2)], ["pytest's own duration", _stat(d["pytest_s"], 2)],
            ["wall, every installed plugin autoloaded", _stat(d.get("plugin_autoload_wall_s"), 2)],
            ["floor: python + the imports", _stat(d["imports_s"], 2)]]
    return _table(["measure (s)", "median (min-max)"], rows)


def rl(d: dict[str, Any]) -> str:
    rows = [[str(r["controlled"]), _stat(r["agent_steps_per_s"]), _stat(r["env_steps_per_s"]),
             _stat(r["env_decisions_per_s"]), _stat(r["headless_bare_decisions_per_s"]),
             _stat(r["headless_reading_decisions_per_s"]), _stat(r["ratio_bare"], 3), _stat(r["ratio_same_work"], 3)]
            for r in d["results"]]
    return _table(["K controlled", "agent-steps/s", "env steps/s", "env decisions/s", "headless bare decisions/s",
                   "headless reading decisions/s", "ratio bare", "ratio same work"], rows)


def sweeps(d: dict[str, Any]) -> str:
    rows = [[r["workload"], str(r["seeds"]), _stat(r["seeds_per_s"]["jobs 1"], 1), _stat(r["seeds_per_s"]["jobs 2"], 1),
             _stat(r["seeds_per_s"]["ray"], 1), _stat(r["ratio_vs_jobs_1"]["jobs 2"], 2),
             _stat(r["ratio_vs_jobs_1"]["ray"], 2), f"{100 * r.get('machine_busy_share', float('nan')):.0f}%"]
            for r in d["results"]]
    return (_table(["workload", "seeds", "jobs 1 seeds/s", "jobs 2 seeds/s", "ray seeds/s", "jobs 2 / jobs 1",
                    "ray / jobs 1", "machine busy"], rows) + f"\n\n`ray.init` (local, {d['cores']} CPUs): {d['ray_init_s']:.1f} s, "
            "paid once per session, not in the figures.")


RENDER = {"engine": engine, "protocol": protocol, "scale": scale, "warp": warp, "ws": ws, "rl": rl,
          "sweeps": sweeps}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.report")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = p.parse_args(argv)
    for name, render in RENDER.items():
        path = args.out / f"{name}.json"
        if not path.exists():
            continue
        data = json.loads(path.read_text())
        print(f"### {name} {_load(data)}\n\n{render(data)}\n\n{_targets(data)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
