"""The engine seen by an RL loop: batches of controlled wakes, integer choices, a team reward.

This module owns the mapping between the engine and a step-based API, and nothing of PettingZoo or
Gymnasium (those live in ``parallel.py`` and ``single.py``): one ``step`` answers every controlled
agent that woke (choice ``i`` is the i-th ready-to-send suggestion, 0 and anything else a noop),
adjudicates, and runs the engine on (uncontrolled agents on their policies) until a batch wakes a
controlled agent or the run ends. Everything here is plain Python over the engine's three calls, so
the same seed and the same choices give the same records, byte for byte.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from ..engine import NOOP, Observation, Policy, Simulation
from ..engine.headless import answer_or_noop
from ..engine.policy import fork_policies
from ..engine.records import dumps_record, with_cursor
from ..scenarios import LoadedScenario, instantiate, resolve_policy

# Added to the reward of the step in which the run ends "completed" (every objective met).
COMPLETION_BONUS = 1.0
# The characters of the ``text`` observation: printable ASCII and newlines (gymnasium's Text space
# needs an explicit charset); anything else in the envelope's text is shown as "?".
TEXT_CHARSET = "\n" + "".join(chr(c) for c in range(32, 127))
_OUTSIDE_CHARSET = re.compile(r"[^\n -~]")
FEATURES = ("time", "busy", "inventory", "progress")


def clean_text(text: str, limit: int) -> str:
    """The envelope text in the space's charset, cut to ``limit`` characters."""
    return _OUTSIDE_CHARSET.sub("?", text)[:limit]


def suggestions_of(obs: Observation, limit: int) -> list[dict[str, Any]]:
    """The fixed order of choices: affordances in catalog order, each one's suggestions in order.

    Index ``i`` (1-based) of the action space is element ``i - 1`` of this list; at most ``limit``.
    """
    out: list[dict[str, Any]] = []
    for afford in obs.affordances:
        for args in afford["suggestions"]:
            if len(out) >= limit:
                return out
            out.append({"action": afford["action"], "args": dict(args)})
    return out


def choice_index(value: Any) -> int:
    """An action as an index; anything that is not an integer counts as 0 (noop), never an error."""
    if isinstance(value, bool):
        return 0
    try:
        import operator

        return operator.index(value)
    except TypeError:
        return 0


def progress(sim: Simulation) -> float:
    """The objectives' mean progress in [0, 1] (each ``current / target``, capped at 1)."""
    objectives = list(sim.objectives.values())
    if not objectives:
        return 1.0 if sim.status == "completed" else 0.0
    return sum(min(o.current, o.target) / o.target if o.target > 0 else 1.0 for o in objectives) / len(objectives)


class Driver:
    """One episode at a time of a loaded scenario, some agents controlled by the caller."""

    def __init__(self, loaded: LoadedScenario, controlled: tuple[str, ...], max_actions: int, *,
                 trace: bool = False, policy: str = "solution") -> None:
        ids = [a.id for a in loaded.spec.agents]
        unknown = [a for a in controlled if a not in ids]
        if unknown:
            shown = ", ".join(ids[:8]) + (", ..." if len(ids) > 8 else "")
            raise ValueError(f"scenario {loaded.name} has no agent {unknown[0]!r}; its agents: {shown}")
        if not controlled:
            raise ValueError("controlled must name at least one agent")
        if max_actions < 1:
            raise ValueError(f"max_actions must be at least 1, got {max_actions}")
        self.loaded = loaded
        self.controlled = tuple(a for a in ids if a in set(controlled))  # the scenario's order
        self._controlled_set = frozenset(self.controlled)
        self.max_actions = max_actions
        self.trace = trace
        resolve_policy(policy, loaded)  # a bad policy spec fails here, with the CLI's teaching error
        self.policy = policy
        self.sim: Simulation | None = None
        self.policies: dict[str, Policy] = {}
        self.awake: dict[str, Observation] = {}
        self.choices: dict[str, list[dict[str, Any]]] = {}
        self.progress = 0.0
        self.controlled_decisions = 0
        self._lines: list[str] = []
        self._cursor = 0

    # -- episodes ------------------------------------------------------------------------------------
    def start(self, seed: int) -> None:
        self.sim, self.policies = instantiate(self.loaded, seed, self.policy, self.controlled, record=self.trace,
                                              run_id="rl")
        sim = self.sim
        self._lines, self._cursor = [], 0
        self.controlled_decisions = 0
        self.progress = progress(sim)
        self._run_to_controlled()

    def fork(self) -> Driver:
        """An independent driver at the same point of the same episode (``Simulation.fork``, the policies of the
        uncontrolled agents copied with ``fork_policies``): the same actions give both the same future."""
        new = copy.copy(self)  # the scenario, the controlled agents, the options: the same, never changed
        sim = self.sim
        new.sim = forked = sim.fork() if sim is not None else None
        new.policies = fork_policies(self.policies)
        new.awake = {aid: forked.pending[aid] for aid in self.awake} if forked is not None else {}
        new.choices = {aid: [{**c, "args": dict(c["args"])} for c in options] for aid, options in self.choices.items()}
        new._lines = list(self._lines)
        return new

    def step(self, actions: Mapping[str, Any]) -> float:
        """Answer the awake controlled agents, adjudicate, run on; the team reward of the step."""
        sim = self.sim
        if sim is None or sim.ended:
            return 0.0
        for aid, obs in self.awake.items():
            i = choice_index(actions.get(aid, 0))
            options = self.choices[aid]
            command = dict(options[i - 1]) if 1 <= i <= len(options) else dict(NOOP)
            self._answer(obs, command)
        self.controlled_decisions += len(self.awake)
        sim.adjudicate()
        self._run_to_controlled()
        before, self.progress = self.progress, progress(sim)
        reward = self.progress - before
        if sim.status == "completed":
            reward += COMPLETION_BONUS
        return reward

    def _answer(self, obs: Observation, answer: Any) -> None:
        """The answer if the engine accepts it, else a noop with an ``invalid`` record: the rule of
        ``warren run`` and the server's NPCs (``answer_or_noop``), so traces match theirs."""
        sim = self.sim
        assert sim is not None
        command, invalid = answer_or_noop(sim, obs.agent_id, obs.observation_id, answer)
        if invalid is not None:
            sim.answer(obs.agent_id, command, source="invalid")
            sim.emit(invalid)
        else:
            sim.answer(obs.agent_id, command)

    def _run_to_controlled(self) -> None:
        """Advance batch by batch, answering uncontrolled wakes, until a controlled agent wakes or the end."""
        sim = self.sim
        assert sim is not None
        self.awake, self.choices = {}, {}
        while (batch := sim.advance()) is not None:
            for obs in batch.observations:
                if obs.agent_id in self._controlled_set:
                    self.awake[obs.agent_id] = obs
                    self.choices[obs.agent_id] = suggestions_of(obs, self.max_actions)
                else:
                    self._answer(obs, self.policies[obs.agent_id].decide(obs))
            if self.awake:
                break
            sim.adjudicate()
        self._keep_records()

    def _keep_records(self) -> None:
        sim = self.sim
        if self.trace and sim is not None:
            for record in sim.drain_records():
                self._lines.append(dumps_record(with_cursor(self._cursor, record)))
                self._cursor += 1

    # -- views ---------------------------------------------------------------------------------------
    @property
    def ended(self) -> bool:
        return self.sim is None or self.sim.ended

    @property
    def truncated(self) -> bool:
        """Ended by the scenario's time limit (not by its objectives or a deadline)."""
        sim = self.sim
        return (sim is not None and sim.status == "failed" and sim.time >= sim.conv.time_limit_ms
                and not any(o.status == "failed" for o in sim.objectives.values()))

    def features(self, agent_id: str) -> list[float]:
        """time (fraction of the limit), busy (0/1), inventory size, objectives' progress."""
        sim = self.sim
        assert sim is not None
        agent = sim.world.agents[agent_id]
        return [min(sim.time / sim.conv.time_limit_ms, 1.0), 1.0 if agent.busy() else 0.0,
                float(len(agent.inventory)), self.progress]

    def idle_text(self, agent_id: str) -> str:
        """What a controlled agent that did not wake this step is told (it has nothing to decide)."""
        sim = self.sim
        assert sim is not None
        if sim.ended:
            return f"[t={sim.time}ms] The run ended: {sim.status} ({sim.end_reason})."
        agent = sim.world.agents[agent_id]
        doing = [f"{a.tool} until t={a.until}ms" for a in agent.lanes.values() if a is not None]
        state = "busy: " + ", ".join(doing) if doing else "asleep"
        return f"[t={sim.time}ms] {agent_id} did not wake in this batch ({state}); nothing to decide."

    def trace_text(self) -> str:
        """The episode's engine records so far as JSON Lines (``trace=True``), the bytes of ``warren run --trace``."""
        self._keep_records()
        return "".join(line + "\n" for line in self._lines)
