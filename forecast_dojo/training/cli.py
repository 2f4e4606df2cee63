"""``forecast-dojo export sft``: trajectory logs -> an SFT dataset (parquet) for TRL."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` command (subcommand ``sft``) to the ``forecast-dojo`` parser."""
    export = subparsers.add_parser("export", help="export trajectory logs as training data")
    kinds = export.add_subparsers(dest="kind", required=True)
    sft = kinds.add_parser(
        "sft",
        help="logs -> a parquet SFT dataset (messages + tools + scores) that TRL's SFTTrainer reads",
        description="Export step records of trajectory logs as an SFT dataset. Evaluation events are refused; "
        "invalid forecasts, low scores, duplicates and all but the best record per (event, step, memory) are "
        "dropped; long tool results are shortened (never an assistant turn) to fit --max-tokens.",
    )
    sft.add_argument(
        "logs", nargs="+", type=Path, help="run directories, steps.jsonl files or folders of runs"
    )
    sft.add_argument("--out", type=Path, required=True, help="output directory (train.parquet, export.json)")
    sft.add_argument(
        "--keep-invalid", action="store_true", help="keep records with invalid/missing forecasts"
    )
    sft.add_argument("--min-score", type=float, help="drop records scoring below this (higher is better)")
    sft.add_argument("--max-regret", type=float, help="drop records whose regret vs the oracle exceeds this")
    sft.add_argument("--score-rule", default="brier", choices=["brier", "log", "spherical"])
    sft.add_argument("--best-of", type=int, default=1, help="keep the k best records per step (0: keep all)")
    sft.add_argument("--keep-duplicates", action="store_true")
    sft.add_argument("--max-tokens", type=int, default=2048, help="length budget per transcript (0: none)")
    sft.add_argument(
        "--tokenizer", default="smollm2", help="tokenizer measuring length (name, HF id or path)"
    )
    sft.add_argument(
        "--eval-events", nargs="*", default=[], help="event ids or event JSONL files to refuse (evaluation)"
    )
    sft.add_argument(
        "--assume-all-training",
        action="store_true",
        help="export logs whose split is unknown, treating every event as training",
    )
    sft.set_defaults(func=export_sft_command)


def export_sft_command(args: argparse.Namespace) -> int:
    """Run the export and print what was kept and dropped."""
    from forecast_dojo.training.export import ExportConfig, export_sft

    config = ExportConfig(
        valid_only=not args.keep_invalid,
        min_score=args.min_score,
        max_regret=args.max_regret,
        score_rule=args.score_rule,
        best_per_step=args.best_of or None,
        deduplicate=not args.keep_duplicates,
        max_tokens=args.max_tokens or None,
        tokenizer=args.tokenizer,
        eval_events=tuple(args.eval_events),
        assume_all_training=args.assume_all_training,
    )
    export_sft(
        args.logs, args.out, config
    )  # an ExportError ends the command with one line (forecast_dojo.cli)
    return 0
