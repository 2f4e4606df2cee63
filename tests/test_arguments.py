"""Config dataclasses as flags: the export and server flags are generated from ExportConfig and OpenAIConfig."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from forecast_dojo.agents.openai_agent import OpenAIConfig
from forecast_dojo.arguments import (
    Flag,
    add_command,
    add_dataclass_arguments,
    at_least,
    dataclass_from_arguments,
    field_docs,
    iso_day,
    option,
)
from forecast_dojo.cli import build_parser, main
from forecast_dojo.errors import ConfigError
from forecast_dojo.evaluation.cli import SERVER_FIELDS, _server_config
from forecast_dojo.training.cli import EXPORT_FLAGS
from forecast_dojo.training.export import ExportConfig


@dataclass
class Options:
    """Options of something.

    Attributes:
        rate: how fast, in
            steps per second (``rate`` > 0).
        name: what to call it.
        keep: keep it.
        limit: the most (None: no limit).
        tags: labels.
    """

    rate: float = 1.5
    name: str = "x"
    keep: bool = True
    limit: int | None = 10
    tags: Sequence[str] = ()
    quiet: bool = False
    extra: dict[str, int] = field(default_factory=dict)


def test_field_docs_reads_the_attributes_section():
    docs = field_docs(Options)
    assert docs["rate"] == "how fast, in steps per second (``rate`` > 0)."
    assert docs["limit"] == "the most (None: no limit)." and "extra" not in docs


def parse(argv: list[str], **flags: Flag) -> Options:
    parser = argparse.ArgumentParser()
    only = ("rate", "name", "keep", "limit", "tags")
    add_dataclass_arguments(parser, Options, only=only, flags=flags)
    return dataclass_from_arguments(Options, parser.parse_args(argv), only=only, flags=flags)


def test_types_defaults_inversion_and_zero_for_none():
    flags = {"keep": Flag("--drop", invert=True), "limit": Flag(zero_is_none=True)}
    assert parse([], **flags) == Options()
    got = parse(["--rate", "2", "--name", "y", "--drop", "--limit", "0", "--tags", "a", "b"], **flags)
    assert got == Options(rate=2.0, name="y", keep=False, limit=None, tags=("a", "b"))
    with pytest.raises(SystemExit):
        parse(["--rate", "fast"])


def test_unsupported_fields_and_unknown_names_are_refused():
    with pytest.raises(ConfigError, match="extra"):
        add_dataclass_arguments(argparse.ArgumentParser(), Options)
    with pytest.raises(ConfigError, match="no field"):
        add_dataclass_arguments(argparse.ArgumentParser(), Options, only=["nope"])
    with pytest.raises(ConfigError, match="default True"):
        add_dataclass_arguments(
            argparse.ArgumentParser(), Options, only=["quiet"], flags={"quiet": Flag(invert=True)}
        )
    with pytest.raises(ConfigError, match="zero_is_none"):
        add_dataclass_arguments(
            argparse.ArgumentParser(), Options, only=["rate"], flags={"rate": Flag(zero_is_none=True)}
        )


def subcommand(name: str, *path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for part in (name, *path):
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[part]
    return parser


def test_export_flags_are_exportconfig_with_the_documented_names():
    parser = subcommand("export", "sft")
    flags = {o for a in parser._actions for o in a.option_strings}
    assert {"--keep-invalid", "--min-score", "--max-regret", "--score-rule", "--best-of", "--keep-duplicates",
            "--max-tokens", "--tokenizer", "--eval-events", "--assume-all-training"} <= flags  # fmt: skip
    dests = {a.dest for a in parser._actions}
    assert {f.name for f in dataclasses.fields(ExportConfig)} <= dests  # a new field is a new flag
    default = dataclass_from_arguments(
        ExportConfig, parser.parse_args(["log", "--out", "o"]), flags=EXPORT_FLAGS
    )
    assert default == ExportConfig()
    args = parser.parse_args(
        ["log", "--out", "o", "--keep-invalid", "--best-of", "0", "--max-tokens", "0", "--keep-duplicates",
         "--eval-events", "e1", "e2", "--score-rule", "log", "--min-score", "-0.3"]
    )  # fmt: skip
    assert dataclass_from_arguments(ExportConfig, args, flags=EXPORT_FLAGS) == ExportConfig(
        valid_only=False, best_per_step=None, max_tokens=None, deduplicate=False, eval_events=("e1", "e2"),
        score_rule="log", min_score=-0.3,
    )  # fmt: skip


def test_server_flags_are_openaiconfig_with_the_documented_names():
    parser = subcommand("run")
    args = parser.parse_args(["--base-url", "http://127.0.0.1:1/v1", "--model", "m"])
    config = _server_config(args)
    defaults = OpenAIConfig(base_url="u", model="m")
    for name in SERVER_FIELDS[2:]:
        assert getattr(config, name) == getattr(defaults, name), name
    args = parser.parse_args(
        ["--base-url", "u", "--model", "m", "--timeout", "5", "--retries", "1", "--concurrency", "3"]
    )
    config = _server_config(args)
    assert (config.timeout_s, config.max_retries, config.concurrency) == (5.0, 1, 3)


def test_a_bad_server_option_is_refused_before_anything_loads(capsys):
    argv = [
        "run",
        "--agents",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--max-tokens",
        "0",
    ]
    assert (
        main([*argv, "--spec", "Nope-v0"]) == 2
    )  # the server options are checked before the spec is looked up
    assert "max_tokens must be >= 1" in capsys.readouterr().err


def test_events_build_flags_are_buildconfig_fields():
    from forecast_dojo.events.build import BuildConfig
    from forecast_dojo.events.cli import BUILD_FIELDS, BUILD_FLAGS
    from forecast_dojo.events.split import parse_window

    parser = subcommand("events", "build")
    windows = [
        "--out",
        "o",
        "--train-window",
        "2024-01-01:2024-12-31",
        "--eval-window",
        "2025-01-01:2025-06-30",
    ]
    extra = {
        "train_window": parse_window("2024-01-01:2024-12-31"),
        "eval_window": parse_window("2025-01-01:2025-06-30"),
    }
    default = dataclass_from_arguments(
        BuildConfig, parser.parse_args(windows), only=BUILD_FIELDS, flags=BUILD_FLAGS, **extra
    )
    assert default == BuildConfig(**extra)
    args = parser.parse_args([*windows, "--keep-leaks", "--trim-into-eval", "--min-eval-steps", "5"])
    config = dataclass_from_arguments(BuildConfig, args, only=BUILD_FIELDS, flags=BUILD_FLAGS, **extra)
    assert (config.exclude_leaks, config.trim_into_eval, config.min_eval_steps) == (False, True, 5)


PROBES: list[int] = []


def probe_hardware() -> bool:
    PROBES.append(1)
    return True


@dataclass
class TrainerOptions:
    """Options of a trainer.

    Attributes:
        output_dir: where it goes.
        bf16: autocast.
        native: probed on the machine.
        data: inputs.
    """

    output_dir: str = "out"
    bf16: bool = True
    native: bool = field(default_factory=probe_hardware)
    data: list[str] = field(default_factory=list)


def test_trl_style_flags_and_defaults_computed_by_the_dataclass():
    PROBES.clear()
    parser = argparse.ArgumentParser()
    add_dataclass_arguments(parser, TrainerOptions, style="trl")
    assert PROBES == []  # building the parser called no default_factory function
    options = dataclass_from_arguments(TrainerOptions, parser.parse_args([]))
    assert options == TrainerOptions(output_dir="out", bf16=True, native=True, data=[]) and len(PROBES) == 1
    argv = ["--output-dir", "x", "--no_bf16", "--native", "false", "--data", "a", "b"]
    options = dataclass_from_arguments(TrainerOptions, parser.parse_args(argv))
    assert options == TrainerOptions(output_dir="x", bf16=False, native=False, data=["a", "b"])
    assert isinstance(options.data, list)
    assert (
        dataclass_from_arguments(TrainerOptions, parser.parse_args(["--bf16", "no", "--bf16"])).bf16 is True
    )
    with pytest.raises(ConfigError, match="style"):
        add_dataclass_arguments(argparse.ArgumentParser(), TrainerOptions, style="hf")


@dataclass(kw_only=True)
class Command:
    """A command's arguments, declared with ``option``."""

    paths: tuple[Path, ...] = option(positional=True, nargs="+", help="inputs")
    out: Path = option(help="where to write")
    modes: tuple[str, ...] = option(("a",), nargs="+", aliases=("--mode",), choices=("a", "b"))
    feeds: tuple[Path, ...] = option((), append=True)
    count: int = option(1, parse=at_least(1))
    day: str | None = option(None, parse=iso_day)


def test_option_fields_say_what_add_argument_would():
    parser = argparse.ArgumentParser()
    add_dataclass_arguments(parser, Command)
    args = parser.parse_args(["x", "y", "--out", "o", "--mode", "b", "a", "--feeds", "f", "--feeds", "g"])
    assert dataclass_from_arguments(Command, args) == Command(
        paths=(Path("x"), Path("y")), out=Path("o"), modes=("b", "a"), feeds=(Path("f"), Path("g"))
    )
    assert dataclass_from_arguments(Command, parser.parse_args(["x", "--out", "o"])).modes == ("a",)
    for argv in (
        ["--out", "o"],  # the positional needs a value
        ["x"],  # --out is required: the field has no default
        ["x", "--out", "o", "--modes"],  # nargs="+"
        ["x", "--out", "o", "--modes", "c"],  # choices
        ["x", "--out", "o", "--count", "0"],
        ["x", "--out", "o", "--day", "20240501"],
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)


@dataclass
class Plain:
    """A plain field without a default."""

    url: str


def test_a_plain_field_without_default_is_an_optional_flag():
    parser = argparse.ArgumentParser()
    add_dataclass_arguments(parser, Plain)
    assert parser.parse_args([]).url is None  # as the server's --base-url, needed by one agent only


@dataclass
class Listed:
    """Fields declared with ``option`` in the trl style.

    Attributes:
        tags: a list default.
        report_to: another spelling.
    """

    tags: list[str] = option(["a"])
    report_to: str = option("none", aliases=("--report",))


def test_an_option_list_default_is_built_with_the_parser_and_trl_style_keeps_aliases():
    parser = argparse.ArgumentParser()
    add_dataclass_arguments(parser, Listed, style="trl")
    assert parser.parse_args([]).tags == ["a"]  # option()'s copy of a list is no computed default
    args = parser.parse_args(["--report", "wandb"])
    assert dataclass_from_arguments(Listed, args) == Listed(tags=["a"], report_to="wandb")
    assert parser.parse_args(["--report-to", "x"]).report_to == "x"


def test_add_command_is_the_parser_its_flags_and_what_it_runs() -> None:
    @dataclass(kw_only=True)
    class Arguments:
        """A command's arguments.

        Attributes:
            count: how many
        """

        count: int = 3
        mode: str = "a"

    def run(args: argparse.Namespace) -> int:
        return args.count

    parser = argparse.ArgumentParser(prog="tool")
    commands = parser.add_subparsers(dest="command", required=True)
    group = add_command(commands, "group", help="a group", description="A group.")
    sub = group.add_subparsers(dest="sub", required=True)
    add_command(
        sub, "go", run, help="go somewhere", arguments=Arguments, flags={"mode": Flag(choices=("a", "b"))}
    )
    args = parser.parse_args(["group", "go", "--count", "5", "--mode", "b"])
    assert (args.func(args), args.mode) == (5, "b")
    defaults = parser.parse_args(["group", "go"])
    assert (defaults.count, defaults.mode) == (3, "a")
    with pytest.raises(SystemExit):
        parser.parse_args(["group", "go", "--mode", "c"])
    assert "go somewhere" in group.format_help() and "how many" in sub.choices["go"].format_help()
    assert sub.choices["go"].description is None and group.description == "A group."
