"""The system prompt names exactly the tools the env offers."""

from __future__ import annotations

import pytest

from forecast_dojo.prompts import research_rule


@pytest.mark.parametrize(
    ("tools", "says", "never"),
    [
        (
            ("search", "read", "python", "submit_forecast"),
            ["search the news", "read documents", "run Python"],
            [],
        ),
        (("search", "read", "submit_forecast"), ["search the news", "read documents"], ["Python"]),
        (("submit_forecast",), ["no research tools"], ["search the news", "Python", '"name": "search"']),
    ],
)
def test_system_prompt_names_only_the_enabled_tools(make_tiny_env, tools, says, never) -> None:
    env = make_tiny_env(tools=tools)
    observation, _ = env.reset(env.events[0].id)
    system = observation["messages"][0]["content"]
    assert all(text in system for text in says)
    assert not any(text in system for text in never)


def test_a_turn_without_a_call_is_answered_for_the_tools_at_hand(make_tiny_env) -> None:
    env = make_tiny_env(tools=("submit_forecast",))
    env.reset(env.events[0].id)
    observation, *_ = env.step("I think yes.")
    assert (
        observation["messages"][-1]["content"]
        == "No tool call found. Call submit_forecast to finish this step."
    )
    env = make_tiny_env()
    env.reset(env.events[0].id)
    observation, *_ = env.step("I think yes.")
    assert "Research with the tools" in observation["messages"][-1]["content"]


def test_research_rule_lists_in_a_fixed_order() -> None:
    assert research_rule(["read", "search"]) == (
        "- Use the tools to research: search the news archive, and read documents that a search returned."
    )
