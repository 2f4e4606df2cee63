"""Export of trajectory logs as an SFT dataset: round trip, filters, refusals, length policy, TRL."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_dojo.agents import UniformAgent
from forecast_dojo.agents.base import tool_call
from forecast_dojo.training.export import (
    SHORTENED_MARKER,
    ExportConfig,
    ExportError,
    build_sft_rows,
    export_sft,
    load_sft_dataset,
    through_last_assistant_turn,
    token_counter,
)

REPO = Path(__file__).resolve().parents[2]


def decoded(messages: list[dict]) -> list[dict]:
    """Exported messages with their JSON-string tool arguments decoded (the log's form)."""
    out = []
    for m in messages:
        calls = m["tool_calls"]
        if calls:
            calls = [
                {**c, "function": {**c["function"], "arguments": json.loads(c["function"]["arguments"])}}
                for c in calls
            ]
        out.append({**m, "tool_calls": calls})
    return out


def log_records(log: Path) -> list[dict]:
    return [json.loads(line) for line in (log / "steps.jsonl").read_text().splitlines()]


class BadForecaster:
    """Submits a forecast that is not a distribution (invalid) at every step."""

    name = "bad"

    def act(self, observation):
        return tool_call(
            "submit_forecast", probabilities=[0.9, 0.9, 0.9][: 2 if "Harbor" in str(observation) else 3]
        )


def test_round_trip_keeps_every_record_exactly(teacher_log, tmp_path, tokenizer):
    log = teacher_log()
    config = ExportConfig(max_tokens=None, assume_all_training=True, best_per_step=None, deduplicate=False)
    dataset = export_sft(log, tmp_path / "out", config, verbose=False)
    loaded = load_sft_dataset(tmp_path / "out")
    records = log_records(log)
    assert len(loaded) == len(dataset) == len(records) == 7  # 3 harbor steps + 4 mayor steps
    for row, record in zip(loaded, records, strict=True):
        assert decoded(row["messages"]) == through_last_assistant_turn(record["messages"])
        assert record["messages"][-1]["role"] == "tool" and row["messages"][-1]["role"] == "assistant"
        assert json.loads(row["tools"]) == record["tools"]
        assert (row["event_id"], row["step"], row["memory"]) == (
            record["event_id"],
            record["step"],
            "notebook",
        )
        assert row["scores"] == record["scores"] and row["valid"] == record["valid"]
        assert row["forecast"] == record["forecast"] and row["notebook_in"] == record["notebook_in"]
        assert row["regret"] is None  # no oracle outside the synthetic world
    # What SFT renders from the export is what it would render from the log itself (through its last
    # assistant turn: the reply to the final call is never trained on).
    from forecast_dojo.agents.llm import TOOL_CHAT_TEMPLATE

    for row, record in zip(loaded, records, strict=True):
        a = tokenizer.apply_chat_template(row["messages"], chat_template=TOOL_CHAT_TEMPLATE, tokenize=False)
        b = tokenizer.apply_chat_template(
            through_last_assistant_turn(record["messages"]), chat_template=TOOL_CHAT_TEMPLATE, tokenize=False
        )
        assert a == b
    meta = json.loads((tmp_path / "out" / "export.json").read_text())
    assert meta["report"]["kept"] == 7 and meta["report"]["read"] == 7


def test_unknown_split_is_refused_unless_stated(teacher_log):
    log = teacher_log()
    with pytest.raises(ExportError, match="cannot tell training from evaluation"):
        build_sft_rows([log], ExportConfig(max_tokens=None))


def test_evaluation_events_are_refused_and_reported(teacher_log, tmp_path, capsys):
    log = teacher_log()
    events_file = tmp_path / "eval.jsonl"
    events_file.write_text(json.dumps({"id": "mayor"}) + "\n")
    config = ExportConfig(max_tokens=None, eval_events=(str(events_file),))
    export_sft(log, None, config)
    printed = capsys.readouterr().out
    rows, report = build_sft_rows([log], config)
    assert {r["event_id"] for r in rows} == {"harbor"}
    assert report.dropped["evaluation_event"] == 4 and report.refused_events == {"mayor"}
    assert "refused 4 records on 1 evaluation events" in printed and "mayor" in printed


def test_synthetic_logs_use_the_held_out_split_and_oracle_regret(teacher_log, tmp_path):
    """A log whose run.json names the synthetic world: its held-out events are refused, regret is computed."""
    from forecast_dojo.synthetic.split import synthetic_split

    split = synthetic_split(0)
    log = tmp_path / "syn"
    log.mkdir()
    train_id, held_id = split.train[0], split.held_out[0]
    records = []
    for event_id in (train_id, held_id):
        records.append(
            {  # a step record as the log holds it (the export reads typed records: every required field)
                "event_id": event_id,
                "step": 0,
                "n_steps": 1,
                "cutoff": "2031-03-01T00:00:00Z",
                "forecast_date": "2031-03-01",
                "outcome": "a",
                "reward": -0.5,
                "memory": "none",
                "messages": [
                    {
                        "role": "user",
                        "content": f"q {event_id}",
                        "tool_calls": None,
                        "tool_call_id": None,
                        "name": None,
                    }
                ],
                "tools": [],
                "outcomes": ["a", "b"],
                "outcome_index": 0,
                "forecast": [0.5, 0.5],
                "valid": True,
                "flags": [],
                "scores": {"brier": -0.5, "log": -0.69, "spherical": 0.7},
                "notebook_in": None,
            }
        )
    (log / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (log / "run.json").write_text(json.dumps({"run_id": "r", "env_spec": {"world": "synthetic", "seed": 0}}))
    rows, report = build_sft_rows([log], ExportConfig(max_tokens=None))
    assert [r["event_id"] for r in rows] == [train_id]
    assert report.refused_events == {held_id}
    from forecast_dojo.scoring import brier_score
    from forecast_dojo.synthetic import generate_world, oracle_table

    oracle = next(r for r in oracle_table(generate_world(0)) if (r["event_id"], r["step"]) == (train_id, 0))
    assert rows[0]["regret"] == pytest.approx(brier_score(oracle["probabilities"], 0) - (-0.5))


def test_filters_invalid_score_best_of_k_and_duplicates(teacher_log):
    good = teacher_log("teacher")
    again = teacher_log("teacher-again")  # identical transcripts: duplicates
    uniform = teacher_log("uniform", UniformAgent)
    bad = teacher_log("bad", BadForecaster)
    logs = [good, again, uniform, bad]
    base = dict(max_tokens=None, assume_all_training=True)

    rows, report = build_sft_rows(logs, ExportConfig(**base, best_per_step=None, deduplicate=False))
    assert report.read == 28 and report.dropped["invalid_forecast"] == 7 and len(rows) == 21

    rows, report = build_sft_rows(logs, ExportConfig(**base, best_per_step=None))
    assert report.dropped["duplicate"] == 7 and len(rows) == 14

    rows, report = build_sft_rows(logs, ExportConfig(**base))  # best of k per (event, step, memory)
    by_step = {(r["event_id"], r["step"]): r for r in rows}
    assert len(rows) == len(by_step) == 7
    uniform_scores = {(r["event_id"], r["step"]): r["scores"]["brier"] for r in log_records(uniform)}
    teacher_scores = {(r["event_id"], r["step"]): r["scores"]["brier"] for r in log_records(good)}
    for key, row in by_step.items():
        assert row["scores"]["brier"] == max(uniform_scores[key], teacher_scores[key])

    threshold = sorted(teacher_scores.values())[3]
    rows, report = build_sft_rows([good], ExportConfig(**base, min_score=threshold))
    assert all(r["scores"]["brier"] >= threshold for r in rows)
    assert report.dropped[f"score_below_{threshold}"] == sum(s < threshold for s in teacher_scores.values())


def test_length_policy_shortens_tool_results_never_assistant_turns(teacher_log, tokenizer):
    log = teacher_log()
    count = token_counter(tokenizer)
    lengths = [count(r["messages"]) for r in log_records(log)]
    budget = sorted(lengths)[len(lengths) // 2]  # half the records are longer than this
    rows, report = build_sft_rows(
        [log],
        ExportConfig(max_tokens=budget, assume_all_training=True, best_per_step=None),
        tokenizer=tokenizer,
    )
    originals = {(r["event_id"], r["step"]): r for r in log_records(log)}
    assert report.shortened_records >= 1 and report.kept + sum(report.dropped.values()) == 7
    for row in rows:
        assert count(row["messages"]) <= budget
        original = through_last_assistant_turn(originals[(row["event_id"], row["step"])]["messages"])
        assert len(row["messages"]) == len(original)
        for new, old in zip(row["messages"], original, strict=True):
            if new["role"] != "tool":
                assert decoded([new]) == [old]  # prompts, assistant turns and the answer are never touched
            elif new["content"] != old["content"]:
                assert old["content"].startswith(new["content"].split("\n[... tool result shortened")[0])
                assert SHORTENED_MARKER.split("{")[0] in new["content"]
    # A budget below the prompt itself: nothing fits, every record is dropped with its reason.
    with pytest.raises(ExportError, match="no record survived"):
        export_sft(log, None, ExportConfig(max_tokens=64, assume_all_training=True), tokenizer=tokenizer)


@pytest.mark.slow
def test_trl_sft_trainer_reads_the_export_as_is(teacher_log, tmp_path, tiny_model_dir, tokenizer):
    from trl import SFTConfig, SFTTrainer

    from forecast_dojo.agents.llm import load_model

    export_sft(
        teacher_log(),
        tmp_path / "out",
        ExportConfig(max_tokens=2048, assume_all_training=True),
        tokenizer=tokenizer,
    )
    dataset = load_sft_dataset(tmp_path / "out")
    config = SFTConfig(
        output_dir=str(tmp_path / "sft"),
        max_steps=2,
        per_device_train_batch_size=2,
        max_length=2048,
        assistant_only_loss=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
    )
    trainer = SFTTrainer(
        model=load_model(tiny_model_dir), args=config, train_dataset=dataset, processing_class=tokenizer
    )
    assert trainer.train().global_step == 2


@pytest.mark.slow
def test_cli_export_sft(teacher_log, tmp_path):
    log = teacher_log()
    out = tmp_path / "cli-out"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "forecast_dojo.cli",
            "export",
            "sft",
            str(log),
            "--out",
            str(out),
            "--assume-all-training",
            "--max-tokens",
            "0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "read 7 step records; kept 7" in result.stdout
    assert len(load_sft_dataset(out)) == 7
    refused = subprocess.run(
        [sys.executable, "-m", "forecast_dojo.cli", "export", "sft", str(log), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode != 0 and "cannot tell training from evaluation" in refused.stderr


def test_a_killed_runs_torn_log_exports_the_rows_load_records_reads(teacher_log, tmp_path, capsys):
    """`export sft` and `forecast-dojo run` read a killed run's log with the same rule (issue 19).

    The export used to have its own reader, which failed on the torn last line (`steps.jsonl:N: not JSON`)
    that `load_records` drops and a resuming run cuts off.
    """
    import warnings

    from forecast_dojo.trajectory import TornLogWarning, load_records

    log = teacher_log()
    steps = log / "steps.jsonl"
    whole = steps.read_bytes()
    lines = whole.splitlines(keepends=True)
    config = ExportConfig(max_tokens=None, assume_all_training=True, best_per_step=None, deduplicate=False)
    for cut in (1, len(lines[-1]) // 2, len(lines[-1]) - 1):  # a kill mid-write, and just before the newline
        steps.write_bytes(b"".join(lines[:-1]) + lines[-1][:cut])
        with pytest.warns(TornLogWarning):
            torn_rows, torn_report = build_sft_rows([log], config)
        with pytest.warns(TornLogWarning):
            kept = load_records(log)
        assert torn_report.read == len(kept) == len(lines) - 1
        # The log as load_records reads it, written out whole: the export gives the very same rows.
        steps.write_bytes(b"".join(lines[:-1]))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            clean_rows, _ = build_sft_rows([log], config)
        assert torn_rows == clean_rows
        assert [(r["event_id"], r["step"]) for r in torn_rows] == [(k.event_id, k.step) for k in kept]
    steps.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "forecast_dojo.cli",
            "export",
            "sft",
            str(log),
            "--out",
            str(tmp_path / "sft"),
            "--assume-all-training",
            "--max-tokens",
            "0",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"read {len(lines) - 1} step records" in out.stdout


def test_the_export_names_the_prompt_profile_and_refuses_a_mix(teacher_log, tmp_path):
    default, compact = teacher_log("default"), teacher_log("compact", prompt="compact")
    config = ExportConfig(max_tokens=None, assume_all_training=True)
    rows, _ = build_sft_rows([compact], config)
    assert rows and {r["prompt_profile"] for r in rows} == {"compact"}
    export_sft([compact], tmp_path / "out", config, verbose=False)
    assert json.loads((tmp_path / "out" / "export.json").read_text())["prompt_profile"] == "compact"
    assert load_sft_dataset(tmp_path / "out")[0]["prompt_profile"] == "compact"
    assert {r["prompt_profile"] for r in build_sft_rows([default], config)[0]} == {"default"}
    with pytest.raises(ExportError, match="never a mix"):
        build_sft_rows([default, compact], config)
