"""Reward functions as plain TRL reward functions, against hand-computed values."""

from __future__ import annotations

import math

import pytest

from forecast_dojo.training.rewards import (
    INVALID_PENALTY,
    MISSING_PENALTY,
    brier_reward,
    find_submission,
    log_score_reward,
    proper_score_reward,
    valid_forecast_reward,
)

OUTCOMES = ["Yes", "No"]


def submit(probabilities, content: str = "") -> list[dict]:
    arguments = '{"probabilities": ' + probabilities + "}"
    return [
        {
            "role": "assistant",
            "content": f'{content}<tool_call>{{"name": "submit_forecast", "arguments": {arguments}}}</tool_call>',
        }
    ]


def test_brier_reward_hand_computed():
    completions = [
        submit("[0.8, 0.2]"),  # -((0.8-1)^2 + 0.2^2) = -0.08
        submit('{"No": 0.3, "Yes": 0.7}'),  # labels in any order: -((0.7-1)^2 + 0.3^2) = -0.18
        submit("[0.8, 0.3]"),  # does not sum to 1: invalid -> uniform (-0.5) - 0.25
        [{"role": "assistant", "content": "I think Yes."}],  # nothing submitted -> -0.5 - 0.5
        'Reasoning. <tool_call>{"name": "submit_forecast", "arguments": {"probabilities": [1, 0]}}</tool_call>',
    ]
    rewards = brier_reward(completions, outcome_index=[0] * 5, outcomes=[OUTCOMES] * 5)
    assert rewards == pytest.approx([-0.08, -0.18, -0.5 - INVALID_PENALTY, -0.5 - MISSING_PENALTY, 0.0])


def test_three_outcomes_log_score_and_first_submission_counts():
    outcomes = ["A", "B", "C"]
    completion = [
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "search", "arguments": {"query": "x"}}</tool_call>',
        },
        {"role": "tool", "name": "search", "content": "[]"},
        *submit("[0.2, 0.5, 0.3]"),
        *submit("[0.0, 1.0, 0.0]"),  # a second submission never counts
    ]
    assert log_score_reward([completion], outcome_index=[1], outcomes=[outcomes]) == pytest.approx(
        [math.log(0.5)]
    )
    # Brier: (0.2)^2 + (0.5-1)^2 + 0.3^2 = 0.04 + 0.25 + 0.09 = 0.38
    assert proper_score_reward([completion], [1], [outcomes]) == pytest.approx([-0.38])
    # Log score of the floor for an outcome given probability 0.
    assert log_score_reward([submit("[1, 0, 0]")], outcome_index=[2], outcomes=[outcomes]) == pytest.approx(
        [math.log(1e-3)]
    )


def test_openai_style_tool_calls_and_penalties_are_configurable():
    completion = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {
                        "name": "submit_forecast",
                        "arguments": {"probabilities": {"Yes": 0.6, "No": 0.4}},
                    },
                }
            ],
        }
    ]
    assert brier_reward([completion], outcome_index=[1], outcomes=[OUTCOMES]) == pytest.approx([-0.72])
    missing = [[{"role": "assistant", "content": ""}]]
    assert proper_score_reward(missing, [0], [OUTCOMES], missing_penalty=2.0) == pytest.approx([-2.5])
    bad_labels = submit('{"yes": 0.5, "no": 0.5}')
    assert find_submission(bad_labels, OUTCOMES).forecast is None
    assert proper_score_reward([bad_labels], [0], [OUTCOMES], invalid_penalty=0.0) == pytest.approx([-0.5])
    assert valid_forecast_reward([completion, bad_labels, missing[0]], outcomes=[OUTCOMES] * 3) == [
        1.0,
        0.0,
        0.0,
    ]


def test_garbage_never_raises():
    junk = [
        "",
        "<tool_call>{not json</tool_call>",
        '<tool_call>{"name": "submit_forecast", "arguments": "x"}</tool_call>',
        [{"role": "user"}],
    ]
    rewards = brier_reward(junk, outcome_index=[0] * 4, outcomes=[OUTCOMES] * 4)
    assert all(r <= -0.5 - INVALID_PENALTY + 1e-12 for r in rewards)


def test_log_odds_submissions_are_read_as_the_env_reads_them():
    """A completion that submits log odds is scored on their softmax, exactly as the env records it."""
    completion = [
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "submit_forecast", "arguments": {"log_odds": [1, 0]}}</tool_call>',
        }
    ]
    p_yes = math.e / (math.e + 1)
    assert find_submission(completion, OUTCOMES).forecast == pytest.approx((p_yes, 1 - p_yes))
    assert brier_reward([completion], outcome_index=[0], outcomes=[OUTCOMES]) == pytest.approx(
        [-((1 - p_yes) ** 2 + (1 - p_yes) ** 2)]
    )
    both = submit('[0.5, 0.5], "log_odds": [0, 0]')
    assert find_submission(both, OUTCOMES).error == "give probabilities, or log_odds and evidence, not both"
    evidence = [
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "submit_forecast", "arguments": {"evidence": [["Yes", 0.5], ["Yes", 0.5]]}}</tool_call>',
        }
    ]
    assert find_submission(evidence, OUTCOMES).forecast == pytest.approx((p_yes, 1 - p_yes))
    neither = [
        {
            "role": "assistant",
            "content": '<tool_call>{"name": "submit_forecast", "arguments": {}}</tool_call>',
        }
    ]
    assert find_submission(neither, OUTCOMES).forecast is None
    assert brier_reward([neither], outcome_index=[0], outcomes=[OUTCOMES]) == [-0.5 - INVALID_PENALTY]
