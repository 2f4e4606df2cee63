"""Training on the environment: export logs as SFT data, fine-tune with TRL, GRPO with the env as reward.

Data flows one way: trajectory logs -> :mod:`forecast_dojo.training.export` (an SFT dataset) ->
:mod:`forecast_dojo.training.sft` (a checkpoint an agent plays); :mod:`forecast_dojo.training.grpo`
drives TRL's ``GRPOTrainer`` with the env's tools and its proper-score reward
(:mod:`forecast_dojo.training.rewards`). Heavy libraries (torch, TRL) load only when used.
"""

from forecast_dojo.agents.llm import (
    load_model,
    load_model_and_tokenizer,
    load_tokenizer,
    save_checkpoint,
)
from forecast_dojo.chat_template import TOOL_CHAT_TEMPLATE
from forecast_dojo.training.export import (
    ExportConfig,
    ExportError,
    ExportReport,
    build_sft_rows,
    export_sft,
    load_sft_dataset,
)

__all__ = [
    "TOOL_CHAT_TEMPLATE",
    "ExportConfig",
    "ExportError",
    "ExportReport",
    "build_sft_rows",
    "export_sft",
    "load_model",
    "load_model_and_tokenizer",
    "load_sft_dataset",
    "load_tokenizer",
    "save_checkpoint",
]
