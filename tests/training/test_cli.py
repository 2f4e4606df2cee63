"""``forecast-dojo sft`` / ``grpo``: every training-arguments field is a flag, parsed as HfArgumentParser parses it."""

from __future__ import annotations

import dataclasses

import pytest

from forecast_dojo.cli import build_parser
from forecast_dojo.training.cli import grpo_arguments, sft_arguments
from forecast_dojo.training.grpo import GRPOArguments
from forecast_dojo.training.sft import SFTArguments

COMMANDS = {"sft": (SFTArguments, sft_arguments), "grpo": (GRPOArguments, grpo_arguments)}


def subparser(name: str):
    return build_parser()._subparsers._group_actions[0].choices[name]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_help_lists_every_field_with_its_default(name):
    cls, _ = COMMANDS[name]
    text = subparser(name).format_help()
    assert f"usage: forecast-dojo {name}" in text
    for field in dataclasses.fields(cls):
        assert f"--{field.name}" in text, field.name
    assert "(default: " in text and "``" not in text


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_flags_give_the_dataclass_defaults(name):
    cls, build = COMMANDS[name]
    assert build(subparser(name).parse_args([])) == cls()


SFT_ARGVS = [
    ["--model", "m", "--data", "a", "b", "--output_dir", "o", "--max_steps", "2", "--bf16", "false"],
    ["--bf16", "0", "--use_cpu", "--lora_rank", "16", "--learning_rate", "1e-4"],
    ["--bf16", "--gradient_checkpointing", "true", "--extra", '{"lr_scheduler_type": "cosine"}'],
]
GRPO_ARGVS = [
    ["--events", "syn-0000", "syn-0002", "--python", "false", "--num_generations", "2", "--use_cpu"],
    [
        "--python",
        "true",
        "--memory",
        "notebook",
        "--rule",
        "log",
        "--temperature",
        "0.7",
        "--embedder",
        "hashing",
    ],
    ["--spec", "SyntheticNotebook-v0", "--extra", '{"bf16": true}', "--max_completion_length", "8"],
]


@pytest.mark.parametrize(
    ("name", "argv"), [("sft", a) for a in SFT_ARGVS] + [("grpo", a) for a in GRPO_ARGVS]
)
def test_flags_parse_as_the_hf_argument_parser_parses_them(name, argv):
    transformers = pytest.importorskip("transformers")
    cls, build = COMMANDS[name]
    ours = build(subparser(name).parse_args(argv))
    (theirs,) = transformers.HfArgumentParser(cls).parse_args_into_dataclasses(args=argv)
    assert ours == theirs
    assert isinstance(ours.extra, dict) and all(
        isinstance(getattr(ours, f), list) for f in ("events", "notebook_logs") if hasattr(ours, f)
    )


def test_dashed_spellings_and_values():
    args = sft_arguments(
        subparser("sft").parse_args(["--output-dir", "o", "--max-steps", "3", "--use-cpu", "no"])
    )
    assert (args.output_dir, args.max_steps, args.use_cpu) == ("o", 3, False)
    assert args.bf16 == SFTArguments().bf16  # not given: computed for this machine
    assert isinstance(args.data, list)


@pytest.mark.parametrize(
    "argv", [["--bf16", "maybe"], ["--extra", "[1, 2]"], ["--extra", "{not json"], ["--max_steps", "two"]]
)
def test_bad_values_are_usage_errors(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        subparser("sft").parse_args(argv)
    assert exit_info.value.code == 2
    assert "error: argument" in capsys.readouterr().err


def test_grpo_rule_and_memory_are_checked_before_anything_loads(capsys):
    with pytest.raises(SystemExit):
        subparser("grpo").parse_args(["--rule", "accuracy"])
    assert "invalid choice" in capsys.readouterr().err


def test_an_optional_boolean_takes_a_bare_flag_too():
    parser = subparser("grpo")
    assert grpo_arguments(parser.parse_args(["--python"])).python is True
    assert grpo_arguments(parser.parse_args(["--python", "0"])).python is False
    assert grpo_arguments(parser.parse_args([])).python is None


def test_a_computed_boolean_default_can_be_switched_off():
    # SFTArguments.bf16 defaults to what the machine runs natively (computed when the run starts)
    parser = subparser("sft")
    assert sft_arguments(parser.parse_args(["--no_bf16"])).bf16 is False
    assert sft_arguments(parser.parse_args(["--bf16"])).bf16 is True
    assert sft_arguments(parser.parse_args([])).bf16 == SFTArguments().bf16
