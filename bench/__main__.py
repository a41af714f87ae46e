"""``python -m bench [engine|protocol|scale|warp|ws|rl|sweeps ...] [--quick] [--out bench/out] [--profile]``.

With no name, every sub-benchmark runs, in the order above. Each prints its tables and writes
``<out>/<name>.json`` (the machine, the options, the results, the targets met or missed). The exit code is 0
when every chosen benchmark ran, whatever its targets say (targets are reported, not enforced), and 1 if
one of them failed to run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path
from typing import Any

from bench.common import REPO, Options, clean_floats, machine, write_json
from warren_sim.runtime.clock import wall_seconds

NAMES = ("engine", "protocol", "scale", "warp", "ws", "rl", "sweeps")


def loadavg() -> list[float]:
    try:
        return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="warren bench",
        description=f"Run WARREN's benchmarks (the same as python -m bench from the repository root): "
                    f"{', '.join(NAMES)}, all of them in that order when no NAME is given. Each prints its tables "
                    "and writes OUT/NAME.json (the machine, the options, the results, the targets met or missed). "
                    "Exit 0 when every chosen benchmark ran, whatever its targets say (targets are reported, not "
                    "enforced); 1 if one of them failed to run. Results and how to read them: bench/RESULTS.md.")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help=f"sub-benchmarks to run: {', '.join(NAMES)} (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes and short windows: all of it in under a minute")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out", help="where NAME.json goes (default: bench/out)")
    p.add_argument("--profile", action="store_true",
                   help="also write pyinstrument profiles (<out>/NAME_profile*.txt), in separate passes")
    p.add_argument("--repeats", type=int, help="override the repeats of every benchmark")
    p.add_argument("--duration", type=float, help="seconds of load per measurement (protocol, ws)")
    p.add_argument("--scrape", type=float, metavar="S",
                   help="protocol: scrape the server's GET /metrics every S seconds while it is measured (the cost "
                        "of metrics to the hot path: compare with a run without it; bench/RESULTS.md)")
    args = p.parse_args(argv)
    unknown = [n for n in args.names if n not in NAMES]
    if unknown:
        p.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(NAMES)}")
    names = args.names or list(NAMES)
    opts = Options(quick=args.quick, out=args.out, profile=args.profile, repeats=args.repeats,
                   duration=args.duration, scrape=args.scrape)
    info = machine()
    print(f"machine: {info['cores']} cores ({info['cpu']}), {info['mem_gib']} GiB, Python {info['python']}; "
          + ", ".join(f"{k} {v}" for k, v in info["versions"].items() if v) + "\n", flush=True)
    failed: list[str] = []
    for name in names:
        load0, t0 = loadavg(), wall_seconds()
        try:
            module = importlib.import_module(f"bench.{name}")
            result: dict[str, Any] = module.run(opts)
        except Exception:  # report, go on with the others, exit 1
            traceback.print_exc()
            failed.append(name)
            continue
        payload = {"name": name, "quick": opts.quick, "argv": sys.argv, "machine": info,
                   "loadavg_before": load0, "loadavg_after": loadavg(), "elapsed_s": wall_seconds() - t0, **result}
        path = write_json(opts.out, name, clean_floats(payload))
        print(f"-> {path} ({payload['elapsed_s']:.1f} s)\n", flush=True)
    if failed:
        print(f"failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
