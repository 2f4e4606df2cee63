"""A played world episode summarizes from its records exactly as its final info says."""

from __future__ import annotations

from forecast_dojo.evaluation.world import play_world, summarize_world, tables_from_records


def test_a_played_episode_summarizes_from_its_records(make_world_env):
    from forecast_dojo.agents.world import WorldScriptedAgent

    env = make_world_env(end="2031-03-01")
    records, info = play_world(env, WorldScriptedAgent())
    tables = tables_from_records(records)
    assert tables["scores"] == info["scores"] and tables["accuracy"] == info["accuracy"]
    s = summarize_world(**tables, n_boot=100)
    assert s["question_days"] == len(records) and 0 < s["coverage"][0] <= 1
    assert s["updates_per_day"] > 0 and s["tool_calls_per_day"] > 0


def test_a_days_tokens_are_prompt_plus_completion_not_every_count_in_the_record(make_world_env):
    """A record's ``constrained_tokens`` is part of its completion: the day's cost does not count it again."""
    from forecast_dojo.agents.world import WorldScriptedAgent

    env = make_world_env(end="2031-03-01")
    records, _ = play_world(env, WorldScriptedAgent())
    counted = [
        r.replace(tokens={"prompt_tokens": 50, "completion_tokens": 7, "constrained_tokens": 2})
        for r in records
    ]
    tokens = tables_from_records(counted)["tokens"]
    assert {v for day in tokens.values() for v in day.values()} == {57.0}
