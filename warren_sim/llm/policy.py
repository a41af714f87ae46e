"""``--policy llm``: each decision is one chat-completions request to an OpenAI-compatible endpoint.

The policy speaks only the policy protocol (``factory(agent_id, role, briefing)``, ``decide(obs)``), so it
runs the same headless (``warren run``, ``warren eval``) and remote (``warren agent`` over HTTP or WS); it
imports neither the engine nor the SDK. Why each rule:

- **Bounded by the decision deadline.** A remote observation carries ``deadline_unix``; past it the server
  answers ``expired``, so the request (and every retry) must end before it. In-process there is no deadline
  and ``WARREN_LLM_TIMEOUT`` bounds it instead, so a hung server cannot stall a run.
- **429 and 5xx are retried** with a doubling pause (the server's ``Retry-After`` when it sends one), but
  only while the pause still fits in the bound; then the decision is an ``invalid`` noop saying so.
- **A reply without a usable call is a noop, never a crash**: ``decide`` returns ``{"invalid": reason}``,
  which the shared answer-or-noop rule records as a noop plus an ``invalid`` journal record; the reason is
  also in the model's next prompt.
- **A dead endpoint is one clear error before the run** (:func:`probe`, once per process and endpoint): a
  ``GET /models`` costs no tokens and tells a missing server, a refused key and an unknown model apart.
- **Traced when the program traces**: each model call is a GenAI span (``chat MODEL``, with the model, token
  counts and finish reasons) under the agent's current span, so a decision's trace shows its model calls.
- **Remote verdicts**: a client that holds receipts passes each to :meth:`LLMPolicy.on_receipt` (``warren
  agent`` does); outcomes of earlier commands also arrive in each observation's ``events``, which the policy
  reads both in-process and remotely.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from ..observability.tracing import model_call
from ..runtime.clock import seconds_until_unix, wall_seconds
from .config import LLMConfig, LLMConfigError
from .prompt import Turn, build_messages, note_after, system_message
from .tools import NOOP, SLEEP, Invalid, check_catalog, narrowed_tools, openai_tools, to_command

DEADLINE_MARGIN_S = 0.5  # kept free before a served deadline for the command's own request
MAX_BACKOFF_S = 8.0
PROBE_TIMEOUT_S = 10.0
MAX_REPLY_CHARS = 2000  # an assistant reply's text kept in the history


_clients: dict[LLMConfig, Any] = {}


def _client(config: LLMConfig) -> Any:
    """One ``openai.OpenAI`` per configuration and process: the agents of a run share its connections."""
    if config in _clients:
        return _clients[config]
    try:
        import jsonschema  # noqa: F401  (checks the model's arguments: part of the same extra)
        import openai
    except ImportError as exc:
        raise LLMConfigError(f"--policy llm needs the openai and jsonschema packages ({exc}): "
                             "pip install 'warren-sim[llm]'") from None
    _clients[config] = openai.OpenAI(base_url=config.base_url, api_key=config.api_key, max_retries=0,
                                     timeout=config.timeout_s)
    return _clients[config]


_probed: dict[tuple[str, str, str], None] = {}


def probe(config: LLMConfig, *, force: bool = False) -> None:
    """Check once per process that the endpoint answers, accepts the key and serves the model.

    ``GET {base_url}/models``: a connection failure, 401/403 or another error status raises
    :class:`LLMConfigError` with what to do; a 404 (an endpoint without a model list) passes. A list that does
    not name the model (``NAME:latest`` names ``NAME``) is only a warning: gateways list aliases, or nothing
    that they route, so the first request decides, and a 404 there stops the policy with a clear error.
    """
    key = (config.base_url, config.api_key, config.model)
    if key in _probed and not force:
        return
    client = _client(config)  # first: a missing package is a LLMConfigError, not an ImportError
    import openai

    where = f"the model endpoint {config.base_url}"
    try:
        page = client.models.list(timeout=PROBE_TIMEOUT_S)
        served = [m.id for m in page.data]
    except openai.APIConnectionError as exc:
        raise LLMConfigError(f"cannot reach {where} ({exc}). Start the server (e.g. `ollama serve`, `vllm serve "
                             "MODEL`, `llama-server -m FILE`) or set OPENAI_BASE_URL to where it listens") from None
    except openai.NotFoundError:
        served = []  # no model list here: the first decision will tell
    except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
        raise LLMConfigError(f"{where} refused the API key ({exc.status_code}: {_message(exc)}); set "
                             "OPENAI_API_KEY to a key it accepts") from None
    except openai.APIStatusError as exc:
        raise LLMConfigError(f"{where} answered GET /models with {exc.status_code}: {_message(exc)}") from None
    if served and not listed(config.model, served):
        shown = ", ".join(sorted(served)[:12]) + (" ..." if len(served) > 12 else "")
        # Proxies (LiteLLM, gateways) list aliases, or not what they route: the first request decides, and its
        # 404 (model_not_found in _ask) is then the one clear error
        print(f"warning: {where} does not list model {config.model!r} (it lists: {shown}); trying it anyway: "
              "the first request tells whether it is served", file=sys.stderr, flush=True)
    _probed[key] = None


def listed(model: str, served: list[str]) -> bool:
    """Whether a model list names ``model``: as spelled, or as Ollama lists a tag-less name (``llama3.1`` is
    served as ``llama3.1:latest``)."""
    base = model.removesuffix(":latest")
    return model in served or base in served or f"{base}:latest" in served


def model_not_found(config: LLMConfig, exc: Any) -> LLMConfigError:
    """A chat request refused with 404: the endpoint does not serve the model (the probe let it through)."""
    return LLMConfigError(f"the model endpoint {config.base_url} answered 404 to a request for model "
                          f"{config.model!r} ({_message(exc)}); pass a model it serves with --model (GET "
                          f"{config.base_url.rstrip('/')}/models lists them; for Ollama, `ollama pull NAME` first)")


def _message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])[:300]
    return str(getattr(exc, "message", exc))[:300]


class LLMPolicy:
    """One agent's policy: briefing -> system message; each observation -> one (bounded) request.

    ``usage`` holds the cumulative ``prompt_tokens`` and ``completion_tokens`` (the convention every report
    sums); ``last_usage`` those of the latest decision; ``requests`` how many requests were sent.
    """

    def __init__(self, agent_id: str, role: str, briefing: Mapping[str, Any], config: LLMConfig, *,
                 client: Any = None, sleep: Callable[[float], None] | None = None,
                 tracer_provider: Any = None) -> None:
        self.agent_id = agent_id
        self.role = role
        self.config = config
        self.catalog = list(briefing.get("tool_catalog") or [])
        check_catalog(self.catalog)
        self.system = system_message(briefing)
        self.history: list[Turn] = []
        self._by_obs: dict[str, Turn] = {}
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0}
        self.last_usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0}
        self.requests = 0
        self._client = client if client is not None else _client(config)
        # what each model call's GenAI span records (warren_sim/observability/tracing.py; off unless tracing is on)
        self._server = urlsplit(config.base_url).hostname
        self._settings = {"temperature": config.temperature}
        self._tracer_provider = tracer_provider  # None: the program's global one, if it installed an SDK one
        if sleep is None:
            import time

            sleep = time.sleep  # a blocking policy pauses like the blocking SDK does
        self._sleep = sleep

    # ------------------------------------------------------------------ the policy protocol

    def decide(self, obs: Any) -> dict[str, Any]:
        self._learn(obs)
        observation_id = str(getattr(obs, "observation_id", ""))
        previous = self.history[-1] if self.history else None
        user = note_after(previous) + str(obs.text)
        tools = narrowed_tools(self.catalog, list(obs.affordances))
        messages = build_messages(self.system, self.history, self.config.max_history, user)
        self.last_usage = {"prompt_tokens": 0, "completion_tokens": 0}
        reply, result = self._ask(messages, tools, self._budget(obs))
        turn = Turn(observation_id=observation_id, user=user, reply=reply)
        calls = reply.get("tool_calls") or []
        if isinstance(result, Invalid):
            turn.invalid = result.reason
        elif not calls:
            content = (reply.get("content") or "").strip()
            turn.invalid = ("the reply had no tool call" + (f" (it said: {content[:120]!r})" if content else "")
                            + "; answer with exactly one tool call")
        else:
            first = calls[0]
            turn.call_id = first["id"]
            command = to_command(first["function"].get("name"), first["function"].get("arguments"), tools)
            if isinstance(command, Invalid):
                turn.invalid = command.reason
            else:
                turn.command = command
        self.history.append(turn)
        self._by_obs[observation_id] = turn
        self._forget()
        if turn.invalid is not None:
            return {"invalid": turn.invalid, "raw": _raw(reply)}
        assert turn.command is not None
        return dict(turn.command)

    def recall(self, obs: Any, command: Mapping[str, Any]) -> None:
        """A fork brings this policy to its fork point (docs/fork.md): the past observation and what the agent
        answered go into the history as if the model had answered with that tool call; no request is sent."""
        self._learn(obs)
        observation_id = str(getattr(obs, "observation_id", ""))
        previous = self.history[-1] if self.history else None
        user = note_after(previous) + str(obs.text)
        if "action" in command:
            name, args = str(command["action"]), dict(command.get("args") or {})
        elif "sleep_ms" in command:
            name, args = SLEEP, {"sleep_ms": command["sleep_ms"]}
        else:
            name, args = NOOP, {}
        call_id = f"recalled-{observation_id}"
        reply = {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
        turn = Turn(observation_id=observation_id, user=user, reply=reply, call_id=call_id, command=dict(command))
        self.history.append(turn)
        self._by_obs[observation_id] = turn
        self._forget()

    def on_receipt(self, receipt: Any) -> None:
        """A receipt for one of this policy's commands (remote clients call it after each submit): its verdict
        and outcome go into the history the model sees next. Takes the SDK's receipt or its JSON dict."""
        get = receipt.get if isinstance(receipt, Mapping) else (lambda k, d=None: getattr(receipt, k, d))
        turn = self._by_obs.get(str(get("observation_id", "")))
        if turn is None:
            return
        status = str(get("status", ""))
        detail = get("detail") or ""
        turn.verdict = f"{status}: {detail}" if detail and status != "accepted" else status
        outcome = get("outcome")
        if status in ("accepted", "duplicate") and outcome and outcome != "pending":
            turn.add_outcome(str(outcome), str(get("outcome_reason") or ""))

    # ------------------------------------------------------------------ internals

    def _learn(self, obs: Any) -> None:
        """Outcome events of earlier commands (``your take (engineer-1#0) was accepted``) into the history."""
        events = (obs.observation or {}).get("events") or []
        for event in events:
            if isinstance(event, Mapping) and event.get("kind") == "outcome":
                turn = self._by_obs.get(str(event.get("observation_id")))
                if turn is not None:
                    turn.add_outcome(str(event.get("outcome")), str(event.get("reason") or ""))

    def _forget(self) -> None:
        """Keep what the next prompts can show: the last ``max_history`` turns (outcomes arrive late)."""
        keep = max(self.config.max_history, 1) + 8
        if len(self.history) > keep:
            for turn in self.history[:-keep]:
                self._by_obs.pop(turn.observation_id, None)
            del self.history[:-keep]

    def _budget(self, obs: Any) -> float:
        budget = self.config.timeout_s
        deadline = getattr(obs, "deadline_unix", None)
        if deadline is not None:
            budget = min(budget, seconds_until_unix(float(deadline)) - DEADLINE_MARGIN_S)
        return budget

    def _ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], budget: float
             ) -> tuple[dict[str, Any], Invalid | None]:
        """One decision's request, retried on 429/5xx/connection errors while the budget lasts."""
        import openai

        empty: dict[str, Any] = {"role": "assistant", "content": ""}
        end = wall_seconds() + budget
        kwargs: dict[str, Any] = {"model": self.config.model, "messages": messages, "tools": openai_tools(tools),
                                  "tool_choice": self.config.tool_choice}
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        attempt = 0
        while True:
            remaining = end - wall_seconds()
            if remaining <= 0.01:
                return empty, Invalid(f"no answer from the model within the decision's time budget "
                                      f"({max(budget, 0):.1f}s); a faster model, a later decision_deadline_s "
                                      "or a slower pace gives it more time")
            try:
                self.requests += 1
                with model_call(self.config.model, server_address=self._server, request=self._settings,
                                tracer_provider=self._tracer_provider) as call:
                    try:
                        completion = self._client.chat.completions.create(**kwargs, timeout=remaining)
                    except openai.APIError as exc:
                        call.failed(str(getattr(exc, "status_code", None) or type(exc).__name__))
                        raise
                    call.finish(completion)
            except openai.APITimeoutError:
                return empty, Invalid(f"the model did not answer within the decision's time budget ({budget:.1f}s)")
            except openai.NotFoundError as exc:  # the model is not served: no later decision can do better
                raise model_not_found(self.config, exc) from None
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as exc:
                status = getattr(exc, "status_code", None) or "connection error"
                pause = min(self.config.backoff_s * 2**attempt, MAX_BACKOFF_S)
                pause = max(pause, _retry_after(exc) or 0.0)
                if wall_seconds() + pause >= end:
                    return empty, Invalid(f"the model endpoint kept failing ({status}: {_message(exc)}) and the "
                                          "decision's time budget ran out")
                self._sleep(pause)
                attempt += 1
                continue
            except openai.APIStatusError as exc:
                return empty, Invalid(f"the model endpoint refused the request ({exc.status_code}: {_message(exc)})")
            except openai.APIResponseValidationError as exc:
                return empty, Invalid(f"the model endpoint's reply is not a chat completion ({exc})")
            self._count(getattr(completion, "usage", None))
            return self._reply_of(completion)

    def _count(self, usage: Any) -> None:
        if usage is None:
            return
        for key in ("prompt_tokens", "completion_tokens"):
            n = int(getattr(usage, key, 0) or 0)
            self.usage[key] += n
            self.last_usage[key] += n

    @staticmethod
    def _reply_of(completion: Any) -> tuple[dict[str, Any], Invalid | None]:
        choices = getattr(completion, "choices", None) or []
        if not choices:
            return {"role": "assistant", "content": ""}, Invalid("the reply had no choices")
        message = choices[0].message
        reply: dict[str, Any] = {"role": "assistant", "content": (message.content or "")[:MAX_REPLY_CHARS]}
        calls = []
        for i, call in enumerate(message.tool_calls or []):
            fn = getattr(call, "function", None)
            calls.append({"id": getattr(call, "id", None) or f"call-{i}", "type": "function",
                          "function": {"name": getattr(fn, "name", None) or "",
                                       "arguments": getattr(fn, "arguments", None) or ""}})
        if calls:
            reply["tool_calls"] = calls
            if not reply["content"]:
                reply["content"] = None
        return reply, None


def _retry_after(exc: Any) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _raw(reply: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in reply.items() if k != "role"}, ensure_ascii=False)[:MAX_REPLY_CHARS]


def factory(agent_id: str, role: str, briefing: Mapping[str, Any]) -> LLMPolicy:
    """The policy protocol's factory: configured from the environment, the endpoint probed once."""
    config = LLMConfig.from_env()
    probe(config)
    return LLMPolicy(agent_id, role, briefing, config)
