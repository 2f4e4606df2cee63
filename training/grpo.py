"""GRPO on forecast steps with the environment as reward: the same command as ``forecast-dojo grpo``.

    python training/grpo.py --model runs/sft-model --output_dir runs/grpo-model --max_steps 20
    forecast-dojo run --agents hf:runs/grpo-model --max-events 4

Every field of ``GRPOArguments`` is a flag. Prompts are the forecast steps of the synthetic world's
training split (or ``--events``); ``--memory notebook --notebook_logs <teacher log>`` starts each step
from the notebook a teacher carried into it.
"""

from __future__ import annotations

import sys

from forecast_dojo.cli import main as forecast_dojo_main


def main(argv: list[str] | None = None) -> int:
    """Parse ``GRPOArguments`` from the command line, train, and print where the checkpoint is."""
    return forecast_dojo_main(["grpo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
