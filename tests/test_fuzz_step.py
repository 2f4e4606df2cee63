"""``env.step`` never raises on anything a model can write (issue 9 §3).

Part 1: every reproducer of the issue as a named regression test, on the synthetic world.
Part 2: a Hypothesis suite of generated actions (raw text and structured dicts, with lone
surrogates, deep nesting, huge numbers, huge strings, wrong types, non-JSON Python objects), each
stepped through an env; an "escape" is an exception out of ``env.step`` or a broken invariant
(observation outside the space, not strict UTF-8 JSON, non-finite reward, an unbounded echo, a step
that outlives its budget, a tool's last-resort guard firing).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forecast_dojo.actions import MAX_ACTION_CHARS, MAX_NAME_CHARS, MAX_TOOL_CALLS_PER_TURN
from forecast_dojo.corpus import HashingEmbedder
from forecast_dojo.corpus.retrieval import ExactDenseRetriever
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.messages import normalize_message
from forecast_dojo.tools import INTERNAL_ERROR_PREFIX, MAX_CODE_CHARS, MAX_QUERY_CHARS
from forecast_dojo.trajectory import STEPS_FILE
from forecast_dojo.untrusted import MAX_DEPTH, MAX_INT_DIGITS

from .conftest import tiny_events

# What one turn's new messages may hold at most: every tool call's largest result (a 20,000-character
# read page plus its JSON frame) and the prompts of the next step.
MAX_OBSERVATION_CHARS = 40_000 * (MAX_TOOL_CALLS_PER_TURN + 2)


def dumps(value: Any) -> str:
    """JSON text of a generated value, even one a model could write but ``json.dumps`` refuses."""
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        return json.dumps(value)
    except RecursionError:
        return "[" * 5000 + "]" * 5000
    finally:
        sys.set_int_max_str_digits(limit)


def tool_call(name: str, arguments: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


def dict_action(name: Any, arguments: Any, content: Any = "") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def check_step(env: ForecastDojoEnv, action: Any):
    """Step once and check every invariant an agent-facing step must keep; returns the step tuple."""
    turns_before = env._turns if not env._done else 0
    seen = len(env._messages) if not env._done else 0
    obs, reward, terminated, truncated, info = env.step(action)
    assert env.observation_space.contains(obs)
    text = json.dumps(obs, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")  # no lone surrogate anywhere
    assert sum(len(m["content"]) for m in obs["messages"]) <= MAX_OBSERVATION_CHARS
    assert all(INTERNAL_ERROR_PREFIX not in m["content"] for m in obs["messages"])
    assert math.isfinite(reward) and truncated is False
    json.dumps({k: v for k, v in info.items() if k != "record"}, allow_nan=False)
    if info["step_ended"]:  # the step's log record: strict JSON, UTF-8
        json.dumps(info["record"].to_dict(), ensure_ascii=False, allow_nan=False).encode("utf-8")
    else:  # this turn's part of the transcript, as the log will hold it
        for message in env._messages[seen:]:
            json.dumps(normalize_message(message), ensure_ascii=False, allow_nan=False).encode("utf-8")
    # The turn budget ends the step: a research turn never goes past max_turns + 1.
    assert info["step_ended"] or turns_before + 1 <= env.budgets.max_turns + 1
    return obs, reward, terminated, truncated, info


def contents(obs: dict[str, Any]) -> str:
    return "\n".join(m["content"] for m in obs["messages"])


@pytest.fixture
def synthetic_env(make_synthetic_env):
    env = make_synthetic_env()
    env.reset(seed=0, options={"event_id": env.events[0].id})
    return env


# ---------------------------------------------------------------- part 1: the reproducers


def test_deeply_nested_text_tool_call(synthetic_env):
    action = "<tool_call>" + "[" * 50000 + "]" * 50000 + "</tool_call>"
    obs = check_step(synthetic_env, action)[0]
    assert f"nested too deeply; the cap is {MAX_DEPTH} levels" in contents(obs)


def test_deeply_nested_function_arguments_string(synthetic_env):
    obs = check_step(synthetic_env, dict_action("search", "[" * 50000 + "]" * 50000))[0]
    assert "nested too deeply" in contents(obs)


def test_deeply_nested_arguments_object_and_circular_dict(synthetic_env):
    deep: Any = "x"
    for _ in range(5000):
        deep = {"a": deep}
    obs = check_step(synthetic_env, dict_action("search", {"query": deep}))[0]
    assert "nested too deeply" in contents(obs)
    circular: dict[str, Any] = {"query": "vote"}
    circular["self"] = circular
    obs = check_step(synthetic_env, dict_action("search", circular))[0]
    assert "nested too deeply" in contents(obs)


def test_deeply_nested_notebook(make_synthetic_env):
    env = make_synthetic_env(memory="notebook")
    env.reset(seed=0)
    labels = env.event.outcomes
    uniform = {k: 1 / len(labels) for k in labels}
    for notebook, message in (
        (
            "[" * 50000 + "]" * 50000,
            "notebook rejected, forecast not submitted: notebook is 100000 characters",
        ),
        ("[" * 5000 + "]" * 5000, "notebook rejected, forecast not submitted: notebook: nested too deeply"),
        ("[" * 500 + "]" * 500, "notebook rejected, forecast not submitted: notebook: nested too deeply"),
        (json.loads("[" * 900 + "]" * 900), "tool_calls: nested too deeply"),
    ):
        obs, _, _, _, info = check_step(
            env, dict_action("submit_forecast", {"probabilities": uniform, "notebook": notebook})
        )
        assert message in contents(obs) and not info["step_ended"]


def test_huge_integer_top_k(synthetic_env):
    digits = "9" * 5000
    action = (
        '<tool_call>{"name": "search", "arguments": {"query": "vote", "top_k": ' + digits + "}}</tool_call>"
    )
    obs = check_step(synthetic_env, action)[0]
    assert f"more than {MAX_INT_DIGITS} digits" in contents(obs)
    obs = check_step(synthetic_env, dict_action("search", {"query": "vote", "top_k": 10**5000}))[0]
    assert f"more than {MAX_INT_DIGITS} digits" in contents(obs)
    obs = check_step(synthetic_env, dict_action("search", {"query": "vote", "top_k": 10**50}))[0]
    assert "top_k must be an integer from 1 to 20" in contents(obs)


def test_huge_integer_probability(synthetic_env):
    k = len(synthetic_env.event.outcomes)
    big = "1" + "0" * 400
    probabilities = "[" + ", ".join([big] + ["0"] * (k - 1)) + "]"
    action = (
        '<tool_call>{"name": "submit_forecast", "arguments": {"probabilities": '
        + probabilities
        + "}}</tool_call>"
    )
    obs, _, _, _, info = check_step(synthetic_env, action)
    assert "digits" in contents(obs) and not info["step_ended"]
    obs, _, _, _, info = check_step(
        synthetic_env, dict_action("submit_forecast", {"probabilities": [10**400] + [0] * (k - 1)})
    )
    # 401 digits: refused at entry; 100 digits: a number, too large to be a probability.
    assert "digits" in contents(obs) and not info["step_ended"]
    obs, _, _, _, info = check_step(
        synthetic_env, dict_action("submit_forecast", {"probabilities": [10**99] + [0] * (k - 1)})
    )
    assert info["step_ended"] and info["flags"] == ["invalid_forecast"]
    obs, _, _, _, info = check_step(
        synthetic_env, dict_action("submit_forecast", {"log_odds": [10**99] + [0] * (k - 1)})
    )
    assert info["step_ended"] and info["flags"] == ["invalid_forecast"]  # beyond the log odds bound


def test_lone_surrogate_in_a_query(synthetic_env):
    obs = check_step(
        synthetic_env, '<tool_call>{"name": "search", "arguments": {"query": "\ud800 vote"}}</tool_call>'
    )[0]
    results = json.loads(obs["messages"][0]["content"])
    assert isinstance(results, list) and results
    escaped = '<tool_call>{"name": "search", "arguments": {"query": "\\ud800 vote \\udfff"}}</tool_call>'
    obs = check_step(synthetic_env, escaped)[0]
    assert isinstance(json.loads(obs["messages"][0]["content"]), list)
    call = synthetic_env.conversation()[-2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"query": "\ufffd vote \ufffd"}


def test_lone_surrogates_with_a_log_directory_are_logged_and_budgets_still_end_the_step(
    make_synthetic_env, tmp_path: Path
):
    env = make_synthetic_env(log_dir=tmp_path)
    env.reset(seed=0, options={"event_id": "syn-0000"})
    n_steps = env.event.n_steps
    check_step(env, "thinking \ud800")
    total, turns, ended = 0.0, 1, 0
    while ended < n_steps:
        obs, reward, terminated, _, info = check_step(env, f"still thinking \udfff {turns}")
        turns += 1
        total += reward
        if info["step_ended"]:
            assert info["flags"] == ["no_submission"]
            ended += 1
            assert turns <= env.budgets.max_turns + 1
            turns = 0
    assert terminated
    records = [json.loads(line) for line in (tmp_path / STEPS_FILE).read_text(encoding="utf-8").splitlines()]
    assert len(records) == n_steps
    assert "thinking \ufffd" in records[0]["messages"][2]["content"]
    assert math.isclose(sum(r["reward"] for r in records), total)


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"query": {1, 2}}, "a set of 2 items, which is not JSON"),
        ({1: "vote"}, "a key of type int"),
        ({"query": b"vote"}, "a value of type bytes, which is not JSON"),
        ({"query": object()}, "a value of type object, which is not JSON"),
        ({"query": float("nan")}, "nan is not a JSON number"),
        ({"query": "vote", "top_k": float("inf")}, "inf is not a JSON number"),
        ('{"query": NaN}', "NaN is not a JSON number"),
        (["query"], "arguments must be a JSON object"),
    ],
)
def test_non_json_arguments(synthetic_env, arguments, message):
    obs = check_step(synthetic_env, dict_action("search", arguments))[0]
    assert message in contents(obs)


def test_ten_megabyte_query_name_and_turn_are_refused_with_their_caps(synthetic_env):
    huge = "vote " * 2_000_000
    obs = check_step(synthetic_env, dict_action("search", {"query": huge}))[0]
    assert f"the cap is {MAX_ACTION_CHARS}" in contents(obs)
    obs = check_step(synthetic_env, dict_action("search", {"query": huge[:150_000]}))[0]
    assert f"query is 150000 characters long; the cap is {MAX_QUERY_CHARS}" in contents(obs)
    obs = check_step(synthetic_env, dict_action("x" * 10_000_000, {"query": "vote"}))[0]
    assert f"the cap is {MAX_ACTION_CHARS}" in contents(obs) and len(contents(obs)) < 2_000
    obs = check_step(synthetic_env, dict_action("x" * 1000, {"query": "vote"}))[0]
    assert f"tool name is 1000 characters long; the cap is {MAX_NAME_CHARS}" in contents(obs)
    assert len(contents(obs)) < 2_000
    obs = check_step(synthetic_env, tool_call("search", {"query": "vote"}) * 1000 + "x" * 10_000_000)[0]
    assert f"the cap is {MAX_ACTION_CHARS}" in contents(obs)
    obs = check_step(synthetic_env, dict_action("python", {"code": "print(1)\n" * 5000}))[0]
    assert f"the cap is {MAX_CODE_CHARS}" in contents(obs) or "disabled" in contents(obs)


def test_unclosed_tool_call_openers_parse_in_linear_time(synthetic_env):
    # A backtracking pattern took seconds here (quadratic in the number of openers).
    obs = check_step(synthetic_env, "<tool_call>" * 18_000)[0]
    assert "No tool call found" in contents(obs)


def test_too_many_calls_in_one_turn(synthetic_env):
    obs = check_step(synthetic_env, tool_call("nope", {}) * 100)[0]
    text = contents(obs)
    assert f"at most {MAX_TOOL_CALLS_PER_TURN} run per turn" in text
    assert text.count("unknown tool") == MAX_TOOL_CALLS_PER_TURN


def test_openai_client_message_objects_are_accepted(synthetic_env):
    from openai.types.chat import ChatCompletion, ChatCompletionMessage

    message = ChatCompletionMessage.model_validate(
        {
            "role": "assistant",
            "content": "Let me search.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "search", "arguments": '{"query": "vote"}'},
                }
            ],
        }
    )
    obs = check_step(synthetic_env, message)[0]
    assert obs["messages"][0]["tool_call_id"] == "call_a" and isinstance(json.loads(contents(obs)), list)
    labels = synthetic_env.event.outcomes
    response = ChatCompletion.model_validate(
        {
            "id": "r1",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_b",
                                "type": "function",
                                "function": {
                                    "name": "submit_forecast",
                                    "arguments": json.dumps(
                                        {"probabilities": {k: 1 / len(labels) for k in labels}}
                                    ),
                                },
                            }
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150},
        }
    )
    assert synthetic_env._usage == {"prompt_tokens": None, "completion_tokens": None}
    _, _, _, _, info = check_step(synthetic_env, response)
    assert info["step_ended"] and info["valid"]


def test_objects_whose_methods_raise_become_errors(synthetic_env):
    class Hostile:
        def model_dump(self):
            raise RuntimeError("boom")

    obs = check_step(synthetic_env, Hostile())[0]
    assert "could not be read (RuntimeError)" in contents(obs)
    for action in (None, 5, b"bytes", ["list"], {"content": 5}, {"tool_calls": "x"}, {"tool_calls": [5]}):
        check_step(synthetic_env, action)


# ---------------------------------------------------------------- part 2: generated actions

TOOL_NAMES = ("search", "read", "python", "submit_forecast")
ARGUMENT_NAMES = (
    "query",
    "top_k",
    "doc_id",
    "offset",
    "limit",
    "code",
    "probabilities",
    "log_odds",
    "evidence",
    "notebook",
    "rationale",
    "citations",
    "graph",
)
LABELS = ("Yes", "No", "Mira Tolvanen", "Jonas Berg", "Ada Quist")
# Examples per suite; each steps ACTIONS_PER_EXAMPLE or one more turns: at least 10,000 actions in all.
FUZZ_EXAMPLES = {"text": 1250, "json": 1500, "dict": 1500, "python": 750}
ACTIONS_PER_EXAMPLE = 2
FUZZ_TALLY: dict[str, Any] = {"actions": 0, "logged_keys": set()}

any_char = st.characters(exclude_categories=())  # lone surrogates included
NASTY_STRINGS = [
    "",
    " ",
    "\ud800",
    "\udfff\ud800",
    "\x00\x1b[2J",
    "<tool_call>",
    "</tool_call>",
    "Error: the step ended",
    "\u202e\ufeff",
    "\ud83d" * 100,
]
huge_strings = st.sampled_from([MAX_QUERY_CHARS + 1, MAX_CODE_CHARS + 1, MAX_ACTION_CHARS + 1]).map(
    lambda n: "y" * n
)
texts = st.text(any_char, max_size=12) | st.sampled_from(NASTY_STRINGS) | huge_strings
huge_ints = st.integers(min_value=10**99, max_value=10**120) | st.sampled_from([5000, 401, -401]).map(
    lambda digits: (10 ** abs(digits)) * (1 if digits > 0 else -1)
)
numbers = st.integers(-5, 30) | st.floats(allow_nan=True, allow_infinity=True) | st.floats(0, 1) | huge_ints


def nest(spec: tuple[int, str]) -> Any:
    """A value nested ``depth`` levels deep, in lists, objects or both alternately."""
    depth, shape = spec
    value: Any = 0
    for level in range(depth):
        value = [value] if shape == "list" or (shape == "mixed" and level % 2) else {"k": value}
    return value


deep = st.tuples(
    st.sampled_from([MAX_DEPTH - 4, MAX_DEPTH, MAX_DEPTH + 1, 200, 5000]),
    st.sampled_from(["list", "dict", "mixed"]),
).map(nest)


json_leaves = st.none() | st.booleans() | numbers | texts | st.sampled_from(LABELS)
json_values = (
    st.recursive(
        json_leaves,
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(texts | st.sampled_from(LABELS), children, max_size=3)
        ),
        max_leaves=6,
    )
    | deep
)


NOTEBOOK_LABELS = st.sampled_from([("Yes", "No"), ("Mira Tolvanen", "Jonas Berg", "Ada Quist")])
NOTEBOOK_PROBABILITY = st.floats(0, 1) | numbers
NOTEBOOK_EVIDENCE = (
    st.lists(
        st.fixed_dictionaries(
            {"claim": texts, "date": st.sampled_from(["2030-01-05", "2099-01-01", "x"]) | texts},
            optional={"doc_ids": st.lists(st.sampled_from(["harbor-03", "x"]), max_size=12) | json_leaves},
        ),
        max_size=2,
    )
    | json_values
)
NOTEBOOK_QUESTIONS = st.lists(texts, max_size=2) | json_leaves


@st.composite
def notebook_like(draw):
    labels = draw(NOTEBOOK_LABELS)
    notebook = {
        "assessment": {label: draw(NOTEBOOK_PROBABILITY) for label in labels},
        "evidence": draw(NOTEBOOK_EVIDENCE),
        "open_questions": draw(NOTEBOOK_QUESTIONS),
    }
    return dumps(notebook) if draw(st.booleans()) else notebook


notebooks = notebook_like() | json_values
ARGUMENT_VALUES = {
    name: strategy | json_values
    for name, strategy in {
        "query": st.sampled_from(["Harbor Act", "Tolvanen poll", "vote"]) | texts,
        "top_k": st.integers(-2, 25) | huge_ints,
        "doc_id": st.sampled_from(["harbor-03", "leak-harbor", "vote-09"]) | texts,
        "offset": st.integers(-5, 10**12),
        "limit": st.integers(-5, 30_000),
        "code": texts,
        "probabilities": st.lists(numbers | st.floats(0, 1), max_size=4)
        | st.dictionaries(st.sampled_from(LABELS) | texts, numbers | st.floats(0, 1), max_size=4),
        "log_odds": st.lists(numbers | st.floats(-150, 150), max_size=4)
        | st.dictionaries(st.sampled_from(LABELS) | texts, numbers | st.floats(-150, 150), max_size=4),
        "evidence": st.lists(
            st.tuples(st.sampled_from(LABELS) | texts, numbers | st.floats(-150, 150)).map(list)
            | json_values,
            max_size=5,
        )
        | st.just([["Yes", 100]] * 101),
        "notebook": notebooks,
        "rationale": texts | st.just("r" * 5000),
        "citations": st.lists(st.sampled_from(["harbor-03", "leak-harbor"]) | texts, max_size=3)
        | st.just(["x"] * 60),
        "graph": st.fixed_dictionaries(
            {
                "events": st.lists(
                    st.fixed_dictionaries(
                        {
                            "id": st.sampled_from(["a", "b"]) | texts,
                            "date": st.just("2031-01-02") | texts,
                            "text": texts,
                        }
                    ),
                    max_size=3,
                ),
                "links": st.lists(
                    st.fixed_dictionaries(
                        {
                            "from": st.just("a"),
                            "to": st.sampled_from(["b", "outcome"]),
                            "sign": st.sampled_from(["+", "-", "?"]),
                        }
                    ),
                    max_size=2,
                ),
            }
        ),
    }.items()
}
ARGUMENT_KEYS = st.lists(st.sampled_from(ARGUMENT_NAMES) | texts, max_size=3, unique=True)


@st.composite
def arguments(draw):
    names = draw(ARGUMENT_KEYS)
    return {name: draw(ARGUMENT_VALUES.get(name, json_values)) for name in names}


argument_objects = arguments()
tool_names = st.sampled_from(TOOL_NAMES) | texts | st.just("x" * 70)
calls = st.fixed_dictionaries({"name": tool_names | json_values, "arguments": argument_objects | json_values})
TEXT_PARTS = st.lists(
    texts
    | calls.map(lambda c: "<tool_call>" + dumps(c) + "</tool_call>")
    | calls.map(lambda c: "<tool_call>" + dumps(c)[:-1])  # truncated
    | st.sampled_from(["<tool_call>", "</tool_call>", "[" * 1200, "\ud800", "\\ud800"]),
    max_size=4,
).map("".join)


class Opaque:
    def __repr__(self) -> str:
        raise RuntimeError("repr fails")


python_values = st.recursive(
    json_leaves
    | st.sets(st.integers(), max_size=3)
    | st.binary(max_size=5)
    | st.builds(Opaque)
    | st.tuples(texts),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(texts | st.integers() | st.none(), children, max_size=3)
    ),
    max_leaves=6,
)


def message_dicts(values: st.SearchStrategy, wild: bool) -> st.SearchStrategy:
    """Assistant-message dicts whose every part may be replaced by ``values``."""
    function = (
        st.fixed_dictionaries(
            {
                "name": tool_names | values,
                "arguments": argument_objects | argument_objects.map(dumps) | values,
            }
        )
        | values
    )
    raw_calls = (
        st.lists(
            st.fixed_dictionaries(
                {"function": function}, optional={"id": texts | values, "type": st.just("function")}
            )
            | values,
            max_size=2,
        )
        | values
    )
    usage = st.fixed_dictionaries({"prompt_tokens": numbers, "completion_tokens": numbers}) | values
    messages = st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": texts | st.none() | values, "tool_calls": raw_calls},
        optional={"usage": usage},
    )
    if not wild:
        return messages

    def circular(action: dict[str, Any]) -> dict[str, Any]:
        action["tool_calls"] = [action]
        return action

    return messages | messages.map(circular)


json_messages = message_dicts(json_values, wild=False)
python_messages = message_dicts(python_values, wild=True)


@pytest.fixture(scope="module")
def fuzz_envs(tiny_corpus, tmp_path_factory):
    log = tmp_path_factory.mktemp("fuzz-log")
    retriever = ExactDenseRetriever(tiny_corpus, HashingEmbedder())
    envs = [
        ForecastDojoEnv(
            tiny_events(), tiny_corpus, retriever, python_runner=lambda code: (f"ran {len(code)}", None)
        ),
        ForecastDojoEnv(
            tiny_events(), tiny_corpus, retriever, memory="notebook", python_runner=None, log_dir=log
        ),
    ]
    for env in envs:
        env.reset(seed=0)
    return envs


def run_fuzz(envs: list[ForecastDojoEnv], which: int, actions: list[Any]) -> None:
    """Step ``actions`` in order through one of the fuzz envs (resetting when an episode ends)."""
    env = envs[which]
    for action in actions:
        if env._done:
            env.reset(seed=FUZZ_TALLY["actions"])
        FUZZ_TALLY["actions"] += 1
        info = check_step(env, action)[4]
        if info["step_ended"] and env.log_dir is not None:
            record = info["record"]
            FUZZ_TALLY["logged_keys"].add((record.event_id, record.step, record.rollout))


def fuzz_settings(max_examples: int) -> settings:
    """Deterministic (CI-stable) settings; no deadline: a turn may legitimately take a while."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )


def turns(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """Two or three consecutive turns per example (so the 5,000 examples step at least 10,000 actions)."""
    return st.lists(strategy, min_size=ACTIONS_PER_EXAMPLE, max_size=ACTIONS_PER_EXAMPLE + 1)


tool_call_texts = st.lists(calls, min_size=1, max_size=2).map(
    lambda payloads: "".join("<tool_call>" + dumps(p) + "</tool_call>" for p in payloads)
)


@pytest.mark.slow
@fuzz_settings(FUZZ_EXAMPLES["text"])
@given(st.integers(0, 1), turns(texts | TEXT_PARTS))
def test_generated_raw_text_actions(fuzz_envs, which, actions):
    run_fuzz(fuzz_envs, which, actions)


@pytest.mark.slow
@fuzz_settings(FUZZ_EXAMPLES["json"])
@given(st.integers(0, 1), turns(tool_call_texts))
def test_generated_structured_tool_calls_as_text(fuzz_envs, which, actions):
    run_fuzz(fuzz_envs, which, actions)


@pytest.mark.slow
@fuzz_settings(FUZZ_EXAMPLES["dict"])
@given(st.integers(0, 1), turns(json_messages))
def test_generated_structured_dict_actions(fuzz_envs, which, actions):
    run_fuzz(fuzz_envs, which, actions)


@pytest.mark.slow
@fuzz_settings(FUZZ_EXAMPLES["python"])
@given(st.integers(0, 1), turns(python_messages | python_values))
def test_generated_python_objects_of_the_wrong_type(fuzz_envs, which, actions):
    run_fuzz(fuzz_envs, which, actions)


@pytest.mark.slow
def test_generated_actions_number_at_least_ten_thousand(fuzz_envs):
    """Runs after the four suites above (file order): the figure the README states, and the log."""
    assert sum(FUZZ_EXAMPLES.values()) * ACTIONS_PER_EXAMPLE >= 10_000
    if FUZZ_TALLY["actions"]:  # the suites ran in this session (not deselected)
        assert FUZZ_TALLY["actions"] >= 10_000, FUZZ_TALLY["actions"]
        print(f"generated actions stepped: {FUZZ_TALLY['actions']}, escapes: 0")
        steps = (fuzz_envs[1].log_dir / STEPS_FILE).read_text(encoding="utf-8").splitlines()
        # One line per distinct (event, step, rollout): the writer skips a replayed step's record.
        assert len(steps) == len(FUZZ_TALLY["logged_keys"]) > 0
        for line in steps:
            json.loads(line, parse_constant=lambda token: pytest.fail(f"{token} in the log"))
