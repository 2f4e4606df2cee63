"""Supervised fine-tuning on exported trajectories: the same command as ``forecast-dojo sft``.

    python training/sft.py --data runs/sft-data --output_dir runs/sft-model --max_steps 100
    forecast-dojo run --agents hf:runs/sft-model --max-events 4

Every field of ``SFTArguments`` is a flag (``--model``, ``--lora_rank``, ``--bf16 false``...); ``--data``
takes export directories (``forecast-dojo export sft``) or trajectory log directories.
"""

from __future__ import annotations

import sys

from forecast_dojo.cli import main as forecast_dojo_main


def main(argv: list[str] | None = None) -> int:
    """Parse ``SFTArguments`` from the command line, train, and print where the checkpoint is."""
    return forecast_dojo_main(["sft", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
