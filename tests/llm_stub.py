"""A scripted model behind a real local HTTP server speaking the OpenAI chat-completions wire format.

It stands in for the external service (a hosted or local LLM), not for any part of WARREN: the policy
under test talks to it with the official ``openai`` client over loopback. ``script(request) -> reply``
decides each answer; a reply is one of ``{"tool": name, "args": {...}}`` (or ``"arguments": "raw text"``),
``{"content": "..."}`` (no tool call), ``{"calls": [(name, args), ...]}``, ``{"status": 429}`` (an error
status, optional ``"headers"``), each optionally with ``"delay": seconds`` before answering.

:func:`solution_table` records, for seeds of a scenario, what its solution policies answer to each
observation text, so :func:`play_solution` can script a model that plays the solution's moves: the run is
deterministic, so a model making the same moves sees the same texts.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Script = Callable[[dict[str, Any]], dict[str, Any]]
NOTE_END = ")\n\n"


def tool_call_reply(name: str, args: Any, call_id: str = "call_1") -> dict[str, Any]:
    arguments = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


class ScriptedModel:
    def __init__(self, script: Script, *, models: Iterable[str] = ("scripted",), key: str | None = None,
                 list_status: int = 200, serves: Iterable[str] | None = None) -> None:
        self.script = script
        self.models = list(models)
        # the models a chat request may name (None: any), answered 404 otherwise as Ollama answers it; apart from
        # ``models`` (what GET /models lists) because gateways list aliases, or not what they route
        self.serves = None if serves is None else set(serves)
        self.key = key
        self.list_status = list_status
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedModel:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def env(self, model: str = "scripted", **more: str) -> dict[str, str]:
        out = {"OPENAI_BASE_URL": self.url, "OPENAI_API_KEY": self.key or "sk-test", "WARREN_LLM_MODEL": model}
        out.update(more)
        return out

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            wbufsize = 1 << 16  # headers and body in one segment (no Nagle / delayed-ACK stall)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _authorized(self) -> bool:
                if model.key is None or self.headers.get("Authorization") == f"Bearer {model.key}":
                    return True
                self._send(401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                           "code": "invalid_api_key"}})
                return False

            def do_GET(self) -> None:
                if not self._authorized():
                    return
                if self.path.rstrip("/").endswith("/models") and model.list_status == 200:
                    self._send(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in model.models]})
                else:
                    self._send(model.list_status if model.list_status != 200 else 404,
                               {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self._authorized():
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                if model.serves is not None and body.get("model") not in model.serves:
                    self._send(404, {"error": {"message": f"model '{body.get('model')}' not found, try pulling it "
                                                          "first", "type": "api_error"}})
                    return
                with model.lock:
                    model.requests.append(body)
                reply = model.script(body)
                if reply.get("delay"):
                    time.sleep(reply["delay"])
                if "status" in reply:
                    self._send(reply["status"], {"error": {"message": reply.get("message", "scripted error")}},
                               reply.get("headers"))
                    return
                message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
                calls = []
                if "tool" in reply:
                    calls.append(tool_call_reply(reply["tool"], reply.get("arguments", reply.get("args", {}))))
                for i, (name, args) in enumerate(reply.get("calls", [])):
                    calls.append(tool_call_reply(name, args, f"call_{i + 1}"))
                if calls:
                    message["tool_calls"] = calls
                prompt = len(json.dumps(body["messages"])) // 4
                completion = 5 + len(json.dumps(calls)) // 4
                self._send(200, {
                    "id": f"chatcmpl-{len(model.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model"),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": "tool_calls" if calls else "stop"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                              "total_tokens": prompt + completion}})

        return Handler


@contextmanager
def scripted_model(script: Script, **kw: Any) -> Iterator[ScriptedModel]:
    with ScriptedModel(script, **kw) as server:
        yield server


def last_user_text(request: dict[str, Any]) -> str:
    """The observation text of a request: its last user message, without a leading note."""
    content = request["messages"][-1]["content"]
    if content.startswith("(Your reply") and NOTE_END in content:
        content = content.split(NOTE_END, 1)[1]
    return content


def solution_table(scenario: str, seeds: Iterable[int]) -> dict[str, dict[str, Any]]:
    """Observation text -> the command the scenario's solution policy answers, over whole headless runs."""
    from warren_sim.engine import Simulation, briefing
    from warren_sim.scenarios import load_scenario, make_policy

    sc = load_scenario(scenario)
    table: dict[str, dict[str, Any]] = {}
    for seed in seeds:
        sim = Simulation(sc.spec, seed, run_id="table", params=sc.params, record=False)
        policies = {a.id: make_policy(sc, "solution", a.id, a.role, briefing(sim, a.id), seed) for a in sc.spec.agents}
        while (batch := sim.advance()) is not None:
            for obs in batch.observations:
                command = policies[obs.agent_id].decide(obs)
                known = table.setdefault(obs.text, command)
                assert known == command, f"two answers to one text: {known} vs {command}"
                sim.answer(obs.agent_id, command)
            sim.adjudicate()
        assert sim.summary()["status"] == "completed"
    return table


def command_reply(command: dict[str, Any]) -> dict[str, Any]:
    if "action" in command:
        return {"tool": command["action"], "args": command.get("args", {})}
    if "sleep_ms" in command:
        return {"tool": "sleep", "args": {"sleep_ms": command["sleep_ms"]}}
    return {"tool": "noop", "args": {}}


def play_solution(table: dict[str, dict[str, Any]]) -> Script:
    """A script that answers each observation with the solution's move (a plain reply when it is unknown)."""

    def script(request: dict[str, Any]) -> dict[str, Any]:
        command = table.get(last_user_text(request))
        if command is None:
            return {"content": "I do not know this place."}
        return command_reply(command)

    return script
