"""The learning experiment: every stage end to end on a tiny random model, and a resume after a kill."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forecast_dojo.training.experiment import (
    STAGES,
    ExperimentArguments,
    ExperimentError,
    Layout,
    run_experiment,
)

REPO = Path(__file__).resolve().parents[2]


def _argv(out: Path, model: Path, results: Path) -> list[str]:
    # Small everything: a world of 26 training events (hashing embedder), 2 held-out events, one
    # optimizer step of SFT and of GRPO, a tiny random model that writes a few tokens per reply.
    return [
        sys.executable,
        str(REPO / "training" / "experiment.py"),
        *("--out", str(out), "--results", str(results), "--model", str(model)),
        *("--embedder", "hashing", "--train_events", "26", "--max_turns", "2", "--max_tool_calls", "1"),
        *("--eval_events", "syn-0001", "syn-0003", "--eval_concurrency", "2", "--eval_dtype", "float32"),
        *(
            "--eval_max_new_tokens",
            "8",
            "--sft_max_steps",
            "1",
            "--sft_batch_size",
            "1",
            "--sft_grad_accum",
            "1",
        ),
        *("--sft_bf16", "false", "--grpo_max_steps", "1", "--grpo_num_generations", "2"),
        *("--teacher_sample", "20", "--eval_unseen_events", "2"),  # 26 of the 46 training events unplayed
        *(
            "--grpo_max_completion_length",
            "8",
            "--extra_grpo",
            '{"max_tool_calling_iterations": 1, "use_cpu": true}',
        ),
    ]


@pytest.mark.slow
def test_experiment_runs_every_stage_and_resumes_after_a_kill(synthetic_cache, tiny_model_dir, tmp_path):
    out, results = tmp_path / "exp", tmp_path / "docs" / "learning.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["FORECAST_DOJO_CACHE"] = str(synthetic_cache)
    env["TRL_EXPERIMENTAL_SILENCE"] = "1"
    argv = _argv(out, tiny_model_dir, results)
    layout = Layout(out)

    # First run: killed (SIGKILL, no clean-up) once the teacher stage has finished.
    first = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while not layout.marker("export").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.poll() is None, first.stdout.read().decode()[-3000:] if first.stdout else ""
    first.send_signal(signal.SIGKILL)
    first.wait()
    done_before = {s for s in STAGES if layout.marker(s).exists()}
    assert {"spec", "teacher", "export"} <= done_before and "results" not in done_before

    # Second run: skips what is on disk and finishes.
    second = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    for stage in done_before:
        assert f"[{stage}] done already" in second.stdout
    assert all(layout.marker(s).exists() for s in STAGES)

    learning = json.loads(results.read_text())
    assert learning == json.loads(layout.results.read_text())
    for key in ("base", "sft", "grpo"):
        entry = learning[key]
        assert entry["steps"] > 0 and 0.0 <= entry["valid_rate"] <= 1.0
        assert set(entry["modes"]) == {"none", "notebook"}
        mean, low, high = entry["brier_minus_uniform"]
        assert low <= mean <= high
        by_event = entry["brier_minus_uniform_by_event"]  # what pools replicate runs
        assert set(by_event) == {"syn-0001", "syn-0003"}
        assert sum(by_event.values()) / len(by_event) == pytest.approx(mean)
    assert learning["sft"]["agent"] != learning["base"]["agent"]
    assert learning["base"]["modes"]["notebook"]["steps"] == 0  # the base model plays memory-free only
    assert set(learning["effects"]["sft_minus_base"]) == {"none"}
    assert set(learning["effects"]["grpo_minus_sft"]) == {"none", "notebook"}
    assert learning["grpo"]["training"]["global_step"] == 1  # GRPO's own numbers beside its evaluation
    # the SFT model on two training events the teacher never played, and over those and the held-out two
    unseen = learning["sft"]["unseen"]
    unseen_events = set(unseen["brier_minus_uniform_by_event"])
    assert len(unseen_events) == 2 and unseen_events.isdisjoint({"syn-0001", "syn-0003"})
    teacher_events = {
        json.loads(line)["event_id"] for line in (layout.teacher / "honest-none" / "steps.jsonl").open()
    }
    assert len(teacher_events) == 20 and unseen_events.isdisjoint(teacher_events)
    both = learning["sft"]["held_out_and_unseen"]
    assert both["events"] == 4 and both["steps"] == learning["sft"]["steps"] + unseen["steps"]
    every = {**learning["sft"]["brier_minus_uniform_by_event"], **unseen["brier_minus_uniform_by_event"]}
    assert both["brier_minus_uniform"][0] == pytest.approx(sum(every.values()) / 4)
    assert learning["stage_wall_s"]["teacher"] is not None

    # A third run plays nothing and changes nothing; only the results are recomputed from the logs.
    third = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert third.returncode == 0, third.stderr[-3000:]
    assert json.loads(results.read_text()) == learning
    assert all(f"[{s}] done already" in third.stdout for s in STAGES if s != "results")
    assert "[results] running" in third.stdout

    # The folder moved elsewhere continues there: nothing is played again, and the results find the
    # steps played under the checkpoints' old paths (labels hash a checkpoint's path).
    moved, moved_results = tmp_path / "moved", tmp_path / "moved.json"
    out.rename(moved)
    fourth = subprocess.run(
        _argv(moved, tiny_model_dir, moved_results),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fourth.returncode == 0, fourth.stdout[-3000:] + fourth.stderr[-3000:]
    assert all(f"[{s}] done already" in fourth.stdout for s in STAGES if s != "results")
    after_move = json.loads(moved_results.read_text())
    for key in ("base", "sft", "grpo", "effects"):
        assert after_move[key] == learning[key]
    assert json.loads(Layout(moved).arguments.read_text())["out"] == str(moved)


def test_a_folder_refuses_another_configuration(tmp_path):
    out = tmp_path / "exp"
    out.mkdir()
    (out / "experiment.json").write_text(
        json.dumps(ExperimentArguments(out=str(out), train_events=40).__dict__)
    )
    (out / "spec.toml").write_text("")  # the spec stage has started: every stage reads train_events
    with pytest.raises(ExperimentError, match="train_events"):
        run_experiment(ExperimentArguments(out=str(out), train_events=50), stages=["spec"])


def test_the_results_are_recomputed_on_every_run_while_finished_stages_are_skipped(tmp_path, monkeypatch):
    from forecast_dojo.training import experiment

    calls = []
    for stage in ("grpo", "results"):
        monkeypatch.setitem(
            experiment.STAGE_FUNCTIONS, stage, lambda _args, _layout, stage=stage: calls.append(stage) or {}
        )
    args = ExperimentArguments(out=str(tmp_path / "exp"), grpo_max_steps=2)
    layout = Layout(args.out)
    layout.marker("grpo").parent.mkdir(parents=True)
    for stage in ("grpo", "results"):  # both finished before, e.g. results written before GRPO existed
        layout.marker(stage).write_text(json.dumps({"stage": stage}))
    run_experiment(args, stages=["grpo", "results"])
    assert calls == ["results"]


def test_arguments_of_stages_not_yet_started_may_change(tmp_path):
    out = tmp_path / "exp"
    first = ExperimentArguments(out=str(out), eval_sample=6, grpo_max_steps=0)
    (out / "eval").mkdir(parents=True)  # the evaluation has started, GRPO has not
    (out / "experiment.json").write_text(json.dumps(first.__dict__))
    with pytest.raises(ExperimentError, match="eval_sample") as refused:
        run_experiment(dataclasses.replace(first, eval_sample=3, grpo_max_steps=2), stages=["results"])
    assert "grpo_max_steps" not in str(refused.value)
    later = dataclasses.replace(first, grpo_max_steps=2, grpo_num_generations=2)
    with pytest.raises(FileNotFoundError, match="study.json"):  # the check passes; no study to summarize
        run_experiment(later, stages=["results"])
    recorded = json.loads((out / "experiment.json").read_text())
    assert (recorded["grpo_max_steps"], recorded["grpo_num_generations"], recorded["eval_sample"]) == (
        2,
        2,
        6,
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("train_events", -1),
        ("max_turns", 0),
        ("best_of", -1),
        ("grpo_max_steps", -2),
        ("eval_unseen_events", -1),
        ("tools", ["search"]),
        ("extra_sft", {"learning_rat": 1e-4}),
        ("extra_grpo", {"num_generation": 2}),
        ("eval_modes", ["none", "memory"]),
        ("eval_modes", []),
        ("eval_modes", ["none", "none"]),
        ("base_eval_modes", ["notebook", "memory"]),
        ("base_eval_modes", ["none", "none"]),
        ("eval_dtype", "float16"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(tmp_path, field, value):
    args = ExperimentArguments(out=str(tmp_path / "exp"), **{field: value})
    with pytest.raises(ExperimentError, match=field if field != "tools" else "submit_forecast"):
        run_experiment(args)
    assert not (tmp_path / "exp").exists()


def test_the_evaluations_play_only_the_named_memory_modes(tmp_path):
    from forecast_dojo.training.experiment import _eval_argv, _run_argv

    args = ExperimentArguments(out=str(tmp_path / "exp"), eval_modes=["none"])
    layout = Layout(args.out)
    evaluation = _eval_argv(args, layout, layout.eval, ["smollm2"])
    modes = evaluation[evaluation.index("--modes") + 1 : evaluation.index("--split")]
    assert modes == ["none"]
    teacher = _run_argv(args, layout, layout.teacher, ["honest"], "train")  # the teacher plays both
    assert teacher[teacher.index("--modes") + 1 : teacher.index("--split")] == ["none", "notebook"]


def test_the_teacher_writes_lines_of_no_bearing_only_when_asked(tmp_path, monkeypatch):
    from forecast_dojo.cli import build_parser
    from forecast_dojo.training import experiment

    calls = []
    monkeypatch.setattr(experiment, "_cli", calls.append)
    monkeypatch.setattr(experiment, "_count_records", lambda folder: 0)
    layout = Layout(tmp_path / "exp")
    for lines in (False, True):
        experiment.stage_teacher(
            ExperimentArguments(out=str(layout.root), teacher_no_bearing_lines=lines), layout
        )
    assert ["--honest-no-bearing-lines" in argv for argv in calls] == [False, True]
    parsed = [build_parser().parse_args(argv) for argv in calls]  # flags `forecast-dojo run` knows
    assert [p.honest_no_bearing_lines for p in parsed] == [False, True]


def test_constrained_evaluations_pass_the_flag_and_record_their_own_labels(tmp_path, monkeypatch):
    from forecast_dojo.cli import build_parser
    from forecast_dojo.training import experiment

    calls = []
    monkeypatch.setattr(experiment, "_cli", calls.append)
    monkeypatch.setattr(experiment, "_count_records", lambda folder: 0)
    layout = Layout(tmp_path / "exp")
    layout.eval.mkdir(parents=True)
    plain = experiment.stage_eval(ExperimentArguments(out=str(layout.root), eval_base=False), layout)
    constrained = experiment.stage_eval(
        ExperimentArguments(out=str(layout.root), eval_base=False, eval_constrain_labels=True), layout
    )
    assert [build_parser().parse_args(argv).local_constrain_labels for argv in calls] == [False, True]
    assert constrained["agents"]["sft"] == plain["agents"]["sft"] + "-labels"


def test_the_base_model_can_leave_memory_on_out_while_the_sft_model_plays_both(tmp_path, monkeypatch):
    from forecast_dojo.training import experiment

    calls = []
    monkeypatch.setattr(experiment, "_cli", calls.append)
    layout = Layout(tmp_path / "exp")
    layout.eval.mkdir(parents=True)

    def modes_and_agents(argv):
        return argv[argv.index("--agents") + 1 : argv.index("--modes")], argv[
            argv.index("--modes") + 1 : argv.index("--split")
        ]

    base_only = ExperimentArguments(out=str(layout.root), base_eval_modes=["none"])
    experiment.stage_eval(base_only, layout)
    assert [modes_and_agents(argv) for argv in calls] == [
        (["hf:smollm2"], ["none"]),
        ([f"hf:{layout.sft_model}"], ["none", "notebook"]),
    ]
    assert all(argv[argv.index("--out") + 1] == str(layout.eval) for argv in calls)  # one study folder
    calls.clear()
    experiment.stage_eval(
        ExperimentArguments(out=str(layout.root), base_eval_modes=["none", "notebook"]), layout
    )
    assert [modes_and_agents(argv) for argv in calls] == [
        (["hf:smollm2", f"hf:{layout.sft_model}"], ["none", "notebook"])  # the same modes: one run, as before
    ]
    calls.clear()
    experiment.stage_eval(ExperimentArguments(out=str(layout.root), eval_base=False), layout)
    assert [modes_and_agents(argv) for argv in calls] == [([f"hf:{layout.sft_model}"], ["none", "notebook"])]


def test_results_without_a_base_evaluation_leave_its_entry_empty(tmp_path, monkeypatch):
    from forecast_dojo.evaluation import study
    from forecast_dojo.training.experiment import summarize

    monkeypatch.setattr(study, "study_rows", lambda folder: [])  # a study with no base rows
    layout = Layout(tmp_path / "exp")
    layout.eval.mkdir(parents=True)
    summary = summarize(ExperimentArguments(out=str(layout.root), eval_base=False), layout)
    assert summary["base"]["steps"] == 0 and summary["sft"]["steps"] == 0


def test_a_folder_written_before_a_field_existed_reads_it_as_its_default(tmp_path):
    from forecast_dojo.training.experiment import _check_folder

    args = ExperimentArguments(out=str(tmp_path / "exp"), base_eval_modes=[])
    layout = Layout(args.out)
    layout.root.mkdir()
    older = dataclasses.asdict(args)
    del older["base_eval_modes"]
    layout.arguments.write_text(json.dumps(older))
    layout.marker("eval").parent.mkdir(parents=True)
    layout.marker("eval").write_text("{}")  # the evaluation has started
    _check_folder(args, layout)  # what that folder's run used (the default then, []): accepted
    with pytest.raises(ExperimentError, match="base_eval_modes"):  # today's default is not what it used
        _check_folder(ExperimentArguments(out=args.out), layout)


def test_eval_modes_parse_from_the_command_line(tmp_path):
    from transformers import HfArgumentParser

    (args,) = HfArgumentParser(ExperimentArguments).parse_args_into_dataclasses(
        args=["--out", str(tmp_path), "--eval_modes", "none", "--base_eval_modes", "none"]
    )
    assert args.eval_modes == ["none"] and ExperimentArguments().eval_modes == ["none", "notebook"]
    assert args.base_eval_modes == ["none"] and ExperimentArguments().base_eval_modes == ["none"]


def test_sft_bf16_reads_the_same_from_the_command_line_as_from_python(tmp_path, monkeypatch):
    """A computed default was read as False by HfArgumentParser: every CLI run trained in float32."""
    from transformers import HfArgumentParser

    from forecast_dojo.training import experiment

    parser = HfArgumentParser(ExperimentArguments)
    (args,) = parser.parse_args_into_dataclasses(args=["--out", str(tmp_path)])
    assert args.sft_bf16 is None and ExperimentArguments().sft_bf16 is None
    (args,) = parser.parse_args_into_dataclasses(args=["--out", str(tmp_path), "--sft_bf16", "false"])
    assert args.sft_bf16 is False
    seen = {}

    def fake_train(sft, extra, train, path):
        seen["bf16"] = sft.bf16
        seen["gradient_checkpointing"] = sft.gradient_checkpointing
        return {"rows": 1}

    monkeypatch.setattr(experiment, "_train", fake_train)
    for native in (True, False):
        monkeypatch.setattr(experiment, "_native_bfloat16", lambda native=native: native)
        marker = experiment.stage_sft(ExperimentArguments(out=str(tmp_path)), Layout(tmp_path))
        assert seen["bf16"] is native and marker["bf16"] is native
    marker = experiment.stage_sft(ExperimentArguments(out=str(tmp_path), sft_bf16=False), Layout(tmp_path))
    assert marker["bf16"] is False
    # the stage is time-bound: no gradient checkpointing unless asked (SFTArguments' default is on)
    assert seen["gradient_checkpointing"] is False and marker["gradient_checkpointing"] is False
    (args,) = parser.parse_args_into_dataclasses(
        args=["--out", str(tmp_path), "--sft_gradient_checkpointing", "true"]
    )
    assert experiment.stage_sft(args, Layout(tmp_path))["gradient_checkpointing"] is True


def test_unknown_stage_is_refused(tmp_path):
    with pytest.raises(ExperimentError, match="unknown stage"):
        run_experiment(ExperimentArguments(out=str(tmp_path / "exp")), stages=["sft", "tune"])


def test_results_read_the_labels_the_evaluations_recorded(tmp_path, monkeypatch):
    from forecast_dojo.evaluation import study
    from forecast_dojo.training import experiment
    from forecast_dojo.training.experiment import summarize

    # Logs played under labels of another path (the folder was moved after its evaluations).
    rows = [
        {
            "agent": agent,
            "memory": "none",
            "event_id": e,
            "step": 0,
            "rollout": 0,
            "forecast": [0.5, 0.5],
            "outcome_index": 0,
            "flags": [],
            "valid": True,
            "score_brier": -0.5,
            "wall_s": 1.0,
            "tokens": {"prompt_tokens": 10, "completion_tokens": 2},
        }
        for agent in ("hf-sft-model-aaaaaa", "hf-grpo-model-bbbbbb")
        for e in ("a", "b")
    ]
    monkeypatch.setattr(study, "study_rows", lambda folder: rows if folder.name == "eval" else [])
    layout = Layout(tmp_path / "exp")
    layout.eval.mkdir(parents=True)
    layout.eval_grpo.mkdir(parents=True)
    args = ExperimentArguments(out=str(layout.root), eval_base=False)
    assert summarize(args, layout)["sft"]["steps"] == 0  # looked up under this path's label: nothing

    layout.marker("eval").parent.mkdir(parents=True)
    layout.marker("eval").write_text(json.dumps({"stage": "eval", "agents": {"sft": "hf-sft-model-aaaaaa"}}))
    layout.marker("eval-grpo").write_text(
        json.dumps({"stage": "eval-grpo", "agents": {"grpo": "hf-grpo-model-bbbbbb"}})
    )
    summary = summarize(args, layout)
    assert summary["sft"]["steps"] == 2 and summary["sft"]["agent"] == "hf-sft-model-aaaaaa"
    assert summary["grpo"]["steps"] == 2
    assert summary["effects"]["grpo_minus_sft"]["none"] == pytest.approx([0.0, 0.0, 0.0])

    # The unseen events played after the move, under this path's label: each set found under its own.
    here = experiment._label(str(layout.sft_model))
    unseen_rows = [{**row, "agent": here, "event_id": "u"} for row in rows if row["event_id"] == "a"]
    unseen_rows = unseen_rows[:1]
    monkeypatch.setattr(
        study,
        "study_rows",
        lambda folder: {"eval": rows, "eval-unseen": unseen_rows}.get(folder.name, []),
    )
    layout.eval_unseen.mkdir()
    layout.marker("eval-unseen").write_text(
        json.dumps({"stage": "eval-unseen", "agents": {"sft-unseen": here}})
    )
    summary = summarize(args, layout)
    assert summary["sft"]["agent"] == "hf-sft-model-aaaaaa" and summary["sft"]["steps"] == 2
    assert summary["sft"]["unseen"]["steps"] == 1 and summary["sft"]["unseen"]["events"] == 1


def test_a_moved_folder_continues_where_it_stopped(tmp_path):
    from forecast_dojo.training.experiment import _check_folder

    first = ExperimentArguments(out=str(tmp_path / "exp"))
    Layout(first.out).root.mkdir()
    _check_folder(first, Layout(first.out))
    Layout(first.out).spec.write_text("")  # every stage has started
    (tmp_path / "exp").rename(tmp_path / "moved")
    moved = ExperimentArguments(out=str(tmp_path / "moved"), results=str(tmp_path / "r.json"))
    _check_folder(moved, Layout(moved.out))  # no refusal: the location is not the configuration
    assert json.loads(Layout(moved.out).arguments.read_text())["out"] == moved.out
    with pytest.raises(ExperimentError, match="seed"):
        _check_folder(dataclasses.replace(moved, seed=1), Layout(moved.out))


def test_labels_of_logs_written_before_hashed_labels_are_found():
    from forecast_dojo.evaluation.cli import local_model_label
    from forecast_dojo.training.experiment import _label

    new = local_model_label("hf:/runs/exp/sft-model")
    assert _label("/runs/exp/sft-model", {new, "smollm2"}) == new
    assert _label("/runs/exp/sft-model", {"hf-sft-model"}) in (new, "hf-sft-model")
    assert _label("/runs/exp/sft-model", {"hf-sft-model"}) == "hf-sft-model" or new == "hf-sft-model"
    assert _label("/runs/exp/sft-model", set()) == new


def test_effects_pair_each_model_with_the_one_it_was_trained_from_per_mode():
    from forecast_dojo.training.experiment import _effects

    def row(agent, memory, event_id, forecast):
        return {
            "agent": agent,
            "memory": memory,
            "event_id": event_id,
            "step": 0,
            "rollout": 0,
            "forecast": forecast,
            "outcome_index": 0,
            "flags": [],
        }

    rows = []
    for event_id in ("a", "b", "c"):
        rows += [row("base", "none", event_id, [0.5, 0.5]), row("sft", "none", event_id, [0.75, 0.25])]
        rows += [
            row("sft", "notebook", event_id, [0.75, 0.25]),
            row("grpo", "notebook", event_id, [1.0, 0.0]),
        ]
        rows.append(row("grpo", "none", event_id, [0.75, 0.25]))
    effects = _effects(rows, {"base": "base", "sft": "sft", "grpo": "grpo"})
    # Brier 0.5 -> 0.125 (sft), 0.125 -> 0 (grpo, memory-on), 0.125 -> 0.125 (grpo, memory-free)
    assert effects["sft_minus_base"] == {"none": pytest.approx([-0.375, -0.375, -0.375])}
    assert effects["grpo_minus_sft"]["notebook"] == pytest.approx([-0.125, -0.125, -0.125])
    assert effects["grpo_minus_sft"]["none"] == pytest.approx([0.0, 0.0, 0.0])
    assert _effects(rows, {"base": "base", "sft": "sft"}) == {"sft_minus_base": effects["sft_minus_base"]}


def test_each_models_numbers_keep_their_per_event_means_for_pooling_replicates():
    from forecast_dojo.evaluation.metrics import event_bootstrap
    from forecast_dojo.training.experiment import _model_numbers

    def row(agent, memory, event_id, step, forecast, valid=True):
        return {
            "agent": agent,
            "memory": memory,
            "event_id": event_id,
            "step": step,
            "rollout": None if memory == "-" else 0,
            "forecast": forecast,
            "outcome_index": 0,
            "flags": [],
            "valid": valid,
        }

    rows = [
        row("sft", "none", "a", 0, [1.0, 0.0]),  # Brier 0
        row("sft", "none", "a", 1, [0.0, 1.0], valid=False),  # Brier 2
        row("sft", "none", "b", 0, [0.75, 0.25]),  # Brier 0.125
    ]
    rows += [row("uniform", "-", e, s, [0.5, 0.5]) for e, s in (("a", 0), ("a", 1), ("b", 0), ("c", 0))]
    numbers = _model_numbers(rows, ("sft", "none"))
    assert numbers["valid_rate"] == pytest.approx(2 / 3)
    assert numbers["brier_minus_uniform_by_event"] == pytest.approx({"a": 0.5, "b": -0.375})
    assert numbers["brier_minus_uniform"] == pytest.approx(
        list(event_bootstrap({"a": [-0.5, 1.5], "b": [-0.375]}))
    )
    assert "regret" not in numbers and "regret_by_event" not in numbers  # no oracle rows
    assert _model_numbers(rows, ("sft", "notebook")) == {"steps": 0}


def test_unseen_events_are_training_events_the_teacher_never_played(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from forecast_dojo import registration
    from forecast_dojo.evaluation import study
    from forecast_dojo.training import experiment

    train = [f"syn-t{i:05d}" for i in range(10)]
    monkeypatch.setattr(
        registration,
        "make",
        lambda spec, split: SimpleNamespace(
            events=[SimpleNamespace(id=e) for e in train], close=lambda: None
        ),
    )
    monkeypatch.setattr(study, "study_rows", lambda folder: [{"event_id": e} for e in train[:6]])
    calls = []
    monkeypatch.setattr(experiment, "_cli", calls.append)
    monkeypatch.setattr(experiment, "_count_records", lambda folder: 0)
    layout = Layout(tmp_path / "exp")
    args = ExperimentArguments(out=str(layout.root), seed=1, eval_unseen_events=3)
    with pytest.raises(ExperimentError, match="once its stage has finished"):
        experiment.unseen_events(args, layout)
    layout.marker("teacher").parent.mkdir(parents=True)
    layout.marker("teacher").write_text("{}")
    chosen = experiment.unseen_events(args, layout)
    assert len(chosen) == 3 and set(chosen) <= set(train[6:]) and chosen == sorted(chosen)
    assert experiment.unseen_events(args, layout) == chosen  # seeded
    numbers = experiment.stage_eval_unseen(args, layout)
    (argv,) = calls
    assert argv[argv.index("--event-ids") + 1 : argv.index("--concurrency")] == chosen
    assert argv[argv.index("--split") + 1] == "train" and argv[argv.index("--modes") + 1] == "none"
    assert argv[argv.index("--out") + 1] == str(layout.eval_unseen) and numbers["events"] == chosen
    with pytest.raises(ExperimentError, match="left only 4 training events unplayed"):
        experiment.unseen_events(dataclasses.replace(args, eval_unseen_events=5), layout)


def test_eval_unseen_runs_only_when_asked_and_may_be_added_to_a_finished_folder(tmp_path, monkeypatch):
    from forecast_dojo.training import experiment

    calls = []
    for stage in STAGES:
        monkeypatch.setitem(
            experiment.STAGE_FUNCTIONS, stage, lambda _args, _layout, stage=stage: calls.append(stage) or {}
        )
    args = ExperimentArguments(out=str(tmp_path / "exp"), grpo_max_steps=0)
    run_experiment(args)
    assert "eval-unseen" not in calls and calls[-1] == "results"
    calls.clear()
    run_experiment(dataclasses.replace(args, eval_unseen_events=60))  # every other stage has finished
    assert calls == ["eval-unseen", "results"]
