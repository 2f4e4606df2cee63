"""Trajectory logs: written per step, loaded with `datasets` without custom code."""

import pytest

from forecast_dojo.trajectory import TrajectoryWriter, load_run_metadata, load_steps


def call(name, **arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def test_log_is_written_per_step_and_loads_with_datasets(make_tiny_env, tmp_path):
    env = make_tiny_env(memory="notebook", log_dir=tmp_path / "run", run_metadata={"seed": 7})
    env.reset("mayor", seed=7)
    env.step(call("search", query="Ostrava poll"))
    assert (tmp_path / "run" / "steps.jsonl").exists() is False  # nothing is logged before a step ends
    env.step(
        {
            **call("submit_forecast", probabilities=[0.6, 0.3, 0.1]),
            "usage": {"prompt_tokens": 100, "completion_tokens": 20},
        }
    )
    lines = (tmp_path / "run" / "steps.jsonl").read_text().splitlines()
    assert len(lines) == 1  # flushed as soon as the step ended
    env.step("no tools here")
    env.step(call("submit_forecast", probabilities=[2.0, 0.0, 0.0]))
    env.step(
        call("submit_forecast", probabilities={"Mira Tolvanen": 1.0, "Jonas Berg": 0.0, "Ada Quist": 0.0})
    )
    env.step(call("submit_forecast", probabilities=[0.5, 0.25, 0.25]))
    env.close()

    dataset = load_steps(tmp_path / "run")
    assert dataset.num_rows == 4
    first = dataset[0]
    assert first["event_id"] == "mayor" and first["step"] == 0 and first["memory"] == "notebook"
    assert first["tokens"] == {"prompt_tokens": 100, "completion_tokens": 20}
    assert [m["role"] for m in first["messages"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert first["tool_calls"][0]["name"] == "search" and first["tool_calls"][0]["doc_ids"]
    assert first["tool_calls"][1]["arguments"]["probabilities"] == pytest.approx([0.6, 0.3, 0.1])
    assert first["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"query": "Ostrava poll"}
    assert first["scores"]["brier"] == pytest.approx(-(0.16 + 0.09 + 0.01))
    assert first["outcome"] == "Mira Tolvanen" and first["forecast"] == pytest.approx([0.6, 0.3, 0.1])
    assert dataset[1]["flags"] == ["invalid_forecast", "no_notebook"] and dataset[1]["valid"] is False
    assert dataset[0]["tools"] == env.tool_schemas()  # exactly as generated
    meta = load_run_metadata(tmp_path / "run")
    assert meta["seed"] == 7 and meta["corpus_content_hash"] and meta["package_version"]


def test_a_directory_of_another_run_is_refused(tmp_path):
    TrajectoryWriter(tmp_path, {"seed": 1}).close()
    TrajectoryWriter(tmp_path, {"seed": 1}).close()  # same run: appends
    with pytest.raises(FileExistsError, match="another directory"):
        TrajectoryWriter(tmp_path, {"seed": 2})
