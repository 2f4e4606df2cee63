"""``forecast-dojo export sft``: trajectory logs -> an SFT dataset (parquet) for TRL."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from forecast_dojo.arguments import Flag, add_dataclass_arguments, dataclass_from_arguments, option

# ExportConfig's fields are the flags (types, defaults, help from its docstring); these keep the
# documented flag names and readings.
EXPORT_FLAGS = {
    "valid_only": Flag("--keep-invalid", "keep records with invalid/missing forecasts", invert=True),
    "score_rule": Flag(choices=("brier", "log", "spherical")),
    "best_per_step": Flag("--best-of", "keep the k best records per step (0: keep all)", zero_is_none=True),
    "deduplicate": Flag(
        "--keep-duplicates", "keep records whose transcript repeats one already kept", invert=True
    ),
    "max_tokens": Flag(help="length budget per transcript (0: none)", zero_is_none=True),
}


@dataclass(kw_only=True)
class ExportSFTArguments:
    """The arguments of ``forecast-dojo export sft`` besides :class:`~forecast_dojo.training.export.ExportConfig`'s."""

    logs: tuple[Path, ...] = option(
        positional=True, nargs="+", help="run directories, steps.jsonl files or folders of runs"
    )
    out: Path = option(help="output directory (train.parquet, export.json)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``export`` command (subcommand ``sft``) to the ``forecast-dojo`` parser."""
    from forecast_dojo.training.export import ExportConfig

    export = subparsers.add_parser("export", help="export trajectory logs as training data")
    kinds = export.add_subparsers(dest="kind", required=True)
    sft = kinds.add_parser(
        "sft",
        help="logs -> a parquet SFT dataset (messages + tools + scores) that TRL's SFTTrainer reads",
        description="Export step records of trajectory logs as an SFT dataset. Evaluation events are refused; "
        "invalid forecasts, low scores, duplicates and all but the best record per (event, step, memory) are "
        "dropped; long tool results are shortened (never an assistant turn) to fit --max-tokens.",
    )
    add_dataclass_arguments(sft, ExportSFTArguments)
    add_dataclass_arguments(sft, ExportConfig, flags=EXPORT_FLAGS)
    sft.set_defaults(func=export_sft_command)


def export_sft_command(args: argparse.Namespace) -> int:
    """Run the export and print what was kept and dropped."""
    from forecast_dojo.training.export import ExportConfig, export_sft

    config = dataclass_from_arguments(ExportConfig, args, flags=EXPORT_FLAGS)
    # an ExportError ends the command with one line (forecast_dojo.cli)
    export_sft(args.logs, args.out, config)
    return 0
