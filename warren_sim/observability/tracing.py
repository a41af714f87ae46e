"""OpenTelemetry traces: a span per agent request, a GenAI span per model call, ``traceparent`` for the SDK.

Optional (``pip install 'warren-sim[otel]'``) and off unless configured the standard way: the ``OTEL_*``
variables (:func:`configure_from_env`, called by ``warren``'s command line), an SDK ``TracerProvider`` the
program installed itself (``opentelemetry-instrument``, a test), or one handed to the app. Off costs nothing:
``opentelemetry`` is never imported unless the variables ask for it or the program imported it already, and
every call here returns a shared do-nothing object (:data:`NO_TRACER`, ``_NULL``).

One decision is one trace, agent to verdict: the SDK sends the current span's W3C ``traceparent`` with every
request (:func:`inject_traceparent`), the server continues it (:meth:`Tracer.request`: a ``SERVER`` span per agent
request, with the run, the agent, the observation id and the verdict as attributes), and the LLM policy's model
call is a ``CLIENT`` span under the agent's own (:func:`model_call`, with the GenAI semantic conventions'
``gen_ai.*`` attributes). What the attributes are is listed in docs/operations.md.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

__all__ = ["NO_TRACER", "NULL_SPAN", "NoTracer", "RequestSpan", "Tracer", "configure_from_env", "inject_traceparent",
           "model_call", "tracer_for", "with_traceparent"]

INSTRUMENTATION = "warren_sim"


class _NullSpan:
    """What a span is when tracing is off: attributes set on it go nowhere."""

    __slots__ = ()

    def set(self, key: str, value: Any) -> None:
        pass

    def __enter__(self) -> _NullSpan:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


_NULL = _NullSpan()
NULL_SPAN = _NULL  # what every span is while tracing is off (callers may test for it to skip building attributes)


class RequestSpan:
    """An agent request's span while it is handled: :meth:`set` adds what is learned on the way (the
    observation id, the verdict)."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def set(self, key: str, value: Any) -> None:
        if value is not None:
            self.span.set_attribute(f"warren.{key}", value)


class Tracer:
    """Server spans per agent request, on an OpenTelemetry tracer (see :func:`tracer_for`)."""

    enabled = True

    def __init__(self, otel_tracer: Any) -> None:
        from opentelemetry.trace import SpanKind
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        self._tracer = otel_tracer
        self._server = SpanKind.SERVER
        self._propagator = TraceContextTextMapPropagator()

    @contextmanager
    def request(self, kind: str, transport: str, route: str, traceparent: str | None, run_id: str,
                agent_id: str | None = None, tracestate: str | None = None) -> Iterator[RequestSpan]:
        """One agent request of ``kind`` (claim, poll, submit, receipt, ...), a child of the caller's span when
        ``traceparent`` names one. A refusal (an exception with a ``status``) is recorded as ``error.type``; only
        one without a status (a bug) marks the span as an error."""
        from opentelemetry.trace import Status, StatusCode

        carrier = {} if traceparent is None else {"traceparent": traceparent}
        if tracestate is not None and traceparent is not None:
            carrier["tracestate"] = tracestate
        parent = self._propagator.extract(carrier) if carrier else None
        attributes: dict[str, Any] = {"warren.run_id": run_id, "warren.transport": transport,
                                      "warren.request": kind}
        if agent_id is not None:
            attributes["warren.agent_id"] = agent_id
        attributes["http.route" if transport == "http" else "rpc.method"] = route
        with self._tracer.start_as_current_span(f"warren.{kind}", context=parent, kind=self._server,
                                                attributes=attributes, record_exception=False,
                                                set_status_on_exception=False) as span:
            try:
                yield RequestSpan(span)
            except Exception as exc:
                status = getattr(exc, "status", getattr(exc, "code", None))  # HTTP's, or JSON-RPC's (< 0)
                span.set_attribute("error.type", str(status) if isinstance(status, int) else type(exc).__qualname__)
                if not isinstance(status, int) or status >= 500:
                    span.record_exception(exc)
                    span.set_status(Status(StatusCode.ERROR, str(exc)[:200]))
                raise


class NoTracer:
    """Tracing off: the same call, a shared do-nothing context manager."""

    enabled = False

    def request(self, kind: str, transport: str, route: str, traceparent: str | None, run_id: str,
                agent_id: str | None = None, tracestate: str | None = None) -> _NullSpan:
        return _NULL


NO_TRACER = NoTracer()


def _otel_imported() -> bool:
    return "opentelemetry.trace" in sys.modules


def tracer_for(provider: Any = None, name: str = INSTRUMENTATION) -> Tracer | NoTracer:
    """A :class:`Tracer` on ``provider``, or on the program's global provider when it installed an SDK one;
    :data:`NO_TRACER` otherwise (without importing ``opentelemetry`` when nothing imported it yet)."""
    otel = _global_tracer(name) if provider is None else provider.get_tracer(name, _version())
    return NO_TRACER if otel is None else Tracer(otel)


def _global_tracer(name: str) -> Any:
    """The global provider's tracer, or None when no real (SDK) provider is installed."""
    if not _otel_imported():
        return None
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(name, _version())


def _version() -> str:
    from .. import __version__

    return __version__


# -- the SDK's side ----------------------------------------------------------------------------------------
_propagator: list[Any] = []


def inject_traceparent(headers: MutableMapping[str, str]) -> None:
    """Add the current span's W3C ``traceparent`` (and ``tracestate``) to a request's ``headers``; nothing when
    no span is current, or when the program never imported OpenTelemetry (then no span can be)."""
    if not _otel_imported():
        return
    from opentelemetry import trace

    if not trace.get_current_span().get_span_context().is_valid:
        return
    if not _propagator:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        _propagator.append(TraceContextTextMapPropagator())
    _propagator[0].inject(headers)


def with_traceparent(params: dict[str, Any]) -> dict[str, Any]:
    """A JSON-RPC request's ``params`` with the current span's ``traceparent`` (and ``tracestate``) added, as the
    agent WebSocket reads them; ``params`` itself when no span is current."""
    carrier: dict[str, str] = {}
    inject_traceparent(carrier)
    return {**params, **carrier} if carrier else params


# -- the LLM policy's side ---------------------------------------------------------------------------------
class ModelCall:
    """A model call's GenAI span while it runs: :meth:`finish` records what the reply says."""

    __slots__ = ("span",)

    def __init__(self, span: Any) -> None:
        self.span = span

    def finish(self, completion: Any) -> None:
        """The response's model, id, token usage and finish reasons (``gen_ai.*``), from an OpenAI-style reply."""
        span = self.span
        model = getattr(completion, "model", None)
        if model:
            span.set_attribute("gen_ai.response.model", str(model))
        rid = getattr(completion, "id", None)
        if rid:
            span.set_attribute("gen_ai.response.id", str(rid))
        usage = getattr(completion, "usage", None)
        if usage is not None:
            for key, attr in (("prompt_tokens", "gen_ai.usage.input_tokens"),
                              ("completion_tokens", "gen_ai.usage.output_tokens")):
                n = getattr(usage, key, None)
                if n is not None:
                    span.set_attribute(attr, int(n))
        reasons = [str(c.finish_reason) for c in getattr(completion, "choices", None) or []
                   if getattr(c, "finish_reason", None)]
        if reasons:
            span.set_attribute("gen_ai.response.finish_reasons", reasons)

    def failed(self, error_type: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        self.span.set_attribute("error.type", error_type)
        self.span.set_status(Status(StatusCode.ERROR, error_type))


class _NullCall:
    __slots__ = ()

    def finish(self, completion: Any) -> None:
        pass

    def failed(self, error_type: str) -> None:
        pass


_NULL_CALL = _NullCall()


@contextmanager
def model_call(model: str, *, server_address: str | None = None, provider_name: str = "openai",
               request: Mapping[str, Any] | None = None, tracer_provider: Any = None) -> Iterator[ModelCall | _NullCall]:
    """A ``chat {model}`` span (GenAI semantic conventions, kind ``CLIENT``) around one model call, a child of the
    current span (the agent's decision); a do-nothing one when tracing is off. ``request``: the request's
    settings worth recording (``temperature``)."""
    otel = _global_tracer("warren_sim.llm") if tracer_provider is None else \
        tracer_provider.get_tracer("warren_sim.llm", _version())
    if otel is None:
        yield _NULL_CALL
        return
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": provider_name,
                                  "gen_ai.system": provider_name, "gen_ai.request.model": model}
    if server_address:
        attributes["server.address"] = server_address
    for key, value in (request or {}).items():
        if value is not None:
            attributes[f"gen_ai.request.{key}"] = value
    with otel.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
        yield ModelCall(span)


# -- configured the standard way ---------------------------------------------------------------------------
def configure_from_env(environ: Mapping[str, str] | None = None, *, service_name: str = "warren") -> Any:
    """Install an SDK ``TracerProvider`` as the global one when the ``OTEL_*`` variables ask for traces, and
    return it; None (and nothing imported) when they do not.

    Asked for: ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set, or
    ``OTEL_TRACES_EXPORTER`` naming exporters (``otlp``, ``console``; ``none`` turns tracing off, as does
    ``OTEL_SDK_DISABLED=true``). The OTLP exporter is the HTTP/protobuf one (the ``otel`` extra's); it reads the
    endpoint, headers and timeouts from the variables itself, and the resource takes ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES`` (``service_name`` when they name none). A program that already installed an SDK
    provider (``opentelemetry-instrument``) keeps its own. Without the SDK a warning says what to install and
    tracing stays off.
    """
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",") if n.strip()]
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    if names == ["none"] or (not names and not endpoint):
        return None
    names = names or ["otlp"]
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
    except ImportError:
        print("warning: OTEL_* variables ask for traces but the OpenTelemetry SDK is not installed; "
              "pip install 'warren-sim[otel]' (tracing stays off)", file=sys.stderr, flush=True)
        return None
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": service_name}))
    for name in names:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        elif name == "otlp":
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            except ImportError:
                print("warning: OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http; "
                      "pip install 'warren-sim[otel]' (no OTLP export)", file=sys.stderr, flush=True)
                continue
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            print(f"warning: OTEL_TRACES_EXPORTER names {name!r}; WARREN knows otlp, console and none "
                  "(ignored)", file=sys.stderr, flush=True)
    trace.set_tracer_provider(provider)
    return provider
