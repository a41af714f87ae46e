"""``warren serve``: warren-agent/0 over HTTP on Hypercorn, on the process clock of ``--rate``.

It prints where it listens and where journals go (stdout), then logs one line per run lifecycle change
(created, started, ended with its status and reason, resumed after a restart) to stderr through
``ServerConfig.on_event``; nothing per request. ``--log-format json`` makes every line of both streams one JSON
object (warren_sim/observability/logs.py), Quart's and Hypercorn's records included. ``GET /metrics`` serves
Prometheus metrics unless ``--no-metrics``; traces follow the ``OTEL_*`` variables (docs/operations.md).
"""

from __future__ import annotations

import argparse
import errno
import functools
import signal
import sys
from pathlib import Path
from typing import Any

from ._common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_scenarios_option,
    apply_scenarios_option,
    subparser,
)


def register(sub: Any) -> None:
    p = subparser(sub, "serve", help="serve warren-agent/0: HTTP long-polling and the WebSocket binding",
                  description="Serve warren-agent/0 on one port: the HTTP API under /v1 (agents long-poll "
                              "GET /v1/runs/RUN/agents/AGENT/observations), the agent WebSocket binding "
                              "WS /v1/agent (JSON-RPC 2.0, observations pushed, many leases per connection), "
                              "spectator streams (WS /v1/runs/RUN/stream, SSE /v1/runs/RUN/events), and the "
                              "protocol's documents (/v1/openapi.json, /v1/schemas). It prints where it listens and "
                              "where journals go, then one line per run created, started and ended.")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (loopback only unless you say otherwise)")
    p.add_argument("--port", type=int, default=8000, help="port (0 picks a free one)")
    p.add_argument("--lease-ttl", type=float, default=300.0, help="lease TTL in (clock) seconds")
    p.add_argument("--rate", type=float, default=1.0,
                   help="clock rate: every deadline and timeout passes RATE times faster")
    p.add_argument("--data-dir", type=Path, default=Path("warren-data"), help="where run journals are written")
    p.add_argument("--max-wait", type=float, default=60.0,
                   help="cap of a long-poll's wait; polls also end by 0.9 x --lease-ttl (seconds)")
    p.add_argument("--max-polls-per-lease", type=int, default=4,
                   help="concurrent long-polls per lease; more get 429")
    p.add_argument("--max-spectators", type=int, default=64,
                   help="concurrent spectator streams per run; more get 429")
    p.add_argument("--max-runs", type=int, default=64,
                   help="live (created or running) runs per server; more get 429")
    p.add_argument("--max-agents", type=int, default=100_000,
                   help="agents per run; bigger worlds are refused with 400")
    p.add_argument("--fsync", action="store_true",
                   help="fsync the journal before an accepted receipt leaves (survives power cuts; grouped: one "
                        "fsync per scheduler tick). Without it, accepted verdicts are written to the OS first, "
                        "which survives a killed process")
    p.add_argument("--no-resume", action="store_true",
                   help="on start, mark the data dir's runs that were live as crashed ('server restarted') "
                        "instead of resuming them")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="a browser origin (e.g. http://localhost:3000) allowed to call this server besides its "
                        "own pages; requests from other web origins get 403 (repeatable)")
    p.add_argument("--send-timeout", type=float, default=10.0, metavar="S",
                   help="a spectator that takes no data for S seconds is cut and its slot freed")
    p.add_argument("--no-metrics", action="store_true",
                   help="serve no GET /metrics and count nothing for it (Prometheus metrics are on by default)")
    p.add_argument("--log-format", choices=("human", "json"), default="human",
                   help="human: the lines below as text (default); json: one JSON object per line on stdout and "
                        "stderr (startup, each run's lifecycle, errors, restarts), for log shippers")
    add_scenarios_option(p)
    p.add_argument("--faults", metavar="SPEC",
                   help="seeded faults on every run's wire, to test your agents (docs/faults.md): "
                        "kind=rate[,kind=rate...] with kinds reset, lost_reply, unavailable, delay (delay=RATE:BOUND, "
                        "as 0.1:2s), redeliver, disconnect, expire, restart (every live run restored from its "
                        "journal); all=RATE sets every network kind")
    p.add_argument("--fault-seed", type=int, default=0, metavar="N",
                   help="the seed of --faults: the same seed and agent meet the same faults (default 0)")
    p.set_defaults(func=cmd_serve)


class _Say:
    """``warren serve``'s own lines, as text (what it always printed) or as JSON log records (``--log-format``)."""

    def __init__(self, json_format: bool) -> None:
        import logging

        self.json = json_format
        self.stdout_log = logging.getLogger("warren.serve")
        if json_format:  # stdout's lines (where it listens) stay on stdout, as JSON too
            from ..observability.logs import JsonFormatter

            out = logging.StreamHandler(sys.stdout)
            out.setFormatter(JsonFormatter())
            self.stdout_log.handlers = [out]
            self.stdout_log.propagate = False

    def out(self, event: str, text: str, **fields: Any) -> None:
        """A line for stdout (where the server listens, where journals go)."""
        from ..observability.logs import LogEvent, log_event

        if self.json:
            log_event(LogEvent(event, text, fields), self.stdout_log)
        else:
            print(text, flush=True)

    def err(self, event: Any, text: str | None = None, **fields: Any) -> None:
        """A line for stderr: a runtime LogEvent, or one of serve's own (``event``, ``text``)."""
        from ..observability.logs import LogEvent, log_event

        if not isinstance(event, LogEvent):
            event = LogEvent(event, text or "", fields)
        if self.json:
            log_event(event)
        else:
            print(f"WARREN: {event}" if text is None else text, file=sys.stderr, flush=True)


async def serve_main(args: argparse.Namespace) -> None:
    import trio

    from ..http.server import SERVER_GC_THRESHOLDS, is_loopback, start_server
    from ..runtime.leases import poll_wait
    from ..runtime.manager import ServerConfig

    json_logs = args.log_format == "json"
    errorlog: Any = "-"
    if json_logs:
        from ..observability.logs import configure_json

        errorlog = configure_json()
    say = _Say(json_logs)
    config = ServerConfig(lease_ttl=args.lease_ttl, data_dir=args.data_dir, max_wait_s=args.max_wait,
                          rate=args.rate, max_polls_per_lease=args.max_polls_per_lease,
                          max_spectators=args.max_spectators, max_runs=args.max_runs, max_agents=args.max_agents,
                          fsync=args.fsync, resume=not args.no_resume, send_timeout_s=args.send_timeout,
                          allow_origins=tuple(o.strip().rstrip("/") for o in args.allow_origin),
                          faults=args.fault_spec, fault_seed=args.fault_seed,
                          on_event=say.err, metrics=not args.no_metrics)
    if not is_loopback(args.host):
        say.err("server.exposed", f"warning: binding {args.host} exposes WARREN beyond this machine; anyone who can "
                "reach it can create and cancel runs", host=args.host)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(functools.partial(start_server, config, args.host, args.port,
                                                            gc_thresholds=SERVER_GC_THRESHOLDS, errorlog=errorlog))
            say.out("server.listening", f"WARREN listening on {server.url}", url=server.url,
                    metrics=not args.no_metrics, rate=args.rate)
            data_dir = args.data_dir.resolve()
            say.out("server.journals", f"WARREN journals go to {data_dir}/run-N.jsonl (--data-dir)",
                    data_dir=str(data_dir))
            capped = poll_wait(args.max_wait, args.lease_ttl)
            if capped < args.max_wait:  # said once, where the operator looks
                say.err("server.poll_wait_capped", f"WARREN: long-polls wait at most {capped:g} s, below --lease-ttl "
                        f"{args.lease_ttl:g} s (--max-wait {args.max_wait:g} s is capped)", max_wait_s=capped)

            async def watch_signals() -> None:
                async for signum in signals:
                    name = signal.Signals(signum).name
                    if server.shutdown_event.is_set():
                        say.err("server.exit_now", "WARREN: second signal, exiting now", signal=name)
                        nursery.cancel_scope.cancel()
                        return
                    say.err("server.shutting_down", f"WARREN shutting down ({name}): answering long-polls, "
                            "journaling runs", signal=name)
                    server.shutdown()

            nursery.start_soon(watch_signals)
            await server.stopped.wait()
            nursery.cancel_scope.cancel()
    say.err("server.stopped", "WARREN stopped")


def cmd_serve(args: argparse.Namespace) -> int:
    apply_scenarios_option(args)
    if args.rate <= 0 or args.lease_ttl <= 0 or args.max_wait < 0:
        raise UsageError("--rate and --lease-ttl must be > 0 and --max-wait >= 0")
    caps = ("max_polls_per_lease", "max_spectators", "max_runs", "max_agents")
    small = [f"--{c.replace('_', '-')}" for c in caps if getattr(args, c) < 1]
    if small:
        raise UsageError(f"{', '.join(small)} must be >= 1")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0..65535, got {args.port}")
    from ..runtime.faults import FaultSpecError, parse_faults

    try:
        args.fault_spec = parse_faults(args.faults) if args.faults is not None else None
    except FaultSpecError as exc:
        raise UsageError(f"--faults: {exc}") from None
    # The server's stack (trio, Quart, Hypercorn) is imported here, not at the top: `warren --help` and every
    # other subcommand start without it.
    import trio

    from ..http.hypercorn_fixes import UnsupportedHypercorn, check_versions
    from ..runtime.clock import make_clock

    try:  # the server patches Hypercorn's internals: on a release they were not written for, it does not start
        check_versions()
    except UnsupportedHypercorn as exc:
        print(f"warren serve: {exc}", file=sys.stderr)
        return EXIT_FAILED
    try:
        trio.run(serve_main, args, clock=make_clock(args.rate))
    except BaseExceptionGroup as group:
        bind_error = group.subgroup(OSError)
        if bind_error is None:
            raise
        return _cannot_listen(args, _first_leaf(bind_error))
    except OSError as exc:
        return _cannot_listen(args, exc)
    return EXIT_OK


def _first_leaf(group: BaseExceptionGroup[OSError]) -> OSError:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    assert isinstance(exc, OSError)
    return exc


def _cannot_listen(args: argparse.Namespace, exc: OSError) -> int:
    """A bind failure in one line that says what to do (exit 2: the command line asked for it)."""
    where = f"{args.host}:{args.port}"
    if exc.errno == errno.EADDRINUSE:
        print(f"warren serve: address {where} is in use; pick another --port (0 picks a free one) or stop the "
              "other server", file=sys.stderr)
    elif exc.errno == errno.EADDRNOTAVAIL:
        print(f"warren serve: cannot bind {where}: no interface of this machine has that address (--host)",
              file=sys.stderr)
    else:
        print(f"warren serve: cannot listen on {where}: {exc.strerror or exc}", file=sys.stderr)
    return EXIT_USAGE
