"""The ``forecast-dojo`` console command: one subcommand per main job.

Each job lives in its own module that exposes ``register(subparsers)``; modules are imported only
to build the parser and import their heavy dependencies lazily, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# subcommand -> module exposing ``register(subparsers)``
COMMAND_MODULES = (
    "forecast_dojo.evaluation.cli",  # run, world
    "forecast_dojo.corpus.cli",  # corpus build
    "forecast_dojo.events.cli",  # events build
    "forecast_dojo.training.cli",  # export sft
)


def build_parser() -> argparse.ArgumentParser:
    """The ``forecast-dojo`` parser with one subcommand per installed job module."""
    parser = argparse.ArgumentParser(prog="forecast-dojo", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name is not None and (name == err.name or name.startswith(err.name + ".")):
                # that job (or its package) is not part of this installation
                continue
            raise
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
