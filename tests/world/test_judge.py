"""The paraphrase judge for free-form answers: asked only about non-matching outcomes, cached, failures get no credit."""

from __future__ import annotations

import pytest

from forecast_dojo.events.judge import JudgeConfig
from forecast_dojo.scoring import free_form_score
from forecast_dojo.world.judge import AnswerJudge
from tests.agents.test_openai_agent import ScriptedServer, completion


def reply(text: str) -> tuple[int, dict]:
    return (200, completion({"role": "assistant", "content": text}))


def test_the_judge_credits_paraphrases_and_caches_them(tmp_path):
    with ScriptedServer([reply("YES"), reply("No.")]) as server:
        config = JudgeConfig(
            server.url, "scripted", cache_dir=tmp_path / "cache", api_key="x", backoff_s=0.01
        )
        judge = AnswerJudge(config)
        forecast = {"NYC": 0.6, "Boston": 0.3, "new york city": 0.1}
        score = free_form_score(forecast, "New York City", judge=judge)
        assert score == pytest.approx(1 - (1 - 0.7) ** 2 - 0.3**2)
        assert len(server.requests) == 2  # "new york city" matched by normal form: never asked
        assert "Correct answer: New York City" in server.requests[0]["messages"][1]["content"]
        free_form_score(forecast, "New York City", judge=judge)  # in memory: no new request
        assert len(server.requests) == 2
    fresh = AnswerJudge(
        JudgeConfig("http://127.0.0.1:9/v1", "scripted", cache_dir=tmp_path / "cache", api_key="x")
    )
    assert fresh("NYC", "New York City") is True and fresh.cache_hits == 1  # from the disk cache, no server


def test_a_judge_that_cannot_answer_gives_no_credit(tmp_path):
    with ScriptedServer([], default=completion({"role": "assistant", "content": "maybe"})) as server:
        judge = AnswerJudge(
            JudgeConfig(server.url, "scripted", cache_dir=tmp_path, api_key="x", max_retries=0)
        )
        assert judge("NYC", "New York City") is False
        assert free_form_score({"NYC": 1.0}, "New York City", judge=judge) == -1.0


def test_world_env_scores_with_the_judge(make_world_env):
    import json

    env = make_world_env(free_form=True, judge=lambda outcome, answer: outcome == "the right one")
    target = next(e for e in env.calendar.events if e.free_form)
    obs, _ = env.reset()

    def call(name, **arguments):
        function = {"name": name, "arguments": json.dumps(arguments)}
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c", "type": "function", "function": function}],
        }

    while target.id not in [q["id"] for q in obs["open_questions"]]:
        obs, *_ = env.step(call("next_day"))
    env.step(call("submit_forecasts", forecasts={target.id: {"the right one": 0.5}}))
    *_, info = env.step(call("next_day"))
    assert info["day_scores"][target.id] == pytest.approx(0.75)
