"""Tool helpers: snippets and generated schemas."""

from __future__ import annotations

import inspect
import math
import os
import time
from datetime import datetime

import pytest

from forecast_dojo.prompts import Budgets
from forecast_dojo.tools import TOOL_NAMES, ForecastTools, snippet, tool_schemas


def test_snippet_cuts_at_a_sentence_end_within_500_characters():
    text = "First sentence here. " * 30
    cut = snippet(text)
    assert len(cut) <= 500 and cut.endswith("here.")
    assert snippet("Short text.") == "Short text."
    unbroken = "word " * 200
    assert len(snippet(unbroken)) <= 500 and snippet(unbroken).endswith("\u2026")
    quoted = ("He said \u201cyes.\u201d " * 40).strip()
    assert snippet(quoted).endswith("\u201d")


def test_schemas_are_generated_from_the_signatures():
    schemas = {s["function"]["name"]: s["function"] for s in tool_schemas("notebook")}
    assert list(schemas) == list(TOOL_NAMES)
    for name, schema in schemas.items():
        parameters = [p for p in inspect.signature(getattr(ForecastTools, name)).parameters if p != "self"]
        assert list(schema["parameters"]["properties"]) == parameters
        assert schema["description"]
    assert schemas["search"]["parameters"]["required"] == ["query"]
    assert "notebook" not in tool_schemas("none")[3]["function"]["parameters"]["properties"]
    assert [s["function"]["name"] for s in tool_schemas("none", ("search", "submit_forecast"))] == [
        "search",
        "submit_forecast",
    ]


# --- the python time budget of a step (issue 18) ------------------------------------------------------------


def python_calls(*codes: str) -> dict:
    calls = [{"type": "function", "function": {"name": "python", "arguments": {"code": c}}} for c in codes]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def tool_texts(obs: dict) -> list[str]:
    return [m["content"] for m in obs["messages"] if m["role"] == "tool"]


class FakeClock:
    """Stands in for ``time`` in forecast_dojo.tools: runners advance it instead of sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    import forecast_dojo.tools as tools

    fake = FakeClock()
    monkeypatch.setattr(tools, "time", fake)
    return fake


def test_python_budget_is_shared_by_the_calls_and_turns_of_a_step(make_tiny_env, clock):
    timeouts: list[float | None] = []

    def slow(code: str, now: datetime, timeout_s: float | None = None) -> tuple[str, str | None]:
        timeouts.append(timeout_s)
        clock.now += 0.3
        return "ran\n", None

    env = make_tiny_env(python_runner=slow, budgets=Budgets(max_tool_calls=8, max_python_seconds=0.5))
    env.reset("harbor")
    obs, *_ = env.step(python_calls("a = 1", "b = 2"))
    assert tool_texts(obs) == ["ran\n", "ran\n"]  # the second call starts with 0.2 s left
    assert timeouts == [0.5, pytest.approx(0.2)]
    obs, *_ = env.step(python_calls("c = 3"))  # a later turn of the same forecast step
    refusal = "Error: the python time budget of this step (0.5 s) is spent; nothing was run"
    assert tool_texts(obs) == [refusal] and len(timeouts) == 2
    obs, *_ = env.step(call_submit(env))  # the next forecast step has a fresh budget
    obs, *_ = env.step(python_calls("d = 4"))
    assert tool_texts(obs) == ["ran\n"] and timeouts[-1] == 0.5


def call_submit(env) -> dict:
    k = len(env._event.outcomes)
    arguments = {"probabilities": [1 / k] * k}
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "submit_forecast", "arguments": arguments}}]}  # fmt: skip


def test_python_budget_also_bounds_a_runner_without_a_timeout(make_tiny_env, clock):
    def slow(code: str, now: datetime) -> tuple[str, str | None]:
        clock.now += 0.3
        return "ran\n", None

    env = make_tiny_env(python_runner=slow, budgets=Budgets(max_python_seconds=0.5))
    env.reset("harbor")
    obs, *_ = env.step(python_calls("1", "2", "3"))
    texts = tool_texts(obs)
    assert texts[:2] == ["ran\n", "ran\n"] and texts[2].startswith("Error: the python time budget")


def test_python_budget_is_validated():
    for bad in (0, -1.0, float("inf"), float("nan"), "20"):
        with pytest.raises(ValueError, match="max_python_seconds"):
            Budgets(max_python_seconds=bad)
    assert Budgets().max_python_seconds == 20.0


def test_one_turn_of_endless_loops_is_bounded_by_the_budget(make_tiny_env):
    """The reported case: a turn of many `while True: pass` calls held one env.step for 81 s."""
    from forecast_dojo.sandbox import sandbox_available, sandbox_python_runner

    available, reason = sandbox_available()
    if not available:
        if os.environ.get("FORECAST_DOJO_REQUIRE_SANDBOX") == "1":
            pytest.fail(f"no sandbox here: {reason}")
        pytest.skip(f"no sandbox here: {reason}")
    env = make_tiny_env(
        python_runner=sandbox_python_runner, budgets=Budgets(max_tool_calls=32, max_python_seconds=3.0)
    )
    env.reset("harbor")
    started = time.monotonic()
    obs, *_ = env.step(python_calls(*["while True:\n    pass"] * 32))
    elapsed = time.monotonic() - started
    texts = tool_texts(obs)
    assert len(texts) == 32
    assert "the python time budget of this step ran out; the process was killed" in texts[0]
    assert all(t.startswith("Error: the python time budget of this step (3 s) is spent") for t in texts[1:])
    assert elapsed < 3.0 + 5.0, elapsed  # the budget, plus the one killed sandbox's start and teardown


def submit_with(arguments: dict) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "submit_forecast", "arguments": arguments}}]}  # fmt: skip


def test_log_odds_are_read_as_their_softmax_in_both_forms():
    from forecast_dojo.tools import read_forecast, read_log_odds

    outcomes = ["A", "B", "C"]
    expected = [
        math.e**2 / (math.e**2 + math.e + 1),
        math.e / (math.e**2 + math.e + 1),
        1 / (math.e**2 + math.e + 1),
    ]
    assert read_log_odds([2, 1, 0], outcomes)[0] == pytest.approx(expected)
    assert read_log_odds({"C": 10, "A": 12, "B": 11}, outcomes)[0] == pytest.approx(
        expected
    )  # any common offset
    assert read_log_odds([0, 0, 0], outcomes)[0] == pytest.approx([1 / 3] * 3)
    assert read_log_odds([100, -100, 0], outcomes)[0] == pytest.approx([1, 0, 0])  # no overflow at the bound
    assert read_forecast({"log_odds": [0.5, 0, 0]}, outcomes)[0] == read_log_odds([0.5, 0, 0], outcomes)[0]
    assert read_forecast({"probabilities": [0.5, 0.25, 0.25]}, outcomes) == ((0.5, 0.25, 0.25), None)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ([1, 2], "expected 3 numbers, got 2"),
        ([1, 2, 3, 4], "expected 3 numbers, got 4"),
        ([1, float("nan"), 0], "finite numbers"),
        ([1, float("inf"), 0], "finite numbers"),
        ([101, 0, 0], "between -100 and 100"),
        ([10**400, 0, 0], "finite numbers"),
        ([True, 0, 0], "finite numbers"),
        (["1", 0, 0], "finite numbers"),
        ([None, 0, 0], "finite numbers"),
        ({"A": 1, "B": 0}, "missing: ['C']"),
        ({"A": 1, "B": 0, "C": 0, "D": 0}, "unknown: ['D']"),
        ("1, 0, 0", "an object keyed by outcome label or a list"),
        (3, "an object keyed by outcome label or a list"),
    ],
)
def test_bad_log_odds_get_a_clear_error(value, error):
    from forecast_dojo.tools import read_log_odds

    forecast, message = read_log_odds(value, ["A", "B", "C"])
    assert forecast is None and error in message


def test_submitting_log_odds_records_their_softmax_and_says_what_it_came_to(make_tiny_env):
    env = make_tiny_env()
    env.reset("harbor")
    outcomes = list(env._event.outcomes)
    log_odds = [1.0] + [0.0] * (len(outcomes) - 1)
    obs, _, _, _, info = env.step(submit_with({"log_odds": log_odds}))
    record = info["record"]
    weights = [math.exp(x) for x in log_odds]
    assert record.valid and record.forecast == pytest.approx([w / sum(weights) for w in weights])
    recorded = ", ".join(f"{label} {p:.2f}" for label, p in zip(outcomes, record.forecast, strict=True))
    assert record.messages[-1]["content"] == f"forecast recorded: {recorded}"


def test_log_odds_and_probabilities_together_are_an_invalid_forecast_and_neither_is_no_submission(
    make_tiny_env,
):
    env = make_tiny_env()
    env.reset("harbor")
    k = len(env._event.outcomes)
    obs, _, _, _, info = env.step(submit_with({}))  # neither: refused, the step goes on
    assert not info["step_ended"]
    assert "needs probabilities (or log_odds, or evidence); forecast not submitted" in tool_texts(obs)[-1]
    obs, _, _, _, info = env.step(submit_with({"probabilities": [1 / k] * k, "log_odds": [0] * k}))
    record = info["record"]
    assert info["step_ended"] and not record.valid
    assert "give probabilities, or log_odds and evidence, not both" in record.forecast_error
    assert record.forecast == pytest.approx([1 / k] * k)  # the uniform fallback


def test_log_odds_need_listed_outcomes():
    from forecast_dojo.tools import read_log_odds

    forecast, error = read_log_odds([0, 0], [])
    assert forecast is None and "needs listed outcomes" in error


def test_evidence_is_summed_per_outcome_onto_the_log_odds():
    from forecast_dojo.scoring import softmax
    from forecast_dojo.tools import read_evidence, read_forecast

    outcomes = ["A", "B", "C"]
    evidence = [["B", 1], ["A", 2], ["B", 0.5], ["A", -1]]
    assert read_evidence(evidence, outcomes) == ((1.0, 1.5, 0.0), None)
    assert read_evidence([], outcomes) == ((0.0, 0.0, 0.0), None)  # no evidence: uniform
    assert read_forecast({"evidence": evidence}, outcomes)[0] == pytest.approx(softmax([1, 1.5, 0]))
    assert read_forecast({"evidence": []}, outcomes)[0] == pytest.approx([1 / 3] * 3)
    # log_odds are the starting point (a prior) the evidence is added to
    both = read_forecast({"log_odds": {"A": 0, "B": 0, "C": 2}, "evidence": evidence}, outcomes)
    assert both[0] == pytest.approx(softmax([1, 1.5, 2]))
    assert read_forecast({"evidence": [["A", 100]] * 100}, outcomes)[0] == pytest.approx(
        [1, 0, 0]
    )  # no overflow


def test_a_label_with_surrounding_whitespace_names_its_outcome_and_nothing_else_is_forgiven():
    # a tokenizer's leading space (" Harbor Works", seen from the SFT student) names the outcome;
    # case, inner spaces and near-names do not
    from forecast_dojo.tools import read_evidence, read_forecast, read_probabilities

    outcomes = ["Harbor Works", "Degro Labs", "Yes"]
    assert read_evidence([[" Harbor Works", 1], ["Degro Labs\n", 0.5]], outcomes) == ((1.0, 0.5, 0.0), None)
    for label in ["harbor works", "Harbor  Works", "Degradro Labs", "", " "]:
        sums, error = read_evidence([[label, 1]], outcomes)
        assert sums is None and "not one of" in error
    assert read_probabilities({" Yes ": 0.5, "Harbor Works": 0.25, "Degro Labs": 0.25}, outcomes) == (
        (0.25, 0.25, 0.5),
        None,
    )
    assert read_forecast({"log_odds": {"Yes": 0, " Harbor Works": 0, "Degro Labs": 0}}, outcomes)[0] == (
        pytest.approx([1 / 3] * 3)
    )
    # two keys for one outcome are refused, not silently merged or overwritten
    forecast, error = read_probabilities(
        {"Yes": 0.5, " Yes": 0.5, "Harbor Works": 0, "Degro Labs": 0}, outcomes
    )
    assert forecast is None and "named twice: ['Yes']" in error


def test_outcome_labels_differing_only_in_whitespace_are_matched_exactly_or_not_at_all():
    from forecast_dojo.schema import outcome_index

    outcomes = ["A", " A", "B"]
    assert outcome_index("A", outcomes) == 0
    assert outcome_index(" A", outcomes) == 1
    assert outcome_index("A ", outcomes) is None  # ambiguous once stripped: refused
    assert outcome_index(" B", outcomes) == 2


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"A": 1}, "a list of [label, log likelihood ratio] pairs"),
        ("A 1", "a list of [label, log likelihood ratio] pairs"),
        ([["A", 1, 2]], "a [label, number] pair"),
        ([[1, "A"]], "a [label, number] pair"),
        ([{"A": 1}], "a [label, number] pair"),
        (["A"], "a [label, number] pair"),
        ([["D", 1]], "names 'D', not one of ['A', 'B', 'C']"),
        ([["A", "1"]], "finite numbers"),
        ([["A", True]], "finite numbers"),
        ([["A", float("nan")]], "finite numbers"),
        ([["A", 101]], "between -100 and 100"),
        ([["A", 10**400]], "finite numbers"),
        ([["A", 1]] * 101, "the cap is 100"),
    ],
)
def test_bad_evidence_gets_a_clear_error(value, error):
    from forecast_dojo.tools import read_evidence, read_forecast

    forecast, message = read_evidence(value, ["A", "B", "C"])
    assert forecast is None and error in message
    assert read_forecast({"evidence": value, "log_odds": [0, 0, 0]}, ["A", "B", "C"]) == (None, message)


def test_submitting_evidence_records_its_softmax_and_probabilities_beside_it_are_invalid(make_tiny_env):
    from forecast_dojo.scoring import softmax

    env = make_tiny_env()
    env.reset("harbor")
    outcomes = list(env._event.outcomes)
    k = len(outcomes)
    obs, _, _, _, info = env.step(submit_with({"evidence": [[outcomes[0], 1], [outcomes[0], 0.5]]}))
    record = info["record"]
    assert info["step_ended"] and record.valid
    assert record.forecast == pytest.approx(softmax([1.5] + [0] * (k - 1)))
    recorded = ", ".join(f"{label} {p:.2f}" for label, p in zip(outcomes, record.forecast, strict=True))
    assert record.messages[-1]["content"] == f"forecast recorded: {recorded}"
    env.reset("harbor")
    obs, _, _, _, info = env.step(submit_with({"probabilities": [1 / k] * k, "evidence": []}))
    assert info["step_ended"] and not info["record"].valid
    assert "not both" in info["record"].forecast_error
    env.reset("harbor")
    obs, _, _, _, info = env.step(submit_with({"evidence": [["no such outcome", 1]]}))
    assert info["step_ended"] and not info["record"].valid  # an invalid forecast: uniform recorded
    assert info["record"].forecast == pytest.approx([1 / k] * k)
    assert info["record"].messages[-1]["content"].startswith("invalid forecast (evidence names")
