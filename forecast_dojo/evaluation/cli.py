"""``forecast-dojo run`` (a resumable evaluation study), ``forecast-dojo report`` and ``forecast-dojo world``."""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_dojo.agents.llm import LOCAL_DTYPES
from forecast_dojo.arguments import (
    Flag,
    add_command,
    add_dataclass_arguments,
    at_least,
    dataclass_from_arguments,
    iso_day,
    option,
)
from forecast_dojo.errors import InputNotFoundError, StudyError, UsageError
from forecast_dojo.events.split import SPLITS

# agent names the command knows besides the scripted ones of ``forecast_dojo.agents.AGENTS``
EXTRA_AGENTS = ("honest", "openai", "hf:<path>")
# OpenAIConfig's fields are the server flags (types, defaults and help from the dataclass); --concurrency
# is the run's own flag, and two flags keep their documented short names.
SERVER_FIELDS = (
    "base_url",
    "model",
    "api_key",
    "temperature",
    "max_tokens",
    "timeout_s",
    "max_retries",
    "tool_mode",
)
SERVER_FLAGS = {
    "api_key": Flag(help="default: $OPENAI_API_KEY or 'EMPTY'"),
    "timeout_s": Flag("--timeout", "seconds per request before it counts as a (retryable) timeout"),
    "max_retries": Flag("--retries"),
    "tool_mode": Flag(
        help="native tool calls, or tool calls written as text in the reply", choices=("native", "text")
    ),
}


# where ``run`` writes without --out: the main job, and a study with notebook controls (its own folder)
DEFAULT_OUT = Path("runs/latest")
CONTROLS_OUT = Path("runs/notebook-controls")
CONSTRAINED_SUFFIX = "-labels"  # the agent label of a local model decoded with --local-constrain-labels


def default_out(modes: list[str]) -> Path:
    """The study folder ``run`` writes to without ``--out``: :data:`CONTROLS_OUT` for a notebook-control study."""
    from forecast_dojo.evaluation.study import STUDY_MODES

    controls = any(m in STUDY_MODES and STUDY_MODES[m].control for m in modes)
    return CONTROLS_OUT if controls else DEFAULT_OUT


@dataclass(kw_only=True)
class RunArguments:
    """The flags of ``forecast-dojo run`` besides the server ones (those are :class:`OpenAIConfig`'s fields)."""

    spec: str | None = option(
        None,
        help="an environment spec: a name (Synthetic-v0, ForecastBench-WCE-v0) or a .toml file; default: the synthetic world",
    )
    seed: int = option(0, help="synthetic world seed and episode seeds (default 0)")
    embedder: str | None = option(None, help="synthetic world embedder: minilm (default) or hashing")
    agents: tuple[str, ...] = option(
        ("honest", "evidence-oracle", "evidence-oracle-lite"),
        nargs="+",
        help="agents: scripted names (honest, evidence-oracle, evidence-oracle-lite, uniform, smollm2), "
        "'openai' (with --base-url/--model) or 'hf:<path>' (a local checkpoint)",
    )
    # help: the study modes' registry (filled in by register, which imports it)
    modes: tuple[str, ...] = option(("none", "notebook"), nargs="+", aliases=("--memory",))
    rollouts: int = option(1, parse=at_least(1), help="episodes per (agent, mode, event)")
    split: str | None = option(
        None,
        choices=SPLITS,
        help="which events the env holds: the held-out ones (eval, default, unless the spec names a split), "
        "the training ones, or all (the synthetic world's id split, an events build's temporal split; "
        "an events file without a split is used whole)",
    )
    event_ids: tuple[str, ...] | None = option(None, nargs="+", help="only these events")
    sample: int | None = option(None, parse=at_least(1), help="a seeded random sample of N events")
    max_events: int | None = option(None, parse=at_least(1), help="only the first N events (by id)")
    train_events: Path | None = option(
        None,
        help="training events (base rate, honest agent's cue weights); "
        "default: the spec's train.jsonl next to its events, or the synthetic train half",
    )
    step: int | None = option(
        None, parse=at_least(0), help="evaluate only this forecast step of each selected event (no study)"
    )
    notebook: Path | None = option(None, help="with --step: the notebook (JSON file) to start the step from")
    out: Path | None = option(
        None,
        help=f"the study folder (default: {DEFAULT_OUT}; {CONTROLS_OUT} when --modes has a notebook control, "
        "so the control study never replaces the main job's report)",
    )
    overwrite: bool = option(False, help="delete the study's logs and start afresh")
    concurrency: int = option(
        1,
        parse=at_least(1),
        help="episodes in flight (memory-free: forecast steps, each its own): parallel requests to a server "
        "agent; for local models the batch size",
    )
    no_python: bool = option(False, help="disable the python tool")
    honest_no_bearing_lines: bool = option(
        False,
        help="the compact honest agent writes 'doc: no bearing.' for each search hit that does not bear on the "
        "question, instead of passing it over (and the one line 'No report bears on the question.' when none does)",
    )
    prompt: str | None = option(
        None,
        choices=("default", "compact"),
        help="prompt profile (default: the spec's; compact: for small models, <= 400 tokens before any tool result)",
    )
    max_turns: int | None = option(
        None, parse=at_least(1), help="turns per forecast step (default: the spec's budget)"
    )
    max_tool_calls: int | None = option(
        None, parse=at_least(0), help="tool calls per forecast step (default: the spec's)"
    )
    knowledge_cutoff: str | None = option(
        None, parse=iso_day, help="a model's knowledge cutoff (YYYY-MM-DD) for the contamination view"
    )
    local_dtype: str = option(
        "auto",
        choices=LOCAL_DTYPES,
        help="weights for generation (bfloat16: half the memory, somewhat faster on CPUs with AMX/AVX-512 BF16, "
        "about 2.7x slower where it is emulated, e.g. AVX2 only; auto: bfloat16 where native, else float32)",
    )
    local_max_new_tokens: int = option(256, parse=at_least(1), help="tokens per reply")
    local_constrain_labels: bool = option(
        False,
        help="constrained decoding: submit_forecast's evidence stays well-formed and names only the question's "
        f"outcomes (forecast_dojo.agents.constrained); the agents' labels get '{CONSTRAINED_SUFFIX}'",
    )


# the run's flags in their groups: its own, then the server's (OpenAIConfig), then the local models'
LOCAL_FIELDS = ("local_dtype", "local_max_new_tokens", "local_constrain_labels")
RUN_FIELDS = tuple(f.name for f in dataclasses.fields(RunArguments) if f.name not in LOCAL_FIELDS)


@dataclass(kw_only=True)
class ReportArguments:
    """The arguments of ``forecast-dojo report``."""

    runs: tuple[Path, ...] = option(positional=True, nargs="+", help="study folders")
    out: Path | None = option(None, help="where to write (default: the first study folder)")
    knowledge_cutoff: str | None = option(None, parse=iso_day, help="a model's knowledge cutoff (YYYY-MM-DD)")
    no_plots: bool = False


@dataclass(kw_only=True)
class WorldArguments:
    """The flags of ``forecast-dojo world``."""

    seed: int = option(0, parse=at_least(0))
    embedder: str = "minilm"
    train_events: int = option(
        0,
        parse=at_least(0),
        help="extra training-only events (ids syn-t00000...; the 40 base events stay identical); default 0",
    )


RUN_HELP = "evaluate agents on an environment (default: the embedded synthetic world)"
RUN_DESCRIPTION = (
    "Run agents through events in each mode (memory-free, notebook, no-tools, notebook controls), "
    "log every step as it ends (rerunning the same command resumes; --overwrite starts afresh), and report "
    "the field's metrics (Brier loss, Brier Index, log loss, accuracy, ECE) with event-bootstrap 95 % "
    "intervals next to the uniform, base-rate, market and (synthetic) oracle forecasts."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run``, ``report`` and ``world`` subcommands."""
    from forecast_dojo.agents.openai_agent import OpenAIConfig
    from forecast_dojo.evaluation.study import STUDY_MODES

    run = add_command(subparsers, "run", run_command, help=RUN_HELP, description=RUN_DESCRIPTION)
    modes_help = "; ".join(f"{m.name}: {m.description}" for m in STUDY_MODES.values())
    add_dataclass_arguments(run, RunArguments, only=RUN_FIELDS, flags={"modes": Flag(help=modes_help)})
    server = run.add_argument_group("OpenAI-compatible server (agent 'openai')")
    add_dataclass_arguments(server, OpenAIConfig, only=SERVER_FIELDS, flags=SERVER_FLAGS)
    local = run.add_argument_group("local models (agents 'smollm2', 'hf:<path>')")
    add_dataclass_arguments(local, RunArguments, only=LOCAL_FIELDS)
    add_command(
        subparsers,
        "report",
        report_command,
        help="write report.md, report.json and figures for one or more study folders",
        description="Recompute every metric from the logs of study folders (written by 'forecast-dojo run').",
        arguments=ReportArguments,
    )
    world_help = "build (or find cached) the embedded synthetic world"
    add_command(subparsers, "world", world_command, help=world_help, arguments=WorldArguments)


def world_command(args: argparse.Namespace) -> int:
    """Build or find the synthetic world and print its paths."""
    from forecast_dojo.synthetic import ensure_synthetic_world

    paths = ensure_synthetic_world(args.seed, embedder=args.embedder, train_events=args.train_events)
    print(json.dumps({k: str(v) for k, v in vars(paths).items()}, indent=2))
    return 0


def _select_ids(args: argparse.Namespace, all_ids: list[str], split: str) -> list[str]:
    """The ids ``--event-ids``, ``--sample`` and ``--max-events`` select among the split's, in order."""
    known = set(all_ids)
    ids = sorted(known)
    if args.event_ids:
        missing = [i for i in args.event_ids if i not in known]
        if missing:
            shown = ", ".join(sorted(known)[:5])
            raise UsageError(
                f"--event-ids: unknown event id(s) {missing} in the {split} split, which has {len(known)} "
                f"events ({shown}, ...); --split train|eval|all chooses the split"
            )
        ids = list(args.event_ids)
    if args.sample is not None:
        ids = sorted(random.Random(args.seed).sample(ids, min(args.sample, len(ids))))
    if args.max_events is not None:
        ids = ids[: args.max_events]
    if not ids:
        raise UsageError("no events selected")
    return ids


def _select(args: argparse.Namespace, events: list[Any], split: str) -> list[Any]:
    by_id = {e.id: e for e in events}
    return [by_id[i] for i in _select_ids(args, list(by_id), split)]


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse arguments that are wrong on their face, before anything heavy (env, corpus, models) loads.

    Raises:
        UsageError: An unknown mode or agent, an agent without its options, a mode ``--step`` cannot
            play, ``--notebook`` without ``--step``.
        InputNotFoundError: A ``--notebook`` or ``--train-events`` file that does not exist.
    """
    from forecast_dojo.agents import AGENTS
    from forecast_dojo.evaluation.study import EPISODE_MODES, MODES

    bad = [m for m in args.modes if m not in MODES]
    if bad:
        raise UsageError(f"--modes: unknown mode(s) {bad}; known: {list(MODES)}")
    for name in args.agents:
        if name == "openai":
            if not args.base_url or not args.model:
                raise UsageError("agent 'openai' needs --base-url and --model")
            _server_config(args)  # its own checks (max tokens, retries), before anything loads
        elif name.startswith("hf:"):
            if not name.removeprefix("hf:"):
                raise UsageError("agent 'hf:<path>' needs the checkpoint's path after 'hf:'")
        elif name not in AGENTS and name != "honest":
            raise UsageError(
                f"--agents: unknown agent {name!r}; known: {sorted(AGENTS) + list(EXTRA_AGENTS)}"
            )
    if args.step is not None:
        wrong = [m for m in args.modes if m not in EPISODE_MODES]
        if wrong:
            raise UsageError(f"--step works with the modes {', '.join(EPISODE_MODES)}, not {wrong}")
    elif args.notebook is not None:
        raise UsageError("--notebook gives the notebook a single --step starts from; add --step")
    for flag, path in (("--notebook", args.notebook), ("--train-events", args.train_events)):
        if path is not None and not path.is_file():
            raise InputNotFoundError(f"{flag}: file not found: {path}")


def _server_config(args: argparse.Namespace) -> Any:
    """The :class:`~forecast_dojo.agents.openai_agent.OpenAIConfig` the server flags describe."""
    from forecast_dojo.agents.openai_agent import OpenAIConfig

    return dataclass_from_arguments(
        OpenAIConfig, args, only=SERVER_FIELDS, flags=SERVER_FLAGS, concurrency=max(args.concurrency, 1)
    )


def local_model_label(name: str, *, constrain_labels: bool = False) -> str:
    """The agent label of a local model given to ``--agents``: ``smollm2``, or ``hf-<folder name>-<digest>``.

    The digest (6 hex digits of a SHA-256) is of the checkpoint's absolute path when ``hf:<path>`` names
    a local folder, else of the model id as written, so two checkpoints saved as ``a/model`` and
    ``b/model`` get different labels, and one folder gets the same label from any working directory.
    With ``constrain_labels`` (``--local-constrain-labels``) the label ends in :data:`CONSTRAINED_SUFFIX`:
    the same model decoded under the constraint is another agent, with its own logs.
    """
    suffix = CONSTRAINED_SUFFIX if constrain_labels else ""
    if name == "smollm2":
        return name + suffix
    model = name.removeprefix("hf:")
    path = Path(model).expanduser()
    key = str(path.resolve()) if path.exists() else model
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:6]
    return f"hf-{Path(key).name or model}-{digest}{suffix}"


def _agent_factories(args: argparse.Namespace, honest_model: Any) -> dict[str, Any]:
    from forecast_dojo.agents import AGENTS

    factories: dict[str, Any] = {}
    for name in args.agents:
        if name == "openai":
            if not args.base_url or not args.model:
                raise UsageError("agent 'openai' needs --base-url and --model")
            from forecast_dojo.agents.openai_agent import OpenAIAgent

            config = _server_config(args)
            label = f"openai-{args.model.replace('/', '_')}"
            factories[label] = lambda env, config=config, label=label: OpenAIAgent(
                config, env.tool_schemas(), name=label
            )
        elif name.startswith("hf:") or name == "smollm2":  # local models: batched at --concurrency
            path = name.removeprefix("hf:")
            from forecast_dojo.agents.llm import TransformersAgent

            label = local_model_label(name, constrain_labels=args.local_constrain_labels)
            factories[label] = lambda env, path=path, label=label: TransformersAgent.from_pretrained(
                path,
                name=label,
                dtype=args.local_dtype,
                batch_size=max(args.concurrency, 1),
                max_new_tokens=args.local_max_new_tokens,
                constrain_labels=args.local_constrain_labels,
            )
        elif name == "honest":
            from forecast_dojo.agents.honest import HonestEvidenceAgent

            factories[name] = lambda env, model=honest_model: HonestEvidenceAgent(
                model,
                compact=getattr(env, "prompt", "default") == "compact",
                no_bearing_lines=args.honest_no_bearing_lines,
            )
        elif name in AGENTS:
            factories[name] = lambda env, name=name: AGENTS[name]()
        else:
            raise UsageError(
                f"--agents: unknown agent {name!r}; known: {sorted(AGENTS) + list(EXTRA_AGENTS)}"
            )
    return factories


def run_command(args: argparse.Namespace) -> int:
    """Run or resume a study, then write its report."""
    from forecast_dojo.evaluation.baselines import BaseRate, reference_records
    from forecast_dojo.evaluation.report import write_report
    from forecast_dojo.evaluation.study import run_study, study_mode, write_references
    from forecast_dojo.events.split import build_split_file
    from forecast_dojo.registration import make as make_env
    from forecast_dojo.registration import resolve_spec, spec_event_ids

    check_arguments(args)
    if args.out is None:
        args.out = default_out(args.modes)
    spec = resolve_spec(args.spec or "Synthetic-v0")
    synthetic = spec.world == "synthetic"
    overrides: dict[str, Any] = {"seed": args.seed}
    if args.embedder:
        overrides["embedder"] = args.embedder
    for budget in ("max_turns", "max_tool_calls"):
        if getattr(args, budget) is not None:
            overrides[budget] = getattr(args, budget)
    overrides["tools"] = tuple(t for t in spec.tools if t != "python") if args.no_python else spec.tools
    if args.prompt is not None:
        overrides["prompt"] = args.prompt

    if args.split is not None:
        overrides["split"] = args.split

    def env_for(mode: str, metadata: dict[str, Any], **extra: Any) -> Any:
        options = study_mode(mode).env_options(overrides | extra)
        return make_env(spec, default_split="eval", run_metadata=metadata, **options)

    # the selection is checked on the events file alone, before the corpus and the embedder load
    preview = {k: overrides[k] for k in ("seed", "embedder", "split") if k in overrides}
    _select_ids(
        args,
        spec_event_ids(dataclasses.replace(spec, **preview), default_split="eval"),
        args.split or spec.split or "eval",
    )
    probe = env_for("none", {})
    events = _select(args, list(probe.events), probe.split)
    if args.step is not None:
        _check_step(args.step, events)
    # training events: base rate and the honest agent's cue weights
    train_env = None
    train_options = overrides | {"memory": "none", "split": "train"}
    if args.train_events:
        train_env = make_env(spec, **(train_options | {"events": args.train_events, "split": "all"}))
    elif synthetic:
        train_env = make_env(spec, **train_options)
    elif spec.events is not None and (train_file := build_split_file(spec.events, "train")) is not None:
        train_env = make_env(spec, **(train_options | {"events": train_file}))
    train_events = list(train_env.events) if train_env is not None else []
    train_ids = [e.id for e in train_events]
    overlap = {e.id for e in events} & set(train_ids)
    if overlap and "honest" in args.agents:
        print(f"note: {len(overlap)} evaluated events are also the honest agent's training events")
    honest_model = None
    if "honest" in args.agents:
        from forecast_dojo.agents.honest import CueModel, fit_cue_model

        if train_env is None:
            raise UsageError("the honest agent needs training events (--train-events)")
        args.out.mkdir(parents=True, exist_ok=True)
        cached = args.out / "honest-cues.json"
        if cached.exists() and not args.overwrite:
            honest_model = CueModel.load(cached)
        else:
            honest_model = fit_cue_model(train_env, sorted(train_ids), progress=True)
            honest_model.save(cached)
    oracle = None
    if synthetic:
        from forecast_dojo.synthetic import ensure_synthetic_world, load_oracle

        oracle = load_oracle(
            ensure_synthetic_world(
                args.seed, embedder=args.embedder or spec.embedder or "minilm", train_events=spec.train_events
            ).oracle_path
        )
    factories = _agent_factories(args, honest_model)
    if args.step is not None:
        return _single_steps(args, factories, events, env_for)
    result = run_study(
        args.out,
        factories,
        args.modes,
        events,
        env_for,
        rollouts=args.rollouts,
        seed=args.seed,
        concurrency=args.concurrency,
        overwrite=args.overwrite,
        oracle=oracle,
        config={"spec": str(args.spec) if args.spec else "synthetic", "train_events": len(train_events)},
    )
    base_rate = BaseRate(train_events) if train_events else None
    references = reference_records(events, base_rate=base_rate, oracle=oracle)
    # an agent named like a reference (the scripted uniform agent) replaces it: one 'uniform' in the table
    references = [r for r in references if r.agent not in factories]
    write_references(args.out, references)
    print(f"\n{result['played']} steps played now, {result['reused']} reused from the logs in {args.out}/")
    report = write_report([args.out], args.out, knowledge_cutoff=args.knowledge_cutoff)
    print()
    print(report["table_text"])
    for line in report["comparison_lines"]:
        print(line)
    print(f"\nLogs, report.md, report.json and figures in {args.out}/")
    return 0


def _check_step(step: int, events: list[Any]) -> None:
    """Refuse a ``--step`` that none of the selected events has (the command would play nothing)."""
    if any(0 <= step < event.n_steps for event in events):
        return
    counts = ", ".join(f"{event.id} has {event.n_steps}" for event in events[:10])
    more = f" and {len(events) - 10} more" if len(events) > 10 else ""
    raise UsageError(
        f"--step {step}: no selected event has that step (steps count from 0; {counts}{more}): nothing to play"
    )


def _single_steps(
    args: argparse.Namespace, factories: dict[str, Any], events: list[Any], env_for: Any
) -> int:
    """Play one step of each selected event from a given notebook, for each agent and mode; print the records."""
    from forecast_dojo.evaluation.metrics import brier_loss
    from forecast_dojo.evaluation.study import evaluate_step

    notebook = args.notebook.read_text() if args.notebook else None
    for name, factory in factories.items():
        for mode in args.modes:
            env = env_for(mode, {"agent": name, "mode": mode, "single_step": True})
            for event in events:
                if not 0 <= args.step < event.n_steps:
                    print(f"note: {event.id}: no step {args.step} (it has {event.n_steps})", file=sys.stderr)
                    continue
                record = evaluate_step(
                    env, factory(env), event.id, args.step, notebook=notebook if mode == "notebook" else None
                )
                print(
                    json.dumps(
                        {
                            "agent": name,
                            "mode": mode,
                            "event_id": event.id,
                            "step": record.step,
                            "forecast": record.forecast,
                            "brier": brier_loss(record.forecast, record.outcome_index),
                            "flags": record.flags,
                            "notebook_out": record.notebook_out,
                        }
                    )
                )
    return 0


def report_command(args: argparse.Namespace) -> int:
    """Write the report of one or more study folders (or folders of world-mode logs)."""
    from forecast_dojo.evaluation.report import write_report
    from forecast_dojo.evaluation.study import STUDY_FILE
    from forecast_dojo.evaluation.world import find_world_logs

    for run in args.runs:
        if not run.is_dir():
            raise InputNotFoundError(
                f"study folder not found: {run} ('forecast-dojo run --out {run}' writes one)"
            )
        if not (run / STUDY_FILE).is_file() and not find_world_logs(run):
            raise StudyError(
                f"{run} is not a study folder (no {STUDY_FILE}; 'forecast-dojo run --out {run}' writes one) "
                "and holds no world-mode log"
            )
    out = args.out or args.runs[0]
    report = write_report(args.runs, out, knowledge_cutoff=args.knowledge_cutoff, plots=not args.no_plots)
    print(report["table_text"])
    for line in report["comparison_lines"]:
        print(line)
    print(f"\nreport.md and report.json in {out}/")
    return 0
