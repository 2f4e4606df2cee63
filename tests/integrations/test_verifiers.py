"""verifiers' own OpenEnv taskset logic against forecast-dojo serve: its action parsing and OpenEnv's generic client.

verifiers 0.4 (the v1 API) plays an OpenEnv server with ``OpenEnvEnv``: it reads the server's action
schema, turns each model reply into an action with ``parse_action`` and steps OpenEnv's
``GenericEnvClient``. These are exactly those calls, on 127.0.0.1 (a full verifiers rollout needs a
harness program, which verifiers launches with ``uv``).
"""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

pytest.importorskip("openenv")
openenv_taskset = pytest.importorskip("verifiers.v1.tasksets.openenv.taskset")

from forecast_dojo.integrations.openenv import BackgroundServer, create_app  # noqa: E402

REPLIES = [
    '<tool_call>{"name": "search", "arguments": {"query": "Harbor Act"}}</tool_call>',
    "I think the answer is yes.",  # no tool call: a notice, the step goes on
    '```json\n{"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": '
    '{"name": "submit_forecast", "arguments": {"probabilities": {"Yes": 0.6, "No": 0.4}}}}]}\n```',
]


def test_verifiers_openenv_taskset_plays_the_server(make_tiny_env):
    from openenv import GenericEnvClient

    async def play(url: str) -> list:
        with urllib.request.urlopen(f"{url}/schema") as response:
            action_schema = json.loads(response.read())["action"]
        results = []
        async with GenericEnvClient(base_url=url) as client:
            result = await client.reset(event_id="harbor")
            json.dumps(
                {"observation": result.observation, "action_schema": action_schema}
            )  # verifiers' payload
            results.append(result)
            for reply in REPLIES:
                result = await client.step(openenv_taskset.parse_action(reply, action_schema))
                results.append(result)
        return results

    with BackgroundServer(create_app(lambda: make_tiny_env(memory="none"))) as server:
        first, searched, noticed, submitted = asyncio.run(play(server.url))
    assert first.observation["question"] and first.observation["outcomes"] == ["Yes", "No"]
    assert json.loads(searched.observation["messages"][0]["content"])  # search hits
    assert "No tool call found" in noticed.observation["messages"][0]["content"] and noticed.reward == 0.0
    assert submitted.observation["info"]["step_ended"] and submitted.observation["info"]["valid"]
    assert submitted.reward == pytest.approx(-(0.4**2 + 0.4**2))  # harbor resolved Yes
