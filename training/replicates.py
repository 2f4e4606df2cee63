"""Several runs of the learning experiment pooled (a thin script over ``forecast_dojo.training.replicates``).

    python training/replicates.py --runs docs/results/learning-run21.json docs/results/learning-run23.json
    python training/replicates.py --runs runs/a/learning.json runs/b/learning.json --mode notebook --json pooled.json
    python training/replicates.py --runs runs/a/learning.json runs/b/learning.json --against runs/c/learning.json

Each run's ``learning.json`` holds its model's Brier minus uniform per held-out event; the runs must
come from one world. Prints each run, the mean over runs with a 95 % interval over events and one over
runs and events (the recipe's training randomness included), and the arguments in which the runs differ;
with ``--against``, the runs of a second recipe the same way and the difference of the two, paired on events.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.errors import DataError
from forecast_dojo.training.replicates import load_replicates


@dataclass
class ReplicatesConfig:
    """Arguments of the pooling."""

    runs: list[str] = field(metadata={"help": "the runs' learning.json files, one per run"})
    against: list[str] = field(
        default_factory=list,
        metadata={"help": "runs of another recipe on the same world: pooled too, and runs minus against"},
    )
    model: str = field(default="sft", metadata={"help": "base, sft or grpo"})
    mode: str = field(default="none", metadata={"help": "memory mode: none (memory-free) or notebook"})
    n_boot: int = field(default=1000, metadata={"help": "bootstrap resamples"})
    json: str | None = field(default=None, metadata={"help": "also write the numbers to this JSON file"})


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, pool the runs and print the table."""
    (config,) = HfArgumentParser(ReplicatesConfig).parse_args_into_dataclasses(args=argv)
    try:
        replicates = load_replicates(
            config.runs, against=config.against, model=config.model, mode=config.mode, n_boot=config.n_boot
        )
    except DataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(replicates.table())
    if config.json:
        write_json_atomic(config.json, replicates.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
