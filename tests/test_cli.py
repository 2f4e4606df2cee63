"""The console command's main job, end to end on a small slice of the synthetic world."""

from __future__ import annotations

import json

from forecast_dojo.cli import build_parser, main


def test_help_lists_every_job():
    text = build_parser().format_help()
    for job in ("run", "world", "corpus", "events"):
        assert job in text


def test_run_compares_memory_modes_and_baselines(synthetic_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    out = tmp_path / "run"
    argv = [
        "run",
        "--embedder",
        "hashing",
        "--max-events",
        "4",
        "--agents",
        "evidence",
        "uniform",
        "--no-python",
        "--max-turns",
        "6",
        "--max-tool-calls",
        "6",
    ]
    assert main([*argv, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    for word in ("evidence", "uniform", "oracle", "market", "notebook"):
        assert word in printed
    summary = json.loads((out / "summary.json").read_text())
    agents = {(line["agent"], line["memory"]) for line in summary["table"]}
    assert {("evidence", "none"), ("evidence", "notebook"), ("oracle", "-"), ("market", "-")} <= agents
    first = json.loads((out / "evidence-notebook" / "steps.jsonl").read_text().splitlines()[0])
    assert first["budgets"]["max_turns"] == 6 and first["budgets"]["max_tool_calls"] == 6
    assert (out / "evidence-notebook" / "steps.jsonl").exists() and (
        out / "uniform-none" / "run.json"
    ).exists()
    steps = {(line["agent"], line["memory"]): line["steps"] for line in summary["table"]}
    assert steps[("oracle", "-")] == steps[("evidence", "none")] == steps[("uniform", "notebook")] > 4
