"""The sans-IO core of the SDK: every operation once, as a generator that yields what it needs done.

An operation (``get_run``, ``claim``, ``poll``, ``submit``, ``wait_outcome`` ...) is a generator that yields
*effects* and returns its result; a driver performs the effects. There are three drivers, and none of them knows
what an operation means:

* :mod:`._async` (trio) and :mod:`._sync` (blocking) carry every effect over HTTP, through :func:`over_http`
  (retries, status and header checks, the strict JSON reader; written once, here);
* :mod:`._ws` carries the agent effects over the JSON-RPC WebSocket ``WS /v1/agent`` (its connection is
  :mod:`._ws_connection`) and the rest over HTTP (the binding has no run methods).

The effects:

* :class:`Request`: one agent request (claim, briefing, submit, receipt, release), named by its JSON-RPC method
  with the same request over HTTP beside it (:class:`Call`); the driver sends back the result as JSON data, or
  throws in the :class:`WarrenError` it came to.
* :class:`Observe`: the agent's next envelope within ``wait`` s: a long-poll over HTTP, the pushed envelope over
  the WebSocket; the driver sends back the envelope (or None: nothing came).
* :class:`Call`: one HTTP-only request (runs, scenarios, the multi-agent extensions).
* :class:`Sleep`: a pause; the driver sends back the seconds it paused (a ``wake`` agent's push may end it early).

So every driver behaves identically by construction: same retries, same de-duplication by seq, the same
receipt-id check, ``wait_outcome``, release on leaving ``with``, the same errors.

Rules the operations implement (warren-agent/0; ``docs/client.md``):

* Every request carries ``X-Warren-Protocol: warren-agent/0``; every successful response must carry it too,
  be strict JSON, and fit the protocol model, else :class:`ProtocolError`.
* Transport errors are retried (with backoff) only where a retry cannot do harm (:data:`Retry`): reads, polls,
  start, cancel, a claim that resumes a known lease, and ``submit``, whose retries reuse the *same* command_id
  (the server answers an already accepted id with ``duplicate``: exactly-once acceptance). Creating a run and a
  fresh claim are never retried (a retry could create a second run, or find the agent held by the lease whose
  answer was lost).
* Observations: ``after=<highest seq delivered>``; an envelope whose seq was already delivered is dropped
  (at-least-once delivery, de-duplicated here: :func:`accept_envelope`) unless a redelivery was asked for
  (:meth:`AgentState.redeliver`, armed by a resume).
* The briefing is fetched once per revision and checked against its ``content_hash``.
* A 410 carries the run's terminal status as data (``run_status``); from a server that leaves it out, the
  operation asks ``GET /v1/runs/{run}`` (:func:`ended`).
"""

from __future__ import annotations

import hashlib
import json
import secrets
import uuid
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import attrs
import httpx

from warren_sim.observability.tracing import inject_traceparent
from warren_sim.protocol import PROBLEM_CONTENT_TYPE, PROTOCOL_HEADER, PROTOCOL_VERSION
from warren_sim.protocol.converter import WireError, structure_or_error
from warren_sim.protocol.models import (
    TERMINAL_RUN_STATUSES,
    BulkClaimResponse,
    ClaimResponse,
    Receipt,
    RunView,
)
from warren_sim.protocol.strict_json import StrictJSONError, canonical_json, loads_strict

from ._exceptions import (
    BriefingHashMismatch,
    LeaseError,
    LeaseRejected,
    NotFound,
    ProtocolError,
    RunEnded,
    ServiceUnavailable,
    TooManyRequests,
    TransportError,
    WaitTimeout,
    WarrenError,
    error_for_status,
)
from ._models import Observation

T = TypeVar("T")

#: The parts a narrowed envelope may leave out (``poll_many(parts=)``), with what they read as when left out.
OPTIONAL_PARTS: Mapping[str, Any] = {"observation": {}, "text": "", "affordances": []}
#: Outcomes after which a command's outcome can still change (``wait_outcome`` waits past them by default).
PENDING_OUTCOMES = frozenset({"pending"})
#: Receipt statuses that mean "the server has accepted this command" (``duplicate``: accepted earlier).
SUCCESS_STATUSES = frozenset({"accepted", "duplicate"})

#: When a request is sent again after a transport error: ``safe`` (a retry cannot do harm: retried through a
#: server restart, :attr:`RetryPolicy.reconnect_s`), ``brief`` (``attempts`` more tries, no more: a release on
#: the way out), ``unsent`` (only if it never left: claiming several agents at once), ``never`` (creating a run).
#: A claim is ``safe``, a fresh one too: it proposes the token of the lease it asks for (``proposed_lease``), so if
#: its answer was lost after the server granted it (a reset, a restart), the retry resumes that lease. A 503
#: (nothing was done) is retried after its Retry-After whatever the request.
Retry = Literal["safe", "brief", "unsent", "never"]


@attrs.define
class Call:
    """One HTTP request. ``read_timeout`` overrides the client's (long-polls need wait + margin); ``expect`` are
    the success statuses; ``gone_ok`` the errors that, on a retry, mean the first try got through."""

    method: str
    path: str
    params: Mapping[str, str | int | float] = attrs.field(factory=dict)
    json: Any = None
    read_timeout: float | None = None
    expect: tuple[int, ...] = (200,)
    retry: Retry = "safe"
    gone_ok: tuple[type[WarrenError], ...] = ()

    def describe(self) -> str:
        return f"{self.method} {self.path}"


@attrs.define
class Request:
    """One agent request of warren-agent/0: ``rpc`` is its method on the WebSocket binding (params: the agent,
    its lease, read when it is sent, and ``args``), ``http`` the same request over HTTP."""

    rpc: str
    state: AgentState
    http: Call
    args: Mapping[str, Any] = attrs.field(factory=dict)

    def rpc_params(self) -> dict[str, Any]:
        s = self.state
        return {"run_id": s.run_id, "agent_id": s.agent_id, **({"lease": s.lease} if s.lease else {}), **self.args}


@attrs.define
class Observe:
    """The agent's next envelope within ``wait`` s (``redelivery``: the outstanding one again, even if seen)."""

    state: AgentState
    wait: float
    redelivery: bool

    @property
    def http(self) -> Call:
        """The long-poll that asks for it over HTTP (made only there: the WebSocket waits for a push)."""
        s = self.state
        return Call("GET", s.path("/observations"), read_timeout=self.wait + 15.0, expect=(200, 204),
                    params={"after": -1 if self.redelivery else s.delivered_seq, "wait": self.wait, **s.auth})


@attrs.define
class Sleep:
    """Pause for ``seconds``; a push for ``wake``'s agent may end the pause early (over the WebSocket)."""

    seconds: float
    wake: AgentState | None = None


#: Effects are made per request, so they are plain ``attrs.define`` classes: frozen ones cost twice as much to
#: make. Nothing changes an effect once it is yielded.
Effect = Request | Observe | Call | Sleep
#: An operation: yields effects, is sent their results, returns its own.
Op = Generator[Effect, Any, T]
#: What :func:`over_http` makes of an operation: yields the Calls to send (sent back the ``httpx.Response``, or
#: thrown in the ``httpx.TransportError``) and the Sleeps; the HTTP drivers run these.
HttpOp = Generator[Call | Sleep, Any, T]


@attrs.frozen
class RetryPolicy:
    """How transport errors and 429s are retried where retrying is safe: up to ``attempts`` more tries, pausing
    ``backoff * factor**n`` (at most ``max_backoff``) seconds before try n+1, or a 429's ``Retry-After`` (at most
    ``max_retry_after``).

    A transport error (the server went away: a restart: docs/reliability.md) is retried beyond ``attempts`` for as
    long as the pauses so far add up to less than ``reconnect_s`` (default 60 s), then fails with a
    :class:`TransportError` that says how long it tried. A restarted server resumes the run and its leases, so the
    retried request simply goes on. A 503 (nothing was done: a server restarting or shedding load, or an injected
    fault, docs/faults.md) is retried the same way, each try counted as at least its backoff; so is a
    WebSocket request whose connection was lost before its answer came.
    """

    attempts: int = 4
    backoff: float = 0.05
    factor: float = 2.0
    max_backoff: float = 1.0
    max_retry_after: float = 5.0
    reconnect_s: float = 60.0

    def delay(self, attempt: int) -> float:
        # the exponent capped: retries past ``attempts`` (within reconnect_s) may count far beyond where
        # factor**attempt overflows a float
        return min(self.max_backoff, self.backoff * self.factor ** min(attempt, 60))

    def gives_up(self, attempt: int, waited: float, pause: float) -> bool:
        """After ``attempt`` retries whose pauses add up to ``waited``: whether to stop rather than pause ``pause``
        once more (past ``attempts``, only once ``reconnect_s`` would be exceeded)."""
        return attempt >= self.attempts and waited + pause > self.reconnect_s


NO_RETRY = RetryPolicy(attempts=0, reconnect_s=0.0)


def headers() -> dict[str, str]:
    """Headers sent with every request; with the current span's W3C ``traceparent`` when the program traces, so
    the server's span of the request continues the agent's trace (docs/operations.md)."""
    out = {PROTOCOL_HEADER: PROTOCOL_VERSION, "Accept": f"application/json, {PROBLEM_CONTENT_TYPE}"}
    inject_traceparent(out)
    return out


def mint_command_id() -> str:
    """A fresh command id: ``c-`` and 32 random hex digits (uuid4), unique for all practical purposes."""
    return f"c-{uuid.uuid4().hex}"


def quote_segment(value: str) -> str:
    return quote(value, safe="")


def scenario_path(name: str, params: Mapping[str, Any] | None = None) -> str:
    """``/v1/scenarios/{name}``, with ``?params=<JSON>`` when parameters shape the layout."""
    path = f"/v1/scenarios/{quote_segment(name)}"
    if params:
        path += "?params=" + quote(json.dumps(dict(params), separators=(",", ":")), safe="")
    return path


def agent_path(run_id: str, agent_id: str, tail: str = "") -> str:
    return f"/v1/runs/{quote_segment(run_id)}/agents/{quote_segment(agent_id)}{tail}"


def _timeout(http: httpx.AsyncClient | httpx.Client, call: Call) -> httpx.Timeout:
    base = http.timeout
    if call.read_timeout is None or base.read is None:
        return base
    return httpx.Timeout(connect=base.connect, read=max(base.read, call.read_timeout), write=base.write,
                         pool=base.pool)


def request_kwargs(http: httpx.AsyncClient | httpx.Client, call: Call) -> dict[str, Any]:
    kw: dict[str, Any] = {"params": dict(call.params), "headers": headers(), "timeout": _timeout(http, call)}
    if call.json is not None:
        kw["json"] = call.json
    return kw


# --------------------------------------------------------------------------------------------- responses


def _problem_of(response: httpx.Response) -> dict[str, Any]:
    ctype = response.headers.get("content-type", "").split(";")[0].strip()
    if ctype in (PROBLEM_CONTENT_TYPE, "application/json"):
        try:
            data = loads_strict(response.content)
        except StrictJSONError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("detail"), str):
            return data
    text = response.text.strip()[:500] or "(empty body)"
    return {"type": "about:blank", "title": response.reason_phrase, "status": response.status_code,
            "detail": f"the server answered {response.status_code} without a problem+json body: {text}"}


def _retry_after(response: httpx.Response) -> float | None:
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def check(response: httpx.Response, call: Call, expect: Iterable[int]) -> httpx.Response:
    """Raise the :class:`ServerError` for an error status, :class:`ProtocolError` for anything else amiss."""
    status = response.status_code
    if status >= 400:
        error = error_for_status(status, _problem_of(response), call.describe())
        if isinstance(error, TooManyRequests | ServiceUnavailable):
            error.retry_after = _retry_after(response)
        raise error
    expected = tuple(expect)
    if status not in expected:
        raise ProtocolError(f"{call.describe()} answered {status}; warren-agent/0 answers "
                            f"{' or '.join(map(str, expected))} here")
    sent = response.headers.get(PROTOCOL_HEADER)
    if sent != PROTOCOL_VERSION:
        raise ProtocolError(f"{call.describe()}: the response's {PROTOCOL_HEADER} header is {sent!r}, expected "
                            f"{PROTOCOL_VERSION!r}; is this a warren-agent/0 server?")
    return response


def json_body(response: httpx.Response, call: Call) -> Any:
    """The response body read as strict JSON (the server must send nothing Python's lenient reader allows)."""
    ctype = response.headers.get("content-type", "").split(";")[0].strip()
    if not ctype.endswith("json"):
        raise ProtocolError(f"{call.describe()}: expected a JSON body, got content-type {ctype!r}")
    try:
        return loads_strict(response.content)
    except StrictJSONError as exc:
        raise ProtocolError(f"{call.describe()}: the body is not acceptable JSON: {exc}") from None


def model(data: Any, cls: type[T], call: Call | str) -> T:
    """``data`` structured as ``cls``, else :class:`ProtocolError` naming where it came from (a call, or a
    short description such as ``"agent.submit"``)."""
    where = call if isinstance(call, str) else call.describe()
    try:
        return structure_or_error(data, cls)
    except WireError as exc:
        raise ProtocolError(f"{where}: the body does not fit {getattr(cls, 'WIRE_NAME', cls)}: {exc}") from None


def exchange(call: Call, retry: RetryPolicy) -> HttpOp[httpx.Response | None]:
    """Send ``call`` and check the response; retry transport errors and 429s (after their Retry-After, at most
    ``retry.max_retry_after`` s) as ``call.retry`` allows (:data:`Retry`). None when a retry met one of
    ``call.gone_ok``: the first try got through."""
    if call.retry == "never":
        retry = NO_RETRY
    elif call.retry == "brief":
        retry = attrs.evolve(retry, reconnect_s=0.0)
    attempt = 0
    waited = 0.0
    while True:
        try:
            response = yield call
        except httpx.TransportError as exc:
            pause = retry.delay(attempt)
            if (call.retry == "unsent" and not isinstance(exc, httpx.ConnectError)) or retry.gives_up(
                    attempt, waited, pause):
                tries = f" (after {attempt + 1} tries over {waited:.1f} s)" if attempt else ""
                raise TransportError(f"{call.describe()} failed{tries}: {type(exc).__name__}: {exc}; is the "
                                     "server running? (the SDK retries connection errors for up to "
                                     f"{retry.reconnect_s:g} s: RetryPolicy.reconnect_s)") from exc
            yield Sleep(pause)
            waited += pause
            attempt += 1
            continue
        try:
            return check(response, call, call.expect)
        except (TooManyRequests, ServiceUnavailable) as exc:
            pause = retry.delay(attempt) if exc.retry_after is None else min(exc.retry_after, retry.max_retry_after)
            if isinstance(exc, TooManyRequests):
                if attempt >= retry.attempts or call.retry == "never":
                    raise
            elif retry.gives_up(attempt, waited, max(pause, retry.delay(attempt))):
                raise
            yield Sleep(pause)
            waited += max(pause, retry.delay(attempt))
            attempt += 1
        except call.gone_ok:
            if attempt == 0:
                raise
            return None


def http_call(call: Call, retry: RetryPolicy) -> HttpOp[Any]:
    """``call`` over HTTP: its body as strict JSON, or None (a 204, or a retry that found the work done)."""
    response = yield from exchange(call, retry)
    if response is None or response.status_code == 204:
        return None
    return json_body(response, call)


class Steps(Generic[T]):
    """An operation as a driver steps through it: iterate for its effects, answer each one with :meth:`send`
    (its result) or :meth:`throw` (its error) before the next; :attr:`result` is what the operation returned.
    Used as ``with``, it closes the operation if the driver stops early (cancelled, or an error of its own)."""

    def __init__(self, op: Generator[Any, Any, T]) -> None:
        self._op = op
        self._reply: Any = None
        self._error: BaseException | None = None
        self.result: T

    def __iter__(self) -> Iterator[Any]:
        op = self._op
        try:
            while True:
                if self._error is None:
                    effect = op.send(self._reply)
                else:
                    error, self._error = self._error, None
                    effect = op.throw(error)
                self._reply = None
                yield effect
        except StopIteration as stop:  # the operation returned: so does this iterator (no second exception)
            self.result = stop.value

    def send(self, reply: Any) -> None:
        self._reply = reply

    def throw(self, error: BaseException) -> None:
        self._error = error

    def __enter__(self) -> Steps[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self._op.close()


def over_http(op: Op[T], retry: RetryPolicy) -> HttpOp[T]:
    """``op`` with every effect carried over HTTP: a :class:`Request` or :class:`Observe` as its ``http`` call,
    retried per ``retry`` (:func:`http_call`), its JSON (or the error) handed back to ``op``."""
    with Steps(op) as steps:
        for effect in steps:
            if isinstance(effect, Sleep):
                steps.send((yield effect))
                continue
            try:
                steps.send((yield from http_call(effect if isinstance(effect, Call) else effect.http, retry)))
            except WarrenError as exc:
                steps.throw(exc)
    return steps.result


# --------------------------------------------------------------------------------------------- runs


def get_json(path: str) -> Op[Any]:
    return (yield Call("GET", path))


def run_op(method: str, path: str, **kw: Any) -> Op[RunView]:
    call = Call(method, path, **kw)
    return model((yield call), RunView, call)


def run_path(run_id: str, tail: str = "") -> str:
    return f"/v1/runs/{quote_segment(run_id)}{tail}"


def create_run(scenario: str, seed: int, body: dict[str, Any]) -> Op[RunView]:
    return (yield from run_op("POST", "/v1/runs", expect=(201,), retry="never",
                              params={"scenario": scenario, "seed": seed}, json=body))


def fork_run(run_id: str, body: dict[str, Any]) -> Op[RunView]:
    """``POST /v1/runs/{run}/fork``: never retried, as a creation (a retry could make a second fork)."""
    return (yield from run_op("POST", run_path(run_id, "/fork"), expect=(201,), retry="never", json=body))


def run_fork_body(cursor: int, controlled_agents: ControlledAgents, npc_policy: str, pace: float | None,
                  decision_deadline_s: float) -> dict[str, Any]:
    """The fork body: the creation body's fields (no params: the world is the parent's) and the cursor."""
    if not isinstance(cursor, int) or isinstance(cursor, bool):
        raise TypeError(f"cursor is a record's cursor in the parent's journal (an int), not {cursor!r}")
    body = run_create_body(controlled_agents, npc_policy, pace, decision_deadline_s, None)
    del body["params"]
    return {"cursor": cursor, **body}


def list_runs() -> Op[list[RunView]]:
    call = Call("GET", "/v1/runs")
    data = yield call
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise ProtocolError(f"{call.describe()}: expected an object with a 'runs' array")
    return [model(item, RunView, call) for item in data["runs"]]


def wait_run_ended(run_id: str, poll_interval: float, timeout: float | None) -> Op[RunView]:
    waited = 0.0
    while True:
        view = yield from run_op("GET", run_path(run_id))
        if view.status in TERMINAL_RUN_STATUSES:
            return view
        if timeout is not None and waited >= timeout:
            raise WaitTimeout(f"{run_id} is still {view.status} after about {timeout:g} s of polling")
        waited += yield Sleep(poll_interval)


# --------------------------------------------------------------------------------------------- agents


@attrs.define(eq=False)
class AgentState:
    """What the SDK remembers about one claimed agent (shared by the handles of every driver)."""

    run_id: str
    agent_id: str
    #: The lease token ("" until a fresh claim is answered).
    lease: str
    briefing_revision: int = 1
    resumed: bool = False
    #: Highest seq handed to the caller; polls ask for ``after`` it.
    delivered_seq: int = -1
    #: When set, the next poll hands out the outstanding envelope even if it was delivered already.
    redelivery: bool = False
    briefing: dict[str, Any] | None = None
    #: The run's terminal status once the SDK has seen it end (410, or a pushed ``run.status``), else None.
    run_status: str | None = None
    released: bool = False
    detached: bool = False
    #: An envelope that came with a receipt (``submit(..., next_wait=)``), handed out by the next poll
    #: without a request.
    prefetched: dict[str, Any] | None = None
    #: The token the claim in progress proposes (``proposed_lease``), made when it is first sent and kept until a
    #: claim is answered: a claim sent again after its answer was lost gets the lease it was granted.
    proposal: str = ""
    #: ``/v1/runs/{run}/agents/{agent}``, quoted once (every request of the agent starts with it).
    _base: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._base = agent_path(self.run_id, self.agent_id)

    def redeliver(self) -> None:
        """Make the next poll hand out the outstanding envelope again, even if it was delivered already."""
        self.redelivery = True

    def path(self, tail: str) -> str:
        return self._base + tail

    @property
    def auth(self) -> dict[str, str]:
        return {"lease": self.lease}


def ended(exc: RunEnded, run_id: str, states: Iterable[AgentState] = ()) -> Op[RunEnded]:
    """A 410 as it is raised: its terminal status, from the run itself (``GET /v1/runs/{run}``) when the server
    sent no ``run_status`` member, recorded on ``states``."""
    if exc.status is None:
        try:
            view = yield from run_op("GET", run_path(run_id))
        except WarrenError:  # best effort: the 410 itself is the answer
            view = None
        if view is not None and view.status in TERMINAL_RUN_STATUSES:
            exc.status = view.status
    for state in states:
        state.run_status = exc.status or "ended"
    return exc


def run_ended(state: AgentState, detail: str = "") -> RunEnded:
    """The 410 a handle raises by itself, once it knows that the run has ended (``state.run_status``)."""
    status = state.run_status if state.run_status in TERMINAL_RUN_STATUSES else None
    detail = detail or (f"{state.run_id} has ended" + (f" with status {status}" if status else "")
                        + "; there will be no more observations")
    problem = {"type": "about:blank", "title": "Gone", "status": 410, "detail": detail,
               **({"run_status": status} if status else {})}
    return RunEnded(410, problem, "observations")


def new_proposal() -> str:
    """A token for a fresh lease, made here (``proposed_lease``): 192 random bits, as the server's own."""
    return "l-" + secrets.token_urlsafe(24)


def claim(state: AgentState) -> Op[AgentState]:
    """Claim ``state``'s agent: afresh (``state.lease`` is ""), or with its saved lease (a resume).

    Each claim also proposes the token a fresh lease would get (a WARREN extension, ``proposed_lease``): a claim
    sent again because its answer was lost (a reset, a server restart) then resumes the lease it was granted,
    where the server's own token would be lost with the answer and the agent held until that lease's TTL ends.
    The proposal is kept until a claim is answered, so the claim again of a 403 or a reconnect reuses it too."""
    lease = state.lease
    if not state.proposal:
        state.proposal = new_proposal()
    proposed = {"proposed_lease": state.proposal}
    call = Call("POST", state.path("/claim"), params={**({"lease": lease} if lease else {}), **proposed},
                retry="safe")
    try:
        got = yield Request("agent.claim", state, call, proposed)
    except RunEnded as exc:
        raise (yield from ended(exc, state.run_id)) from None
    accept_claim(state, got, lease, call.describe())
    return state


def accept_claim(state: AgentState, got: Any, lease: str, where: str) -> None:
    """Fold a claim's answer (``{lease, briefing_revision}``) into ``state``; ``lease`` is the token the claim
    sent ("" for a fresh claim)."""
    if isinstance(got, dict):  # the WebSocket binding says whether it resumed: we know, from the token
        got = {k: v for k, v in got.items() if k != "resumed"}
    fresh = model(got, ClaimResponse, where)
    # A lease that expired meanwhile is replaced by a fresh token: the agent is ours again all the same.
    state.resumed = bool(lease) and fresh.lease == lease
    state.lease = fresh.lease
    state.briefing_revision = max(state.briefing_revision, fresh.briefing_revision)
    state.released = False
    state.proposal = ""  # answered: the next fresh claim (after this lease ends) proposes another token


def selector_json(agents: ControlledAgents) -> Any:
    """Agent ids, ``"all"`` or ``{"role": ROLE}`` as the wire's selector (``controlled_agents``, bulk claims)."""
    if agents == "all":
        return "all"
    if isinstance(agents, str):
        raise TypeError(f'agents are a list of agent ids, "all" or {{"role": ROLE}}, not the string {agents!r}')
    if isinstance(agents, Mapping):
        return dict(agents)
    return list(agents)


def claim_many(run_id: str, agents: ControlledAgents) -> Op[list[AgentState]]:
    """Fresh leases on several controlled agents in one request (``POST /v1/runs/{run}/claim``, a WARREN
    extension), all or none. Like a fresh claim, retried only while the server cannot be reached."""
    call = Call("POST", run_path(run_id, "/claim"), json={"agents": selector_json(agents)}, retry="unsent")
    try:
        data = yield call
    except RunEnded as exc:
        raise (yield from ended(exc, run_id)) from None
    got = model(data, BulkClaimResponse, call)
    return [AgentState(run_id, aid, token, got.briefing_revision) for aid, token in got.leases.items()]


def leased(state: AgentState, make: Callable[[], Effect]) -> Op[Any]:
    """An agent request (``make()`` builds it with the lease as it stands), claimed again once after a 403 that the
    SDK did not cause itself: the lease expired while the agent was away, or the server ended it (an ``expire``
    fault: docs/faults.md). The claim sends the token held, so a lease that still holds is resumed and one that
    ended is replaced by a fresh token; the request then goes again. Each round needs a claim that succeeded (one
    refused, 409 when another lease holds the agent, is raised), at most :data:`RECLAIMS` of them; a 403 after
    ``release()`` is raised as it is (:class:`LeaseRejected`)."""
    for _ in range(RECLAIMS):
        try:
            return (yield make())
        except LeaseRejected:
            if state.released:
                raise
        yield from claim(state)
    return (yield make())


#: Claims again in a row after 403s (``leased``), each after a claim that succeeded: a bound, never reached by a
#: lease that merely expired once.
RECLAIMS = 16


def resume(state: AgentState) -> Op[None]:
    """Claim again with the saved lease (after a reconnect) and arm the redelivery of the outstanding envelope."""
    yield from claim(state)
    state.redeliver()


def briefing_hash(briefing: Mapping[str, Any]) -> str:
    """``sha256:`` + hex digest of the briefing's canonical JSON without its ``content_hash`` member."""
    body = {k: v for k, v in briefing.items() if k != "content_hash"}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def get_briefing(state: AgentState, revision: int | None = None) -> Op[dict[str, Any]]:
    """The briefing: the one fetched already if it is at least the revision wanted (and the newest announced)."""
    wanted = max(revision or 0, state.briefing_revision)
    cached = state.briefing
    if cached is not None and cached.get("revision", 0) >= wanted:
        return cached
    def request() -> Request:
        return Request("agent.briefing", state, Call("GET", state.path("/briefing"), params=state.auth))

    data = yield from leased(state, request)
    where = f"GET {state.path('/briefing')}"
    if not isinstance(data, dict):
        raise ProtocolError(f"{where}: the briefing must be a JSON object")
    given, computed = data.get("content_hash"), briefing_hash(data)
    if given != computed:
        raise BriefingHashMismatch(f"{where}: content_hash is {given!r} but the briefing's canonical "
                                   f"JSON hashes to {computed!r}")
    rev = data.get("revision")
    if not isinstance(rev, int) or isinstance(rev, bool) or rev < 1:
        raise ProtocolError(f"{where}: revision must be an integer >= 1, got {rev!r}")
    state.briefing = data
    state.briefing_revision = max(state.briefing_revision, rev)
    return data


def _prefetched(state: AgentState) -> Observation | None:
    """The envelope kept from ``submit(next_wait=)``, handed out without a request (unless a redelivery is due)."""
    if state.prefetched is None or state.redelivery:
        return None
    data, state.prefetched = state.prefetched, None
    return accept_envelope(state, data, "the receipt's next_observation")


def poll(state: AgentState, wait: float) -> Op[Observation | None]:
    """One wait of up to ``wait`` s: an observation not yet delivered, or None (nothing came, or only a
    redelivered envelope, dropped)."""
    kept = _prefetched(state)
    if kept is not None:
        return kept
    redelivery = state.redelivery
    try:
        data = yield from leased(state, lambda: Observe(state, wait, redelivery))
    except RunEnded as exc:
        raise (yield from ended(exc, state.run_id, [state])) from None
    state.redelivery = False
    return None if data is None else accept_envelope(state, data, f"GET {state.path('/observations')}", redelivery)


def poll_many(states: list[AgentState], wait: float, parts: Iterable[str] | None = None) -> Op[list[Observation]]:
    """One long-poll for several agents of one run (``POST /v1/runs/{run}/observations``, a WARREN extension):
    the new observations among them, each handed to its agent's state as a single poll would (after=
    its delivered seq, duplicates dropped); ``[]`` on 204. Envelopes kept from ``submit(next_wait=)`` come
    first, without asking for them again. ``parts`` narrows the envelopes (the server then spares building
    what is left out); a part left out reads as empty (:data:`OPTIONAL_PARTS`)."""
    if not states:
        return []
    run_id = states[0].run_id
    if any(st.run_id != run_id for st in states):
        raise ValueError("poll_many polls the agents of one run; these belong to "
                         + ", ".join(sorted({st.run_id for st in states})))
    kept = [obs for obs in map(_prefetched, states) if obs is not None]
    if kept:
        return kept
    after = {st.agent_id: -1 if st.redelivery else st.delivered_seq for st in states}
    body: dict[str, Any] = {"leases": {st.agent_id: st.lease for st in states}, "after": after}
    if parts is not None:
        body["parts"] = list(parts)
    call = Call("POST", run_path(run_id, "/observations"), params={"wait": wait}, json=body,
                read_timeout=wait + 15.0, expect=(200, 204))
    try:
        data = yield call
    except RunEnded as exc:
        raise (yield from ended(exc, run_id, states)) from None
    if data is None:
        return []
    envelopes = data.get("observations") if isinstance(data, dict) else None
    if not isinstance(envelopes, list):
        raise ProtocolError(f"{call.describe()}: the body must be {{\"observations\": [envelopes]}}")
    by_id = {st.agent_id: st for st in states}
    out = []
    for env in envelopes:
        owner = by_id.get(str(env.get("agent_id"))) if isinstance(env, dict) else None
        if owner is None:
            raise ProtocolError(f"{call.describe()}: got an envelope for an agent that was not polled")
        redelivery, owner.redelivery = owner.redelivery, False
        if parts is not None:
            env = {**OPTIONAL_PARTS, **env}
        obs = accept_envelope(owner, env, call.describe(), redelivery)
        if obs is not None:
            out.append(obs)
    return out


def accept_envelope(state: AgentState, data: Any, where: str, redelivery: bool = False) -> Observation | None:
    """An envelope received for ``state``'s agent (JSON, or already an :class:`Observation`), or None when it
    was handed out already (at-least-once delivery) and no redelivery was asked for."""
    obs = data if isinstance(data, Observation) else model(data, Observation, where)
    if obs.agent_id != state.agent_id or obs.run_id != state.run_id:
        raise ProtocolError(f"{where}: got an envelope for {obs.run_id}/{obs.agent_id}")
    if obs.seq <= state.delivered_seq and not redelivery:
        return None  # at-least-once delivery: already handed out (dropped, not an error)
    state.delivered_seq = max(state.delivered_seq, obs.seq)
    state.briefing_revision = max(state.briefing_revision, obs.briefing_revision)  # briefing() refetches if newer
    return obs


def next_observation(state: AgentState, wait: float, idle_pause: float = 0.05) -> Op[Observation]:
    while True:
        obs = yield from poll(state, wait)
        if obs is not None:
            return obs
        if wait <= 0:
            yield Sleep(idle_pause)  # a zero-wait poll would otherwise spin


def command_body(observation: Any, command: Mapping[str, Any], command_id: str | None) -> dict[str, Any]:
    """``{command_id, observation_id, ...command}``; the id is minted unless given here or in ``command``."""
    if not isinstance(command, Mapping):
        raise TypeError(f"a command is a mapping such as {{'action': 'take', 'args': {{...}}}}, "
                        f"{{'sleep_ms': 1000}} or {{'noop': True}}, got {type(command).__name__}")
    observation_id = observation if isinstance(observation, str) else observation.observation_id
    body = dict(command)
    cid = command_id or body.pop("command_id", None) or mint_command_id()
    body.pop("command_id", None)
    body.pop("observation_id", None)
    return {"command_id": cid, "observation_id": observation_id, **body}


def submit(state: AgentState, body: dict[str, Any], next_wait: float | None = None) -> Op[Receipt]:
    """Send the command; transport errors are retried with the same command_id, so an acceptance whose answer
    was lost comes back as ``duplicate`` (the original receipt) instead of a second acceptance.

    With ``next_wait`` the HTTP request asks for the agent's next envelope in the same reply (``?wait=``, a
    WARREN extension): it is kept and handed out by the next poll without a request. A server without the
    extension leaves ``next_observation`` out, and the next poll simply asks it; over the WebSocket the next
    envelope is pushed anyway."""
    def request() -> Request:
        params: dict[str, str | int | float] = dict(state.auth)
        if next_wait is not None:
            params["wait"] = next_wait
        return Request("agent.submit", state, Call("POST", state.path("/commands"), params=params, json=body,
                                                   read_timeout=None if next_wait is None else next_wait + 15.0),
                       {"command": body})

    try:
        data = yield from leased(state, request)
    except RunEnded as exc:
        raise (yield from ended(exc, state.run_id, [state])) from None
    if isinstance(data, dict) and "next_observation" in data:
        data = dict(data)
        nxt = data.pop("next_observation")
        if nxt is not None and next_wait is not None:
            state.prefetched = nxt
    where = f"POST {state.path('/commands')}"
    receipt = model(data, Receipt, where)
    if receipt.command_id != body["command_id"]:
        raise ProtocolError(f"{where}: the receipt is for {receipt.command_id!r}, "
                            f"not {body['command_id']!r}")
    return receipt


def get_receipt(state: AgentState, command_id: str) -> Op[Receipt]:
    path = state.path(f"/commands/{quote_segment(command_id)}")
    data = yield from leased(state, lambda: Request("agent.receipt", state, Call("GET", path, params=state.auth),
                                                    {"command_id": command_id}))
    return model(data, Receipt, f"GET {path}")


def wait_outcome(state: AgentState, command_id: str, until: Iterable[str] | None, poll_interval: float,
                 timeout: float | None) -> Op[Receipt]:
    """Read the receipt until its outcome is in ``until`` (default: anything but ``pending``); a pushed
    ``outcome`` for the agent ends a pause early (over the WebSocket)."""
    wanted = None if until is None else frozenset(until)
    waited = 0.0
    while True:
        receipt = yield from get_receipt(state, command_id)
        done = receipt.outcome not in PENDING_OUTCOMES if wanted is None else receipt.outcome in wanted
        if done or (receipt.status not in SUCCESS_STATUSES):
            return receipt
        if timeout is not None and waited >= timeout:
            raise WaitTimeout(f"command {command_id!r} still has outcome {receipt.outcome!r} after about "
                              f"{timeout:g} s of polling")
        waited += yield Sleep(poll_interval, wake=state)


def release(state: AgentState) -> Op[None]:
    """Free the agent. A retry that finds the lease gone (403) means the first try got through."""
    call = Call("POST", state.path("/release"), params=state.auth, retry="brief", gone_ok=(LeaseRejected,))
    yield Request("agent.release", state, call)
    state.released = True


def released_quietly(state: AgentState) -> Op[None]:
    """Release on leaving a ``with`` block: nothing to do if already released, detached or the run is gone."""
    if state.released or state.detached:
        return
    try:
        yield from release(state)
    except (RunEnded, LeaseError, NotFound, TransportError, ProtocolError, ServiceUnavailable):
        state.released = True  # best effort: the lease is gone, or will expire on its own


class AgentHandleBase:
    """What the sync and async agent handles share: their state, read through properties."""

    _state: AgentState

    @property
    def run_id(self) -> str:
        return self._state.run_id

    @property
    def agent_id(self) -> str:
        return self._state.agent_id

    @property
    def lease(self) -> str:
        """The lease token: save it to resume this agent later (``claim(..., lease=token)``)."""
        return self._state.lease

    @property
    def resumed(self) -> bool:
        """True when the claim resumed a live lease (same token) rather than starting a new one."""
        return self._state.resumed

    @property
    def briefing_revision(self) -> int:
        return self._state.briefing_revision

    @property
    def delivered_seq(self) -> int:
        """Highest observation seq handed out so far (-1: none)."""
        return self._state.delivered_seq

    @property
    def run_status(self) -> str | None:
        """The run's terminal status once the SDK has seen it end (a 410), else None."""
        return self._state.run_status

    def redeliver(self) -> None:
        """Make the next poll hand out the outstanding envelope again even if it was already delivered."""
        self._state.redeliver()

    def detach(self) -> str:
        """Keep the lease when the ``with`` block ends (no release); return the token to resume with later."""
        self._state.detached = True
        return self._state.lease

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.run_id}/{self.agent_id} seq={self.delivered_seq}"
                f"{' ended ' + self.run_status if self.run_status else ''}>")


#: ``controlled_agents`` of ``create_run``: agent ids, ``"all"``, or ``{"role": ROLE}`` (every agent of a role)
ControlledAgents = Iterable[str] | Mapping[str, str]


def run_create_body(controlled_agents: ControlledAgents, npc_policy: str, pace: float | None,
                    decision_deadline_s: float, params: Mapping[str, Any] | None) -> dict[str, Any]:
    if isinstance(controlled_agents, str) and controlled_agents != "all":
        raise TypeError(f'controlled_agents is a list of agent ids, "all" or {{"role": ROLE}}, not the string '
                        f"{controlled_agents!r}")
    selector = selector_json(controlled_agents)
    return {"controlled_agents": selector, "npc_policy": npc_policy, "pace": pace,
            "decision_deadline_s": decision_deadline_s, "params": dict(params or {})}
