"""The learning experiment in one resumable command (a thin script over ``forecast_dojo.training.experiment``).

    python training/experiment.py --out runs/experiment --results docs/results/learning.json

Teacher on the training events (both memory modes) -> export -> SFT of SmolLM2-135M -> evaluation of
the base and SFT models on the 20 held-out events in both memory modes -> a short GRPO run from the SFT
checkpoint -> its evaluation -> ``learning.json`` and a learning-curve figure. Every field of
``ExperimentArguments`` is a flag; ``--stages`` runs a subset. Each stage leaves a marker in
``<out>/stages/`` and is skipped on a rerun, so a stopped run continues where it stopped.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from forecast_dojo.training.experiment import STAGES, ExperimentArguments, run_experiment


@dataclass
class StageArguments:
    stages: list[str] = field(
        default_factory=lambda: list(STAGES), metadata={"help": f"a subset of {STAGES}"}
    )


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, run (or continue) the experiment and print its headline numbers."""
    parser = HfArgumentParser((ExperimentArguments, StageArguments))
    args, stage_args = parser.parse_args_into_dataclasses(args=argv)
    results = run_experiment(args, stages=stage_args.stages)
    for key in ("base", "sft", "grpo"):
        if key in results:
            entry = results[key]
            print(
                f"{key:5s} valid {entry.get('valid_rate', float('nan')):.2f}  Brier {entry.get('brier', float('nan')):.4f}"
                f"  minus uniform {entry.get('brier_minus_uniform')}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
