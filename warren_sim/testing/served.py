"""``warren_server``: a real ``warren serve`` in a background thread, on its own warped trio clock.

Why a thread and not a subprocess: a thread starts in milliseconds, shares the test's temp directory and
needs no free port handshake over a pipe; and it runs exactly the start path of ``warren serve``
(:func:`warren_sim.http.server.start_server` inside ``trio.run(..., clock=make_clock(rate))``), so every
timeout of the server, ours and Hypercorn's, passes ``rate`` times faster while the user's agent, in the test's
thread or a subprocess, talks real HTTP to ``127.0.0.1`` on real time. Hypercorn's own timeouts are scaled by the
rate inside ``start_server`` (DESIGN section 8), so a warped server does not cut keep-alive connections early.

``kill()`` is a crash, not a shutdown: the data directory is left exactly as it was on disk at that instant
(what a SIGKILL leaves), which is what a restarted server must recover from. The thread cannot be killed, so it
is stopped by cancelling its trio run; whatever the cancellation writes afterwards (runs journaled as
``cancelled``) is undone by restoring a copy of the data directory taken, inside the server's trio thread, in the
same step that cancels it (no other trio task runs in between). ``restart()`` starts a new server on the same
port and data directory, so an agent's URL stays valid.
"""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from ..http.server import RunningServer, start_server
from ..protocol.models import TERMINAL_RUN_STATUSES
from ..runtime.clock import make_clock, wall_seconds
from ..runtime.manager import ServerConfig

__all__ = ["ServedRun", "WarrenServer", "WarrenTestError"]

#: Real seconds the test thread waits for the server thread to start or stop before calling it a hang.
THREAD_WAIT_S = 30.0
#: Real seconds between two polls of a run's status in :meth:`ServedRun.wait_status`.
POLL_S = 0.005


class WarrenTestError(AssertionError):
    """WARREN refused what a test asked of it, or a wait ran out; the message carries the server's detail."""


def checked(method: str, path: str, response: httpx.Response) -> httpx.Response:
    """``response`` if it succeeded; a 4xx/5xx becomes :class:`WarrenTestError` with the server's detail (both the
    served and the in-process fixtures' ``request``)."""
    if response.status_code >= 400:
        try:
            detail = response.json().get("detail", response.text)
        except ValueError:
            detail = response.text
        raise WarrenTestError(f"{method} {path} -> {response.status_code}: {detail}")
    return response


def server_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` checked against :class:`ServerConfig`'s fields (a teaching error for an unknown one)."""
    fields = {f.name for f in attrs.fields(ServerConfig)} - {"data_dir"}
    unknown = sorted(set(options) - fields)
    if unknown:
        raise WarrenTestError(f"unknown WARREN server option(s) {', '.join(unknown)} in @pytest.mark.warren(...); "
                              f"known: {', '.join(sorted(fields))}")
    return options


@attrs.define(eq=False)
class WarrenServer:
    """A served WARREN for one test: ``url``, runs, journals, and a crash-and-restart switch.

    Made by the ``warren_server`` fixture (``WarrenServer.open(...)`` outside pytest; close it with ``close()``).
    Every duration it takes (``sleep``, ``wait_status``'s timeout) is in the server's clock seconds: at
    ``rate=1000`` a 300 s lease TTL passes in 0.3 s of wall time.
    """

    data_dir: Path
    rate: float
    options: dict[str, Any]
    port: int = 0
    url: str = ""
    _owns_data_dir: bool = attrs.field(default=False, repr=False)
    # The running server, its thread and the handles to reach into it (None while killed or closed).
    _thread: threading.Thread | None = attrs.field(default=None, init=False, repr=False)
    _token: trio.lowlevel.TrioToken | None = attrs.field(default=None, init=False, repr=False)
    _running: RunningServer | None = attrs.field(default=None, init=False, repr=False)
    _cancel: trio.CancelScope | None = attrs.field(default=None, init=False, repr=False)
    _error: BaseException | None = attrs.field(default=None, init=False, repr=False)
    _http: httpx.Client | None = attrs.field(default=None, init=False, repr=False)

    @classmethod
    def open(cls, rate: float = 1.0, data_dir: Path | None = None, **options: Any) -> WarrenServer:
        """Start a server (its own temporary data directory unless ``data_dir`` is given)."""
        make_clock(rate)  # teaching errors for a bad rate or option, before anything is created
        options = server_options(dict(options))
        owns = data_dir is None
        path = Path(tempfile.mkdtemp(prefix="warren-test-")) if data_dir is None else Path(data_dir)
        server = cls(path, float(rate), options, owns_data_dir=owns)
        try:
            server._start()
        except BaseException:
            server.close()
            raise
        return server

    # -- lifecycle ------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._thread is not None

    def _start(self) -> None:
        config = ServerConfig(data_dir=self.data_dir, rate=self.rate, **self.options)
        ready = threading.Event()
        self._error = None
        self._thread = threading.Thread(target=self._thread_main, args=(config, ready),
                                        name=f"warren_server rate={self.rate:g}", daemon=True)
        self._thread.start()
        if not ready.wait(THREAD_WAIT_S) or self._running is None:
            error = self._error
            self._join()
            raise WarrenTestError(f"warren_server did not start within {THREAD_WAIT_S:g} s"
                                  + (f": {type(error).__name__}: {error}" if error else "")) from error
        self.url = self._running.url
        self.port = int(self.url.rsplit(":", 1)[1])
        self._http = httpx.Client(base_url=self.url, timeout=THREAD_WAIT_S)

    def _thread_main(self, config: ServerConfig, ready: threading.Event) -> None:
        try:
            trio.run(self._serve, config, ready, clock=make_clock(self.rate))
        except BaseException as exc:  # reported by _start / close in the test's thread
            self._error = exc
        finally:
            ready.set()

    async def _serve(self, config: ServerConfig, ready: threading.Event) -> None:
        async with trio.open_nursery() as nursery:
            self._cancel = nursery.cancel_scope
            running = await nursery.start(functools.partial(start_server, config, "127.0.0.1", self.port))
            self._token = trio.lowlevel.current_trio_token()
            self._running = running
            ready.set()
            await running.stopped.wait()
            nursery.cancel_scope.cancel()

    def _join(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(THREAD_WAIT_S)
            if thread.is_alive():
                raise WarrenTestError(f"warren_server's thread did not stop within {THREAD_WAIT_S:g} s")
        if self._http is not None:
            self._http.close()
            self._http = None
        self._token = self._running = self._cancel = None

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` (sync) in the server's trio thread and return its result."""
        if self._token is None:
            raise WarrenTestError("the WARREN server is not running (killed, or closed); restart() it first")
        return trio.from_thread.run_sync(fn, *args, trio_token=self._token)

    def stop(self) -> None:
        """Shut down as ``warren serve`` does on SIGTERM: live runs end ``cancelled``, journals are closed."""
        if self._running is not None and self._token is not None:
            try:
                self._call(self._running.shutdown)
            except trio.RunFinishedError:
                pass
        self._join()
        self._raise_thread_error()

    def kill(self) -> None:
        """Crash the server: it stops answering at once and its data directory stays as it was at that instant."""
        if not self.running:
            raise WarrenTestError("the WARREN server is not running; nothing to kill")
        snapshot = Path(tempfile.mkdtemp(prefix="warren-kill-"))
        try:
            self._call(self._freeze_and_cancel, snapshot)
            self._join()
            shutil.rmtree(self.data_dir)
            shutil.copytree(snapshot / "data", self.data_dir)
        finally:
            shutil.rmtree(snapshot, ignore_errors=True)
        self._raise_thread_error()

    def _freeze_and_cancel(self, snapshot: Path) -> None:
        # Runs in the server's trio thread between two trio steps: the copy is what a SIGKILL would leave.
        shutil.copytree(self.data_dir, snapshot / "data")
        assert self._cancel is not None
        self._cancel.cancel()

    def restart(self) -> WarrenServer:
        """Crash the server if it runs (:meth:`kill`), then serve again on the same port and data directory."""
        if self.running:
            self.kill()
        self._start()
        return self

    def close(self) -> None:
        """Stop the server if it runs and delete its temporary data directory (the fixture's teardown)."""
        try:
            if self.running:
                self.stop()
        finally:
            if self._owns_data_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _raise_thread_error(self) -> None:
        error, self._error = self._error, None
        if error is not None and not isinstance(error, trio.Cancelled):
            raise WarrenTestError(f"the WARREN server thread failed: {type(error).__name__}: {error}") from error

    # -- the server's clock ----------------------------------------------------------------------------
    def sleep(self, seconds: float) -> None:
        """Block for ``seconds`` of the server's clock (``seconds / rate`` of wall time): a stalled agent."""
        if self._token is None:
            raise WarrenTestError("the WARREN server is not running; sleep() waits on its clock")
        trio.from_thread.run(trio.sleep, seconds, trio_token=self._token)

    # -- runs ----------------------------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request to the server (``path`` like ``/v1/runs``); a 4xx/5xx raises :class:`WarrenTestError`."""
        if self._http is None:
            raise WarrenTestError("the WARREN server is not running (killed, or closed); restart() it first")
        response = self._http.request(method, path, **kwargs)
        return checked(method, path, response)

    def create_run(self, scenario: str, seed: int = 0, controlled_agents: Iterable[str] = (),
                   **options: Any) -> ServedRun:
        """``POST /v1/runs``: ``options`` are the body's other fields (``npc_policy``, ``pace``,
        ``decision_deadline_s``, ``params``)."""
        body = {"controlled_agents": list(controlled_agents), **options}
        view = self.request("POST", "/v1/runs", params={"scenario": scenario, "seed": seed}, json=body).json()
        return ServedRun(self, view["run_id"], scenario, seed)

    def fork(self, run: ServedRun | str, cursor: int, controlled_agents: Iterable[str] = (),
             **options: Any) -> ServedRun:
        """``POST /v1/runs/{run}/fork`` (docs/fork.md, "Served"): a new run from the last batch boundary at or
        before ``cursor`` of ``run``'s journal; ``options`` are the creation body's other fields (``npc_policy``,
        ``pace``, ``decision_deadline_s``). Its ``view()["forked_from"]`` says where it forked."""
        body = {"cursor": cursor, "controlled_agents": list(controlled_agents), **options}
        view = self.request("POST", f"/v1/runs/{run}/fork", json=body).json()
        return ServedRun(self, view["run_id"], view["scenario"], view["seed"])

    def journal(self, run: ServedRun | str) -> list[dict[str, Any]]:
        """The run's journal records (as flushed): from the server, or from the data directory when it is down."""
        run_id = str(run)
        if self._http is None:
            path = self.data_dir / f"{run_id}.jsonl"
            if not path.exists():
                raise WarrenTestError(f"no journal {path.name} in {self.data_dir}")
            return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        text = self.request("GET", f"/v1/runs/{run_id}/journal").text
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def faults_met(self) -> list[str]:
        """One line per fault its runs' agents met (docs/faults.md), from the journals on disk, so it answers
        after a kill too: what a failing test's report shows (the plugin adds it as a section)."""
        lines: list[str] = []
        for path in sorted(self.data_dir.glob("run-*.jsonl"), key=lambda p: (len(p.stem), p.stem)):
            plan = ""
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a torn last line
                if record.get("kind") == "faults":
                    plan = f" (faults {record.get('spec')!r}, fault_seed {record.get('seed')})"
                elif record.get("kind") == "fault":
                    extra = f" by {record['delay_s']:.3f} s" if record.get("fault") == "delay" else ""
                    lines.append(f"{path.stem}: {record.get('fault')}{extra} met {record.get('request')} "
                                 f"#{record.get('index')} of {record.get('agent_id')}{plan}")
        return lines

    def view(self, run: ServedRun | str) -> dict[str, Any]:
        """``GET /v1/runs/{run}``: the run's view (status, agents, objectives, result)."""
        return self.request("GET", f"/v1/runs/{run}").json()


class RunName:
    """What a test's handle on a run answers to: ``run_id`` (``id`` too), and ``str(run)`` is the id, so
    ``f"{url}/v1/runs/{run}"`` works (:class:`ServedRun`, and ``AppRun`` of the in-process app)."""

    __slots__ = ()
    run_id: str

    @property
    def id(self) -> str:
        """The same as ``run_id`` (the name everywhere else: the wire, the SDK, the journal), kept for old tests."""
        return self.run_id

    def __str__(self) -> str:
        return self.run_id


@attrs.define(eq=False)
class ServedRun(RunName):
    """A run on a :class:`WarrenServer`."""

    server: WarrenServer
    run_id: str
    scenario: str
    seed: int

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1/runs/{self.run_id}"

    def view(self) -> dict[str, Any]:
        """``GET /v1/runs/{run}`` as the wire's JSON dict (``view["status"]``, ``view["result"]``), like
        ``journal()``: the plugin hands tests what the server sent. The SDK's ``get_run`` is the same as a typed
        ``RunView`` (``.status``, ``.result``), for agents."""
        return self.server.view(self.run_id)

    @property
    def status(self) -> str:
        return str(self.view()["status"])

    def journal(self) -> list[dict[str, Any]]:
        return self.server.journal(self.run_id)

    def faults(self, agent_id: str | None = None) -> list[dict[str, Any]]:
        """The faults this run's agents met (``@pytest.mark.warren(faults=...)``; docs/faults.md), in order: its
        journal's ``fault`` records, ``{"fault", "agent_id", "request", "index", ...}``; one agent's if named."""
        return [r for r in self.journal() if r.get("kind") == "fault"
                and (agent_id is None or r.get("agent_id") == agent_id)]

    def start(self) -> dict[str, Any]:
        """Start now (controlled agents nobody claimed then do not block)."""
        return self.server.request("POST", f"/v1/runs/{self.run_id}/start").json()

    def cancel(self) -> dict[str, Any]:
        return self.server.request("DELETE", f"/v1/runs/{self.run_id}").json()

    def wait_status(self, status: str, timeout: float) -> dict[str, Any]:
        """Poll until the run has ``status``; ``timeout`` is in the server's clock seconds."""
        deadline = wall_seconds() + timeout / self.server.rate
        while True:
            view = self.view()
            if view["status"] == status:
                return view
            if view["status"] in TERMINAL_RUN_STATUSES:
                raise WarrenTestError(f"{self.run_id} ended {view['status']} "
                                      f"({(view.get('result') or {}).get('reason', '')}), not {status}")
            if wall_seconds() >= deadline:
                raise WarrenTestError(f"{self.run_id} is still {view['status']} after {timeout:g} s of the server's "
                                      f"clock; it did not become {status}")
            time.sleep(POLL_S)

