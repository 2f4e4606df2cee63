"""The step record: built once by the env, written by the log, read back identically."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.evaluation.runner import baseline_records, baseline_rows, episode_records, record_row
from forecast_dojo.records import STEP_RECORD_VERSION, RecordFormatError, StepRecord, ToolCallRecord
from forecast_dojo.trajectory import load_records, load_steps
from tests.conftest import tiny_events

LEGACY_KEYS = [
    "event_id",
    "step",
    "n_steps",
    "cutoff",
    "forecast_date",
    "memory",
    "messages",
    "tools",
    "tool_calls",
    "notebook_in",
    "notebook_out",
    "outcomes",
    "forecast",
    "valid",
    "flags",
    "forecast_error",
    "rationale",
    "scores",
    "reward",
    "outcome",
    "outcome_index",
    "market",
    "budgets",
    "tokens",
    "n_visible",
]
NEW_KEYS = ["format_version", "run_id", "rollout", "agent", "source", "prompt", "wall_time_s"]


def call(name, **arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def play(env, event_id="harbor", **reset_options):
    env.reset(event_id, options=reset_options or None)
    records = []
    actions = [call("search", query="Harbor Act vote"), call("submit_forecast", probabilities=[0.7, 0.3])]
    while True:
        for action in actions:
            _, _, terminated, _, info = env.step(action)
            if info["step_ended"]:
                records.append(info["record"])
                break
        if terminated:
            return records


def test_info_record_is_what_the_log_writes(make_tiny_env, tmp_path):
    env = make_tiny_env(log_dir=tmp_path, run_metadata={"agent": "scripted"})
    records = play(env)
    env.close()
    lines = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert [r.to_dict() for r in records] == lines
    assert list(lines[0]) == [
        "format_version",
        "run_id",
        "event_id",
        "rollout",
        "step",
        "n_steps",
        "cutoff",
        "forecast_date",
        "agent",
        "source",
        "memory",
        "prompt",
        "messages",
        "tools",
        "tool_calls",
        "notebook_in",
        "notebook_out",
        "outcomes",
        "forecast",
        "valid",
        "flags",
        "forecast_error",
        "rationale",
        "scores",
        "reward",
        "outcome",
        "outcome_index",
        "market",
        "budgets",
        "tokens",
        "n_visible",
        "wall_time_s",
    ]
    assert set(LEGACY_KEYS + NEW_KEYS) == set(lines[0])
    first = records[0]
    assert first.format_version == STEP_RECORD_VERSION and first.run_id == env.run_id
    assert first.agent == "scripted" and first.rollout == 0 and first.cutoff.endswith("Z")
    assert isinstance(first.tool_calls[0], ToolCallRecord) and first.tool_calls[0].doc_ids
    assert first.wall_time_s >= 0.0
    loaded = load_records(tmp_path)
    assert loaded == records  # exact, wall time included: the log round-trips
    assert load_steps(tmp_path).num_rows == 3


def test_records_are_deterministic_except_wall_time(make_tiny_env):
    a, b = play(make_tiny_env()), play(make_tiny_env())
    assert all(x.same_as(y) for x, y in zip(a, b, strict=True))
    assert a[0].replace(wall_time_s=123.0).same_as(a[0])
    assert not a[0].replace(reward=0.0).same_as(a[0])
    assert "wall_time_s" not in a[0].deterministic_dict()


def test_rollout_is_a_reset_option(make_tiny_env):
    records = play(make_tiny_env(), rollout=3)
    assert {r.rollout for r in records} == {3}
    with pytest.raises(ValueError, match="rollout"):
        make_tiny_env().reset("harbor", options={"rollout": -1})


def test_from_dict_reads_version_one_and_refuses_unknown_versions(make_tiny_env):
    record = play(make_tiny_env())[0]
    legacy = {k: v for k, v in record.to_dict().items() if k in LEGACY_KEYS}
    legacy["run_id"] = "run-old"
    read = StepRecord.from_dict(legacy)
    assert read.format_version == STEP_RECORD_VERSION and read.rollout == 0 and read.agent is None
    assert read.forecast == record.forecast and read.tool_calls == record.tool_calls
    with pytest.raises(RecordFormatError, match="version"):
        StepRecord.from_dict({**record.to_dict(), "format_version": 99})
    with pytest.raises(RecordFormatError):
        StepRecord.from_dict({"event_id": "x"})


def test_reference_records_use_one_instant_format():
    event = tiny_events()[0]
    record = StepRecord.reference(event, 1, (0.9, 0.1), agent="oracle")
    assert record.cutoff == "2030-01-21T00:00:00Z" and record.memory is None
    assert record.scores["brier"] == pytest.approx(-0.02) and record.reward == record.scores["brier"]
    assert record.market == pytest.approx([0.69, 0.31])  # the point at day 19 and record.n_steps == 3
    rows = baseline_rows(tiny_events())
    assert all(r["cutoff"].endswith("Z") and "+00:00" not in r["cutoff"] for r in rows)
    assert rows == [record_row(r) for r in baseline_records(tiny_events())]
    assert StepRecord.from_dict(record.to_dict()) == record


def test_runner_rows_come_from_records(make_tiny_env):
    from forecast_dojo.agents import UniformAgent

    env = make_tiny_env()
    records = episode_records(env, UniformAgent(), "mayor")
    rows = [record_row(r, "uniform") for r in records]
    assert [r["step"] for r in rows] == [0, 1, 2, 3] and rows[0]["agent"] == "uniform"
    assert rows[0]["score_brier"] == records[0].scores["brier"] and rows[0]["memory"] == "none"


def test_spent_tokens_is_prompt_plus_completion_whatever_else_the_record_counts():
    """``constrained_tokens`` is a part of the completion, never added to a step's cost (one reader, everywhere)."""
    from forecast_dojo.evaluation.metrics import tokens_of
    from forecast_dojo.records import spent_tokens

    tokens = {"prompt_tokens": 100, "completion_tokens": 40, "constrained_tokens": 3}
    assert spent_tokens(tokens) == 140
    assert spent_tokens({"prompt_tokens": None, "completion_tokens": None}) == 0
    assert spent_tokens(None) == 0 and spent_tokens({}) == 0
    assert tokens_of({"tokens": tokens}) == 140
