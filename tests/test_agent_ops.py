"""One agent-protocol path (warren_sim/runtime/agent_ops.py), and the ended run's 410 with its status as data.

Every agent request of every transport (the HTTP lane, Quart's routes, the JSON-RPC methods of ``WS /v1/agent``)
is one call of an agent operation: shown on the transports' source (no request handler calls the run's request
methods itself), and on the wire: the 410 of an ended run is worded once and carries ``run_status`` on every
path that answers it (a poll through the lane, through Quart, from a stored run without a rebuild, a claim, a bulk
claim, a multi-agent poll, a start, and the JSON-RPC methods' ``data``).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import trio
from server_helpers import served
from transports import ws_agent

from warren_sim.http import agent_routes, agent_ws, fault_lane, http_lane
from warren_sim.protocol.models import TERMINAL_RUN_STATUSES
from warren_sim.protocol.schema_registry import load_schema
from warren_sim.runtime import agent_ops
from warren_sim.runtime.stored import StoredRun

AGENT = "engineer-1"
# what a request asks of a run: only agent_ops calls these for a transport
REQUEST_METHODS = {"authenticate", "claim", "claim_many", "release", "briefing_for", "wait_observation",
                   "wait_observations", "submit", "receipt", "ended_poll"}


def _request_handlers() -> list[tuple[str, ast.AST]]:
    """The code that answers agent requests: every function of the HTTP modules, the JSON-RPC methods and what
    a JSON-RPC session pushes."""
    out: list[tuple[str, ast.AST]] = []
    for module in (agent_routes, http_lane, fault_lane):
        out += [(f"{module.__name__}.{n.name}", n) for n in ast.walk(ast.parse(inspect.getsource(module)))
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    methods = {**agent_ws.METHODS, "(pushing)": agent_ws.AgentSession._flush}
    for name, method in methods.items():
        out.append((f"agent_ws {name}", ast.parse(textwrap.dedent(inspect.getsource(method)))))
    return out


def test_every_transports_agent_request_goes_through_agent_ops():
    """No request handler of any transport calls a run's request methods: each calls its agent operation."""
    reached_past = []
    for where, tree in _request_handlers():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in REQUEST_METHODS
                    and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "agent_ops")):
                reached_past.append(f"{where}: .{node.func.attr}()")
    assert reached_past == []
    used = {node.func.attr for _, tree in _request_handlers() for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "agent_ops"}
    # and every operation has a caller (the constants: what a claim names, the transports' shared Via values)
    assert used == set(agent_ops.__all__) - {"BRIEFING_REVISION", "HTTP", "WS"}


def test_the_ended_runs_410_is_worded_in_one_place():
    """"has ended" is written once in the server's code: runtime/errors.py's run_ended."""
    root = Path(agent_ops.__file__).parents[1]
    places = [str(p.relative_to(root)) for sub in ("runtime", "http") for p in (root / sub).glob("*.py")
              if "has ended with" in p.read_text()]
    assert places == ["runtime/errors.py"]


async def test_the_410_carries_the_run_status_on_every_path(autojump_clock, tmp_path):
    async with served(tmp_path) as api:
        run = await api.create(controlled_agents=[AGENT, "courier-1"])
        lease = await api.claim(run)
        other = await api.claim(run, "courier-1")
        status, _ = await api.call("DELETE", f"/v1/runs/{run}")
        assert status == 200
        with trio.fail_after(60):  # the run leaves memory: a late poll is answered from its stored status
            while not isinstance(api.manager.runs[run], StoredRun):
                await trio.sleep(0.1)
        status, problem = await api.poll(run, lease, wait=0)
        assert status == 410 and problem["run_status"] == "cancelled"
        assert run not in api.manager._rebuilt  # answered without rebuilding the run
        base = f"/v1/runs/{run}/agents/{AGENT}"
        asked = {  # (method, path, body, headers): each answered 410 with run_status
            "poll (the lane)": ("GET", f"{base}/observations?lease={lease}", None, {}),
            "poll (Quart)": ("GET", f"{base}/observations?lease={lease}", None, {"Origin": "http://localhost"}),
            "claim": ("POST", f"/v1/runs/{run}/agents/courier-1/claim?lease={other}", None, {}),
            "bulk claim": ("POST", f"/v1/runs/{run}/claim", {"agents": "all"}, {}),
            "multi-agent poll": ("POST", f"/v1/runs/{run}/observations", {"leases": {AGENT: lease}}, {}),
            "start": ("POST", f"/v1/runs/{run}/start", None, {}),
        }
        for what, (method, path, body, headers) in asked.items():
            status, problem = await api.call(method, path, body, headers=headers)
            assert status == 410, (what, problem)
            assert problem["run_status"] == "cancelled" and problem["detail"].startswith(f"{run} has ended with "
                                                                                         "status cancelled"), what
            assert list(problem) == ["type", "title", "status", "detail", "run_status"]
        status, problem = await api.call("GET", f"{base}/observations?after=x&lease={lease}")
        assert status == 400 and "run_status" not in problem  # other refusals carry no such member


        async with ws_agent(api) as ws:
            for method, params in (("agent.subscribe", {"lease": lease}), ("agent.claim", {"lease": other})):
                who = AGENT if method == "agent.subscribe" else "courier-1"
                status, body = await ws.call(method, {"run_id": run, "agent_id": who, **params})
                assert status == 410, (method, body)
                assert body["rpc"]["data"]["run_status"] == "cancelled", method
                assert body["rpc"]["data"]["detail"].startswith(f"{run} has ended with status cancelled")


def test_the_problem_schema_names_every_terminal_status():
    assert set(load_schema("problem")["properties"]["run_status"]["enum"]) == TERMINAL_RUN_STATUSES
