"""``forecast-dojo run`` / ``report`` end to end: twice in a row, killed mid-way and resumed, report = recomputation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from forecast_dojo.cli import build_parser, main
from tests.agents.test_openai_agent import SUBMIT, ScriptedServer, completion

REPO = Path(__file__).resolve().parents[2]
ARGS = ["--embedder", "hashing", "--no-python", "--max-turns", "6", "--max-tool-calls", "6"]


def test_help_says_95_percent():
    parser = build_parser()
    run = parser._subparsers._group_actions[0].choices["run"]
    text = run.format_help()
    assert "95 %" in text and "%%" not in text


def count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_run_twice_in_a_row_reuses_the_logs(synthetic_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    out = tmp_path / "run"
    argv = ["run", *ARGS, "--max-events", "3", "--agents", "honest", "evidence-oracle", "--out", str(out)]
    assert main(argv) == 0
    first = capsys.readouterr().out
    assert "Brier (95% CI), lower is better" in first and "base-rate" in first and "market (" in first
    logs = {p.name: count_lines(p / "steps.jsonl") for p in out.iterdir() if p.is_dir()}
    assert set(logs) == {"honest-none", "honest-notebook", "evidence-oracle-none", "evidence-oracle-notebook"}
    report = json.loads((out / "report.json").read_text())
    assert main(argv) == 0  # the README's first command, twice
    second = capsys.readouterr().out
    assert "0 steps played now" in second
    assert {p.name: count_lines(p / "steps.jsonl") for p in out.iterdir() if p.is_dir()} == logs
    assert json.loads((out / "report.json").read_text()) == report
    names = [line["agent"] for line in report["table"] if line["memory"] == "-"]
    assert sorted(names) == sorted(set(names)) and "uniform" in names
    assert main([*argv[:-2], "--out", str(out), "--overwrite"]) == 0
    assert "0 steps played now" not in capsys.readouterr().out


def recompute(out: Path) -> dict[tuple[str, str], float]:
    """Mean Brier loss (within event, then across events) straight from the raw logs."""
    study = json.loads((out / "study.json").read_text())
    means = {}
    for agent in study["agents"]:
        for mode in study["modes"]:
            by_event = defaultdict(list)
            for line in (out / f"{agent}-{mode}" / "steps.jsonl").read_text().splitlines():
                r = json.loads(line)
                by_event[r["event_id"]].append(
                    sum((p - (k == r["outcome_index"])) ** 2 for k, p in enumerate(r["forecast"]))
                )
            means[(agent, mode)] = sum(sum(v) / len(v) for v in by_event.values()) / len(by_event)
    return means


@pytest.mark.slow
def test_killed_run_resumes_and_reports_the_logged_numbers(synthetic_cache, tmp_path):
    """run -> SIGKILL mid-way -> rerun (resumes) -> report; counts and numbers checked against the log."""
    out = tmp_path / "study"
    env = os.environ | {"FORECAST_DOJO_CACHE": str(synthetic_cache), "PYTHONPATH": str(REPO)}
    with ScriptedServer([], default=completion(SUBMIT)) as server:
        server.script = [("sleep", 0.4, completion(SUBMIT))] * 40  # slow replies: time to kill mid-way
        command = [
            sys.executable, "-m", "forecast_dojo.cli", "run", *ARGS, "--max-events", "4", "--agents", "openai",
            "--base-url", server.url, "--model", "scripted", "--api-key", "x", "--modes", "none", "--out", str(out),
        ]  # fmt: skip
        log = out / "openai-scripted-none" / "steps.jsonl"
        process = subprocess.Popen(
            command, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.time() + 240
        while count_lines(log) < 3 and time.time() < deadline and process.poll() is None:
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait()
        killed_at = count_lines(log)
        study = json.loads((out / "study.json").read_text())
        total = sum(1 for _ in study["events"])  # events; steps are counted from the finished log below
        assert killed_at >= 3
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
    assert f"steps played now, {killed_at} reused" in done.stdout
    records = [json.loads(line) for line in log.read_text().splitlines()]
    keys = [(r["event_id"], r["step"], r["rollout"]) for r in records]
    assert len(keys) == len(set(keys)) and len({r["event_id"] for r in records}) == total
    assert all(sorted(r["step"] for r in records if r["event_id"] == e) == list(range(r0["n_steps"]))
               for e in study["events"] for r0 in records if r0["event_id"] == e)  # fmt: skip
    assert killed_at < len(records)
    report_out = tmp_path / "report"
    subprocess.run(
        [sys.executable, "-m", "forecast_dojo.cli", "report", str(out), "--out", str(report_out), "--no-plots"],
        env=env, check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    report = json.loads((report_out / "report.json").read_text())
    table = {(line["agent"], line["memory"]): line for line in report["table"]}
    for key, mean in recompute(out).items():
        assert table[key]["brier"] == pytest.approx(mean, abs=1e-12)
        assert table[key]["steps"] == len(records)
    assert f"| openai-scripted | none | 4 | {len(records)} |" in (report_out / "report.md").read_text()


def test_run_evaluates_the_held_out_split_by_default(synthetic_cache, tmp_path, monkeypatch, capsys):
    from forecast_dojo.synthetic.split import synthetic_split

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    split = synthetic_split(0)
    base = ["run", *ARGS, "--max-events", "2", "--agents", "uniform", "--modes", "none"]
    assert main([*base, "--out", str(tmp_path / "eval")]) == 0
    assert json.loads((tmp_path / "eval" / "study.json").read_text())["events"] == list(split.held_out[:2])
    assert main([*base, "--split", "train", "--out", str(tmp_path / "train")]) == 0
    assert json.loads((tmp_path / "train" / "study.json").read_text())["events"] == list(split.train[:2])
    capsys.readouterr()
    assert main([*base, "--event-ids", split.train[0], "--out", str(tmp_path / "x")]) != 0
    assert "in the eval split" in capsys.readouterr().err


def test_local_model_labels_of_two_checkpoints_named_alike_differ(tmp_path, monkeypatch):
    from forecast_dojo.evaluation.cli import local_model_label

    for folder in ("a/model", "b/model"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    a, b = local_model_label("hf:a/model"), local_model_label("hf:b/model")
    assert a != b
    assert a.startswith("hf-model-") and b.startswith("hf-model-")  # readable: the folder name
    # deterministic, and the same folder gets the same label however it is written or from where
    assert local_model_label("hf:a/model") == a == local_model_label(f"hf:{tmp_path}/a/model/")
    monkeypatch.chdir(tmp_path / "a")
    assert local_model_label("hf:model") == a == local_model_label("hf:./model")
    # a hub id (no such folder) keeps its own label; the bundled SmolLM2 keeps its name
    assert local_model_label("hf:org/model") not in (a, b)
    assert local_model_label("hf:org/model").startswith("hf-model-")
    assert local_model_label("smollm2") == "smollm2"
    # the same model decoded under the evidence-label constraint is another agent
    assert local_model_label("hf:model", constrain_labels=True) == a + "-labels"
    assert local_model_label("smollm2", constrain_labels=True) == "smollm2-labels"


def test_a_single_step_selection_that_plays_nothing_is_an_error(
    synthetic_cache, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    argv = ["run", "--agents", "uniform", "--modes", "notebook", "--event-ids", "syn-0001", "--step", "3"]
    assert main([*argv, *ARGS, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("forecast-dojo run: error: --step 3: no selected event has that step")
    assert "syn-0001 has 3" in err[-1]
    # a step that exists plays and prints one JSON record per (agent, mode, event)
    assert main([*argv[:-1], "2", *ARGS, "--out", str(tmp_path / "out")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    record = json.loads(lines[-1])
    assert (record["event_id"], record["step"], record["mode"]) == ("syn-0001", 2, "notebook")


def test_notebook_control_study_has_its_own_default_folder(synthetic_cache, tmp_path, monkeypatch, capsys):
    from forecast_dojo.evaluation.cli import CONTROLS_OUT, DEFAULT_OUT, default_out

    assert default_out(["none", "notebook"]) == DEFAULT_OUT
    assert default_out(["notebook", "notebook-stale"]) == CONTROLS_OUT
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    monkeypatch.chdir(tmp_path)
    base = ["run", *ARGS, "--max-events", "1", "--agents", "evidence-oracle"]
    assert main([*base, "--modes", "none", "notebook"]) == 0
    main_report = (tmp_path / DEFAULT_OUT / "report.md").read_text()
    assert main([*base, "--modes", "notebook", "notebook-empty"]) == 0
    assert f"in {CONTROLS_OUT}/" in capsys.readouterr().out
    # the main job's report is intact
    assert (tmp_path / DEFAULT_OUT / "report.md").read_text() == main_report
    controls = json.loads((tmp_path / CONTROLS_OUT / "report.json").read_text())
    assert {(t["agent"], t["memory"]) for t in controls["table"] if t["memory"] != "-"} == {
        ("evidence-oracle", "notebook"),
        ("evidence-oracle", "notebook-empty"),
    }


def test_the_honest_teacher_writes_its_lines_of_no_bearing_when_asked(synthetic_cache, tmp_path, monkeypatch):
    from forecast_dojo.evaluation.verdicts import step_verdicts
    from forecast_dojo.trajectory import load_records

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    base = ["run", *ARGS, "--prompt", "compact", "--agents", "honest", "--modes", "none", "--split", "eval"]
    finals = {}
    for name, extra in (("gate", []), ("lines", ["--honest-no-bearing-lines"])):
        assert main([*base, "--max-events", "4", "--out", str(tmp_path / name), *extra]) == 0
        records = load_records(tmp_path / name / "honest-none")
        finals[name] = {r.key: step_verdicts(r) for r in records}
    assert finals["gate"].keys() == finals["lines"].keys()
    gate_turns = [k for k, v in finals["gate"].items() if v.no_bearing]
    assert gate_turns, "no step of the sample where no hit bears on the question"
    assert not any(v.no_bearing for v in finals["lines"].values())
    for key, gated in finals["gate"].items():
        lined = finals["lines"][key]
        assert lined.evidence == gated.evidence and lined.judged() == gated.judged()  # the same forecast
        assert {v.doc_id for v in lined.verdicts} == set(lined.hits)  # every hit judged in writing
