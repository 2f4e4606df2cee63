"""`--extra '{...}'` reaches SFTConfig / GRPOConfig from the command line (HfArgumentParser calls the field's type)."""

from __future__ import annotations

import pytest

from forecast_dojo.training.arguments import JsonObject

transformers = pytest.importorskip("transformers")
pytest.importorskip("trl")


@pytest.mark.parametrize("module", ["forecast_dojo.training.sft", "forecast_dojo.training.grpo"])
def test_extra_is_a_json_object_on_the_command_line(module):
    import importlib

    arguments = getattr(
        importlib.import_module(module), "SFTArguments" if module.endswith("sft") else "GRPOArguments"
    )
    parser = transformers.HfArgumentParser(arguments)
    (args,) = parser.parse_args_into_dataclasses(args=["--extra", '{"bf16": true, "weight_decay": 0.1}'])
    assert args.extra == {"bf16": True, "weight_decay": 0.1}
    (args,) = parser.parse_args_into_dataclasses(args=[])
    assert args.extra == {}
    with pytest.raises(SystemExit):  # argparse reports the bad value and exits
        parser.parse_args_into_dataclasses(args=["--extra", "[1, 2]"])


def test_extra_overrides_the_sft_defaults():
    from forecast_dojo.training.sft import SFTArguments, sft_config

    config = sft_config(SFTArguments(output_dir="unused", extra={"bf16": True, "logging_steps": 3}))
    assert config.bf16 is True and config.logging_steps == 3


def test_extra_overrides_the_grpo_defaults():
    from forecast_dojo.training.grpo import GRPOArguments, grpo_config

    config = grpo_config(GRPOArguments(output_dir="unused", extra={"bf16": True, "logging_steps": 3}))
    assert config.bf16 is True and config.logging_steps == 3


def test_json_object_errors_name_the_problem():
    assert JsonObject('{"a": 1}') == {"a": 1} and JsonObject({"b": 2}) == {"b": 2} and JsonObject() == {}
    with pytest.raises(ValueError, match="not JSON"):
        JsonObject("{bf16: true}")
    with pytest.raises(ValueError, match="JSON object"):
        JsonObject("3")
