"""``warren serve`` with one extra: runs created in-process before the first request.

Why: ``POST /v1/runs`` takes at most 64 KiB of body (``MAX_BODY_BYTES``), and ``controlled_agents`` names
every agent, so about 4,000 controlled agents is the most one HTTP request can create (10,000 forager ids
take about 170 KB). The scale benchmark needs 10,000 controlled agents, so this launcher creates the run
through the same ``RunManager.create`` the route calls, then serves it exactly as ``warren serve`` does:
the same ``start_server`` (Quart-Trio app on Hypercorn's trio worker), the same config, SIGTERM to stop.

``python -m bench.served --data-dir D --run '{"scenario": "warren", "agents": 10000, "decision_deadline_s": 600}'``
prints
``WARREN listening on URL`` and then ``RUN <run_id>`` for each ``--run``.
"""

from __future__ import annotations

import argparse
import functools
import json
import signal
import sys
from pathlib import Path

import trio

from warren_sim.http.server import SERVER_GC_THRESHOLDS, start_server
from warren_sim.protocol.models import RunCreate
from warren_sim.runtime.manager import ServerConfig
from warren_sim.scenarios import load_scenario


async def main_async(args: argparse.Namespace) -> None:
    config = ServerConfig(data_dir=args.data_dir)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(functools.partial(start_server, config, "127.0.0.1", 0,
                                                            gc_thresholds=SERVER_GC_THRESHOLDS))
            print(f"WARREN listening on {server.url}", flush=True)
            manager = server.app.warren.manager
            for spec in args.run:
                want = json.loads(spec)
                params = {"agents": want["agents"]}
                ids = [a.id for a in load_scenario(want["scenario"], params).spec.agents]
                run = manager.create(want["scenario"], want.get("seed", 0),
                                     RunCreate(controlled_agents=ids, npc_policy="none", params=params,
                                               decision_deadline_s=want.get("decision_deadline_s", 60.0)))
                print(f"RUN {run.run_id}", flush=True)

            async def watch_signals() -> None:
                async for _ in signals:
                    server.shutdown()
                    return

            nursery.start_soon(watch_signals)
            await server.stopped.wait()
            nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.served")
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--run", action="append", default=[], help='JSON: {"scenario": ..., "agents": N}')
    trio.run(main_async, p.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
