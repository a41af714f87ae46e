"""Helpers for the durability tests (issue 13): a `warren serve` process on a fixed port that can be SIGKILLed
and restarted on the same data directory, and `warren agent` processes that log their receipts."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from warren_sim.replay import RUNTIME_KINDS

PROTO = {"X-Warren-Protocol": "warren-agent/0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Restartable:
    """`warren serve --port PORT --data-dir D` that the test kills (SIGKILL) and starts again, same port, same dir."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.args = args
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[str] | None = None
        self.err = tempfile.TemporaryFile("w+", encoding="utf-8")  # noqa: SIM115
        self.starts = 0

    def start(self) -> None:
        for _ in range(50):  # the port may linger a moment after a kill
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "warren_sim.cli", "serve", "--port", str(self.port), "--data-dir",
                 str(self.data_dir), *self.args], stdout=subprocess.PIPE, stderr=self.err, text=True)
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            if line.startswith("WARREN listening on"):
                self.starts += 1
                return
            self.proc.wait(timeout=10)
            self.proc.stdout.close()
            time.sleep(0.1)
        raise AssertionError(f"warren serve did not start on port {self.port}: {self.stderr()}")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()

    def stderr(self) -> str:
        self.err.flush()
        self.err.seek(0)
        return self.err.read()

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=PROTO, timeout=30)

    def __enter__(self) -> Restartable:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.err.close()


def start_agent(url: str, run_id: str, agent_id: str, receipts: Path, log: Path) -> subprocess.Popen[bytes]:
    """`warren agent URL --run RUN --agent AGENT --policy solution --receipts FILE` in its own process."""
    with open(log, "wb") as out:  # the child has its own descriptor
        return subprocess.Popen([sys.executable, "-m", "warren_sim.cli", "agent", url, "--run", run_id, "--agent",
                                 agent_id, "--policy", "solution", "--receipts", str(receipts), "--wait", "2",
                                 "--reconnect", "60"], stdout=out, stderr=subprocess.STDOUT, env=dict(os.environ))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def engine_records(records: list[dict[str, Any]], *ignore: str) -> list[dict[str, Any]]:
    """The engine's records without cursor, wall-clock facts, and the keys in ``ignore``."""
    skip = {"cursor", "wall", *ignore}
    return [{k: v for k, v in r.items() if k not in skip} for r in records if r["kind"] not in RUNTIME_KINDS]


def headless_trace(tmp_path: Path, scenario: str, seed: int, params: dict[str, Any]) -> list[dict[str, Any]]:
    """`warren run SCENARIO --seed N --trace FILE` (every agent on its solution policy)."""
    out = tmp_path / f"headless-{scenario}-{seed}.jsonl"
    cmd = [sys.executable, "-m", "warren_sim.cli", "run", scenario, "--seed", str(seed), "--quiet", "--trace",
           str(out)]
    for k, v in params.items():
        cmd += ["--param", f"{k}={v}"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return read_jsonl(out)
