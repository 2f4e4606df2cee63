"""``forecast-dojo run``: evaluate agents (memory-free and memory-on) against baselines; ``forecast-dojo world``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def register(subparsers: argparse._SubParsersAction) -> None:
    run = subparsers.add_parser(
        "run",
        help="evaluate agents on an environment (default: the embedded synthetic world)",
        description="Run agents through every event of an environment in each memory mode, log trajectories, "
        "and print proper scores with 95%% intervals next to the uniform, market and (synthetic) oracle baselines.",
    )
    run.add_argument(
        "--spec",
        type=Path,
        help="an environment spec file or name (forecast_dojo/envs/<name>.toml); default: the synthetic world",
    )
    run.add_argument("--seed", type=int, default=0, help="synthetic world seed and episode seeds (default 0)")
    run.add_argument("--embedder", default=None, help="synthetic world embedder: minilm (default) or hashing")
    run.add_argument(
        "--agents",
        nargs="+",
        default=["evidence", "evidence-lite"],
        help="agents to run (default: evidence evidence-lite)",
    )
    run.add_argument("--memory", nargs="+", default=["none", "notebook"], choices=["none", "notebook"])
    run.add_argument("--max-events", type=int, default=None, help="only the first N events (by id)")
    run.add_argument(
        "--out", type=Path, default=Path("runs/latest"), help="output folder (logs, rows, summary)"
    )
    run.add_argument("--no-python", action="store_true", help="disable the python tool")
    run.add_argument("--max-turns", type=int, help="turns per forecast step (default: the spec's budget)")
    run.add_argument("--max-tool-calls", type=int, help="tool calls per forecast step (default: the spec's)")
    run.set_defaults(func=run_command)

    world = subparsers.add_parser("world", help="build (or find cached) the embedded synthetic world")
    world.add_argument("--seed", type=int, default=0)
    world.add_argument("--embedder", default="minilm")
    world.set_defaults(func=world_command)


def world_command(args: argparse.Namespace) -> int:
    from forecast_dojo.synthetic import ensure_synthetic_world

    paths = ensure_synthetic_world(args.seed, embedder=args.embedder)
    print(json.dumps({k: str(v) for k, v in vars(paths).items()}, indent=2))
    return 0


def run_command(args: argparse.Namespace) -> int:
    from forecast_dojo.agents import AGENTS
    from forecast_dojo.evaluation.metrics import format_table, paired_difference, summarize
    from forecast_dojo.evaluation.runner import baseline_rows, run_episodes
    from forecast_dojo.registration import make, resolve_spec

    unknown = [a for a in args.agents if a not in AGENTS]
    if unknown:
        raise SystemExit(f"unknown agent(s) {unknown}; known: {sorted(AGENTS)}")
    spec = resolve_spec(args.spec or "Synthetic-v0")
    overrides: dict[str, Any] = {"seed": args.seed}
    if args.embedder:
        overrides["embedder"] = args.embedder
    for budget in ("max_turns", "max_tool_calls"):
        if getattr(args, budget) is not None:
            overrides[budget] = getattr(args, budget)
    if args.no_python:
        overrides["tools"] = tuple(t for t in spec.tools if t != "python")
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    events = None
    for memory in args.memory:
        for agent_name in args.agents:
            log_dir = args.out / f"{agent_name}-{memory}"
            if (log_dir / "steps.jsonl").exists():
                raise SystemExit(f"{log_dir} already holds a log; choose another --out")
            env = make(
                spec,
                memory=memory,
                log_dir=log_dir,
                run_metadata={"seed": args.seed, "agent": agent_name},
                **overrides,
            )
            events = sorted(env.events, key=lambda e: e.id)[: args.max_events]
            rows += run_episodes(env, AGENTS[agent_name], [e.id for e in events], seed=args.seed)
            env.close()
    assert events is not None
    oracle = None
    if spec.world == "synthetic":
        from forecast_dojo.synthetic import ensure_synthetic_world, load_oracle

        oracle = load_oracle(
            ensure_synthetic_world(args.seed, embedder=args.embedder or "minilm").oracle_path
        )
    rows += baseline_rows(events, oracle=oracle)
    table = summarize(rows)
    print()
    print(format_table(table))
    comparisons = []
    for agent_name in args.agents:
        if {"none", "notebook"} <= set(args.memory):
            comparisons.append(paired_difference(rows, (agent_name, "notebook"), (agent_name, "none")))
        if oracle is not None:
            for memory in args.memory:
                comparisons.append(paired_difference(rows, (agent_name, memory), ("oracle", "-")))
    if comparisons:
        print("\nPaired Brier differences (a - b; positive means a scored better):")
        for c in comparisons:
            print(
                f"  {c['a'][0]}/{c['a'][1]} - {c['b'][0]}/{c['b'][1]}: {c['mean']:+.4f} [{c['ci'][0]:+.4f}, {c['ci'][1]:+.4f}] over {c['steps']} steps"
            )
    with (args.out / "rows.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    (args.out / "summary.json").write_text(
        json.dumps({"table": table, "comparisons": comparisons}, indent=2, default=list)
    )
    from forecast_dojo.evaluation.plots import plot_run

    plot_run(rows, {e.id: e.outcome_index for e in events}, args.out / "scores.png")
    print(f"\nTrajectory logs, rows, summary and figure (scores.png) in {args.out}/")
    return 0
