"""Supervised fine-tuning on exported trajectories (a thin script over ``forecast_dojo.training.sft``).

    python training/sft.py --data runs/sft-data --output_dir runs/sft-model --max_steps 100
    forecast-dojo run --agents hf:runs/sft-model --max-events 4

Every field of ``SFTArguments`` is a flag (``--model``, ``--lora_rank``, ``--bf16``...); ``--data``
takes export directories (``forecast-dojo export sft``) or trajectory log directories.
"""

from __future__ import annotations

import sys

from transformers import HfArgumentParser

from forecast_dojo.training.sft import SFTArguments, train_sft


def main(argv: list[str] | None = None) -> int:
    """Parse ``SFTArguments`` from the command line, train, and print where the checkpoint is."""
    parser = HfArgumentParser(SFTArguments)
    (args,) = parser.parse_args_into_dataclasses(args=argv)
    out = train_sft(args)
    print(f"checkpoint: {out}  (play it: forecast-dojo run --agents hf:{out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
