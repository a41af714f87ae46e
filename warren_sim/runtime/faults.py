"""Seeded faults on the wire, for people to test their agents (docs/faults.md).

warren-agent/0 promises at-least-once delivery, exactly-once acceptance, leases that survive reconnects and a
server that survives restarts; an agent keeps its side of those promises only if it retries with the same
``command_id``, accepts a redelivered envelope, claims again after a 403 and backs off on a 503. This module
decides, for each agent request, whether it meets a fault, so that a user's test can see whether their agent
does.

Reproducible from one seed, in the manner of FoundationDB's simulation and TigerBeetle's VOPR: whether a request
meets a fault is a pure function of ``(seed, run, agent, request kind, index)``, where the index counts that
agent's requests of that kind in that run (0, 1, 2, ...). No wall time, no global random state: a
deterministic agent meets the same faults on every run with the same seed, and a failing test fails again.

The rules:

- A SPEC is ``kind=rate[,kind=rate...]``; ``rate`` is a probability per request, from 0 to 1. ``all=R`` sets
  every network kind (:data:`NETWORK_KINDS`) that the SPEC does not name itself. ``delay`` takes a bound too:
  ``delay=0.1:2s`` delays a tenth of the requests by up to 2 s of the process clock (so ``--rate`` warps it).
- Each kind draws independently; a request meets at most one fault: the first kind of :data:`ORDER` that
  applies to its request kind and whose draw falls under its rate.
- What applies where (:data:`APPLIES`): every kind may meet ``reset``, ``lost_reply``, ``unavailable`` and
  ``delay``; ``redeliver`` only a ``poll`` (the envelope already delivered comes again); ``disconnect`` only a
  request on the agent WebSocket; ``expire`` every request that carries a lease (not ``claim``).
- Faults never touch the world: only the wire and the leases. With no SPEC there is no plan, and the agent
  operations skip this module entirely: faults off cost nothing.
- ``restart`` draws per request like the others; a request that meets it first has every live run of the server
  dropped from memory and rebuilt from its journal, as after a crash (``RunManager.restart_runs``), then is
  served by the rebuilt run; requests in flight on the dropped runs get 503 (``Retry-After: 0``) and the agent
  WebSockets close with 1012. One restart touches every run, so its rate is for rare events (0.01, not 0.15).
  It needs a data directory (the journals it restores from).
"""

from __future__ import annotations

import difflib
import hashlib
import math
import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["APPLIES", "NETWORK_KINDS", "ORDER", "REQUEST_KINDS", "SERVER_KINDS", "Fault", "FaultInjector", "FaultPlan", "FaultSpec",
           "FaultSpecError", "as_fault_spec", "parse_faults"]

#: Request kinds, by what an agent asks (the WebSocket's JSON-RPC methods map to the same kinds).
REQUEST_KINDS = ("claim", "briefing", "poll", "submit", "receipt", "release")

#: The kinds that act on the wire only; ``all=R`` sets these.
NETWORK_KINDS = ("reset", "lost_reply", "unavailable", "delay", "redeliver", "disconnect")

#: Precedence when two kinds draw under their rates for one request: the first wins.
ORDER = ("restart", "expire", "reset", "unavailable", "lost_reply", "disconnect", "redeliver", "delay")

#: The kinds that act on the server itself, not only the wire: named one by one (``all=R`` does not set them).
SERVER_KINDS = ("expire", "restart")

_EVERY = frozenset(REQUEST_KINDS)
APPLIES: Mapping[str, frozenset[str]] = {
    "reset": _EVERY,
    "lost_reply": _EVERY,
    "unavailable": _EVERY,
    "delay": _EVERY,
    "redeliver": frozenset({"poll"}),
    "disconnect": _EVERY,  # on the agent WebSocket only: an HTTP request never meets it
    "expire": _EVERY - {"claim"},
    "restart": _EVERY,
}

_DELAY = re.compile(r"^(?P<rate>[^:]+):(?P<bound>[0-9]*\.?[0-9]+)(?P<unit>ms|s)?$")
_UNIT_HELP = ("a rate is a probability per request from 0 to 1 (reset=0.1); delay takes a bound too, "
              "delay=RATE:BOUND with BOUND in s or ms (delay=0.1:2s)")


class FaultSpecError(ValueError):
    """A SPEC that cannot be read; the message says what was wrong and what is accepted."""


@attrs.frozen
class Fault:
    """One injected fault: what it is, which request met it, and (for ``delay``) by how much (clock seconds)."""

    fault: str
    agent_id: str
    request: str
    index: int
    delay_s: float = 0.0

    def record(self) -> dict[str, Any]:
        """The runtime journal record (replay skips it: it is not the engine's)."""
        out: dict[str, Any] = {"kind": "fault", "fault": self.fault, "agent_id": self.agent_id,
                               "request": self.request, "index": self.index}
        if self.fault == "delay":
            out["delay_s"] = self.delay_s
        return out


@attrs.frozen
class FaultSpec:
    """What a SPEC says: a rate per kind, and the bound of ``delay``."""

    rates: Mapping[str, float]
    delay_bound_s: float = 0.0
    text: str = ""

    def __bool__(self) -> bool:
        return any(rate > 0 for rate in self.rates.values())


def _rate(kind: str, text: str) -> float:
    try:
        rate = float(text)
    except ValueError:
        raise FaultSpecError(f"fault {kind}={text!r}: {text!r} is not a number; {_UNIT_HELP}") from None
    if not math.isfinite(rate) or not 0.0 <= rate <= 1.0:
        raise FaultSpecError(f"fault {kind}={text}: the rate must be from 0 to 1; {_UNIT_HELP}")
    return rate


def parse_faults(text: str) -> FaultSpec:
    """Read a SPEC (``lost_reply=0.2,reset=0.1``, ``all=0.15``, ``delay=0.1:2s``): teaching errors otherwise."""
    kinds = (*NETWORK_KINDS, *SERVER_KINDS)
    rates: dict[str, float] = {}
    every: float | None = None
    bound = 0.0
    if not text.strip():
        raise FaultSpecError(f"an empty fault SPEC; write kind=rate[,kind=rate...] with kinds {', '.join(kinds)} "
                             "or all (every network kind)")
    for item in text.split(","):
        kind, eq, value = item.strip().partition("=")
        if not eq or not kind or not value:
            raise FaultSpecError(f"fault SPEC item {item.strip()!r}: expected kind=rate; {_UNIT_HELP}")
        if kind != "all" and kind not in kinds:
            close = difflib.get_close_matches(kind, [*kinds, "all"], n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise FaultSpecError(f"unknown fault kind {kind!r}{hint}; the kinds: {', '.join(kinds)}, and all "
                                 f"(every network kind: {', '.join(NETWORK_KINDS)})")
        if kind in rates or (kind == "all" and every is not None):
            raise FaultSpecError(f"fault kind {kind} is given twice in {text!r}")
        if kind == "delay":
            m = _DELAY.match(value)
            if m is None:
                raise FaultSpecError(f"fault delay={value}: expected delay=RATE:BOUND, a rate from 0 to 1 and "
                                     "a bound in s or ms, as in delay=0.1:2s or delay=0.5:250ms")
            rates[kind] = _rate(kind, m["rate"])
            bound = float(m["bound"]) / (1000.0 if m["unit"] == "ms" else 1.0)
            if bound <= 0:
                raise FaultSpecError(f"fault delay={value}: the bound must be above 0 (delay=0.1:2s)")
        elif kind == "all":
            every = _rate(kind, value)
        else:
            rates[kind] = _rate(kind, value)
    if every is not None:
        for kind in NETWORK_KINDS:
            rates.setdefault(kind, every)
        if "delay" in rates and bound == 0.0:
            bound = 1.0  # all=R delays by up to 1 s unless delay=R:BOUND says otherwise
    return FaultSpec(rates={k: rates[k] for k in ORDER if k in rates}, delay_bound_s=bound, text=text)


def as_fault_spec(value: FaultSpec | str | None) -> FaultSpec | None:
    """A SPEC given as text (a marker's or a config's ``faults="..."``) read; a FaultSpec or None kept."""
    return parse_faults(value) if isinstance(value, str) else value


def _draw(seed: int, run_id: str, agent_id: str, request: str, index: int, what: str) -> float:
    """A uniform number in [0, 1), the same for the same inputs on every machine and Python."""
    key = f"{seed}\x1f{run_id}\x1f{agent_id}\x1f{request}\x1f{index}\x1f{what}".encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big") / 2.0**64


@attrs.define
class FaultPlan:
    """One run's faults: the SPEC, the seed, and how many requests of each kind each agent has made.

    The counters live here and not in the run, so that rebuilding a run (a stored run's, for a late request)
    does not send an agent back to index 0 and make it meet its first faults again.
    """

    spec: FaultSpec
    seed: int
    run_id: str
    counts: dict[tuple[str, str], int] = attrs.field(factory=dict)
    met: list[Fault] = attrs.field(factory=list)

    def decide(self, agent_id: str, request: str, *, websocket: bool = False,
               retriable: bool = True) -> Fault | None:
        """Count this request and say which fault, if any, it meets (at most one).

        ``retriable=False``: a claim that neither resumes a live lease nor proposes its token (``proposed_lease``),
        whose reply is never lost (its client could not learn the token the server made: the fault would only
        test waiting out the lease's TTL)."""
        index = self.counts.get((agent_id, request), 0)
        self.counts[agent_id, request] = index + 1
        for kind, rate in self.spec.rates.items():
            if rate <= 0 or request not in APPLIES[kind] or (kind == "disconnect" and not websocket):
                continue
            if kind == "lost_reply" and not retriable:
                continue
            if _draw(self.seed, self.run_id, agent_id, request, index, kind) < rate:
                delay = 0.0
                if kind == "delay":
                    delay = self.spec.delay_bound_s * _draw(self.seed, self.run_id, agent_id, request, index,
                                                            "delay-by")
                fault = Fault(kind, agent_id, request, index, delay)
                self.met.append(fault)
                return fault
        return None

    def tally(self, agent_id: str | None = None) -> dict[str, int]:
        """Faults met so far, by kind (one agent's, or the run's)."""
        out: dict[str, int] = {}
        for f in self.met:
            if agent_id is None or f.agent_id == agent_id:
                out[f.fault] = out.get(f.fault, 0) + 1
        return out


@attrs.define
class FaultInjector:
    """The server's faults: its default SPEC and seed (``warren serve --faults --fault-seed``) and each run's plan.

    A run created with ``"faults"`` in its body gets its own plan; every other run gets the server's, if any.
    The agent operations ask :meth:`decide` once per request; with no plan at all it answers at the cost of
    one dict lookup, so faults off cost nothing measurable.
    """

    default: FaultSpec | None = None
    seed: int = 0
    plans: dict[str, FaultPlan] = attrs.field(factory=dict)

    def start(self, run_id: str, spec: FaultSpec | None = None, seed: int | None = None) -> FaultPlan | None:
        """The plan of a new (or resumed) run: its own SPEC when given, else the server's; None when neither."""
        chosen = spec if spec is not None else self.default
        if not chosen:
            self.plans.pop(run_id, None)
            return None
        plan = self.plans.get(run_id)
        if plan is None or plan.spec != chosen:
            plan = self.plans[run_id] = FaultPlan(chosen, self.seed if seed is None else seed, run_id)
        return plan

    def decide(self, run_id: str, agent_id: str, request: str, *, websocket: bool = False,
               retriable: bool = True) -> Fault | None:
        plan = self.plans.get(run_id)
        return None if plan is None else plan.decide(agent_id, request, websocket=websocket, retriable=retriable)

    def tally(self, run_id: str, agent_id: str | None = None) -> dict[str, int]:
        plan = self.plans.get(run_id)
        return {} if plan is None else plan.tally(agent_id)
