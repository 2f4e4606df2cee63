"""``forecast-dojo export sft``, ``forecast-dojo sft`` and ``forecast-dojo grpo``: the training jobs.

``export sft`` turns trajectory logs into an SFT dataset (parquet) for TRL. ``sft`` and ``grpo`` take
every field of :class:`~forecast_dojo.training.sft.SFTArguments` /
:class:`~forecast_dojo.training.grpo.GRPOArguments` as a flag, spelled as the training scripts
(``training/sft.py``, ``training/grpo.py``, which run these commands) and ``trl sft`` spell them:
``--output_dir`` (or ``--output-dir``), ``--bf16 false`` or ``--no_bf16``, ``--extra '{"k": v}'``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_dojo.arguments import Flag, add_dataclass_arguments, dataclass_from_arguments, option
from forecast_dojo.training.arguments import JsonObject

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

# SFTArguments / GRPOArguments: the flags HfArgumentParser makes of them (style="trl"), plus choices.
SFT_FLAGS = {"extra": Flag(type=JsonObject)}
GRPO_FLAGS = {
    "extra": Flag(type=JsonObject),
    "memory": Flag(choices=("none", "notebook")),
    "rule": Flag(choices=("brier", "log", "spherical")),
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
    register_training(subparsers)


def register_training(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sft`` and ``grpo`` commands: every training-arguments field is a flag."""
    from forecast_dojo.training.grpo import GRPOArguments
    from forecast_dojo.training.sft import SFTArguments

    for name, cls, flags, func, text, description in (
        (
            "sft",
            SFTArguments,
            SFT_FLAGS,
            sft_command,
            "fine-tune a model on exported trajectories with TRL's SFTTrainer",
            "Supervised fine-tuning with TRL's SFTTrainer on export directories (forecast-dojo export sft) "
            "or trajectory logs (exported on the fly); saves a checkpoint that forecast-dojo run --agents hf:<dir> "
            "plays.",
        ),
        (
            "grpo",
            GRPOArguments,
            GRPO_FLAGS,
            grpo_command,
            "GRPO with TRL's GRPOTrainer, the environment as tools and reward",
            "GRPO on the forecast steps of a spec's training split (one prompt per step, the env's tools, "
            "the step's proper score as reward); saves a checkpoint that forecast-dojo run --agents hf:<dir> plays.",
        ),
    ):
        parser = subparsers.add_parser(
            name,
            help=text,
            description=f"{description} Every flag is a field of {cls.__name__}; python training/{name}.py "
            "takes the same flags.",
            formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        )
        add_dataclass_arguments(parser, cls, flags=flags, style="trl")
        parser.set_defaults(func=func)


def export_sft_command(args: argparse.Namespace) -> int:
    """Run the export and print what was kept and dropped."""
    from forecast_dojo.training.export import ExportConfig, export_sft

    config = dataclass_from_arguments(ExportConfig, args, flags=EXPORT_FLAGS)
    # an ExportError ends the command with one line (forecast_dojo.cli)
    export_sft(args.logs, args.out, config)
    return 0


def sft_arguments(args: argparse.Namespace) -> Any:
    """The :class:`~forecast_dojo.training.sft.SFTArguments` the ``sft`` flags describe."""
    from forecast_dojo.training.sft import SFTArguments

    return dataclass_from_arguments(SFTArguments, args, flags=SFT_FLAGS)


def grpo_arguments(args: argparse.Namespace) -> Any:
    """The :class:`~forecast_dojo.training.grpo.GRPOArguments` the ``grpo`` flags describe."""
    from forecast_dojo.training.grpo import GRPOArguments

    return dataclass_from_arguments(GRPOArguments, args, flags=GRPO_FLAGS)


def sft_command(args: argparse.Namespace) -> int:
    """Train with SFT and print where the checkpoint is."""
    from forecast_dojo.training.sft import train_sft

    out = train_sft(sft_arguments(args))
    print(f"checkpoint: {out}  (play it: forecast-dojo run --agents hf:{out})")
    return 0


def grpo_command(args: argparse.Namespace) -> int:
    """Train with GRPO and print where the checkpoint is."""
    from forecast_dojo.training.grpo import train_grpo

    out = train_grpo(grpo_arguments(args))
    print(f"checkpoint: {out}  (play it: forecast-dojo run --agents hf:{out})")
    return 0
