"""The learning experiment as one resumable pipeline: teacher -> export -> SFT -> evaluation -> GRPO -> evaluation.

Every stage writes its outputs under ``out`` and a marker ``out/stages/<stage>.json`` (what it ran, its
wall time, its numbers) when it has finished; a rerun skips every stage whose marker exists but
``results`` (recomputed from the logs in seconds, so a stage added later reaches ``learning.json``),
and the stages that play episodes resume their own logs, so a stopped run continues where it stopped
and a finished one costs nothing. A folder may be moved or copied and continued from its new place: its
location is not part of its configuration, and the evaluation markers record the label each model
was played under (labels hash a checkpoint's path), so the results find the steps already played.
Stages, in order:

1. ``spec``: the environment of the whole experiment, written once as ``out/spec.toml``: the synthetic
   world (its 20 held-out events unchanged) with ``train_events`` extra training events, the prompt profile
   and the budgets. Every later stage names this file, so teacher, export, models and evaluation see
   one environment.
2. ``teacher``: the honest agent on the training events in both memory modes (``forecast-dojo run``).
3. ``export``: the teacher's steps as an SFT dataset that fits ``max_tokens`` (best-of-k per step).
4. ``sft``: TRL SFT of ``model`` on that dataset.
5. ``eval``: the base model and the SFT model on the held-out events in both memory modes (``eval_modes``:
   memory-on steps of an event run in order, so memory-on costs hours on a CPU; ``--eval_modes none``
   sizes a run to fit, ``--base_eval_modes none`` leaves out only the base model's memory-on evaluation,
   and the results stage reports whichever modes the logs hold).
6. ``eval-unseen`` (only with ``eval_unseen_events`` > 0): the SFT model, memory-free, on a seeded
   sample of training events the teacher never played: more events from the same generator than the
   20 held-out ones, so a verdict that the held-out interval leaves open can narrow.
7. ``grpo``: a short GRPO run from the SFT checkpoint with the environment as reward.
8. ``eval-grpo``: the GRPO model on the same held-out steps.
9. ``results``: ``learning.json`` (valid-forecast rate, Brier, Brier minus uniform and regret vs the
   oracle with event-bootstrap intervals, memory-on minus memory-free, SFT minus base and GRPO minus
   SFT paired on the same steps, tokens, wall times; each event's mean Brier minus uniform and regret, which
   :mod:`forecast_dojo.training.replicates` pools over runs) and a learning-curve figure, written from
   the logs and checkpoints, never by hand.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_dojo.agents.llm import LOCAL_DTYPES
from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.errors import ExperimentError
from forecast_dojo.training.arguments import JsonObject
from forecast_dojo.training.checkpoint import RESUME_LAST

STAGES = ("spec", "teacher", "export", "sft", "eval", "eval-unseen", "grpo", "eval-grpo", "results")
MODES = ("none", "notebook")
__all__ = ["STAGES", "ExperimentArguments", "ExperimentError", "Layout", "run_experiment"]


def _fields(kind: str) -> set[str]:
    """The field names of ``SFTArguments`` (``sft``) or ``GRPOArguments`` (``grpo``)."""
    if kind == "sft":
        from forecast_dojo.training.sft import SFTArguments as arguments
    else:
        from forecast_dojo.training.grpo import GRPOArguments as arguments  # type: ignore[assignment]
    return {f.name for f in dataclasses.fields(arguments)}


def _native_bfloat16() -> bool:
    from forecast_dojo.agents.llm import native_bfloat16

    return native_bfloat16()


@dataclass
class ExperimentArguments:
    """Arguments of the learning experiment (CPU-sized defaults; docs/training.md gives the measured stage times).

    Attributes:
        out: the experiment folder (every stage's outputs and markers).
        results: where ``learning.json`` is also written (e.g. ``docs/results/learning.json``); empty: only ``out``.
        model: the model to fine-tune: ``"smollm2"`` (SmolLM2-135M-Instruct, offline) or a checkpoint path.
        seed: the synthetic world's seed and the episodes' seed.
        embedder: the synthetic world's embedder (``minilm``; ``hashing`` for fast tests).
        train_events: extra training events of the synthetic world (beside its 20; the 20 held-out stay as they are).
        prompt: the prompt profile of every stage (``compact`` fits a small model).
        tools: the env's tools: search and submit_forecast. ``python`` is off: a 135M model does not use
            it, and it costs time. ``read`` is off since 2026-12-07: the compact teacher forecasts from
            the search results' snippets and never reads, so its student does not either, and the
            tool's line in the system text cost 19 tokens of every record and every prompt.
        max_tool_calls: tool calls per forecast step.
        max_turns: turns per forecast step.
        teacher_rollouts: teacher episodes per (event, mode); the export keeps the best ``best_of`` per step.
        teacher_no_bearing_lines: the teacher writes ``doc: no bearing.`` for each search hit that does not
            bear on the question (``forecast-dojo run --honest-no-bearing-lines``; the form of the runs
            before 2026-12-07, about 12 more tokens in the median record) instead of passing it over and
            writing the one line "No report bears on the question." when none does.
        best_of: records kept per (event, step, memory) by the export (best score first).
        max_tokens: the export's length budget (SFT ``max_length`` too).
        sft_max_steps: SFT optimizer steps (-1: ``sft_epochs`` over the data). The default, 270 steps of
            4 sequences (about half an epoch of the default teacher's ~2,200 records), is the recipe
            that met the goal on both synthetic worlds tried (seeds 0 and 1) with the ``read`` tool and
            the teacher's lines of no bearing, and without them on seed 0; on seed 1 without ``read``
            it met it memory-free in one run of four (no lines, SFT seeds 1, 2 and 3: -0.029, -0.129
            and -0.112 against uniform, the last at 89.5 % valid; the lines, SFT seed 1: -0.090); 135
            steps met it in two runs of three on the first world and not on the second, 60 steps not at
            all (docs/training.md, runs 9-23).
        sft_epochs: SFT epochs when ``sft_max_steps`` is -1.
        sft_batch_size: sequences per forward pass.
        sft_grad_accum: forward passes per optimizer step.
        sft_learning_rate: SFT peak learning rate.
        sft_bf16: bfloat16 autocast in SFT; None (the default): where bfloat16 is native on the machine
            the stage runs on (:func:`forecast_dojo.agents.llm.native_bfloat16`), recorded in the stage's
            marker. (A computed default was read as False by ``HfArgumentParser``, so every run of
            ``training/experiment.py`` before 2026-12-04 trained in float32.)
        sft_gradient_checkpointing: recompute activations in SFT's backward pass. Off here, unlike
            ``SFTArguments``' default: the stage is bound by time, not memory (without it a step is
            21 % shorter and the peak 0.7 GiB higher), and every run so far trained without it.
        teacher_sample: play the teacher on a seeded sample of this many training events (0: all).
        eval_events: held-out events to evaluate (empty: all of them).
        eval_base: play the base model in the ``eval`` stage (``--eval_base false`` leaves it out, and
            ``learning.json``'s ``base`` entry then has no steps: for a rerun whose base-model prompts
            are unchanged, since a base SmolLM2 writes up to the reply budget every turn: 37 min for
            its 93 memory-free steps on 2 AMX cores in the sixteenth run of docs/training.md).
        eval_modes: the memory modes of the evaluations (``none``, ``notebook``; default both).
        base_eval_modes: the memory modes of the base model's evaluation (empty: ``eval_modes``). The
            default, ``none`` while the SFT and GRPO models play both, keeps the experiment within its
            two hours: the base model's memory-on evaluation costs hours on a CPU (a base SmolLM2 calls
            no tool and writes up to the reply budget every turn, and an event's memory-on steps run in
            order). Folders written before 2026-12-06 recorded none and used ``eval_modes``.
        eval_sample: evaluate a seeded sample of this many held-out events (0: all).
        eval_unseen_events: also evaluate the SFT model memory-free on a seeded sample of this many
            training events the teacher did not play (0, the default: none; ``teacher_sample`` must
            leave that many out). The 20 held-out events give an interval about +-0.12 wide on Brier
            minus uniform (docs/training.md); these events come from the same generator and the student
            never saw them, so ``learning.json``'s ``sft`` entry gains ``unseen`` (their numbers) and
            ``held_out_and_unseen`` (Brier minus uniform over both sets, one event bootstrap), reported
            beside the held-out headline, which stays the goal's number.
        eval_constrain_labels: decode the local models at every evaluation with their ``evidence``
            kept well-formed and naming only the question's outcomes
            (:mod:`forecast_dojo.agents.constrained`, ``forecast-dojo run --local-constrain-labels``;
            their agent labels end in ``-labels``). Off by default: the model alone is measured.
        eval_concurrency: episodes generated as one batch by the local model.
        eval_dtype: the local model's weights at evaluation (``auto``: bfloat16 where native, else float32).
        eval_max_new_tokens: tokens per reply at evaluation; at least the teacher's longest turn, or the
            fine-tuned model's reasoning is cut before its tool call (the compact teacher's turns: median 61
            tokens, 95th percentile 325, longest 367 with SmolLM2's tokenizer).
        grpo_max_steps: GRPO optimizer steps (0 skips GRPO and its evaluation).
        grpo_num_generations: completions per prompt.
        grpo_max_completion_length: tokens per GRPO rollout, tool results included (384 cut every rollout of
            the run on this machine before its submission: a compact record is up to 1,024 tokens, ~330 of
            them the prompt).
        grpo_learning_rate: GRPO learning rate.
        extra_sft: further ``SFTArguments`` fields.
        extra_grpo: further ``GRPOArguments`` fields.
    """

    out: str = "runs/experiment"
    results: str = ""
    model: str = "smollm2"
    seed: int = 0
    embedder: str = "minilm"
    train_events: int = 400
    prompt: str = "compact"
    tools: list[str] = field(default_factory=lambda: ["search", "submit_forecast"])
    max_tool_calls: int = 3
    max_turns: int = 4
    teacher_sample: int = 200
    teacher_rollouts: int = 1
    teacher_no_bearing_lines: bool = False
    best_of: int = 1
    max_tokens: int = 1024
    sft_max_steps: int = 270
    sft_epochs: float = 1.0
    sft_batch_size: int = 1
    sft_grad_accum: int = 4
    sft_learning_rate: float = 2e-4
    sft_bf16: bool | None = None
    sft_gradient_checkpointing: bool = False
    eval_events: list[str] = field(default_factory=list)
    eval_modes: list[str] = field(default_factory=lambda: list(MODES))
    base_eval_modes: list[str] = field(default_factory=lambda: ["none"])
    eval_base: bool = True
    eval_sample: int = 0
    eval_unseen_events: int = 0
    eval_constrain_labels: bool = False
    eval_concurrency: int = 32
    eval_dtype: str = "auto"
    eval_max_new_tokens: int = 384
    grpo_max_steps: int = 4
    grpo_num_generations: int = 4
    grpo_max_completion_length: int = 768
    grpo_learning_rate: float = 1e-6
    extra_sft: JsonObject = field(default_factory=JsonObject)
    extra_grpo: JsonObject = field(default_factory=JsonObject)

    def check(self) -> None:
        """Refuse arguments no stage could run with, before anything is loaded."""
        problems = []
        if self.train_events < 0:
            problems.append(f"train_events must be >= 0, got {self.train_events}")
        for name in ("max_turns", "teacher_rollouts", "max_tokens", "sft_batch_size", "sft_grad_accum"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.best_of < 0:
            problems.append(f"best_of must be >= 0, got {self.best_of}")
        for name in ("grpo_max_steps", "eval_unseen_events"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("eval_modes", "base_eval_modes"):
            modes = getattr(self, name)
            if (modes or name == "eval_modes") and (
                not modes or set(modes) - set(MODES) or len(set(modes)) != len(modes)
            ):
                problems.append(f"{name} must be distinct memory modes among {list(MODES)}, got {modes}")
        if "submit_forecast" not in self.tools:
            problems.append("tools must include submit_forecast")
        if self.eval_dtype not in LOCAL_DTYPES:
            problems.append(f"eval_dtype must be one of {list(LOCAL_DTYPES)}, got {self.eval_dtype!r}")
        for name, known in (("extra_sft", _fields("sft")), ("extra_grpo", _fields("grpo"))):
            unknown = sorted(set(getattr(self, name)) - known)
            if unknown:
                problems.append(f"{name} has unknown field(s) {unknown}")
        if problems:
            raise ExperimentError("; ".join(problems))


# ---------------------------------------------------------------------------------------------------
# The folder: where each stage puts its outputs, and the markers that make a rerun skip it.


class Layout:
    """Paths inside an experiment folder."""

    def __init__(self, out: str | Path):
        self.root = Path(out)
        self.spec = self.root / "spec.toml"
        self.teacher = self.root / "teacher"
        self.sft_data = self.root / "sft-data"
        self.sft_model = self.root / "sft-model"
        self.grpo_model = self.root / "grpo-model"
        self.eval = self.root / "eval"
        self.eval_unseen = self.root / "eval-unseen"
        self.eval_grpo = self.root / "eval-grpo"
        self.stages = self.root / "stages"
        self.arguments = self.root / "experiment.json"
        self.results = self.root / "learning.json"
        self.figure = self.root / "learning.png"

    def marker(self, stage: str) -> Path:
        """The file whose presence says ``stage`` has finished."""
        return self.stages / f"{stage}.json"

    def started(self, stage: str) -> bool:
        """Whether ``stage`` has finished or left outputs (a stage in progress resumes from them)."""
        outputs = {
            "spec": self.spec,
            "teacher": self.teacher,
            "export": self.sft_data,
            "sft": self.sft_model,
            "eval": self.eval,
            "eval-unseen": self.eval_unseen,
            "grpo": self.grpo_model,
            "eval-grpo": self.eval_grpo,
            "results": self.results,
        }
        return self.marker(stage).is_file() or outputs[stage].exists()


def _cli(argv: Sequence[str]) -> None:
    """Run one ``forecast-dojo`` command in this process; a non-zero exit is an :class:`ExperimentError`."""
    from forecast_dojo.cli import main

    print("$ forecast-dojo " + shlex.join(argv), flush=True)
    try:
        status = main(list(argv))
    except SystemExit as exit_:  # argparse and the commands exit with a message
        status = exit_.code if isinstance(exit_.code, int) else 1
        if not isinstance(exit_.code, int) and exit_.code is not None:
            print(exit_.code)
    if status:
        raise ExperimentError(f"forecast-dojo {shlex.join(argv)} exited with status {status}")


# ---------------------------------------------------------------------------------------------------
# The stages. Each takes the arguments and the layout and returns the numbers its marker records.


def spec_text(args: ExperimentArguments) -> str:
    """The environment spec every stage of the experiment uses (TOML)."""
    tools = ", ".join(json.dumps(t) for t in args.tools)
    return f"""# Written by forecast_dojo.training.experiment: the one environment of this experiment.
name = "LearningExperiment"
description = "Synthetic world (seed {args.seed}) with {args.train_events} training events, {args.prompt} prompt."

[data]
world = "synthetic"
seed = {args.seed}
embedder = "{args.embedder}"
train_events = {args.train_events}

[env]
retriever = "dense"
memory = "none"
reward = "brier"
prompt = "{args.prompt}"
tools = [{tools}]

[budgets]
max_tool_calls = {args.max_tool_calls}
max_turns = {args.max_turns}
"""


def stage_spec(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """Write the experiment's spec and build (or reuse) its world; returns its event counts."""
    from forecast_dojo.registration import make

    layout.spec.write_text(spec_text(args))
    env = make(str(layout.spec), split="all")
    from forecast_dojo.synthetic.split import synthetic_split

    split = synthetic_split(args.seed, train_events=args.train_events)
    counts = {"events": len(env.events), "train": len(split.train), "held_out": len(split.held_out)}
    env.close()
    return counts


def _run_argv(
    args: ExperimentArguments,
    layout: Layout,
    out: Path,
    agents: Sequence[str],
    split: str,
    modes: Sequence[str] | None = None,
    events: Sequence[str] = (),
) -> list[str]:
    """``forecast-dojo run``'s arguments; ``modes`` default: ``eval_modes`` on the held-out split, both otherwise.

    ``events`` names the events to play (else ``eval_events`` and ``eval_sample`` on the held-out split,
    ``teacher_sample`` on the training split).
    """
    if modes is None:
        modes = args.eval_modes if split == "eval" else MODES
    argv = ["run", "--spec", str(layout.spec), "--agents", *agents, "--modes", *modes, "--split", split]
    argv += ["--seed", str(args.seed), "--out", str(out)]
    if events:
        return [*argv, "--event-ids", *events]
    if split == "eval" and args.eval_events:
        argv += ["--event-ids", *args.eval_events]
    sample = args.eval_sample if split == "eval" else args.teacher_sample
    if sample:
        argv += ["--sample", str(sample)]
    return argv


def stage_teacher(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """The honest agent on the training events, both memory modes."""
    argv = _run_argv(args, layout, layout.teacher, ["honest"], "train")
    argv += ["--rollouts", str(args.teacher_rollouts)]
    if args.teacher_no_bearing_lines:
        argv.append("--honest-no-bearing-lines")
    _cli(argv)
    return {"records": _count_records(layout.teacher)}


def stage_export(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """The teacher's steps as an SFT dataset within ``max_tokens``."""
    logs = [str(layout.teacher / f"honest-{mode}") for mode in MODES]
    argv = ["export", "sft", *logs, "--out", str(layout.sft_data)]
    _cli([*argv, "--max-tokens", str(args.max_tokens), "--best-of", str(args.best_of)])
    report = json.loads((layout.sft_data / "export.json").read_text())
    return {"export": report.get("report", report)}


def _train(
    arguments: Any, extra: dict[str, Any], train: Callable[[Any], Any], run_file: Path
) -> dict[str, Any]:
    """Apply ``extra`` to a training dataclass, train with it, and return the run file it wrote."""
    arguments = dataclasses.replace(arguments, **extra)
    print(f"{type(arguments).__name__}: {arguments}", flush=True)
    train(arguments)
    return dict(json.loads(run_file.read_text()))


SFT_SAVE_STEPS = 16
SFT_CHECKPOINTS = {
    "save_strategy": "steps",
    "save_steps": SFT_SAVE_STEPS,
    "save_total_limit": 1,
    "resume_from_checkpoint": RESUME_LAST,
}


def stage_sft(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """Fine-tune the model on the export."""
    from forecast_dojo.training.sft import SFTArguments, train_sft

    sft = SFTArguments(
        model=args.model,
        data=[str(layout.sft_data)],
        output_dir=str(layout.sft_model),
        max_steps=args.sft_max_steps,
        num_train_epochs=args.sft_epochs,
        per_device_train_batch_size=args.sft_batch_size,
        gradient_accumulation_steps=args.sft_grad_accum,
        learning_rate=args.sft_learning_rate,
        max_length=args.max_tokens,
        bf16=_native_bfloat16() if args.sft_bf16 is None else args.sft_bf16,
        gradient_checkpointing=args.sft_gradient_checkpointing,
        seed=args.seed,
        logging_steps=1,
    )
    # A Trainer checkpoint every SFT_SAVE_STEPS steps, resumed by a rerun: a stopped SFT stage loses
    # at most those steps. ``--extra_sft '{"extra": {...}}'`` adds to these settings or overrides them.
    extra_sft = dict(args.extra_sft)
    given = extra_sft.get("extra", {})
    if not isinstance(given, dict):
        raise ExperimentError(
            f"--extra_sft's 'extra' must be a JSON object of SFTConfig fields, not {given!r}"
        )
    extra_sft["extra"] = {**SFT_CHECKPOINTS, **given}
    summary = _train(sft, extra_sft, train_sft, layout.sft_model / "sft_run.json")
    numbers = {key: summary.get(key) for key in ("rows", "global_step", "training_loss", "wall_seconds")}
    return {**numbers, "bf16": sft.bf16, "gradient_checkpointing": sft.gradient_checkpointing}


def _eval_argv(
    args: ExperimentArguments,
    layout: Layout,
    out: Path,
    models: Sequence[str],
    modes: Sequence[str] | None = None,
    *,
    split: str = "eval",
    events: Sequence[str] = (),
) -> list[str]:
    argv = _run_argv(args, layout, out, [f"hf:{m}" for m in models], split, modes, events)
    argv += ["--concurrency", str(args.eval_concurrency), "--local-dtype", args.eval_dtype]
    argv += ["--local-constrain-labels"] if args.eval_constrain_labels else []
    return [*argv, "--local-max-new-tokens", str(args.eval_max_new_tokens)]


def stage_eval(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """The base and the SFT model on the held-out events, in the memory modes ``eval_modes``.

    With ``base_eval_modes`` other than ``eval_modes``, the base model is played in its own modes first,
    then the SFT model, into the same study folder (one study: the same events, seed and steps).
    """
    models = [args.model, str(layout.sft_model)]
    base_modes = args.base_eval_modes or args.eval_modes
    if not args.eval_base:  # the SFT model alone (learning.json's base entry then has no steps)
        _cli(_eval_argv(args, layout, layout.eval, models[1:]))
    elif list(base_modes) == list(args.eval_modes):
        _cli(_eval_argv(args, layout, layout.eval, models))
    else:
        _cli(_eval_argv(args, layout, layout.eval, models[:1], base_modes))
        _cli(_eval_argv(args, layout, layout.eval, models[1:]))
    constrained = args.eval_constrain_labels
    agents = {"sft": _label(models[1], constrained=constrained)}
    if args.eval_base:
        agents["base"] = _label(models[0], constrained=constrained)
    return {"records": _count_records(layout.eval), "agents": agents}


def unseen_events(args: ExperimentArguments, layout: Layout) -> list[str]:
    """A seeded sample of ``eval_unseen_events`` training events of the spec that the teacher's logs lack.

    Raises:
        ExperimentError: the teacher has not played yet, or it left fewer training events out.
    """
    import random

    from forecast_dojo.evaluation.study import study_rows
    from forecast_dojo.registration import make

    if not layout.marker("teacher").is_file():
        raise ExperimentError(
            "the training events the teacher did not play are known once its stage has finished"
        )
    played = {row["event_id"] for row in study_rows(layout.teacher)}
    env = make(str(layout.spec), split="train")
    try:
        unseen = sorted({event.id for event in env.events} - played)
    finally:
        env.close()
    if len(unseen) < args.eval_unseen_events:
        raise ExperimentError(
            f"eval_unseen_events = {args.eval_unseen_events}, but the teacher left only {len(unseen)} training "
            "events unplayed: lower it, or lower teacher_sample"
        )
    return sorted(random.Random(args.seed).sample(unseen, args.eval_unseen_events))


def stage_eval_unseen(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """The SFT model, memory-free, on training events the teacher never played (:func:`unseen_events`)."""
    events = unseen_events(args, layout)
    model = str(layout.sft_model)
    _cli(_eval_argv(args, layout, layout.eval_unseen, [model], ["none"], split="train", events=events))
    return {
        "records": _count_records(layout.eval_unseen),
        "events": events,
        # its own key: a folder evaluated before a move and here after it holds two labels of one model
        "agents": {"sft-unseen": _label(model, constrained=args.eval_constrain_labels)},
    }


def stage_grpo(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """A short GRPO run from the SFT checkpoint on the experiment's compact training episodes."""
    from forecast_dojo.training.grpo import GRPOArguments, train_grpo

    grpo = GRPOArguments(
        model=str(layout.sft_model),
        output_dir=str(layout.grpo_model),
        spec=str(layout.spec),
        max_steps=args.grpo_max_steps,
        num_generations=args.grpo_num_generations,
        per_device_train_batch_size=args.grpo_num_generations,
        max_completion_length=args.grpo_max_completion_length,
        learning_rate=args.grpo_learning_rate,
        python=False,
        seed=args.seed,
    )
    summary = _train(grpo, args.extra_grpo, train_grpo, layout.grpo_model / "grpo_run.json")
    rewards = [h["reward"] for h in summary.get("log_history", []) if "reward" in h]
    return {
        "global_step": summary.get("global_step"),
        "wall_seconds": summary.get("wall_seconds"),
        "rewards": rewards,
    }


def stage_eval_grpo(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """The GRPO model on the same held-out events."""
    _cli(_eval_argv(args, layout, layout.eval_grpo, [str(layout.grpo_model)]))
    label = _label(str(layout.grpo_model), constrained=args.eval_constrain_labels)
    return {"records": _count_records(layout.eval_grpo), "agents": {"grpo": label}}


def _count_records(study: Path) -> int:
    from forecast_dojo.trajectory import load_records

    return sum(len(load_records(d)) for d in sorted(study.iterdir()) if (d / "steps.jsonl").is_file())


# ---------------------------------------------------------------------------------------------------
# Results: learning.json and the figure, computed from the logs.


def _label(model: str, present: set[str] | frozenset[str] = frozenset(), *, constrained: bool = False) -> str:
    """The agent label ``forecast-dojo run`` gives ``hf:<model>``, as found among the ``present`` labels.

    Logs written before labels carried a hash of the model's path (``hf-<folder>`` then,
    ``hf-<folder>-<hash>`` now) keep their old label: the first candidate found in ``present`` wins.
    ``constrained``: the label of the model decoded with ``--local-constrain-labels``.
    """
    from forecast_dojo.evaluation.cli import local_model_label

    label = local_model_label(f"hf:{model}", constrain_labels=constrained)
    if constrained:
        return label
    legacy = f"hf-{Path(model).name}"
    return next((c for c in (label, legacy) if c in present), label)


def _played_agents(layout: Layout) -> dict[str, str]:
    """The agent label each model was evaluated under, as the evaluation stages' markers record it.

    A label hashes the checkpoint's path, so a folder copied or moved after its evaluation would
    look its models up under new labels and find no steps; the markers keep the labels played.
    Markers written before they recorded labels give none (the labels are then computed).
    """
    played: dict[str, str] = {}
    for stage in ("eval", "eval-unseen", "eval-grpo"):
        marker = layout.marker(stage)
        if marker.is_file():
            played.update(json.loads(marker.read_text()).get("agents") or {})
    return played


def summarize(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """The experiment's numbers from its evaluation logs (see the module docstring)."""
    from forecast_dojo.evaluation import metrics
    from forecast_dojo.evaluation.study import study_rows

    studies = [layout.eval] + ([layout.eval_grpo] if layout.eval_grpo.is_dir() else [])
    rows = [row for study in studies for row in study_rows(study)]
    models = {"base": args.model, "sft": str(layout.sft_model)}
    if layout.eval_grpo.is_dir():
        models["grpo"] = str(layout.grpo_model)
    played = _played_agents(layout)
    out: dict[str, Any] = {}
    present = {metrics.forecaster(row)[0] for row in rows}  # the agent labels the logs hold
    for key, model in models.items():
        agent = played.get(key) or _label(model, present, constrained=args.eval_constrain_labels)
        per_mode = {mode: _model_numbers(rows, (agent, mode)) for mode in MODES}
        entry = dict(per_mode["none"])  # the headline: memory-free
        entry["agent"] = agent
        entry["modes"] = per_mode
        with contextlib.suppress(ValueError):
            diff = metrics.paired_difference(rows, (agent, "notebook"), (agent, "none"), "brier")
            entry["notebook_minus_none"] = [diff["mean"], *diff["ci"]]
        out[key] = entry
    out["effects"] = _effects(rows, {key: entry["agent"] for key, entry in out.items()})
    if layout.eval_unseen.is_dir():
        unseen = _unseen_numbers(layout, out["sft"], played.get("sft-unseen"), args.eval_constrain_labels)
        out["sft"].update(unseen)
    grpo_marker = layout.marker("grpo")
    if grpo_marker.is_file():  # GRPO's training numbers, whether or not its evaluation ran
        trained = json.loads(grpo_marker.read_text())
        entry = out.setdefault("grpo", {"steps": 0})
        entry["training"] = {key: trained.get(key) for key in ("global_step", "wall_seconds", "rewards")}
    stages = {}
    for stage in STAGES[:-1]:
        marker = layout.marker(stage)
        if marker.is_file():
            stages[stage] = json.loads(marker.read_text()).get("wall_s")
    return {
        "arguments": dataclasses.asdict(args),
        **out,
        "stage_wall_s": stages,
        "conventions": "Brier = multiclass Brier loss (lower is better); headline numbers are memory-free ('none'); "
        "intervals are 95 % event-bootstrap; brier_minus_uniform, regret and effects (Brier of the later model minus the "
        "earlier one, per memory mode: negative = the later model is better) are paired on identical steps.",
    }


def _unseen_numbers(
    layout: Layout, sft: dict[str, Any], agent: str | None, constrained: bool = False
) -> dict[str, Any]:
    """The SFT model on the unseen training events, and Brier minus uniform over them and the held-out ones.

    ``agent`` is the label the ``eval-unseen`` stage recorded (None: the label of the model's path now,
    decoded under the evidence-label constraint when ``constrained``).
    """
    from forecast_dojo.evaluation import metrics
    from forecast_dojo.evaluation.study import study_rows

    rows = study_rows(layout.eval_unseen)
    present = {metrics.forecaster(row)[0] for row in rows}
    agent = agent or _label(str(layout.sft_model), present, constrained=constrained)
    unseen = _model_numbers(rows, (agent, "none"))
    numbers: dict[str, Any] = {"unseen": unseen}
    held_out = sft.get("brier_minus_uniform_by_event") or {}
    if unseen.get("brier_minus_uniform_by_event") and held_out:
        both = {**held_out, **unseen["brier_minus_uniform_by_event"]}
        steps = sft["steps"] + unseen["steps"]
        numbers["held_out_and_unseen"] = {
            "events": len(both),
            "steps": steps,
            "valid_rate": (sft["valid_rate"] * sft["steps"] + unseen["valid_rate"] * unseen["steps"]) / steps,
            "brier_minus_uniform": list(metrics.event_bootstrap({e: [v] for e, v in both.items()})),
        }
    return numbers


# What each training stage changed: (later model, earlier model), paired on the steps both played.
EFFECTS = {"sft_minus_base": ("sft", "base"), "grpo_minus_sft": ("grpo", "sft")}


def _effects(rows: Sequence[dict[str, Any]], agents: dict[str, str]) -> dict[str, Any]:
    """Per effect of :data:`EFFECTS` and memory mode: Brier of the later model minus the earlier one.

    ``[mean, lo, hi]`` over the steps both models played in that mode (identical event, step and
    rollout), with an event-bootstrap 95 % interval (negative: the later model is better); a mode
    either model did not play is left out.
    """
    from forecast_dojo.evaluation import metrics

    effects: dict[str, Any] = {}
    for name, (later, earlier) in EFFECTS.items():
        if later not in agents or earlier not in agents:
            continue
        per_mode = {}
        for mode in MODES:
            with contextlib.suppress(ValueError):  # no step played by both
                diff = metrics.paired_difference(
                    rows, (agents[later], mode), (agents[earlier], mode), "brier"
                )
                per_mode[mode] = [diff["mean"], *diff["ci"]]
        effects[name] = per_mode
    return effects


def _model_numbers(rows: Sequence[dict[str, Any]], forecaster: tuple[str, str]) -> dict[str, Any]:
    from forecast_dojo.evaluation import metrics

    mine = [r for r in rows if metrics.forecaster(r) == forecaster]
    if not mine:
        return {"steps": 0}
    summary = metrics.summarize_group(mine)
    numbers: dict[str, Any] = {
        "steps": len(mine),
        "events": len({r["event_id"] for r in mine}),
        "valid_rate": sum(1 for r in mine if r["valid"]) / len(mine),
        "brier": summary["brier"],
        "brier_ci": summary["brier_ci"],
        "tokens_per_step": summary["tokens"],
        "wall_s_per_step": summary["wall_s"],
    }
    for name, reference in (("brier_minus_uniform", "uniform"), ("regret", "oracle")):
        by_event = metrics.paired_values_by_event(rows, forecaster, (reference, "-"), "brier")
        if by_event:
            numbers[name] = list(metrics.event_bootstrap(by_event))
            # each event's mean: what pools this run with replicates of it (forecast_dojo.training.replicates)
            numbers[f"{name}_by_event"] = {event: sum(v) / len(v) for event, v in sorted(by_event.items())}
    return numbers


def learning_figure(layout: Layout, path: Path) -> Path | None:
    """SFT loss and GRPO reward against optimizer steps, from the checkpoints' run files."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = []
    for name, file, key in (
        ("SFT training loss", layout.sft_model / "sft_run.json", "loss"),
        ("GRPO reward", layout.grpo_model / "grpo_run.json", "reward"),
    ):
        if file.is_file():
            history = json.loads(file.read_text()).get("log_history", [])
            points = [(h["step"], h[key]) for h in history if key in h and "step" in h]
            if points:
                curves.append((name, points))
    if not curves:
        return None
    fig, axes = plt.subplots(1, len(curves), figsize=(5 * len(curves), 3.4), squeeze=False)
    for ax, (name, points) in zip(axes[0], curves, strict=True):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=2, color="#1f77b4")
        ax.set_xlabel("optimizer step")
        ax.set_title(name)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def stage_results(args: ExperimentArguments, layout: Layout) -> dict[str, Any]:
    """Write ``learning.json`` and ``learning.png`` (and their copies under ``results``)."""
    summary = summarize(args, layout)
    write_json_atomic(layout.results, summary, default=str)
    figure = learning_figure(layout, layout.figure)
    if args.results:
        target = Path(args.results)
        write_json_atomic(target, summary, default=str)
        if figure is not None:
            learning_figure(layout, target.with_suffix(".png"))
    return {key: summary[key].get("brier") for key in ("base", "sft", "grpo") if key in summary}


STAGE_FUNCTIONS: dict[str, Callable[[ExperimentArguments, Layout], dict[str, Any]]] = {
    "spec": stage_spec,
    "teacher": stage_teacher,
    "export": stage_export,
    "sft": stage_sft,
    "eval": stage_eval,
    "eval-unseen": stage_eval_unseen,
    "grpo": stage_grpo,
    "eval-grpo": stage_eval_grpo,
    "results": stage_results,
}


# ---------------------------------------------------------------------------------------------------
# The driver.


# The stages that read each argument family; every other argument shapes every stage from ``spec`` on.
_ARGUMENT_STAGES = {
    "eval_unseen_": ("eval-unseen",),  # before "eval_": the first prefix that matches wins
    "teacher_": ("teacher",),
    "sft_": ("sft",),
    "extra_sft": ("sft",),
    "eval_": ("eval", "eval-unseen", "eval-grpo"),
    "base_eval_": ("eval",),
    "grpo_": ("grpo",),
    "extra_grpo": ("grpo",),
}


def _stages_reading(name: str) -> tuple[str, ...]:
    for prefix, stages in _ARGUMENT_STAGES.items():
        if name.startswith(prefix):
            return stages
    return STAGES


# Fields whose default changed: what a folder that does not record them used.
_DEFAULTS_OF_OLDER_FOLDERS: dict[str, Any] = {"base_eval_modes": []}


# Where the folder and its results are, not what they hold: a folder moved or copied elsewhere continues.
LOCATION_FIELDS = ("out", "results")


def _check_folder(args: ExperimentArguments, layout: Layout) -> None:
    """A folder holds one configuration: refuse arguments that differ for a stage that has started.

    An argument read only by stages that have not started yet (no marker, no output: e.g.
    ``eval_sample`` before the evaluation, any ``grpo_*`` before GRPO) may change: the folder's
    ``experiment.json`` then records the new value.
    """
    mine = dataclasses.asdict(args)
    if layout.arguments.is_file():
        theirs = json.loads(layout.arguments.read_text())
        # a field added after the folder was written counts as its default there (what that run used)
        defaults = {**dataclasses.asdict(ExperimentArguments()), **_DEFAULTS_OF_OLDER_FOLDERS}
        differ = sorted(k for k in mine if k not in LOCATION_FIELDS and theirs.get(k, defaults[k]) != mine[k])
        started = {stage for stage in STAGES if layout.started(stage)}
        changed = [k for k in differ if started & set(_stages_reading(k))]
        if changed:
            raise ExperimentError(
                f"{layout.root} holds an experiment with other arguments ({', '.join(changed)}) for "
                "stages already started: use another --out, or delete the folder to start afresh"
            )
        if differ:
            print(f"arguments of stages not yet run changed: {', '.join(differ)}", flush=True)
            write_json_atomic(layout.arguments, mine, default=str)
        elif any(theirs.get(k) != mine[k] for k in LOCATION_FIELDS):  # a moved or copied folder
            write_json_atomic(layout.arguments, mine, default=str)
    else:
        write_json_atomic(layout.arguments, mine, default=str)


def _release_memory() -> None:
    """Give back what a stage kept in this process: the evaluation's models and batchers, freed heap."""
    from forecast_dojo.agents.llm import release_shared_models

    release_shared_models()


def run_experiment(args: ExperimentArguments, *, stages: Sequence[str] | None = None) -> dict[str, Any]:
    """Run (or continue) the experiment; returns ``learning.json``'s content when the results stage ran.

    Args:
        args: the experiment's arguments.
        stages: only these stages (in pipeline order); default all, GRPO and its evaluation only when
            ``args.grpo_max_steps > 0``. A stage whose marker exists is skipped, except ``results``:
            it is recomputed from the logs every time (seconds), so a stage added later, such as
            GRPO after a run without it, reaches ``learning.json``.
    """
    args.check()
    wanted = list(stages) if stages is not None else list(STAGES)
    unknown = [s for s in wanted if s not in STAGES]
    if unknown:
        raise ExperimentError(f"unknown stage(s) {unknown}; known: {list(STAGES)}")
    if args.grpo_max_steps == 0:
        wanted = [s for s in wanted if s not in ("grpo", "eval-grpo")]
    if args.eval_unseen_events == 0:
        wanted = [s for s in wanted if s != "eval-unseen"]
    layout = Layout(args.out)
    layout.root.mkdir(parents=True, exist_ok=True)
    _check_folder(args, layout)
    for stage in (s for s in STAGES if s in wanted):
        marker = layout.marker(stage)
        if marker.is_file() and stage != "results":
            print(f"[{stage}] done already ({marker}): skipped", flush=True)
            continue
        print(f"[{stage}] running", flush=True)
        started = time.perf_counter()
        numbers = STAGE_FUNCTIONS[stage](args, layout)
        _release_memory()  # the next stage starts from what this one leaves, not from its peak
        wall = round(time.perf_counter() - started, 1)
        write_json_atomic(
            marker, {"stage": stage, "wall_s": wall, "load_avg": os.getloadavg(), **numbers}, default=str
        )
        print(f"[{stage}] finished in {wall:.0f} s", flush=True)
    return json.loads(layout.results.read_text()) if layout.results.is_file() else {}
