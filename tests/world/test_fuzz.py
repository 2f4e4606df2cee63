"""World mode's ``env.step`` never raises on anything a model can write, and its observations stay in the space."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_dojo.tools import INTERNAL_ERROR_PREFIX
from forecast_dojo.world import WorldBudgets

JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=300),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=30), children, max_size=5)
    ),
    max_leaves=20,
)
TOOLS = st.sampled_from(
    ["submit_forecasts", "next_day", "read_question", "write_memory", "read_memory", "search", "read", "nope"]
)


def action(name: str, arguments) -> dict:
    function = {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c", "type": "function", "function": function}],
    }


@pytest.mark.slow  # about 110 s at load 6-7 (an env per example)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(TOOLS, JSONISH), min_size=1, max_size=6), forecast_value=JSONISH)
def test_hostile_calls_never_raise(make_world_env, calls, forecast_value):
    env = make_world_env(
        end="2031-02-20", memory="files", budgets=WorldBudgets(max_tool_calls=3, max_turns=4)
    )
    obs, _ = env.reset()
    qid = obs["open_questions"][0]["id"]
    turns = [
        *calls,
        ("submit_forecasts", {"forecasts": {qid: forecast_value}}),
        ("submit_forecasts", forecast_value),
    ]
    for name, arguments in turns:
        if isinstance(arguments, dict) or name in ("next_day",):
            payload = arguments if isinstance(arguments, dict) else {}
        else:
            payload = {"forecasts": arguments} if name == "submit_forecasts" else {"value": arguments}
        try:
            text = json.dumps(payload)
        except (ValueError, OverflowError):
            text = "{}"
        obs, reward, terminated, truncated, info = env.step(action(name, text))
        assert obs in env.observation_space and math.isfinite(reward)
        for message in obs["messages"]:
            assert INTERNAL_ERROR_PREFIX not in message["content"]
        if terminated:
            break
