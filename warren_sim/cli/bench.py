"""``warren bench ARGS``: ``python -m bench ARGS`` from the repo root (bench/ is not installed)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

from ._common import UsageError


def register(sub: Any) -> None:
    p = sub.add_parser("bench", help="run the benchmarks of a source checkout (python -m bench ARGS; "
                       "warren bench --help lists them)",
                       add_help=False, prefix_chars="\0")  # no options of its own: every ARG goes to bench
    p.add_argument("bench_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> int:
    root = Path(__file__).resolve().parents[2]
    if not (root / "bench" / "__main__.py").is_file():
        raise UsageError(f"no benchmarks at {root / 'bench'}; warren bench runs from a source checkout")
    return subprocess.call([sys.executable, "-m", "bench", *args.bench_args], cwd=root)
