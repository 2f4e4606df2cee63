"""``forecast-dojo run`` (a resumable evaluation study), ``forecast-dojo report`` and ``forecast-dojo world``."""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

SPLITS = ("all", "train", "eval")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``run``, ``report`` and ``world`` subcommands."""
    run = subparsers.add_parser(
        "run",
        help="evaluate agents on an environment (default: the embedded synthetic world)",
        description="Run agents through events in each mode (memory-free, notebook, no-tools, notebook controls), "
        "log every step as it ends (rerunning the same command resumes; --overwrite starts afresh), and report "
        "the field's metrics (Brier loss, Brier Index, log loss, accuracy, ECE) with event-bootstrap 95 % "
        "intervals next to the uniform, base-rate, market and (synthetic) oracle forecasts.",
    )
    run.add_argument(
        "--spec",
        help="an environment spec: a name (Synthetic-v0, ForecastBench-WCE-v0) or a .toml file; default: the synthetic world",
    )
    run.add_argument("--seed", type=int, default=0, help="synthetic world seed and episode seeds (default 0)")
    run.add_argument("--embedder", default=None, help="synthetic world embedder: minilm (default) or hashing")
    run.add_argument(
        "--agents",
        nargs="+",
        default=["honest", "evidence-oracle", "evidence-oracle-lite"],
        help="agents: scripted names (honest, evidence-oracle, evidence-oracle-lite, uniform, smollm2), "
        "'openai' (with --base-url/--model) or 'hf:<path>' (a local checkpoint)",
    )
    run.add_argument(
        "--modes",
        "--memory",
        dest="modes",
        nargs="+",
        default=["none", "notebook"],
        help="none, notebook, no-tools, notebook-empty, notebook-stale, notebook-shuffled, notebook-oracle",
    )
    run.add_argument("--rollouts", type=int, default=1, help="episodes per (agent, mode, event)")
    run.add_argument(
        "--split",
        choices=SPLITS,
        default="eval",
        help="which events: the synthetic world's held-out half (eval, default), its train half, or all; "
        "a spec's events file is used as it is",
    )
    run.add_argument("--event-ids", nargs="+", help="only these events")
    run.add_argument("--sample", type=int, help="a seeded random sample of N events")
    run.add_argument("--max-events", type=int, default=None, help="only the first N events (by id)")
    run.add_argument(
        "--train-events",
        type=Path,
        help="training events (base rate, honest agent's cue weights); "
        "default: the spec's train.jsonl next to its events, or the synthetic train half",
    )
    run.add_argument(
        "--step", type=int, help="evaluate only this forecast step of each selected event (no study)"
    )
    run.add_argument(
        "--notebook", type=Path, help="with --step: the notebook (JSON file) to start the step from"
    )
    run.add_argument("--out", type=Path, default=Path("runs/latest"), help="the study folder")
    run.add_argument("--overwrite", action="store_true", help="delete the study's logs and start afresh")
    run.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="episodes in flight: parallel requests to a server agent; for local models the batch size",
    )
    run.add_argument("--no-python", action="store_true", help="disable the python tool")
    run.add_argument("--max-turns", type=int, help="turns per forecast step (default: the spec's budget)")
    run.add_argument("--max-tool-calls", type=int, help="tool calls per forecast step (default: the spec's)")
    run.add_argument(
        "--knowledge-cutoff", help="a model's knowledge cutoff (YYYY-MM-DD) for the contamination view"
    )
    server = run.add_argument_group("OpenAI-compatible server (agent 'openai')")
    server.add_argument("--base-url", help="e.g. http://127.0.0.1:8000/v1")
    server.add_argument("--model", help="the model name the server expects")
    server.add_argument("--api-key", help="default: $OPENAI_API_KEY or 'EMPTY'")
    server.add_argument("--temperature", type=float, default=0.0)
    server.add_argument("--max-tokens", type=int, default=512)
    server.add_argument("--timeout", type=float, default=120.0, help="seconds per request")
    server.add_argument("--retries", type=int, default=4)
    server.add_argument("--tool-mode", choices=["native", "text"], default="native")
    local = run.add_argument_group("local checkpoint (agents 'hf:<path>')")
    local.add_argument(
        "--local-dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="weights for generation (bfloat16: half the memory, somewhat faster on CPUs with AMX/AVX-512 BF16)",
    )
    local.add_argument("--local-max-new-tokens", type=int, default=256, help="tokens per reply")
    run.set_defaults(func=run_command)

    report = subparsers.add_parser(
        "report",
        help="write report.md, report.json and figures for one or more study folders",
        description="Recompute every metric from the logs of study folders (written by 'forecast-dojo run').",
    )
    report.add_argument("runs", nargs="+", type=Path, help="study folders")
    report.add_argument("--out", type=Path, help="where to write (default: the first study folder)")
    report.add_argument("--knowledge-cutoff", help="a model's knowledge cutoff (YYYY-MM-DD)")
    report.add_argument("--no-plots", action="store_true")
    report.set_defaults(func=report_command)

    world = subparsers.add_parser("world", help="build (or find cached) the embedded synthetic world")
    world.add_argument("--seed", type=int, default=0)
    world.add_argument("--embedder", default="minilm")
    world.add_argument(
        "--train-events",
        type=int,
        default=0,
        help="extra training-only events (ids syn-t00000...; the 40 base events stay identical); default 0",
    )
    world.set_defaults(func=world_command)


def world_command(args: argparse.Namespace) -> int:
    """Build or find the synthetic world and print its paths."""
    from forecast_dojo.synthetic import ensure_synthetic_world

    if args.train_events < 0:
        raise SystemExit(f"--train-events must be >= 0, got {args.train_events}")
    paths = ensure_synthetic_world(args.seed, embedder=args.embedder, train_events=args.train_events)
    print(json.dumps({k: str(v) for k, v in vars(paths).items()}, indent=2))
    return 0


def synthetic_split(event_ids: list[str], split: str) -> list[str]:
    """The synthetic world's split (``forecast_dojo.synthetic.split``): even positions train, odd ones evaluate."""
    from forecast_dojo.synthetic.split import split_event_ids

    return split_event_ids(event_ids).select(split)


def _select(args: argparse.Namespace, events: list[Any], synthetic: bool) -> list[Any]:
    by_id = {e.id: e for e in events}
    ids = synthetic_split(list(by_id), args.split) if synthetic else sorted(by_id)
    if args.event_ids:
        missing = [i for i in args.event_ids if i not in by_id]
        if missing:
            raise SystemExit(f"unknown event id(s) {missing}")
        ids = [i for i in args.event_ids]
    if args.sample is not None:
        ids = sorted(random.Random(args.seed).sample(ids, min(args.sample, len(ids))))
    if args.max_events is not None:
        ids = ids[: args.max_events]
    return [by_id[i] for i in ids]


def _agent_factories(args: argparse.Namespace, honest_model: Any) -> dict[str, Any]:
    from forecast_dojo.agents import AGENTS

    factories: dict[str, Any] = {}
    for name in args.agents:
        if name == "openai":
            if not args.base_url or not args.model:
                raise SystemExit("agent 'openai' needs --base-url and --model")
            from forecast_dojo.agents.openai_agent import OpenAIAgent, OpenAIConfig

            config = OpenAIConfig(
                base_url=args.base_url,
                model=args.model,
                api_key=args.api_key,
                temperature=args.temperature,
                max_tokens=args.max_tokens,
                timeout_s=args.timeout,
                max_retries=args.retries,
                concurrency=max(args.concurrency, 1),
                tool_mode=args.tool_mode,
            )
            label = f"openai-{args.model.replace('/', '_')}"
            factories[label] = lambda env, config=config, label=label: OpenAIAgent(
                config, env.tool_schemas(), name=label
            )
        elif name.startswith("hf:"):
            path = name.removeprefix("hf:")
            from forecast_dojo.agents.llm import TransformersAgent

            label = f"hf-{Path(path).name}"
            factories[label] = lambda env, path=path, label=label: TransformersAgent.from_pretrained(
                path,
                name=label,
                dtype=args.local_dtype,
                batch_size=max(args.concurrency, 1),
                max_new_tokens=args.local_max_new_tokens,
            )
        elif name == "honest":
            from forecast_dojo.agents.honest import HonestEvidenceAgent

            factories[name] = lambda env, model=honest_model: HonestEvidenceAgent(model)
        elif name in AGENTS:
            factories[name] = lambda env, name=name: AGENTS[name]()
        else:
            raise SystemExit(
                f"unknown agent {name!r}; known: {sorted(AGENTS) + ['honest', 'openai', 'hf:<path>']}"
            )
    return factories


def run_command(args: argparse.Namespace) -> int:
    """Run or resume a study, then write its report."""
    from forecast_dojo.evaluation.baselines import BaseRate, reference_records
    from forecast_dojo.evaluation.report import write_report
    from forecast_dojo.evaluation.study import MODES, StudyError, run_study, write_references
    from forecast_dojo.prompts import Budgets
    from forecast_dojo.registration import make as make_env
    from forecast_dojo.registration import resolve_spec

    bad = [m for m in args.modes if m not in MODES]
    if bad:
        raise SystemExit(f"unknown mode(s) {bad}; known: {list(MODES)}")
    spec = resolve_spec(args.spec or "Synthetic-v0")
    synthetic = spec.world == "synthetic"
    overrides: dict[str, Any] = {"seed": args.seed}
    if args.embedder:
        overrides["embedder"] = args.embedder
    for budget in ("max_turns", "max_tool_calls"):
        if getattr(args, budget) is not None:
            overrides[budget] = getattr(args, budget)
    overrides["tools"] = tuple(t for t in spec.tools if t != "python") if args.no_python else spec.tools

    def env_for(mode: str, metadata: dict[str, Any], **extra: Any) -> Any:
        options = dict(overrides) | extra
        if mode == "no-tools":
            options |= {"tools": ("submit_forecast",), "budgets": Budgets(max_tool_calls=0, max_turns=1)}
            options.pop("max_turns", None)
            options.pop("max_tool_calls", None)
        return make_env(
            spec,
            memory="notebook" if mode.startswith("notebook") else "none",
            run_metadata=metadata,
            **options,
        )

    probe = env_for("none", {})
    all_events = list(probe.events)
    events = _select(args, all_events, synthetic)
    if not events:
        raise SystemExit("no events selected")
    # training events: base rate and the honest agent's cue weights
    train_env = None
    if args.train_events:
        train_env = make_env(spec, memory="none", events=args.train_events, **overrides)
    elif synthetic:
        train_env = probe
    elif spec.events is not None and (spec.events.parent / "train.jsonl").exists():
        train_env = make_env(spec, memory="none", events=spec.events.parent / "train.jsonl", **overrides)
    if synthetic and not args.train_events:
        train_ids = synthetic_split([e.id for e in all_events], "train")
        overlap = sorted({e.id for e in events} & set(train_ids))
        if overlap and ("honest" in args.agents):
            print(f"note: {len(overlap)} evaluated events are also the honest agent's training events")
    else:
        train_ids = [e.id for e in train_env.events] if train_env is not None else []
    train_events = [e for e in (train_env.events if train_env is not None else []) if e.id in set(train_ids)]
    honest_model = None
    if "honest" in args.agents:
        from forecast_dojo.agents.honest import CueModel, fit_cue_model

        if train_env is None:
            raise SystemExit("the honest agent needs training events (--train-events)")
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
                args.seed, embedder=args.embedder or "minilm", train_events=spec.train_events
            ).oracle_path
        )
    factories = _agent_factories(args, honest_model)
    if args.step is not None:
        return _single_steps(args, factories, events, env_for)
    try:
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
    except StudyError as err:
        raise SystemExit(str(err)) from err
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


def _single_steps(
    args: argparse.Namespace, factories: dict[str, Any], events: list[Any], env_for: Any
) -> int:
    """Play one step of each selected event from a given notebook, for each agent and mode; print the records."""
    from forecast_dojo.evaluation.metrics import brier_loss
    from forecast_dojo.evaluation.study import evaluate_step

    notebook = args.notebook.read_text() if args.notebook else None
    for name, factory in factories.items():
        for mode in args.modes:
            if mode not in ("none", "notebook", "no-tools"):
                raise SystemExit("--step works with the modes none, notebook and no-tools")
            env = env_for(mode, {"agent": name, "mode": mode, "single_step": True})
            for event in events:
                if not 0 <= args.step < event.n_steps:
                    print(f"{event.id}: no step {args.step} (it has {event.n_steps})")
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
    """Write the report of one or more study folders."""
    from forecast_dojo.evaluation.report import write_report

    out = args.out or args.runs[0]
    report = write_report(args.runs, out, knowledge_cutoff=args.knowledge_cutoff, plots=not args.no_plots)
    print(report["table_text"])
    for line in report["comparison_lines"]:
        print(line)
    print(f"\nreport.md and report.json in {out}/")
    return 0
