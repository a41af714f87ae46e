"""A black-box check (``warren conformance URL``) of any warren-agent/0 server, one rule at a time.

Each rule is a sentence of the protocol (docs/protocol.md) checked with real requests: raw
httpx where the point is a malformed or unauthorized request, the SDK's helpers where it is the happy path.
The checks run in three flows (discovery; one run driven through claim, briefing, polls, every verdict,
release and cancel; one run with a short decision deadline for expiry); a flow that breaks off marks its
remaining rules as failed with the reason. Every response is recorded by an httpx event hook, and the last
rules judge all of them: the protocol header on every ``/v1`` response, problem+json on every error, and
every body against its normative JSON Schema (that rule needs the ``jsonschema`` package and is skipped
without it).

The checker creates its own runs (controlling the first agent of the chosen scenario, ``npc_policy:
"none"``) and cancels them at the end. It needs nothing from the server but the protocol, so it can be
pointed at another implementation; it reads no clock but trio's.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
import httpx
import trio

from .client import briefing_hash, mint_command_id
from .protocol import PROBLEM_CONTENT_TYPE, PROTOCOL_HEADER, PROTOCOL_VERSION
from .protocol.response_check import Seen, response_problems

__all__ = ["RULES", "Checker", "RuleResult", "format_report", "run_conformance"]

#: Every rule checked, in report order: (id, what the protocol says).
RULES: tuple[tuple[str, str], ...] = (
    ("discovery", "GET /v1 names the protocol warren-agent/0 and GET /v1/scenarios lists scenarios"),
    ("no-header-accepted", "a request without the X-Warren-Protocol header is accepted"),
    ("protocol-mismatch-409", "a request whose X-Warren-Protocol names another protocol gets 409"),
    ("unknown-run-404", "an unknown run gets 404"),
    ("bad-json-400", "a malformed JSON body gets 400"),
    ("create-run-201", "POST /v1/runs answers 201 with the run, status created while a controlled agent is unclaimed"),
    ("claim", "claiming a controlled agent answers 200 {lease, briefing_revision}"),
    ("run-starts-on-claim", "the run is running once every controlled agent is claimed"),
    ("claim-while-held-409", "a claim without the token while a live lease holds the agent gets 409"),
    ("claim-resume", "a claim with the live lease's token resumes it: 200, same token"),
    ("lease-missing-401", "an agent request without ?lease= gets 401"),
    ("lease-wrong-403", "an agent request with a wrong lease gets 403"),
    ("briefing-hash", "the briefing's content_hash is sha256 of its canonical JSON without the hash field"),
    ("first-envelope-start", "the first envelope has seq 0, observation_id '<agent>#0' and reason 'start'"),
    ("long-poll-204", "a long-poll with nothing newer than after= answers 204 with no body"),
    ("redelivery-on-resume", "after a resume, after=-1 redelivers the outstanding envelope"),
    ("verdict-unknown-observation", "a command for an observation never issued is rejected (outcome none)"),
    ("non-string-ids-422", "a non-string command_id or observation_id gets 422"),
    ("verdict-rejected", "an invalid payload is rejected with a teaching detail and changes nothing"),
    ("rejected-id-rejudged", "a rejected command_id is re-judged: a corrected payload under it is accepted"),
    ("verdict-duplicate", "resubmitting an accepted command_id gets duplicate carrying the original receipt"),
    ("verdict-stale", "a new command for an already answered observation is stale"),
    ("receipt-poll", "GET .../commands/{id} returns the receipt with its outcome; an unknown id gets 404"),
    ("verdict-expired", "a command for an observation past its decision deadline is expired"),
    ("expired-before-payload", "a malformed command for an expired observation is expired, not rejected"),
    ("release", "release frees the agent: its token gets 403 and a new claim gets a new token"),
    ("cancel-410", "after DELETE the run is cancelled; polls and claims get 410 naming the terminal status"),
    ("fork-201", "(optional capability) POST /v1/runs/{run}/fork answers 201 with a new run whose forked_from "
                 "names the parent and the cursor; a cursor past the journal's end gets 400"),
    ("header-on-every-response", "every /v1 response carries X-Warren-Protocol: warren-agent/0"),
    ("problem-json", "every error is application/problem+json with type, title, status and a detail"),
    ("schemas", "every response has a documented status and a body that fits its JSON Schema"),
)
_TITLES = dict(RULES)


@attrs.frozen
class RuleResult:
    """One rule's verdict: ``passed`` True/False, or None when it was skipped (``detail`` says why)."""

    rule: str
    title: str
    passed: bool | None
    detail: str = ""


class RuleFailed(Exception):
    """A rule's check failed; the flow goes on when ``fatal`` is False."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule, self.detail = rule, detail


class Checker:
    """Runs every rule against the server behind ``http`` (an ``httpx.AsyncClient`` with ``base_url``)."""

    def __init__(self, http: httpx.AsyncClient, scenario: str | None = None) -> None:
        self.http = http
        self.scenario = scenario
        self.results: dict[str, RuleResult] = {}
        self.seen: list[Seen] = []
        self.runs: list[str] = []
        hooks = dict(http.event_hooks)
        hooks["response"] = [*hooks.get("response", []), self._record]
        http.event_hooks = hooks

    async def _record(self, response: httpx.Response) -> None:
        await response.aread()
        self.seen.append(Seen(response.request.method, response.request.url.path, response.status_code,
                              response.headers, response.content))

    # -- helpers -----------------------------------------------------------------------------------------
    def ok(self, rule: str, detail: str = "") -> None:
        self.results.setdefault(rule, RuleResult(rule, _TITLES[rule], True, detail))

    def fail(self, rule: str, detail: str) -> None:
        self.results[rule] = RuleResult(rule, _TITLES[rule], False, detail)

    def expect(self, rule: str, condition: bool, detail: str) -> bool:
        """Record a failure of ``rule`` unless ``condition``; a rule passes when nothing failed it."""
        if not condition:
            self.fail(rule, detail)
        return condition

    def require(self, rule: str, condition: bool, detail: str) -> None:
        """Like :meth:`expect`, but later steps of the flow depend on it: stop the flow when it fails."""
        if not condition:
            raise RuleFailed(rule, detail)

    async def req(self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None,
                  content: bytes | None = None, header: str | None = PROTOCOL_VERSION) -> httpx.Response:
        headers = {PROTOCOL_HEADER: header} if header is not None else {}
        kw: dict[str, Any] = {"params": params or {}, "headers": headers}
        if content is not None:
            kw["content"] = content
            headers["content-type"] = "application/json"
        elif body is not None:
            kw["json"] = body
        return await self.http.request(method, path, **kw)

    @staticmethod
    def show(response: httpx.Response) -> str:
        text = response.text if len(response.text) <= 300 else response.text[:300] + "..."
        return f"{response.request.method} {response.request.url.path} -> {response.status_code} {text}"

    @staticmethod
    def body(response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            return None

    def agent_path(self, run: str, agent: str, tail: str) -> str:
        return f"/v1/runs/{run}/agents/{agent}{tail}"

    async def create(self, agent: str, **extra: Any) -> httpx.Response:
        body = {"controlled_agents": [agent], "npc_policy": "none", **extra}
        response = await self.req("POST", "/v1/runs", params={"scenario": self.scenario, "seed": 1}, body=body)
        data = self.body(response)
        if response.status_code == 201 and isinstance(data, dict) and isinstance(data.get("run_id"), str):
            self.runs.append(data["run_id"])
        return response

    async def command(self, run: str, agent: str, lease: str, body: Any) -> httpx.Response:
        return await self.req("POST", self.agent_path(run, agent, "/commands"), params={"lease": lease}, body=body)

    # -- flows ---------------------------------------------------------------------------------------------
    async def flow_discovery(self) -> str:
        r = await self.req("GET", "/v1", header=None)
        info = self.body(r)
        self.expect("no-header-accepted", r.status_code == 200, self.show(r))
        self.ok("no-header-accepted")
        self.require("discovery", r.status_code == 200 and isinstance(info, dict)
                     and info.get("protocol") == PROTOCOL_VERSION, self.show(r))
        r = await self.req("GET", "/v1/scenarios")
        scenarios = [s.get("name") for s in (self.body(r) or {}).get("scenarios", []) if isinstance(s, dict)]
        self.require("discovery", r.status_code == 200 and bool(scenarios), self.show(r))
        if self.scenario is None:
            self.scenario = "bridge_repair" if "bridge_repair" in scenarios else scenarios[0]
        self.require("discovery", self.scenario in scenarios,
                     f"scenario {self.scenario!r} is not served; the server has {scenarios}")
        r = await self.req("GET", f"/v1/scenarios/{self.scenario}")
        agents = [a.get("agent_id") for a in (self.body(r) or {}).get("agents", []) if isinstance(a, dict)]
        self.require("discovery", r.status_code == 200 and bool(agents), self.show(r))
        self.ok("discovery", f"scenario {self.scenario}, agent {agents[0]}")

        r = await self.req("GET", "/v1/runs", header="warren-agent/99")
        self.expect("protocol-mismatch-409", r.status_code == 409, self.show(r))
        self.ok("protocol-mismatch-409")
        r = await self.req("GET", "/v1/runs/no-such-run-conformance")
        self.expect("unknown-run-404", r.status_code == 404, self.show(r))
        self.ok("unknown-run-404")
        r = await self.req("POST", "/v1/runs", params={"scenario": self.scenario}, content=b'{"pace": ')
        self.expect("bad-json-400", r.status_code == 400, self.show(r))
        self.ok("bad-json-400")
        return str(agents[0])

    async def flow_main(self, agent: str) -> None:
        # Paced: once `release` frees the agent, nobody blocks the run, and an unpaced one races to its time
        # limit (status failed) before the next claim can reach a loaded server. Pace 1 holds sim time to the
        # clock, so the run outlives the flow however slow the client is.
        r = await self.create(agent, pace=1)
        run_view = self.body(r) or {}
        self.require("create-run-201", r.status_code == 201 and run_view.get("status") == "created", self.show(r))
        self.ok("create-run-201")
        run = run_view["run_id"]
        claim_path = self.agent_path(run, agent, "/claim")

        r = await self.req("POST", claim_path)
        got = self.body(r) or {}
        self.require("claim", r.status_code == 200 and isinstance(got.get("lease"), str) and got["lease"]
                     and isinstance(got.get("briefing_revision"), int), self.show(r))
        self.ok("claim")
        lease, revision = got["lease"], got["briefing_revision"]
        r = await self.req("GET", f"/v1/runs/{run}")
        self.expect("run-starts-on-claim", (self.body(r) or {}).get("status") == "running", self.show(r))
        self.ok("run-starts-on-claim")

        r = await self.req("POST", claim_path)
        self.expect("claim-while-held-409", r.status_code == 409, self.show(r))
        self.ok("claim-while-held-409")
        r = await self.req("POST", claim_path, params={"lease": lease})
        self.expect("claim-resume", r.status_code == 200 and (self.body(r) or {}).get("lease") == lease,
                    self.show(r))
        self.ok("claim-resume")

        briefing_path = self.agent_path(run, agent, "/briefing")
        r = await self.req("GET", briefing_path)
        self.expect("lease-missing-401", r.status_code == 401, self.show(r))
        self.ok("lease-missing-401")
        r = await self.req("GET", briefing_path, params={"lease": "l-not-the-token"})
        self.expect("lease-wrong-403", r.status_code == 403, self.show(r))
        self.ok("lease-wrong-403")
        r = await self.req("GET", briefing_path, params={"lease": lease})
        briefing = self.body(r)
        self.require("briefing-hash", r.status_code == 200 and isinstance(briefing, dict), self.show(r))
        self.expect("briefing-hash", briefing.get("content_hash") == briefing_hash(briefing),
                    f"content_hash {briefing.get('content_hash')!r}, computed {briefing_hash(briefing)!r}")
        self.expect("briefing-hash", briefing.get("revision") == revision,
                    f"claim said briefing_revision {revision}, the briefing has revision {briefing.get('revision')}")
        self.ok("briefing-hash")

        obs_path = self.agent_path(run, agent, "/observations")
        r = await self.req("GET", obs_path, params={"after": -1, "wait": 10, "lease": lease})
        env = self.body(r) or {}
        self.require("first-envelope-start", r.status_code == 200 and env.get("seq") == 0
                     and env.get("observation_id") == f"{agent}#0" and env.get("reason") == "start"
                     and env.get("agent_id") == agent and env.get("run_id") == run, self.show(r))
        self.ok("first-envelope-start")
        oid = env["observation_id"]

        r = await self.req("GET", obs_path, params={"after": 0, "wait": 0.3, "lease": lease})
        self.expect("long-poll-204", r.status_code == 204 and r.content == b"", self.show(r))
        self.ok("long-poll-204")

        r = await self.req("POST", claim_path, params={"lease": lease})
        r2 = await self.req("GET", obs_path, params={"after": -1, "wait": 0, "lease": lease})
        self.expect("redelivery-on-resume", r.status_code == 200 and r2.status_code == 200
                    and (self.body(r2) or {}).get("observation_id") == oid, self.show(r2))
        self.ok("redelivery-on-resume")

        r = await self.command(run, agent, lease, {"command_id": mint_command_id(),
                                                   "observation_id": f"{agent}#999999", "noop": True})
        rec = self.body(r) or {}
        self.expect("verdict-unknown-observation", r.status_code == 200 and rec.get("status") == "rejected"
                    and rec.get("outcome") == "none" and bool(rec.get("detail")), self.show(r))
        self.ok("verdict-unknown-observation")

        r = await self.command(run, agent, lease, {"command_id": 5, "observation_id": oid, "noop": True})
        r2 = await self.command(run, agent, lease, {"command_id": mint_command_id(), "observation_id": 7,
                                                    "noop": True})
        self.expect("non-string-ids-422", r.status_code == 422, self.show(r))
        self.expect("non-string-ids-422", r2.status_code == 422, self.show(r2))
        self.ok("non-string-ids-422")

        cid = mint_command_id()
        r = await self.command(run, agent, lease, {"command_id": cid, "observation_id": oid, "sleep_ms": "soon"})
        rec = self.body(r) or {}
        self.expect("verdict-rejected", r.status_code == 200 and rec.get("status") == "rejected"
                    and "sleep_ms" in str(rec.get("detail")), self.show(r))
        r2 = await self.req("GET", obs_path, params={"after": -1, "wait": 0, "lease": lease})
        self.expect("verdict-rejected", r2.status_code == 200 and (self.body(r2) or {}).get("observation_id") == oid,
                    "after the rejection the observation should still be outstanding: " + self.show(r2))
        self.ok("verdict-rejected")

        r = await self.command(run, agent, lease, {"command_id": cid, "observation_id": oid, "noop": True})
        accepted = self.body(r) or {}
        self.require("rejected-id-rejudged", r.status_code == 200 and accepted.get("status") == "accepted",
                     self.show(r))
        self.ok("rejected-id-rejudged")

        r = await self.command(run, agent, lease, {"command_id": cid, "observation_id": oid, "noop": True})
        dup = self.body(r) or {}
        self.expect("verdict-duplicate", r.status_code == 200 and dup.get("status") == "duplicate"
                    and dup.get("command_id") == cid and dup.get("observation_id") == oid
                    and dup.get("detail") == accepted.get("detail") and dup.get("outcome") != "none", self.show(r))
        self.ok("verdict-duplicate")

        r = await self.command(run, agent, lease, {"command_id": mint_command_id(), "observation_id": oid,
                                                   "noop": True})
        self.expect("verdict-stale", r.status_code == 200 and (self.body(r) or {}).get("status") == "stale",
                    self.show(r))
        self.ok("verdict-stale")

        r = await self.req("GET", self.agent_path(run, agent, f"/commands/{cid}"), params={"lease": lease})
        rec = self.body(r) or {}
        self.expect("receipt-poll", r.status_code == 200 and rec.get("command_id") == cid
                    and rec.get("status") == "accepted" and rec.get("outcome") in
                    ("pending", "accepted", "rejected", "completed", "interrupted"), self.show(r))
        r = await self.req("GET", self.agent_path(run, agent, "/commands/c-never-sent"), params={"lease": lease})
        self.expect("receipt-poll", r.status_code == 404, self.show(r))
        self.ok("receipt-poll")

        r = await self.req("POST", self.agent_path(run, agent, "/release"), params={"lease": lease})
        self.require("release", r.status_code == 200, self.show(r))
        r = await self.req("GET", briefing_path, params={"lease": lease})
        self.expect("release", r.status_code == 403, "the released token still works: " + self.show(r))
        r = await self.req("POST", claim_path)
        fresh = (self.body(r) or {}).get("lease")
        self.require("release", r.status_code == 200 and isinstance(fresh, str) and fresh != lease, self.show(r))
        self.ok("release")

        r = await self.req("DELETE", f"/v1/runs/{run}")
        self.require("cancel-410", r.status_code == 200 and (self.body(r) or {}).get("status") == "cancelled",
                     self.show(r))
        r = await self.req("GET", obs_path, params={"after": -1, "wait": 1, "lease": fresh})
        self.expect("cancel-410", r.status_code == 410 and "cancelled" in str((self.body(r) or {}).get("detail")),
                    self.show(r))
        r = await self.req("POST", claim_path)
        self.expect("cancel-410", r.status_code == 410, self.show(r))
        self.ok("cancel-410")

    async def flow_expiry(self, agent: str) -> None:
        r = await self.create(agent, decision_deadline_s=0.3)
        self.require("verdict-expired", r.status_code == 201, self.show(r))
        run = self.body(r)["run_id"]
        r = await self.req("POST", self.agent_path(run, agent, "/claim"))
        self.require("verdict-expired", r.status_code == 200, self.show(r))
        lease = self.body(r)["lease"]
        obs_path = self.agent_path(run, agent, "/observations")
        r = await self.req("GET", obs_path, params={"after": -1, "wait": 10, "lease": lease})
        self.require("verdict-expired", r.status_code == 200, self.show(r))
        oid = self.body(r)["observation_id"]
        # The next envelope only comes once the first one's deadline has passed unanswered.
        r = await self.req("GET", obs_path, params={"after": self.body(r)["seq"], "wait": 10, "lease": lease})
        self.require("verdict-expired", r.status_code == 200,
                     "no second observation came after the first one's 0.3 s deadline: " + self.show(r))
        r = await self.command(run, agent, lease, {"command_id": mint_command_id(), "observation_id": oid,
                                                   "noop": True})
        rec = self.body(r) or {}
        self.expect("verdict-expired", r.status_code == 200 and rec.get("status") == "expired"
                    and rec.get("outcome") == "none" and "deadline" in str(rec.get("detail")), self.show(r))
        self.ok("verdict-expired")
        r = await self.command(run, agent, lease, {"command_id": mint_command_id(), "observation_id": oid,
                                                   "sleep_ms": -5})
        self.expect("expired-before-payload", r.status_code == 200
                    and (self.body(r) or {}).get("status") == "expired", self.show(r))
        self.ok("expired-before-payload")

    async def flow_fork(self, agent: str) -> None:
        """An optional capability (docs/fork.md): skipped, not failed, on a server without the route."""
        r = await self.create(agent)
        self.require("fork-201", r.status_code == 201, self.show(r))
        run = self.body(r)["run_id"]
        r = await self.req("POST", f"/v1/runs/{run}/fork", body={"cursor": 0, "controlled_agents": [agent],
                                                                "npc_policy": "none"})
        if r.status_code in (404, 405):  # the run exists (just made): the route does not
            self.results["fork-201"] = RuleResult("fork-201", _TITLES["fork-201"], None,
                                                  "skipped: the server does not fork runs (" + self.show(r) + ")")
            return
        fork = self.body(r) or {}
        if r.status_code == 201 and isinstance(fork.get("run_id"), str):
            self.runs.append(fork["run_id"])
        self.require("fork-201", r.status_code == 201 and fork.get("run_id") != run
                     and (fork.get("forked_from") or {}).get("run_id") == run
                     and (fork.get("forked_from") or {}).get("cursor") == 0, self.show(r))
        r = await self.req("POST", f"/v1/runs/{run}/fork", body={"cursor": 10**12})
        self.expect("fork-201", r.status_code == 400, self.show(r))
        self.ok("fork-201", f"forked {run} into {fork['run_id']}")

    # -- judging every response ----------------------------------------------------------------------------
    def judge_responses(self) -> None:
        if not self.seen:
            for rule in ("header-on-every-response", "problem-json", "schemas"):
                self.fail(rule, "no response was recorded: the server could not be reached")
            return
        missing = [f"{s.method} {s.path} -> {s.status}" for s in self.seen
                   if s.path.startswith("/v1") and s.headers.get(PROTOCOL_HEADER) != PROTOCOL_VERSION]
        self.expect("header-on-every-response", not missing, f"{len(missing)} without it, e.g. {missing[:3]}")
        self.ok("header-on-every-response", f"{len(self.seen)} responses")

        bad = []
        for s in self.seen:
            if s.status < 400:
                continue
            ctype = s.headers.get("content-type", "").split(";")[0].strip()
            try:
                body = json.loads(s.content)
            except ValueError:
                body = None
            if ctype != PROBLEM_CONTENT_TYPE or not isinstance(body, dict) or body.get("status") != s.status or \
                    not all(isinstance(body.get(k), str) and body.get(k) for k in ("type", "title", "detail")):
                bad.append(f"{s.method} {s.path} -> {s.status} {ctype} {s.content[:120]!r}")
        self.expect("problem-json", not bad, f"{len(bad)} errors are not problem+json, e.g. {bad[:2]}")
        self.ok("problem-json")

        try:
            from .protocol.schema_registry import validation_errors, validator

            validator("envelope")
        except ImportError as exc:
            self.results["schemas"] = RuleResult("schemas", _TITLES["schemas"], None, str(exc))
            return
        problems = []
        for s in self.seen:
            problems += [f"{s.method} {s.path} -> {s.status}: {p}" for p in response_problems(s, validation_errors)]
        self.expect("schemas", not problems, f"{len(problems)} problems, e.g. {problems[:3]}")
        self.ok("schemas", f"{len(self.seen)} responses")

    # -- running -------------------------------------------------------------------------------------------
    async def _flow(self, flow: Callable[[], Awaitable[Any]], rules: list[str]) -> Any:
        try:
            return await flow()
        except RuleFailed as exc:
            self.fail(exc.rule, exc.detail)
            reason = f"not reached: {exc.rule} failed"
        except httpx.ConnectError:
            raise  # nothing is listening there: one error, not a failure per rule (the caller reports it)
        except (httpx.HTTPError, KeyError, TypeError, ValueError, AttributeError) as exc:
            reason = f"not reached: {type(exc).__name__}: {exc}"
        for rule in rules:
            if rule not in self.results:
                self.fail(rule, reason)
        return None

    async def run(self) -> list[RuleResult]:
        """Check every rule; the results in :data:`RULES` order."""
        ids = [r for r, _ in RULES]
        agent = await self._flow(self.flow_discovery, ids[: ids.index("bad-json-400") + 1])
        if agent is not None:
            expiry = ["verdict-expired", "expired-before-payload"]  # their own flow: not reached-by a main failure
            main = [r for r in ids[ids.index("create-run-201"): ids.index("cancel-410") + 1] if r not in expiry]
            await self._flow(lambda: self.flow_main(agent), main)
            await self._flow(lambda: self.flow_expiry(agent), expiry)
            await self._flow(lambda: self.flow_fork(agent), ["fork-201"])
        for run in self.runs:  # leave nothing running behind
            try:
                await self.req("DELETE", f"/v1/runs/{run}")
            except httpx.HTTPError:
                pass
        self.judge_responses()
        return [self.results.get(r) or RuleResult(r, t, False, "not reached") for r, t in RULES]


def format_report(url: str, results: list[RuleResult]) -> str:
    lines = [f"warren-agent/0 conformance of {url}"]
    for r in results:
        mark = {True: "PASS", False: "FAIL", None: "SKIP"}[r.passed]
        lines.append(f"  {mark}  {r.rule:<28} {r.title}")
        if r.passed is not True and r.detail:
            lines.append(f"        {r.detail}")
    passed = sum(r.passed is True for r in results)
    failed = sum(r.passed is False for r in results)
    skipped = len(results) - passed - failed
    lines.append(f"{passed} passed, {failed} failed" + (f", {skipped} skipped" if skipped else "")
                 + f" of {len(results)} rules")
    return "\n".join(lines)


async def run_conformance(url: str, *, scenario: str | None = None, http: httpx.AsyncClient | None = None,
                          timeout: float = 30.0) -> list[RuleResult]:
    """Check the server at ``url`` (or behind ``http``, e.g. an in-process app) against every rule."""
    if http is not None:
        return await Checker(http, scenario).run()
    async with httpx.AsyncClient(base_url=url, timeout=timeout) as own:
        with trio.fail_after(timeout * 4):
            return await Checker(own, scenario).run()
