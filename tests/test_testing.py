"""The scripted OpenAI-compatible chat server: a search on a step's first turn, then a uniform forecast."""

from __future__ import annotations

import json
import urllib.request

from forecast_dojo.testing import ScriptedChatServer, serve_scripted_chat


def post(url: str, messages: list[dict]) -> dict:
    body = json.dumps({"model": "scripted", "messages": messages}).encode()
    request = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_the_scripted_server_searches_then_submits_uniform():
    ScriptedChatServer.requests = []
    server, url = serve_scripted_chat()
    try:
        prompt = 'Outcomes (exactly one will happen): ["a", "b", "c", "d"]'
        first = post(url, [{"role": "system", "content": "s"}, {"role": "user", "content": prompt}])
        call = first["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "search" and json.loads(call["arguments"])["query"]
        later = [{"role": "system", "content": "s"}, {"role": "user", "content": prompt}]
        later += [first["choices"][0]["message"], {"role": "tool", "content": "[]", "tool_call_id": "x"}]
        call = post(url, later)["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "submit_forecast"
        assert json.loads(call["arguments"])["probabilities"] == [0.25] * 4
        assert [r["path"] for r in ScriptedChatServer.requests] == ["/v1/chat/completions"] * 2
    finally:
        server.shutdown()
        server.server_close()
