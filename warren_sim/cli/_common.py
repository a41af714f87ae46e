"""What every subcommand shares: exit codes, ``UsageError``, ``--param`` and ``--scenarios`` parsing.

Subcommand modules import from here and never from each other or from ``warren_sim.cli`` itself, so
the package has one root (:func:`warren_sim.cli.main`) and no cycles.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..scenarios import ParamText, PolicyFactory, ScenarioError, load_scenario, resolve_policy

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad command-line input; printed without a traceback, exit code 2."""


def cli_params(texts: list[str]) -> dict[str, ParamText]:
    """``["agents=1000"]`` -> ``{"agents": ParamText("1000")}``; the loader reads each by its declared type."""
    out: dict[str, ParamText] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--param expects NAME=VALUE (for example --param agents=1000), got {text!r}")
        out[key.strip()] = ParamText(value)
    return out


def add_scenarios_option(p: argparse.ArgumentParser) -> None:
    """``--scenarios DIR`` (repeatable) on every subcommand that loads scenarios."""
    p.add_argument("--scenarios", action="append", default=[], type=Path, metavar="DIR", dest="scenario_dirs",
                   help="also look for scenarios in DIR (repeatable; searched before $WARREN_SCENARIOS and the "
                        "bundled ones)")


def apply_scenarios_option(args: argparse.Namespace) -> None:
    """Put ``--scenarios`` directories in front of ``$WARREN_SCENARIOS`` (the loader's search path).

    The environment variable, not a module global, so a server's run tasks and any child process see
    the same directories as this command.
    """
    dirs: list[Path] = list(getattr(args, "scenario_dirs", None) or [])
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        raise UsageError(f"--scenarios: {', '.join(missing)} is not a directory")
    if dirs:
        old = [p for p in os.environ.get("WARREN_SCENARIOS", "").split(os.pathsep) if p]
        os.environ["WARREN_SCENARIOS"] = os.pathsep.join([*(str(d.resolve()) for d in dirs), *old])


class DefaultsFormatter(argparse.HelpFormatter):
    """Help that ends each option with its default (``(default: 0)``), unless the text already says it or
    there is none worth saying (a flag, an unset option, an empty list)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        unset = action.default is None or action.default is False or action.default == [] \
            or action.default == argparse.SUPPRESS
        quiet = unset or "default" in text
        if quiet or action.option_strings == [] and action.nargs in ("*", "+", argparse.REMAINDER):
            return text
        return text + " (default: %(default)s)"


def subparser(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """A subcommand's parser whose help shows each option's default (``--seed SEED ... (default: 0)``)."""
    kwargs.setdefault("formatter_class", DefaultsFormatter)
    parser: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    return parser


def show_command(command: dict[str, Any]) -> str:
    if "action" in command:
        return f"{command['action']} {json.dumps(command.get('args', {}), ensure_ascii=False)}"
    if "sleep_ms" in command:
        return f"sleep {command['sleep_ms']} ms"
    return "noop" if command.get("noop") is True else json.dumps(command, ensure_ascii=False)


def show_receipt(receipt: Any) -> str:
    text = receipt.status
    if receipt.status in ("accepted", "duplicate"):
        text += f" (outcome {receipt.outcome})"
    if receipt.detail:
        text += f": {receipt.detail}"
    return text


def remote_factory(spec: str, scenario: str, seed: int) -> PolicyFactory:
    """``--policy`` resolved against a served run's scenario, before anything is claimed or created."""
    try:
        return resolve_policy(spec, load_scenario(scenario), seed)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def remote_policy(factory: PolicyFactory, agent_id: str, briefing: dict[str, Any]) -> Any:
    """The remote agent's policy, made from its briefing (a product without ``decide`` is a usage error)."""
    try:
        return factory(agent_id, str(briefing.get("role", "")), briefing)
    except ScenarioError as exc:
        raise UsageError(str(exc)) from None


def add_llm_options(p: argparse.ArgumentParser) -> None:
    """``--model``, ``--temperature``, ``--max-history`` for ``--policy llm`` (docs/llm.md)."""
    g = p.add_argument_group("--policy llm", "an OpenAI-compatible endpoint: OPENAI_BASE_URL, OPENAI_API_KEY")
    g.add_argument("--model", help="the model to ask (or WARREN_LLM_MODEL), e.g. llama3.1, gpt-4o-mini")
    g.add_argument("--temperature", type=float, help="sampling temperature (or WARREN_LLM_TEMPERATURE); "
                   "default: the server's")
    g.add_argument("--max-history", type=int, metavar="N",
                   help="past decisions, with their verdicts, kept in each prompt (or WARREN_LLM_MAX_HISTORY; "
                        "default 8)")


def apply_llm_options(args: argparse.Namespace) -> None:
    """For ``--policy llm`` (or ``ROLE=llm``, ``--focal ROLE=llm``): the flags into ``WARREN_LLM_*`` (so worker processes see them too), then one
    probe of the endpoint, so a dead endpoint or a refused key is one usage error before anything runs."""
    specs = getattr(args, "policy", None)
    specs = [specs] if isinstance(specs, str) else list(specs or [])
    specs += list(getattr(args, "focal", None) or [])  # cross-play: --focal ROLE=llm
    if not any(spec.split("=")[-1].strip() == "llm" for spec in specs):  # --policy llm, ROLE=llm, AGENT=llm
        return
    for flag, name in (("model", "WARREN_LLM_MODEL"), ("temperature", "WARREN_LLM_TEMPERATURE"),
                       ("max_history", "WARREN_LLM_MAX_HISTORY")):
        value = getattr(args, flag, None)
        if value is not None:
            os.environ[name] = str(value)
    try:
        from ..llm import LLMConfig, LLMConfigError, probe
    except ImportError as exc:  # pragma: no cover - the package itself imports nothing optional
        raise UsageError(_llm_usage(str(exc))) from None
    try:
        probe(LLMConfig.from_env())
    except LLMConfigError as exc:
        raise UsageError(_llm_usage(str(exc))) from None


def _llm_usage(message: str) -> str:
    """``--policy llm: <why>``, once: some reasons already start with ``--policy llm``."""
    return message if message.startswith("--policy llm") else f"--policy llm: {message}"


def policy_text(specs: list[str]) -> str:
    """Repeated ``--policy`` -> one spec text (a plain spec stays as typed, a team is ``scenarios.team_text``):
    what a sweep's tasks and a fork carry. Raises PolicyError for a malformed team."""
    from ..scenarios import parse_team, team_text
    from ..scenarios.policies import DEFAULT_KEY

    team = parse_team(specs)
    return team[DEFAULT_KEY] if list(team) == [DEFAULT_KEY] else team_text(team)


def tokens_line(policies: Any) -> str | None:
    """``tokens: N prompt + M completion`` summed over policies exposing ``usage``, or None if none does."""
    from ..evaluation.runs import tokens_of  # the one place that sums a run's token usage

    tokens = tokens_of(policies)
    if tokens is None:
        return None
    return f"tokens: {tokens['prompt']:,} prompt + {tokens['completion']:,} completion"


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off while a command builds what lives until it ends (a scenario's world and its
    policies, a fork's snapshot and the walk to its fork point): hundreds of thousands of objects at once, hardly
    any of them garbage, which the collector would otherwise walk again and again as the heap grows (for 10,000
    foragers, a quarter of a fork's time, a twelfth of a run's). Only around work whose garbage is bounded by the
    world: never around a run, or a replay from a journal's start.

    What was built joins the oldest generation as the collector comes back (``gc.freeze`` then ``gc.unfreeze``,
    which move objects without a pass): left in the youngest, it would all be walked by the first collection
    after, at once (0.04 s of a fork of 10,000 foragers). Not when something is frozen already (a server in the
    same process): ``gc.unfreeze`` would release its objects too."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        if enabled:
            gc.enable()


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """What exists now (a command's world and policies, which live until it ends) out of the cycle collector's
    sight while the command goes on (``gc.freeze``; back in sight after it, for a caller in the same process): the
    collector's full passes then walk only what the run makes, not the 10,000 foragers it was given again.
    Nothing is done when something is frozen already (a server in the same process): ``gc.unfreeze`` would
    release its objects too."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def open_trace(path: Path | None) -> TextIO | None:
    """``--trace PATH`` opened for writing (the caller closes it), None without one; a usage error if it cannot be."""
    try:
        return open(path, "w", encoding="utf-8") if path else None  # noqa: SIM115
    except OSError as exc:
        raise UsageError(f"--trace: cannot write {path}: {exc.strerror or exc}") from None


def print_headless_summary(summary: dict[str, Any], wall: float, *, wall_note: str = "",
                           between: Sequence[str] = (), after: Sequence[str] = (), policies: Any = (),
                           trace: Path | None = None, records: int = 0, name: str | None = None) -> None:
    """What ``warren run`` and ``warren fork`` print when a headless run ends: its status, ``between`` lines,
    each objective, the sim time and decision rate over ``wall`` s, ``after`` lines, the tokens, the trace.

    ``name`` is the scenario as the user named it (a directory found by ``--scenarios`` may hold a world
    whose own name differs); without it, the world's name."""
    print(f"{name or summary['scenario']} seed {summary['seed']}: {summary['status']} ({summary['reason']})")
    for line in between:
        print(line)
    for o in summary["objectives"]:
        p = o["progress"]
        print(f"  objective {o['id']:<12} {o['status']:<10} {p['current']}/{p['target']}  {o['description']}")
    rate = summary["decisions"] / wall if wall > 0 else float("inf")
    print(f"  sim time {summary['sim_time_ms'] / 1000:.1f}s, {summary['decisions']} decisions, "
          f"wall {wall:.3f}s{wall_note}, {rate:,.0f} decisions/s")
    for line in after:
        print(line)
    tokens = tokens_line(policies)
    if tokens is not None:
        print(f"  {tokens}")
    if trace:
        print(f"  trace: {trace} ({records} records)")


def remote_command(command: Any) -> tuple[Any, str | None]:
    """What a remote agent submits for a policy's answer: a policy's ``{"invalid": reason}`` ("no usable
    command") is sent as a noop, the reason returned for printing (the server journals the noop)."""
    if isinstance(command, dict) and "invalid" in command and set(command) <= {"invalid", "raw"}:
        return {"noop": True}, str(command["invalid"]) or "the policy had no usable command"
    return command, None


RETRIES_AFTER_REJECTION = 2


def answers_again(policy: Any, receipt: Any, attempt: int) -> bool:
    """After a ``rejected`` verdict the observation is still outstanding: a policy that hears receipts
    (``on_receipt``, such as the LLM policy, which now has the reason in its prompt) decides again, up to
    :data:`RETRIES_AFTER_REJECTION` more times; any other policy would only repeat itself."""
    return (receipt.status == "rejected" and callable(getattr(policy, "on_receipt", None))
            and attempt < RETRIES_AFTER_REJECTION)


GIVE_UP_NOOP = {"noop": True}


def gave_up(receipt: Any) -> bool:
    """The last answer to an observation was still ``rejected`` (the policy's tries are spent): the caller
    answers the turn with a noop at once, rather than leave it outstanding until its decision deadline."""
    return receipt.status == "rejected"


def after_receipt(policy: Any, receipt: Any) -> str:
    """Hand the receipt to a policy with ``on_receipt`` (the LLM policy puts verdicts in its next prompt);
    the decision's token usage, when the policy reports one, as text for the log line."""
    hook = getattr(policy, "on_receipt", None)
    if callable(hook):
        hook(receipt)
    last = getattr(policy, "last_usage", None)
    if isinstance(last, dict):
        return f"  tokens {last.get('prompt_tokens', 0)}+{last.get('completion_tokens', 0)}"
    return ""
