"""The ``forecast-dojo`` console command: one subcommand per main job.

Each job lives in its own module that exposes ``register(subparsers)``; modules are imported only
to build the parser and import their heavy dependencies lazily, so ``--help`` stays fast.

An error the library raises on purpose (a :class:`~forecast_dojo.errors.ForecastDojoError`: an
unknown spec, events not built, a missing file, a bad argument) ends the command with one line on
stderr, ``forecast-dojo <command>: error: <message>``, and exit status 2 (the status argparse uses
for a usage error); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from forecast_dojo.errors import ForecastDojoError

ERROR_EXIT = 2

# subcommand -> module exposing ``register(subparsers)``
COMMAND_MODULES = (
    "forecast_dojo.evaluation.cli",  # run, world
    "forecast_dojo.corpus.cli",  # corpus build
    "forecast_dojo.events.cli",  # events build
    "forecast_dojo.training.cli",  # export sft
    "forecast_dojo.integrations.cli",  # serve
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


def error_line(command: str, err: BaseException) -> str:
    """The one line a failed command prints: ``forecast-dojo <command>: error: <message>`` (whitespace folded)."""
    message = " ".join(str(err).split()) or type(err).__name__
    return f"forecast-dojo {command}: error: {message}"


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (2 with one line on stderr for a ForecastDojoError)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ForecastDojoError as err:
        command = " ".join(
            str(part)
            for part in (
                args.command,
                getattr(args, "kind", None) or getattr(args, f"{args.command}_command", None),
            )
            if part
        )
        print(error_line(command, err), file=sys.stderr)
        return ERROR_EXIT


if __name__ == "__main__":
    sys.exit(main())
