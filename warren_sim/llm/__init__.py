"""LLM agents: ``--policy llm`` asks an OpenAI-compatible chat-completions endpoint for each decision.

``factory(agent_id, role, briefing)`` is the policy protocol's entry point (the ``llm`` policy name maps to
it); :class:`LLMPolicy` is the policy, :func:`probe` the start-up check, :class:`LLMConfig` the settings
(``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``WARREN_LLM_*``). The ``openai`` package (the optional extra
``warren-sim[llm]``) is imported only when a policy is made. See docs/llm.md.
"""

from .config import LLMConfig, LLMConfigError
from .policy import LLMPolicy, factory, probe

__all__ = ["LLMConfig", "LLMConfigError", "LLMPolicy", "factory", "probe"]
