"""What every sub-benchmark shares: statistics, tables, targets, processes, /proc readings, the machine.

Timing is ``wall_seconds`` (a monotonic clock). The only unix-time value a benchmark needs is to compare
with the server's ``deadline_unix``: :func:`unix_now` reads unix time once (through the product's clock
module) and then moves it forward with the monotonic clock, as the server's own ``WallMap`` does.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs

from warren_sim.runtime.clock import unix_now as _product_unix_now
from warren_sim.runtime.clock import wall_seconds

REPO = Path(__file__).resolve().parents[1]
PROTO = {"X-Warren-Protocol": "warren-agent/0"}

_UNIX0 = _product_unix_now()
_WALL0 = wall_seconds()


def unix_now() -> float:
    """Unix time anchored once, advanced by the monotonic clock (comparable with ``deadline_unix``)."""
    return _UNIX0 + (wall_seconds() - _WALL0)


# -- optional extras -----------------------------------------------------------------------------------
#: Import names that differ from their distribution's name.
_DIST_OF = {"openenv": "openenv-core", "server": "openenv-core"}


def extra_for(module: str) -> str | None:
    """The optional extra of pyproject.toml that installs the top-level import ``module`` (``simpy`` ->
    ``bench``), preferring a specific extra to the ``test`` one that pulls every extra in; None if none does."""
    import re
    import tomllib

    top = module.split(".")[0]
    dist = _DIST_OF.get(top, top)
    want = re.sub(r"[-_.]+", "-", dist).lower()
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"].get(
        "optional-dependencies", {})
    for extra in sorted(extras, key=lambda e: e == "test"):
        for requirement in extras[extra]:
            name = re.match(r"[A-Za-z0-9._-]+", requirement)
            if name and re.sub(r"[-_.]+", "-", name.group(0)).lower() == want:
                return str(extra)
    return None


class MissingExtra(Exception):
    """A benchmark needs a module that is not installed; the message says which extra brings it."""

    def __init__(self, module: str) -> None:
        extra = extra_for(module)
        how = (f"the '{extra}' extra: pip install -e '.[{extra}]'" if extra is not None
               else "an optional package that is not installed")
        super().__init__(f"it needs {module!r}, from {how}")
        self.module, self.extra = module, extra


# -- options -----------------------------------------------------------------------------------------
@attrs.define
class Options:
    quick: bool = False
    out: Path = REPO / "bench" / "out"
    profile: bool = False  # also write pyinstrument profiles to <out>/<name>_profile*.txt
    repeats: int | None = None  # override each benchmark's default
    duration: float | None = None  # seconds of load per measurement (protocol, ws)
    scrape: float | None = None  # protocol: GET /metrics of the server every this many seconds meanwhile

    def reps(self, full: int, quick: int = 1) -> int:
        return self.repeats if self.repeats is not None else (quick if self.quick else full)

    def secs(self, full: float, quick: float) -> float:
        return self.duration if self.duration is not None else (quick if self.quick else full)


# -- statistics ----------------------------------------------------------------------------------------
def summary(values: Iterable[float]) -> dict[str, float]:
    xs = [float(v) for v in values]
    if not xs:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of unsorted values; nan when empty."""
    if not values:
        return float("nan")
    xs = sorted(values)
    k = max(0, min(len(xs) - 1, int(round(q / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


def fmt_num(x: float, digits: int = 0) -> str:
    if x != x:  # nan
        return "-"
    return f"{x:,.{digits}f}"


def fmt_stat(s: dict[str, float], digits: int = 0, unit: str = "") -> str:
    """``1,234 (1,200-1,300)``; a single value without its range."""
    if s["n"] == 0:
        return "-"
    med = fmt_num(s["median"], digits) + unit
    if s["n"] == 1 or s["min"] == s["max"]:
        return med
    return f"{med} ({fmt_num(s['min'], digits)}-{fmt_num(s['max'], digits)})"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], note: str = "") -> str:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]
    lines = [f"== {title}", "  ".join(str(h).ljust(w) for h, w in zip(headers, widths, strict=True)),
             "  ".join("-" * w for w in widths)]
    lines += ["  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(r, widths,
                                                                                              strict=True)))
              for r in rows]
    if note:
        lines.append(note)
    text = "\n".join(lines)
    print(text + "\n", flush=True)
    return text


def target(name: str, value: float, op: str, threshold: float, unit: str = "") -> dict[str, Any]:
    met = {"<": value < threshold, "<=": value <= threshold, ">": value > threshold}.get(op, value >= threshold)
    return {"name": name, "value": value, "op": op, "threshold": threshold, "unit": unit, "met": bool(met)}


def _fmt_figure(x: float) -> str:
    if x != x:
        return "-"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.2f}" if abs(x) >= 1 else f"{x:.3f}"


def targets_table(targets: list[dict[str, Any]]) -> str:
    rows = [[t["name"], f"{_fmt_figure(t['value'])}{t['unit']}", f"{t['op']} {_fmt_figure(t['threshold'])}{t['unit']}",
             "met" if t["met"] else "MISSED"] for t in targets]
    return print_table("targets", ["target", "measured", "wanted", "verdict"], rows)


# -- the machine -------------------------------------------------------------------------------------
def _meminfo_kib(field: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str | None] = {}
    for dist in ("trio", "hypercorn", "quart", "quart-trio", "httpx", "h11", "wsproto", "trio-websocket", "simpy",
                 "pyinstrument", "attrs", "cattrs"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    mem = _meminfo_kib("MemTotal")
    return {"cores": os.cpu_count(), "cpu": model, "mem_gib": round(mem / 2**20, 1) if mem else None,
            "python": platform.python_version(), "platform": platform.platform(), "versions": versions}


# -- /proc -------------------------------------------------------------------------------------------
def proc_status_kib(pid: int, field: str) -> int:
    """``VmRSS``/``VmHWM``... of a live process, in KiB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return 0
    return 0


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- processes ---------------------------------------------------------------------------------------
class ServerProcess:
    """A server subprocess that prints ``<something> listening on URL`` once it accepts connections.

    Stopped with SIGTERM (the servers answer it by draining and exiting 0); killed only if that takes
    more than ``stop_timeout`` seconds. Its stderr goes to a file (a pipe nobody reads could fill up).
    """

    def __init__(self, argv: list[str], *, name: str, stop_timeout: float = 20.0) -> None:
        self.name = name
        self.stop_timeout = stop_timeout
        self._dir = tempfile.TemporaryDirectory(prefix=f"warren-bench-{name}-")
        self._dir_cleaned = False
        self.dir = Path(self._dir.name)
        self._err = open(self.dir / "stderr.txt", "w+", encoding="utf-8")  # noqa: SIM115
        argv = [a.replace("{dir}", str(self.dir)) for a in argv]
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._err, text=True, cwd=REPO,
                                     env=bench_env())
        assert self.proc.stdout is not None
        self.lines: list[str] = []
        self.url = ""
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.stop()
                raise RuntimeError(f"{name} did not start: {self.stderr_tail()}")
            self.lines.append(line.strip())
            if " listening on " in line:
                self.url = line.split()[-1]
                break

    @property
    def pid(self) -> int:
        return self.proc.pid

    def readline(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def stderr_tail(self, n: int = 2000) -> str:
        self._err.flush()
        self._err.seek(0)
        return self._err.read()[-n:]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.returncode != 0 and not self._dir_cleaned:
            print(f"warning: {self.name} exited {self.proc.returncode}: {self.stderr_tail(800)}", file=sys.stderr)
        if not self._dir_cleaned:
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self._err.close()
            self._dir.cleanup()
            self._dir_cleaned = True
        return self.proc.returncode

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


#: options every ``warren serve`` of this bench process gets (``python -m bench --no-metrics``: the servers
#: run with ``--no-metrics``, to compare with a run without it)
SERVE_EXTRA: list[str] = []


def warren_serve(*extra: str, profile_to: Path | None = None) -> ServerProcess:
    """``warren serve --port 0`` (the real CLI) with a throwaway data directory."""
    prefix = [sys.executable]
    if profile_to is not None:
        prefix += ["-m", "pyinstrument", "-r", "text", "--show-all", "-o", str(profile_to)]
    return ServerProcess([*prefix, "-m", "warren_sim.cli", "serve", "--port", "0", "--data-dir", "{dir}/data",
                          *SERVE_EXTRA, *extra], name="warren-serve")


def trim_profile(path: Path, min_share: float = 0.005) -> None:
    """Keep a pyinstrument text profile readable: drop the tree lines under ``min_share`` of the total."""
    import re

    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    node = re.compile(r"^[\s│├└─|`-]*([\d.]+) ")
    total = None
    kept = []
    for line in lines:
        m = node.match(line)
        if m is None:
            kept.append(line)
            continue
        t = float(m.group(1))
        total = total if total is not None else t
        if total and t >= min_share * total:
            kept.append(line)
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")


def loadgen(mode: str, *args: str, timeout: float) -> dict[str, Any]:
    """Run ``python -m bench.loadgen MODE ARGS`` in its own process; its one JSON line of results."""
    argv = [sys.executable, "-m", "bench.loadgen", mode, *args]
    try:  # its stderr (progress lines, a traceback) goes straight to ours
        done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=timeout, cwd=REPO, env=bench_env())
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"loadgen {mode} did not finish within {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise RuntimeError(f"loadgen {mode} exited {done.returncode} (its stderr is above)")
    return json.loads(done.stdout.strip().splitlines()[-1])


def write_json(out: Path, name: str, payload: dict[str, Any]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(payload, indent=2, allow_nan=False, default=_jsonable) + "\n", encoding="utf-8")
    return path


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def clean_floats(obj: Any) -> Any:
    """NaN/inf -> None, recursively, so the JSON files stay strict."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: clean_floats(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean_floats(v) for v in obj]
    return obj
