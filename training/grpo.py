"""GRPO on forecast steps with the environment as reward (a thin script over ``forecast_dojo.training.grpo``).

    python training/grpo.py --model runs/sft-model --output_dir runs/grpo-model --max_steps 20
    forecast-dojo run --agents hf:runs/grpo-model --max-events 4

Every field of ``GRPOArguments`` is a flag. Prompts are the forecast steps of the synthetic world's
training split (or ``--events``); ``--memory notebook --notebook_logs <teacher log>`` starts each step
from the notebook a teacher carried into it.
"""

from __future__ import annotations

import sys

from transformers import HfArgumentParser

from forecast_dojo.training.grpo import GRPOArguments, train_grpo


def main(argv: list[str] | None = None) -> int:
    """Parse ``GRPOArguments`` from the command line, train, and print where the checkpoint is."""
    parser = HfArgumentParser(GRPOArguments)
    (args,) = parser.parse_args_into_dataclasses(args=argv)
    out = train_grpo(args)
    print(f"checkpoint: {out}  (play it: forecast-dojo run --agents hf:{out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
