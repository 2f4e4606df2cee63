"""The OpenAI-compatible agent plays a world episode against a scripted server on 127.0.0.1."""

from __future__ import annotations

import pytest

from forecast_dojo.agents.openai_agent import OpenAIAgent, OpenAIConfig
from tests.agents.test_openai_agent import ScriptedServer, assert_strict, call, completion


def test_the_openai_agent_plays_a_world_episode(make_world_env, tmp_path):
    from forecast_dojo.trajectory import load_records

    env = make_world_env(end="2031-01-20", log_dir=tmp_path / "log")
    obs, _ = env.reset()
    qid = obs["open_questions"][0]["id"]
    script = [
        (200, completion(call("search", {"query": "acquisition"}, "c1"))),
        (200, completion(call("submit_forecasts", {"forecasts": {qid: {"Yes": 0.2, "No": 0.8}}}, "c2"))),
        (200, completion(call("submit_forecasts", {"forecasts": {"no-such-id": {"Yes": 1.0}}}, "c3"))),
        (500, {"error": "overloaded"}),  # retried
        (200, completion(call("next_day", {}, "c4"))),
    ]
    with ScriptedServer(script, default=completion(call("next_day", {}, "c9"))) as server:
        config = OpenAIConfig(
            server.url, "scripted", api_key="x", timeout_s=5.0, backoff_s=0.01, max_retries=2
        )
        agent = OpenAIAgent(config, tools=env.tool_schemas())
        done, info = False, {}
        while not done:
            obs, _, done, _, info = env.step(agent.act(obs))
        requests = server.requests
    env.close()
    for request in requests:
        assert_strict(request)
        assert {"submit_forecasts", "next_day", "search"} <= {t["function"]["name"] for t in request["tools"]}
    assert "not an open question" in requests[3]["messages"][-1]["content"]
    # A new day starts a fresh conversation: [system, user] only.
    assert [m["role"] for m in requests[5]["messages"]] == ["system", "user"]
    assert 'your forecast: {"Yes": 0.2, "No": 0.8}' in requests[5]["messages"][1]["content"]
    first_day = env.calendar.days[0].isoformat()
    p_answer = {"Yes": 0.2, "No": 0.8}[env._by_id[qid].answer]
    assert info["scores"][qid][first_day] == pytest.approx(1 - (1 - p_answer) ** 2 - (1 - p_answer) ** 2)
    records = load_records(tmp_path / "log")
    assert any(r.tokens["prompt_tokens"] for r in records if "updated" in r.flags)
    assert agent.retries == 1 and not agent.failures
