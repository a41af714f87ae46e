"""``python -m bench [engine|protocol|scale|warp|ws|rl|sweeps|fork ...] [--quick] [--out bench/out] [--profile]``.

With no name, every sub-benchmark runs, in the order above. Each prints its tables and writes
``<out>/<name>.json`` (the machine, the options, the results, the targets met or missed). The exit code is 0
when every chosen benchmark ran or was skipped for a missing optional extra (each skip says which extra to
install), whatever its targets say (targets are reported, not enforced), and 1 if one of them failed to run
or none could run.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from pathlib import Path
from typing import Any

from bench import common
from bench.common import REPO, MissingExtra, Options, clean_floats, machine, write_json
from warren_sim.runtime.clock import wall_seconds

NAMES = ("engine", "protocol", "scale", "warp", "ws", "rl", "sweeps", "fork")


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
                    "A benchmark whose optional extra is not installed is skipped, saying which extra to install. "
                    "Exit 0 when every chosen benchmark ran or was skipped, whatever its targets say (targets are "
                    "reported, not enforced); 1 if one of them failed to run or none could. Results and how to read them: bench/RESULTS.md.")
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
    p.add_argument("--no-metrics", action="store_true",
                   help="serve warren with --no-metrics (the cost of metrics: compare with a run without it)")
    args = p.parse_args(argv)
    if args.no_metrics:
        common.SERVE_EXTRA.append("--no-metrics")
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
    skipped: list[str] = []
    missing_extras: list[str | None] = []
    for name in names:
        load0, t0 = loadavg(), wall_seconds()
        try:
            try:
                module = importlib.import_module(f"bench.{name}")
                result: dict[str, Any] = module.run(opts)
            except ModuleNotFoundError as exc:
                if not exc.name or exc.name.split(".")[0] in ("bench", "warren_sim"):
                    raise  # ours: a real failure
                raise MissingExtra(exc.name) from exc
        except MissingExtra as exc:  # an install without that extra: say so, go on with the others
            print(f"skipped {name}: {exc}\n", flush=True)
            skipped.append(f"{name} ({exc.extra or exc.module})")
            missing_extras.append(exc.extra)
            continue
        except Exception:  # report, go on with the others, exit 1
            traceback.print_exc()
            failed.append(name)
            continue
        payload = {"name": name, "quick": opts.quick, "argv": sys.argv, "machine": info,
                   "loadavg_before": load0, "loadavg_after": loadavg(), "elapsed_s": wall_seconds() - t0, **result}
        path = write_json(opts.out, name, clean_floats(payload))
        print(f"-> {path} ({payload['elapsed_s']:.1f} s)\n", flush=True)
    if skipped:
        extras = ",".join(dict.fromkeys(e for e in missing_extras if e))
        print(f"skipped for a missing extra: {', '.join(skipped)}"
              + (f" (pip install -e '.[{extras}]' brings them)" if extras else ""), flush=True)
    if failed:
        print(f"failed to run: {', '.join(failed)}", file=sys.stderr)
        return 1
    if len(skipped) == len(names):
        print("nothing ran: every chosen benchmark needs an extra that is not installed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
