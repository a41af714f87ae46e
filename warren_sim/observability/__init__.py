"""What a running WARREN says about itself: Prometheus metrics, OpenTelemetry spans, structured log events.

Three small modules with narrow surfaces, called by the layers above (the agent operations, the run loop, the
journal, the SDK, the LLM policy) and importing nothing of WARREN themselves, so every layer may use them:

- :mod:`.metrics`: one :class:`~.metrics.Metrics` per app, on its own ``CollectorRegistry``;
- :mod:`.tracing`: a span per agent request continuing the caller's W3C ``traceparent``, GenAI spans per model
  call, ``traceparent`` for the SDK's requests; all of it a no-op (and ``opentelemetry`` never imported) unless
  tracing was configured;
- :mod:`.logs`: lifecycle events that print as today's human lines or as one JSON object per line.

They do not read the clock either: durations are measured by the callers with ``runtime.clock.wall_seconds``
(the one module allowed to read wall time) and handed in as seconds.
"""
