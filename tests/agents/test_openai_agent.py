"""The OpenAI-compatible agent against a scripted HTTP server on 127.0.0.1: happy path and failure modes.

Every reply the server scripts (tool calls, malformed arguments, refusals, 5xx, 429, timeouts, empty
choices, 400) must end as a logged step or a retry, never as an exception.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from forecast_dojo.agents.openai_agent import OpenAIAgent, OpenAIConfig, message_to_action, to_openai_messages
from forecast_dojo.evaluation.runner import run_episode


def completion(message: dict, usage=(100, 7)) -> dict:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)},
    }


def call(name: str, arguments, call_id: str | None = "c1") -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        ],
    }


SUBMIT = call("submit_forecast", {"probabilities": [0.7, 0.3]}, "c9")


class ScriptedServer:
    """Replies to POST /v1/chat/completions with the next scripted item: (status, body) or ("sleep", s, body)."""

    def __init__(self, script: list, default: dict | None = None) -> None:
        self.script = list(script)
        self.default = default or completion(SUBMIT)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                outer.requests.append(json.loads(self.rfile.read(length)))
                item = outer.script.pop(0) if outer.script else (200, outer.default)
                if item[0] == "sleep":
                    time.sleep(item[1])
                    item = (200, item[2])
                status, body = item
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def agent_for(server: ScriptedServer, env, **config) -> OpenAIAgent:
    options = {"timeout_s": 5.0, "backoff_s": 0.01, "max_retries": 2} | config
    return OpenAIAgent(OpenAIConfig(server.url, "scripted", api_key="x", **options), tools=env.tool_schemas())


def assert_strict(request: dict) -> None:
    """What strict servers require of every message sent."""
    for message in request["messages"]:
        assert "name" not in message or message["name"] is not None
        assert message.get("tool_calls", None) != []
        assert None not in message.values()
        if message["role"] == "tool":
            assert set(message) == {"role", "tool_call_id", "content"}
        for c in message.get("tool_calls") or []:
            assert isinstance(c["function"]["arguments"], str) and c["id"]


def test_happy_path_sends_strict_messages_and_logs_usage(make_tiny_env, tmp_path):
    env = make_tiny_env(log_dir=tmp_path)
    event = env.events[0]
    script = [(200, completion(call("search", {"query": "Harbor Act"}, "s1")))]
    with ScriptedServer(script) as server:
        rows = run_episode(env, agent_for(server, env), event.id)
    env.close()
    assert len(rows) == event.n_steps and all(r["valid"] for r in rows)
    first = server.requests[0]
    assert first["model"] == "scripted" and [t["function"]["name"] for t in first["tools"]] == [
        t["function"]["name"] for t in env.tool_schemas()
    ]
    second = server.requests[1]
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][3]["tool_call_id"] == "s1"
    for request in server.requests:
        assert_strict(request)
    record = json.loads((tmp_path / "steps.jsonl").read_text().splitlines()[0])
    assert record["tokens"] == {"prompt_tokens": 200, "completion_tokens": 14}  # two turns of (100, 7)


@pytest.mark.parametrize(
    "reply",
    [
        call("search", "{not json"),  # malformed arguments
        call("no_such_tool", {"x": 1}),
        call("", {"query": "x"}),
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "assistant", "content": "I think 70%."},  # no tool call at all
        {"role": "assistant", "content": "<tool_call>{broken</tool_call>"},
    ],
)
def test_malformed_replies_become_error_messages(make_tiny_env, reply):
    env = make_tiny_env()
    event = env.events[0]
    with ScriptedServer([(200, completion(reply))]) as server:
        rows = run_episode(env, agent_for(server, env), event.id)
    assert len(rows) == event.n_steps
    second = server.requests[1]["messages"]
    assert (
        second[-1]["role"] in ("tool", "user")
        and "rror" in second[-1]["content"]
        or "No tool call" in second[-1]["content"]
    )
    for request in server.requests:
        assert_strict(request)


def test_invalid_forecast_is_flagged_and_scored_as_uniform(make_tiny_env):
    env = make_tiny_env()
    event = env.events[0]
    with ScriptedServer([(200, completion(call("submit_forecast", {"probabilities": [2, -1]})))]) as server:
        rows = run_episode(env, agent_for(server, env), event.id)
    assert rows[0]["flags"] == ["invalid_forecast"] and rows[0]["forecast"] == [0.5, 0.5]
    assert all(r["valid"] for r in rows[1:])


def test_transient_failures_are_retried(make_tiny_env):
    env = make_tiny_env()
    event = env.events[0]
    script = [
        (500, {"error": {"message": "boom"}}),
        (429, {"error": {"message": "slow down"}}),
        (200, {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}),
        ("sleep", 2.0, completion(SUBMIT)),  # longer than the timeout
    ]
    with ScriptedServer(script) as server:
        agent = agent_for(server, env, timeout_s=0.5, max_retries=5)
        rows = run_episode(env, agent, event.id)
    assert len(rows) == event.n_steps and rows[0]["valid"]
    assert agent.retries == 4 and agent.failures == []


def test_exhausted_retries_and_client_errors_end_in_the_fallback(make_tiny_env):
    env = make_tiny_env()
    event = env.events[0]
    bad = (400, {"error": {"message": "context too long"}})
    with ScriptedServer([bad] * 3, default=completion(SUBMIT)) as server:
        agent = agent_for(server, env, max_retries=3)
        rows = run_episode(env, agent, event.id)
    # a 400 is not retried: each failed turn is an empty reply, the budget notice follows, then the fallback
    assert len(agent.failures) == 3 and all("400" in f or "BadRequest" in f for f in agent.failures)
    assert len(rows) == event.n_steps
    with ScriptedServer([(503, {})] * 10) as server:
        agent = agent_for(server, env, max_retries=1)
        step_rows = run_episode(env, agent, event.id)
    assert agent.failures and len(step_rows) == event.n_steps


def test_to_openai_messages_native_and_text():
    messages = [
        {"role": "system", "content": "s", "tool_calls": None, "tool_call_id": None, "name": None},
        {"role": "user", "content": "q", "tool_calls": None, "tool_call_id": None, "name": None},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "search", "arguments": {"query": "x"}}}
            ],
            "tool_call_id": None,
            "name": None,
        },
        {"role": "tool", "content": "[]", "tool_calls": None, "tool_call_id": "a", "name": "search"},
        {"role": "assistant", "content": "hm", "tool_calls": [], "tool_call_id": None, "name": None},
    ]
    native = to_openai_messages(messages)
    assert native[2]["tool_calls"][0]["function"]["arguments"] == '{"query": "x"}'
    assert native[3] == {"role": "tool", "tool_call_id": "a", "content": "[]"}
    assert native[4] == {"role": "assistant", "content": "hm"}
    text = to_openai_messages(messages, "text")
    assert text[2] == {
        "role": "assistant",
        "content": '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>',
    }
    assert text[3] == {"role": "user", "content": "<tool_response>\n[]\n</tool_response>"}
    assert all(set(m) == {"role", "content"} for m in text)


def test_message_to_action_from_client_objects():
    from openai.types.chat import ChatCompletionMessage
    from openai.types.completion_usage import CompletionUsage

    message = ChatCompletionMessage.model_validate(call("search", {"query": "x"}, ""))
    action = message_to_action(message, CompletionUsage(prompt_tokens=3, completion_tokens=2, total_tokens=5))
    assert action["usage"] == {"prompt_tokens": 3, "completion_tokens": 2}
    assert action["tool_calls"][0]["id"].startswith("call_") and action["content"] == ""
