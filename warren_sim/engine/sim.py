"""The simulation: a sans-IO state machine in the manner of h11.

Drive it with three calls and nothing else::

    batch = sim.advance()          # move time to the next batch of wakes; None once the run ended
    sim.answer(agent_id, command)  # one command per observation of the batch (validate() first)
    sim.adjudicate()               # apply the batch's answers in the seeded order

A tool's rules are not here: each is its entry of the rules table (``rules.py``), which the simulation asks
to plan, apply and finish a command; the entry acts on the run through the effects the simulation implements
(``effects.Effects``). Validation is ``command.py``'s, perception ``perception.py``'s.

It never sleeps, reads a clock or does I/O; the same spec, seed and answers give the same records,
byte for byte. Everything that decides an order goes through ``self.rng`` (seeded once) or the
scheduler's ``(time, priority, seq)`` keys.
"""

from __future__ import annotations

import random
from heapq import heappop, heappush
from operator import attrgetter
from typing import Any

import attr

from .command import validate as validate_command
from .command import validate_payload
from .errors import EngineError
from .layout import layout
from .perception import Observation, Perceivable
from .rules import ToolRules, catalog, generic_names
from .scheduler import COMPLETION, DEADLINE, WAKE, Scheduler
from .snapshot import fork_simulation
from .spec import ScenarioSpec
from .tools import Tool
from .world import Action, Agent, Cell, World

# Which reason an agent is told when several fall on the same instant: the most specific wins.
REASON_RANK = {"interrupted": 0, "done": 1, "message": 2, "event": 3, "timer": 4, "idle": 5, "start": 6}
WAKE_REASONS = tuple(REASON_RANK)
END_STATUSES = ("completed", "failed", "cancelled")
MAX_EVENTS = 32
_by_id = attrgetter("id")
# An outcome the agent will perceive is kept as its facts, (time, observation id, tool, outcome, reason), until its
# observation's events are read (perception.outcome_event builds the dict and the prose).
OutcomeFacts = tuple[int, str, str, str, str]
ACCEPTED = ("accepted", "")
PENDING = ("pending", "")


def _fast_shuffle_agrees() -> bool:
    """Whether :meth:`Simulation._shuffle` draws exactly what ``random.Random.shuffle`` draws on this Python.

    It inlines CPython's shuffle (``_randbelow_with_getrandbits``: one ``getrandbits(k)`` per try) to save a
    Python call per agent per batch; if some Python's shuffle draws differently, the seeded order would
    change, so the simulation uses ``rng.shuffle`` itself unless the two agree here.
    """
    for seed in range(8):
        for n in (2, 3, 5, 17, 100):
            a, b = list(range(n)), list(range(n))
            r1, r2 = random.Random(seed), random.Random(seed)
            r1.shuffle(a)
            _inline_shuffle(r2.getrandbits, b)
            if a != b or r1.random() != r2.random():
                return False
    return True


def _inline_shuffle(getrandbits: Any, x: list[Any]) -> None:
    for i in range(len(x) - 1, 0, -1):
        n = i + 1
        k = n.bit_length()
        j = getrandbits(k)
        while j >= n:
            j = getrandbits(k)
        x[i], x[j] = x[j], x[i]


FAST_SHUFFLE = _fast_shuffle_agrees()


@attr.s(auto_attribs=True, eq=False)  # native when compiled (see world.Agent)
class ObjectiveState:
    id: str
    description: str
    structure: str
    field: str
    target: int
    deadline_ms: int | None
    status: str = "pending"
    current: int = 0

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.description,
            "status": self.status,
            "deadline_ms": self.deadline_ms,
            "progress": {"current": self.current, "target": self.target},
        }


@attr.s(auto_attribs=True, eq=False)
class Batch:
    time: int
    observations: list[Observation]


def _append_event(agent: Agent, event: dict[str, Any] | OutcomeFacts) -> None:
    """Append an event (a dict with its time, or an outcome's facts) to what the agent perceives next, keeping
    the newest ``MAX_EVENTS`` and counting the ones dropped."""
    events = agent.events
    events.append(event)
    if len(events) > MAX_EVENTS:
        del events[0]
        agent.events_dropped += 1


class Simulation(Perceivable):
    """One run of one scenario with one seed.

    It is the one implementation of what the rules may do (``effects.Effects``: audience, notify, tell, deliver,
    emit, structure_changed) and of what perception reads (``perception.Perceivable``); a tool's rules are its
    entry of ``self.rules`` (``rules.py``), asked to plan, apply and finish by ``_apply`` and ``_complete``.
    """

    def __init__(self, spec: ScenarioSpec, seed: int, *, run_id: str = "run",
                 params: dict[str, Any] | None = None, record: bool = True, populate: bool = True) -> None:
        """``populate=False`` builds only what the spec alone decides (the map, the rules, the structures), for a
        run that is given its state next (``snapshot.fork_simulation``, ``snapshot.restore``): no agents, items,
        wakes or run record that the state would replace (for 10,000 foragers, most of what building costs)."""
        self.spec = spec
        self.seed = seed
        self.run_id = run_id
        self.rng = random.Random(seed)
        self.conv = spec.conventions
        self.rules: dict[str, ToolRules] = catalog(spec.tools)
        self.tools: dict[str, Tool] = {name: entry.tool for name, entry in self.rules.items()}
        roles = {r.name: r for r in spec.roles}
        generic = generic_names()
        tools_by_role = {name: tuple(t for t in self.rules if t in generic or t in r.tools)
                         for name, r in roles.items()}
        self.roles = roles
        self.world = World(spec, tools_by_role, populate=populate)
        self.time = 0
        self.status = "running"
        self._live = True  # status == "running", read in the hot loops
        self.end_reason = ""
        self.decisions = 0
        self.record = record
        self.records: list[dict[str, Any]] = []
        self.outcomes: dict[str, tuple[str, str]] = {}
        self.conflicts: dict[str, dict[str, str]] = {}  # observation id -> same-batch conflict (a rule's conflict)
        self.pending: dict[str, Observation] = {}  # agent id -> its outstanding observation (answer on it)
        self.batch: Batch | None = None
        self.sched = Scheduler()
        self._heap, self._next_seq = self.sched.heap, self.sched.next_seq
        self.objectives = {o.id: ObjectiveState(o.id, o.description, o.structure, o.field, o.target, o.deadline_ms)
                           for o in spec.objectives}
        for obj in self.objectives.values():
            obj.current = min(self.world.structures[obj.structure].fields.get(obj.field, 0), obj.target)
            if obj.current >= obj.target:  # met from the start: nothing will ever "change" it to met
                obj.status = "completed"
        self._all_met = self._objectives_met()
        self._objective_views: list[dict[str, Any]] | None = None
        self._action_token = 0
        self.batch_no = 0  # observations of batch n may be built lazily until batch n is adjudicated
        # perception's table of what the agents of batch `perceived_batch` are offered, shared per signature
        # (perception.perceived): owned by the simulation, so runs and threads never share one
        self.perceived_batch = -1
        self.perceived_table: dict[Any, Any] = {}
        self._event_wakes: list[Agent] = []  # told of an event this instant while idle: woken at its end if idle
        # While advance() runs through the entries of instant t, a wake due at t joins that instant's woken agents
        # directly (what pushing it and popping it again before the instant ends did): see _wake.
        self._instant = -1
        self._woken: list[Agent] = []
        if not populate:
            return
        if record:  # the layout makes a journal self-describing: a viewer of the file needs nothing else
            self.emit({"kind": "run", "t": 0, "run_id": run_id, "scenario": spec.name, "seed": seed,
                        "params": dict(sorted((params or {}).items())), "agents": list(self.world.agent_ids),
                        "layout": layout(self.world, spec)})
        for aid in self.world.agent_ids:
            self._wake(self.world.agents[aid], 0, "start")
        for obj in self.objectives.values():
            if obj.deadline_ms is not None:
                self.sched.push(obj.deadline_ms, DEADLINE, "objective", obj.id)
        self.sched.push(self.conv.time_limit_ms, DEADLINE, "limit", None)

    # -- records -----------------------------------------------------------------------------------
    def emit(self, record: dict[str, Any]) -> None:
        if self.record:
            self.records.append(record)

    def drain_records(self) -> list[dict[str, Any]]:
        out, self.records = self.records, []
        return out

    # -- driving -----------------------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        return not self._live

    def advance(self) -> Batch | None:
        """Run time forward to the next instant where agents wake; return that batch of observations."""
        if self.pending:
            raise EngineError("adjudicate the current batch before advancing")
        heap = self.sched.heap
        agents = self.world.agents
        event_wakes = self._event_wakes  # cleared in place by _flush_event_wakes
        while self._live:
            if not heap:
                self._end("failed", "nothing left to happen")
                break
            t = heap[0][0]
            self.time = t
            woken: list[Agent] = []
            self._woken, self._instant = woken, t
            while True:  # every entry at t: while heap and heap[0][0] == t and self._live
                _, prio, _, key, token = heappop(heap)
                if prio == WAKE:
                    agent = agents[key]
                    if agent.wake_token == token and agent.wake_time == t:
                        woken.append(agent)
                else:
                    if prio == COMPLETION:
                        self._complete(key, token)
                    else:
                        self._deadline(key, token)
                    if not self._live:
                        if event_wakes and (not heap or heap[0][0] != t):
                            self._flush_event_wakes()  # as ever after the instant's last entry
                        break
                if heap and heap[0][0] == t:
                    continue
                if event_wakes:
                    self._flush_event_wakes()  # (its wakes are due at t + tick_ms: maybe still at t)
                    if heap and heap[0][0] == t:
                        continue
                break
            self._instant = -1
            if self._all_met:
                self._end_if_all_met()
            if not self._live:
                break
            if woken:
                if len(woken) > 1:
                    woken.sort(key=_by_id)
                pending = self.pending
                record = self.record
                for agent in woken:
                    reason = agent.wake_reason
                    agent.wake_time, agent.wake_reason = -1, ""
                    agent.seq += 1
                    obs = pending[agent.id] = Observation(self, agent, reason)
                    if record:
                        self.emit({"kind": "observation", "t": t, "agent": agent.id,
                                    "observation_id": obs.observation_id, "reason": reason})
                self.batch = Batch(t, list(pending.values()))
                return self.batch
        return None

    def next_time(self) -> int | None:
        """When the next live scheduled entry happens (sim ms), without advancing; for pacing.

        Cancelled entries at the top of the queue are dropped first, so the answer is the time the
        next ``advance()`` will move to (unless that instant holds only a deadline that ends nothing).
        """
        if self.ended:
            return None
        while (t := self.sched.peek_time()) is not None:
            _, prio, key, token = self.sched.top()
            if prio == WAKE:
                agent = self.world.agents[key]
                live = agent.wake_token == token and agent.wake_time == t
            elif prio == COMPLETION:
                live = any(a is not None and a.token == token for a in self.world.agents[key].lanes.values())
            else:
                live = True
            if live:
                return t
            self.sched.pop()
        return None

    def validate(self, agent_id: str, command: dict[str, Any]) -> str | None:
        """Check an in-process command (shape, then rules) against the agent's outstanding observation; a
        teaching error or None.

        ``command`` is one of ``{"action": str, "args": {...}}``, ``{"sleep_ms": int}`` or
        ``{"noop": True}`` (``command.validate``). Only the observation's snapshot is consulted (its
        affordances), never the world as changed by other answers: conflicts are decided later, by adjudication.
        """
        obs = self.pending.get(agent_id)
        if obs is None:
            return f"{agent_id} has no outstanding observation"
        return validate_command(self, obs._agent, obs, command)

    def validate_payload(self, agent_id: str, payload: dict[str, Any]) -> str | None:
        """:meth:`validate` for a payload the wire's parser made (``protocol.verdicts.normalize_command``): its
        shape is trusted, only the rules judge it (``command.validate_payload``)."""
        obs = self.pending.get(agent_id)
        if obs is None:
            return f"{agent_id} has no outstanding observation"
        return validate_payload(self, obs._agent, obs, payload)

    def answer(self, agent_id: str, command: dict[str, Any], source: str = "policy") -> None:
        obs = self.pending.get(agent_id)
        if obs is None:
            raise EngineError(f"{agent_id} has no outstanding observation")
        if obs.answer is not None:
            raise EngineError(f"{obs.observation_id} was already answered")
        # Its outcome reads ("pending", "") until adjudication (outcome_of's default): nothing to store.
        obs.answer, obs.source = command, source

    def unanswered(self) -> list[str]:
        return [aid for aid, obs in self.pending.items() if obs.answer is None]

    def adjudicate(self) -> None:
        """Apply every answer of the batch, in a permutation of agent ids drawn from the seeded RNG."""
        pending = self.pending
        order = list(pending.values())  # advance() filled it in id order: sorted already
        for obs in order:
            if obs.answer is None:
                raise EngineError(f"answers missing for {', '.join(sorted(self.unanswered()))}")
        if len(order) > 1:  # the observations are drawn in order, as their ids were (the same draws, same permutation)
            if FAST_SHUFFLE:
                _inline_shuffle(self.rng.getrandbits, order)
            else:
                self.rng.shuffle(order)
        self.decisions += len(order)
        apply = self._apply
        if self.record:
            t = self.time
            self.emit({"kind": "batch", "t": t, "order": [obs.agent_id for obs in order]})
            for obs in order:
                self.emit({"kind": "command", "t": t, "agent": obs.agent_id, "observation_id": obs.observation_id,
                            "command": obs.answer, "source": obs.source})
                apply(obs._agent, obs)
        else:
            for obs in order:
                apply(obs._agent, obs)
        pending.clear()
        self.batch = None
        self.batch_no += 1
        if self._event_wakes:
            self._flush_event_wakes()
        if self._all_met:
            self._end_if_all_met()

    def fork(self) -> Simulation:
        """An independent copy standing where this run stands (at a batch boundary, or with its batch open),
        made without replaying: the same answers give both the same records. ``snapshot.py`` says how."""
        return fork_simulation(self)

    def cancel(self, reason: str = "cancelled by an operator") -> None:
        if not self.ended:
            self._end("cancelled", reason)

    # -- adjudication: each command's tool entry (rules.py) plans, applies and finishes it -----------------
    def _apply(self, agent: Agent, obs: Observation) -> None:
        cmd = obs.answer
        assert cmd is not None
        oid = obs.observation_id
        t = self.time
        if "action" in cmd:
            entry = self.rules[cmd["action"]]
            args = cmd.get("args", {})
            parsed = obs.parsed  # what validation resolved for this very command (a move's destination cell)
            err, duration, dest = entry.plan(self, agent, args, parsed[1] if parsed is not None and parsed[0] is cmd
                                             else None)
            if err:
                self._outcome(agent, oid, "rejected", err, entry.name, entry.conflict(self, agent, args))
                self._wake(agent, t + self.conv.tick_ms, "interrupted")
                return
            lanes = agent.lanes
            lane = entry.lane
            current = lanes[lane]
            if current is not None:
                self._interrupt(agent, current, f"replaced by {entry.name} at t={t}ms")
            durative = entry.durative
            if durative:
                token = self._action_token = self._action_token + 1
                until = t + duration
                lanes[lane] = Action(agent.id, lane, entry.name, args, oid, t, until, token, dest)
                heappush(self._heap, (until, COMPLETION, self._next_seq(), agent.id, token))
            else:
                entry.apply(self, agent, args)
            # accepted, the commonest outcome (not stored: see outcome_of)
            if self.record:
                self.emit({"kind": "outcome", "t": t, "agent": agent.id, "observation_id": oid,
                            "outcome": "accepted", "reason": ""})
                if durative:
                    self.emit({"kind": "action", "t": t, "agent": agent.id, "tool": entry.name,
                               "until": t + duration})
            _append_event(agent, (t, oid, entry.name, "accepted", ""))
            if not durative:  # (a durative action holds its lane now: the agent is not idle)
                self._wake(agent, t + self.conv.tick_ms, "done")
                if agent.idle():
                    self._wake(agent, t + self.conv.idle_wake_ms, "idle")
            return
        if self.record:  # accepted (not stored: see outcome_of)
            self.emit({"kind": "outcome", "t": t, "agent": agent.id, "observation_id": oid,
                        "outcome": "accepted", "reason": ""})
        if "sleep_ms" in cmd:
            at = t + max(1, int(cmd["sleep_ms"]))
            if agent.wake_time == -1 and at != self._instant:  # _wake(agent, at, "timer"), inline: none due yet
                agent.wake_time, agent.wake_reason = at, "timer"
                token = agent.wake_token = agent.wake_token + 1
                heappush(self._heap, (at, WAKE, self._next_seq(), agent.id, token))
            else:
                self._wake(agent, at, "timer")
        elif agent.idle():
            self._wake(agent, t + self.conv.idle_wake_ms, "idle")

    def _complete(self, agent_id: str, token: int) -> None:
        agent = self.world.agents[agent_id]
        lanes = agent.lanes
        for lane, action in lanes.items():
            if action is not None and action.token == token:
                lanes[lane] = None
                err = self.rules[action.tool].finish(self, agent, action)
                if err:
                    self._outcome(agent, action.observation_id, "interrupted", err, action.tool)
                    self._wake(agent, self.time, "interrupted")
                    return
                # _outcome(agent, oid, "completed", "", tool), inline
                oid, t = action.observation_id, self.time
                self.outcomes[oid] = ("completed", "")
                if self.record:
                    self.emit({"kind": "outcome", "t": t, "agent": agent_id, "observation_id": oid,
                                "outcome": "completed", "reason": ""})
                _append_event(agent, (t, oid, action.tool, "completed", ""))
                if agent.wake_time == -1:  # _wake(agent, t, "done"), inline: none due yet, due in this very instant
                    agent.wake_time, agent.wake_reason = t, "done"
                    agent.wake_token += 1
                    self._woken.append(agent)
                else:
                    self._wake(agent, t, "done")
                return

    def _interrupt(self, agent: Agent, action: Action, reason: str) -> None:
        agent.lanes[action.lane] = None
        self._outcome(agent, action.observation_id, "interrupted", reason, action.tool)

    def _outcome(self, agent: Agent, observation_id: str, outcome: str, reason: str, tool: str | None,
                 conflict: dict[str, str] | None = None) -> None:
        self.outcomes[observation_id] = (outcome, reason)
        if conflict is not None:
            self.conflicts[observation_id] = conflict
        if self.record:
            rec: dict[str, Any] = {"kind": "outcome", "t": self.time, "agent": agent.id,
                                   "observation_id": observation_id, "outcome": outcome, "reason": reason}
            if conflict is not None:  # only on conflicts: every other record keeps its bytes
                rec["conflict"] = conflict
            self.emit(rec)
        if tool is not None:  # the event's dict and prose are made only if the agent's events are read
            _append_event(agent, (self.time, observation_id, tool, outcome, reason))

    def _wake(self, agent: Agent, time: int, reason: str) -> None:
        """Schedule the agent's next wake unless an earlier one is already due."""
        wake_time = agent.wake_time
        if wake_time != -1:
            if wake_time < time:
                return
            if wake_time == time:
                if REASON_RANK[reason] < REASON_RANK[agent.wake_reason]:
                    agent.wake_reason = reason
                return
        agent.wake_time, agent.wake_reason = time, reason
        token = agent.wake_token = agent.wake_token + 1
        if time == self._instant:  # due in the instant advance() is settling: nothing can cancel it now
            self._woken.append(agent)
            return
        heappush(self._heap, (time, WAKE, self._next_seq(), agent.id, token))

    # -- effects: what the rules may do (effects.Effects) ----------------------------------------------------
    def tell(self, agent: Agent, event: dict[str, Any]) -> None:
        _append_event(agent, {"time": self.time, **event})

    def audience(self, cell: Cell, actor: str | None) -> list[Agent]:
        """Who is told of what happens at ``cell``: every agent within reach of it but the actor.

        Callers ask first and build the event only when someone hears it or the run is recorded. The order
        does not matter (each agent's events are its own; the wakes they cause are ordered by the scheduler).
        """
        w = self.world
        place = w.cell_place.get(cell)
        if place is None:
            here = w.agents_at.get(cell)
            if not here or (actor in here and len(here) == 1):
                return []
            out = list(here.values())
            if actor in here:
                out.remove(here[actor])
            return out
        agents_at = w.agents_at
        out = []
        me = None
        for c in w.place_cells[place]:
            here = agents_at.get(c)
            if here:
                out += here.values()
                if actor in here:
                    me = here[actor]
        if me is not None:
            out.remove(me)
        return out

    def notify(self, audience: list[Agent], event: dict[str, Any]) -> None:
        """Tell ``audience`` (see :meth:`audience`) what changed, with one dict shared by all of them (events
        are read, never changed); record it; wake the idle ones once the instant is settled."""
        # The record's kind stays "event"; what happened ("took", "arrived"...) goes in "event".
        if self.record:
            self.emit({"kind": "event", "t": self.time, "event": event["kind"],
                        **{k: v for k, v in event.items() if k != "kind"}})
        if not audience:
            return
        shared = {"time": self.time, **event}
        wakes = self._event_wakes
        for agent in audience:
            _append_event(agent, shared)
            # Only an agent idle now can be idle once the instant is settled with no wake due at the event's
            # (what _flush_event_wakes wakes), so only those are queued: the crowd walking through is not visited
            # twice. One busy now becomes idle within the instant only by its action ending (completed or
            # interrupted: woken now) or by its own answer replacing it with an instant tool (woken at t + tick_ms
            # for "done", which outranks "event"): either way the event's wake would change nothing.
            if agent.idle():
                wakes.append(agent)

    def _flush_event_wakes(self) -> None:
        """Wake, for the events of this instant, the agents that are idle once the instant is settled.

        Deciding after the whole batch (not as each answer applies) keeps the adjudication order out
        of it: an agent that starts a long action in the same batch is busy, whatever the order.
        """
        wake_at = self.time + self.conv.tick_ms
        now = self.time
        for other in dict.fromkeys(self._event_wakes):  # each once, in the order they were told while idle
            if other.idle() and other.wake_time != now:
                self._wake(other, wake_at, "event")  # (one waking now sees the event anyway)
        self._event_wakes.clear()

    def deliver(self, to: Agent, message: dict[str, Any]) -> None:
        to.messages.append(message)
        if len(to.messages) > self.conv.max_messages:
            del to.messages[0]
            to.messages_dropped += 1
        self._wake(to, self.time + self.conv.tick_ms, "message")

    # -- objectives and the end ----------------------------------------------------------------------
    def _objectives_met(self) -> bool:
        """Every objective completed (and there is at least one): the run ends "completed"."""
        objectives = self.objectives
        return bool(objectives) and all(o.status == "completed" for o in objectives.values())

    def structure_changed(self, structure_id: str) -> None:
        s = self.world.structures[structure_id]
        for obj in self.objectives.values():
            if obj.structure != structure_id or obj.status != "pending":
                continue
            current = min(s.fields.get(obj.field, 0), obj.target)
            if current != obj.current:
                obj.current = current
                self._objective_views = None
                if current >= obj.target:
                    obj.status = "completed"
                    self._all_met = self._objectives_met()
                if self.record:
                    self.emit({"kind": "objective", "t": self.time, **obj.view()})

    def _end_if_all_met(self) -> None:
        """End the run "completed" once every objective is met: checked when an instant is settled, after a
        batch's adjudication and before a deadline is judged (a deadline met in its very instant is met)."""
        if self._all_met and self._live:
            self._end("completed", "every objective is met")

    def _deadline(self, key: str, token: Any) -> None:
        self._end_if_all_met()
        if self.ended:
            return
        if key == "limit":
            self._end("failed", f"the scenario's time limit of {self.conv.time_limit_ms} ms was reached")
            return
        obj = self.objectives[token]
        if obj.status == "pending":
            obj.status = "failed"
            self._objective_views = None
            self.emit({"kind": "objective", "t": self.time, **obj.view()})
            self._end("failed", f"objective {obj.id} missed its deadline at {obj.deadline_ms} ms")

    def _end(self, status: str, reason: str) -> None:
        self.status, self.end_reason = status, reason
        self._live = False
        self.emit({"kind": "end", "t": self.time, "status": status, "reason": reason,
                    "objectives": [o.view() for o in self.objectives.values()],
                    "decisions": self.decisions})

    # -- views -------------------------------------------------------------------------------------
    def objective_views(self) -> list[dict[str, Any]]:
        return [o.view() for o in self.objectives.values()]

    def shared_objective_views(self) -> list[dict[str, Any]]:
        """``objective_views()`` made once per change of an objective and shared by the observations until the
        next one (an observation's fields are read, never changed)."""
        views = self._objective_views
        if views is None:
            views = self._objective_views = self.objective_views()
        return views

    def outcome_of(self, observation_id: str) -> tuple[str, str]:
        """``(outcome, reason)`` of the answer to an observation of this run; ``("pending", "")`` until adjudicated.

        ``outcomes`` holds every outcome but "accepted", the commonest (one entry per decision saved, 700,000 at
        100,000 foragers): an observation that was adjudicated and has no entry was accepted. It was adjudicated
        when it is an earlier one of its agent's (``agent#seq``, seq below the agent's latest) or the latest, no
        longer pending.
        """
        found = self.outcomes.get(observation_id)
        if found is not None:
            return found
        aid, sep, digits = observation_id.rpartition("#")
        agent = self.world.agents.get(aid)
        if agent is not None and sep and digits.isascii() and digits.isdigit():
            seq = int(digits)
            if f"{aid}#{seq}" == observation_id and (seq < agent.seq or (seq == agent.seq and aid not in self.pending)):
                return ACCEPTED
        return PENDING

    def conflict_of(self, observation_id: str) -> dict[str, str] | None:
        """The same-batch conflict that rejected the answer to ``observation_id`` (see ``ToolRules.conflict``, rules.py)."""
        return self.conflicts.get(observation_id)

    def summary(self) -> dict[str, Any]:
        return {"scenario": self.spec.name, "seed": self.seed, "status": self.status if self.ended else "running",
                "reason": self.end_reason, "sim_time_ms": self.time, "decisions": self.decisions,
                "objectives": self.objective_views()}
