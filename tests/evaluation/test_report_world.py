"""The report of world-mode logs: per-day curves, coverage, updates and cost, memory files vs memory-free paired."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.agents.world import WorldScriptedAgent, WorldUniformAgent
from forecast_dojo.evaluation.report import write_report
from forecast_dojo.evaluation.world import find_world_logs, play_world


@pytest.fixture
def make_world_env(synthetic_cache, monkeypatch):
    """World envs over the synthetic world (hashing embedder, python off, all 40 events)."""
    from forecast_dojo.world import make_world

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))

    def make(**kwargs):
        return make_world("Synthetic-v0", embedder="hashing", python_runner=None, split="all", **kwargs)

    return make


@pytest.fixture
def world_logs(make_world_env, tmp_path):
    """Three short calendars logged under one folder: scripted without and with memory files, uniform."""
    root = tmp_path / "world"
    infos = {}
    for agent, memory in (
        (WorldScriptedAgent(), "none"),
        (WorldScriptedAgent(), "files"),
        (WorldUniformAgent(), "none"),
    ):
        env = make_world_env(
            end="2031-02-20",
            memory=memory,
            log_dir=root / f"{agent.name}-{memory}",
            run_metadata={"agent": agent.name},
        )
        _, infos[f"{agent.name}/{memory}"] = play_world(env, agent)
        env.close()
    return root, infos


def test_a_report_of_world_logs_has_the_curves_the_pairing_and_a_figure(world_logs, tmp_path, make_world_env):
    root, infos = world_logs
    assert len(find_world_logs(root)) == 3 and find_world_logs(tmp_path / "nothing-here") == []
    out = tmp_path / "report"
    report = write_report([root], out)
    saved = json.loads((out / "report.json").read_text())
    world = saved["world"]
    assert set(world["forecasters"]) == set(infos)
    for name, info in infos.items():  # recomputed from the logs: the time-averaged score of each question
        s = world["forecasters"][name]
        per_question = [sum(days.values()) / len(days) for days in info["scores"].values()]
        assert s["skill"][0] == pytest.approx(sum(per_question) / len(per_question))
        assert s["question_days"] == sum(len(days) for days in info["scores"].values())
        assert s["coverage"][0] > 0 and len(s["per_day"]) == len(
            {d for days in info["scores"].values() for d in days}
        )
        for row in s["per_day"]:
            assert {"skill", "skill_ci", "accuracy", "coverage", "updates", "tool_calls", "tokens"} <= set(
                row
            )
    scripted = world["forecasters"]["world-scripted/none"]
    assert scripted["tool_calls_per_day"] > 0 and scripted["updates_per_day"] > 0
    assert world["forecasters"]["world-uniform/none"]["tool_calls_per_day"] == 0
    # memory files vs memory-free, paired on identical question-days (the scripted agent ignores its memory)
    pairs = {c["metric"]: c for c in world["comparisons"]}
    assert set(pairs) == {"skill", "accuracy", "tool_calls", "tokens"}
    assert pairs["skill"]["a"] == ["world-scripted", "files"] and pairs["skill"]["b"] == [
        "world-scripted",
        "none",
    ]
    assert pairs["skill"]["question_days"] == scripted["question_days"] and pairs["skill"]["mean"] == 0.0
    markdown = (out / "report.md").read_text()
    assert "## World mode" in markdown and "world-scripted/files - world-scripted/none (skill)" in markdown
    assert "![world.png](world.png)" in markdown and (out / "world.png").stat().st_size > 10_000
    assert "world-uniform/none" in report["table_text"]


def test_memory_pairing_measures_a_difference(world_logs, tmp_path, make_world_env):
    """Two conditions of one agent name that forecast differently pair as their mean per-question difference."""
    root, _ = world_logs
    infos = {}
    for agent, memory in ((WorldScriptedAgent(), "files"), (WorldUniformAgent(), "none")):
        env = make_world_env(
            end="2031-02-20", memory=memory, log_dir=root / f"probe-{memory}", run_metadata={"agent": "probe"}
        )
        _, infos[memory] = play_world(env, agent)
        env.close()
    world = write_report([root], tmp_path / "r", plots=False)["world"]
    skill = next(c for c in world["comparisons"] if c["a"] == ["probe", "files"] and c["metric"] == "skill")
    files, none = infos["files"]["scores"], infos["none"]["scores"]
    gaps = [sum(files[q][d] - none[q][d] for d in days) / len(days) for q, days in none.items()]
    assert skill["mean"] == pytest.approx(sum(gaps) / len(gaps)) and skill["mean"] != 0.0
    low, high = skill["ci"]
    assert low <= skill["mean"] <= high and skill["questions"] == len(none)
    assert not (tmp_path / "r" / "world.png").exists()  # plots=False


def test_the_cli_reports_a_folder_of_world_logs(world_logs, tmp_path, capsys):
    from forecast_dojo.cli import main

    root, _ = world_logs
    assert main(["report", str(root), "--out", str(tmp_path / "cli"), "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "world-scripted/files" in printed and "(skill)" in printed
