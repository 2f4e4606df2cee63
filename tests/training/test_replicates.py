"""Pooling runs of the learning experiment: checks that they are replicates, the numbers, the script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_dojo.errors import DataError
from forecast_dojo.evaluation.metrics import replicate_bootstrap, replicate_difference
from forecast_dojo.training.replicates import load_replicates

REPO = Path(__file__).resolve().parents[2]
EVENTS = [f"syn-{i:04d}" for i in range(6)]


def _results(path: Path, values: list[float], *, valid: float = 1.0, **arguments: object) -> Path:
    """A learning.json as the experiment writes it, with one SFT model's memory-free numbers."""
    by_event = dict(zip(EVENTS, values, strict=True))
    mean = sum(values) / len(values)
    numbers = {
        "steps": 12,
        "events": len(EVENTS),
        "valid_rate": valid,
        "brier_minus_uniform": [mean, mean - 0.1, mean + 0.05],
        "brier_minus_uniform_by_event": by_event,
    }
    data = {
        "arguments": {
            "out": str(path.parent),
            "results": str(path),
            "seed": 1,
            "embedder": "minilm",
            **arguments,
        },
        "base": {"steps": 0, "modes": {"none": {"steps": 0}, "notebook": {"steps": 0}}},
        "sft": {**numbers, "modes": {"none": numbers, "notebook": {"steps": 0}}},
    }
    path.write_text(json.dumps(data))
    return path


def test_runs_of_one_recipe_are_pooled_per_event(tmp_path):
    values = ([-0.3, -0.2, -0.1, 0.0, -0.2, -0.4], [0.1, -0.1, 0.0, 0.0, -0.1, 0.1])
    a = _results(tmp_path / "a.json", values[0], extra_sft={"seed": 2})
    b = _results(tmp_path / "b.json", values[1], valid=0.8, extra_sft={})
    replicates = load_replicates([a, b])
    expected = replicate_bootstrap([dict(zip(EVENTS, v, strict=True)) for v in values])
    assert replicates.pooled == expected
    assert [r.goal_met for r in replicates.runs] == [True, False]  # b: valid 80 % and its interval reaches 0
    # out and results say where a run was written: not compared
    assert replicates.differing_arguments == {"extra_sft": [{"seed": 2}, {}]}
    table = replicates.table()
    assert "met in 1 of 2 run(s)" in table and 'extra_sft: {"seed": 2} | {}' in table
    assert f"{expected['mean']:+.3f}" in table
    data = replicates.to_dict()
    assert json.loads(json.dumps(data)) == data and data["pooled"]["ci_events"] == list(expected["ci_events"])


def test_two_recipes_are_compared_paired_on_events(tmp_path):
    values = (
        [-0.3, -0.2, -0.1, 0.0, -0.2, -0.4],
        [0.1, -0.1, 0.0, 0.0, -0.1, 0.1],
        [0.0, 0.0, 0.1, 0.2, 0.0, -0.1],
    )
    a = _results(tmp_path / "a.json", values[0], extra_sft={"seed": 2})
    b = _results(tmp_path / "b.json", values[1], extra_sft={})
    lines = _results(tmp_path / "c.json", values[2], teacher_no_bearing_lines=True)
    compared = load_replicates([a, b], against=[lines], seed=3)
    by_event = [dict(zip(EVENTS, v, strict=True)) for v in values]
    assert compared.pooled == replicate_bootstrap(by_event[:2], seed=3)
    alone = replicate_bootstrap(by_event[2:], seed=3)  # one run: its between-run sd is NaN
    assert {k: v for k, v in compared.against_pooled.items() if k != "between_run_sd"} == {
        k: v for k, v in alone.items() if k != "between_run_sd"
    }
    assert compared.difference == replicate_difference(by_event[:2], by_event[2:], seed=3)
    assert [r.path for r in compared.against] == [str(lines)]
    assert compared.differing_arguments["teacher_no_bearing_lines"] == [None, None, True]
    table = compared.table()
    assert f"| against: {lines} |" in table and "runs minus against" in table
    assert f"{compared.difference['mean']:+.3f}" in table
    data = compared.to_dict()
    assert data["difference"]["ci_events"] == list(compared.difference["ci_events"])
    assert load_replicates([a, b]).to_dict()["difference"] is None
    with pytest.raises(DataError, match="one run given twice"):
        load_replicates([a, b], against=[a])


def test_what_is_not_a_replicate_is_refused_with_the_reason(tmp_path):
    a = _results(tmp_path / "a.json", [0.0] * 6)
    b = _results(tmp_path / "b.json", [0.1] * 6)
    with pytest.raises(DataError, match="worlds differ in 'seed'"):
        load_replicates([a, _results(tmp_path / "c.json", [0.1] * 6, seed=0)])
    with pytest.raises(DataError, match="one run given twice"):
        load_replicates([a, b, _results(tmp_path / "copy.json", [0.0] * 6)])
    with pytest.raises(DataError, match="no 'grpo' model \\(it holds base, sft\\)"):
        load_replicates([a, b], model="grpo")
    with pytest.raises(DataError, match="no steps in memory mode 'notebook'"):
        load_replicates([a, b], mode="notebook")
    with pytest.raises(DataError, match="no such results file"):
        load_replicates([a, tmp_path / "missing.json"])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="not a JSON results file"):
        load_replicates([a, tmp_path / "bad.json"])
    old = json.loads(b.read_text())
    for entry in (old["sft"], old["sft"]["modes"]["none"]):
        del entry["brier_minus_uniform_by_event"]
    (tmp_path / "old.json").write_text(json.dumps(old))
    with pytest.raises(DataError, match="--stages results"):
        load_replicates([a, tmp_path / "old.json"])
    other_events = json.loads(b.read_text())
    other_events["sft"]["modes"]["none"]["brier_minus_uniform_by_event"] = {"syn-0099": 0.0}
    (tmp_path / "other.json").write_text(json.dumps(other_events))
    with pytest.raises(DataError, match="same events"):
        load_replicates([a, tmp_path / "other.json"])
    with pytest.raises(DataError, match="no runs"):
        load_replicates([])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("valid_rate", None, "'valid_rate' is not a number from 0 to 1"),
        ("valid_rate", 1.5, "'valid_rate' is not a number from 0 to 1"),
        ("valid_rate", True, "'valid_rate' is not a number from 0 to 1"),
        ("brier_minus_uniform", None, "not a \\[mean, low, high\\] triple"),
        ("brier_minus_uniform", [0.1, "x", 0.2], "not a \\[mean, low, high\\] triple"),
        ("brier_minus_uniform", [0.1, 0.2], "not a \\[mean, low, high\\] triple"),
        ("brier_minus_uniform_by_event", [0.1] * 6, "not an object of numbers"),
        ("brier_minus_uniform_by_event", dict.fromkeys(EVENTS, "0.1"), "not an object of numbers"),
        ("steps", "12", "step count in memory mode 'none' is '12'"),
    ],
)
def test_a_hand_edited_results_file_is_refused_as_data_not_a_crash(tmp_path, field, value, message):
    a = _results(tmp_path / "a.json", [0.0] * 6)
    edited = json.loads(_results(tmp_path / "b.json", [0.1] * 6).read_text())
    if value is None:
        del edited["sft"]["modes"]["none"][field]
    else:
        edited["sft"]["modes"]["none"][field] = value
    (tmp_path / "b.json").write_text(json.dumps(edited))
    with pytest.raises(DataError, match=message):
        load_replicates([a, tmp_path / "b.json"])


def test_the_script_prints_the_table_and_refuses_bad_input_with_status_2(tmp_path):
    a = _results(tmp_path / "a.json", [-0.3, -0.2, -0.1, 0.0, -0.2, -0.4])
    b = _results(tmp_path / "b.json", [0.1, -0.1, 0.0, 0.0, -0.1, 0.1])
    script = [sys.executable, str(REPO / "training" / "replicates.py")]
    env = os.environ | {"PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [*script, "--runs", str(a), str(b), "--json", str(tmp_path / "pooled.json")],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "pooled over the runs" in done.stdout
    assert json.loads((tmp_path / "pooled.json").read_text())["pooled"]["runs"] == 2
    refused = subprocess.run(
        [*script, "--runs", str(a), str(a)], capture_output=True, text=True, timeout=300, env=env
    )
    assert refused.returncode == 2 and "one run given twice" in refused.stderr
