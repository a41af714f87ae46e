"""How the LLM policy is configured: the variables every OpenAI-compatible client already reads.

``OPENAI_BASE_URL`` (a local Ollama, vLLM, llama.cpp or LM Studio server, or a hosted one), ``OPENAI_API_KEY``,
and WARREN's own ``WARREN_LLM_*``. The command line's ``--model``, ``--temperature`` and ``--max-history`` set
the ``WARREN_LLM_*`` variables, so worker processes of ``warren eval`` inherit them with nothing else to pass.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping

import attrs

DEFAULT_BASE_URL = "https://api.openai.com/v1"
LOCAL_KEY = "not-needed"  # what local servers get when no key is set: they ignore it, the client needs one

ENV_MODEL = "WARREN_LLM_MODEL"
ENV_TEMPERATURE = "WARREN_LLM_TEMPERATURE"
ENV_MAX_HISTORY = "WARREN_LLM_MAX_HISTORY"
ENV_TIMEOUT = "WARREN_LLM_TIMEOUT"
ENV_TOOL_CHOICE = "WARREN_LLM_TOOL_CHOICE"
ENV_BACKOFF = "WARREN_LLM_BACKOFF"


class LLMConfigError(Exception):
    """The policy cannot start: no model, a bad setting, an endpoint that cannot be reached or refuses the key."""


@attrs.frozen
class LLMConfig:
    model: str
    base_url: str = DEFAULT_BASE_URL
    api_key: str = LOCAL_KEY
    temperature: float | None = None  # None: the server's default (some reasoning models accept no other)
    max_history: int = 8  # past decisions kept in the messages
    timeout_s: float = 60.0  # bound of one decision when the observation carries no deadline (in-process)
    tool_choice: str = "required"
    backoff_s: float = 0.5  # first pause after a 429/5xx; doubles, at most 8 s, never past the deadline

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMConfig:
        """The configuration from the environment, with a teaching error for each bad or missing value."""
        env = os.environ if env is None else env
        model = env.get(ENV_MODEL, "").strip()
        if not model:
            raise LLMConfigError(f"no model: pass --model NAME or set {ENV_MODEL} (for example --model "
                                 "llama3.1 for Ollama, or --model gpt-4o-mini for OpenAI)")
        base_url = env.get("OPENAI_BASE_URL", "").strip() or DEFAULT_BASE_URL
        if not base_url.startswith(("http://", "https://")):
            raise LLMConfigError(f"OPENAI_BASE_URL must be an http(s) URL such as http://localhost:11434/v1, "
                                 f"got {base_url!r}")
        api_key = env.get("OPENAI_API_KEY", "").strip()
        if not api_key:
            if base_url == DEFAULT_BASE_URL:
                raise LLMConfigError("OPENAI_API_KEY is not set: set it for a hosted endpoint, or point "
                                     "OPENAI_BASE_URL at a local server (e.g. http://localhost:11434/v1)")
            api_key = LOCAL_KEY
        return cls(
            model=model, base_url=base_url.rstrip("/"), api_key=api_key,
            temperature=_number(env, ENV_TEMPERATURE, None, 0.0, 2.0),
            max_history=int(_number(env, ENV_MAX_HISTORY, 8, 0, 1000, integer=True) or 0),
            timeout_s=float(_number(env, ENV_TIMEOUT, 60.0, 0.1, 3600.0) or 60.0),
            tool_choice=_choice(env, ENV_TOOL_CHOICE, "required", ("required", "auto")),
            backoff_s=float(_number(env, ENV_BACKOFF, 0.5, 0.0, 60.0) or 0.0),
        )


def _number(env: Mapping[str, str], name: str, default: float | None, low: float, high: float,
            integer: bool = False) -> float | None:
    text = env.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        kind = "an integer" if integer else "a number"
        raise LLMConfigError(f"{name} must be {kind} between {low:g} and {high:g}, got {text!r}") from None
    if not (math.isfinite(value) and low <= value <= high):
        raise LLMConfigError(f"{name} must be between {low:g} and {high:g}, got {text!r}")
    return value


def _choice(env: Mapping[str, str], name: str, default: str, allowed: tuple[str, ...]) -> str:
    value = env.get(name, "").strip() or default
    if value not in allowed:
        raise LLMConfigError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
    return value
