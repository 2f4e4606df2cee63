"""Where a fine-tuned student departs from its compact teacher: document by document, on the same steps.

    forecast-dojo run --spec runs/experiment/spec.toml --agents honest --modes none --split eval --out runs/teacher-eval
    python evaluation/compare_verdicts.py --teacher runs/teacher-eval/honest-none \
        --student runs/experiment/eval/hf-sft-model-<hash>-none --json runs/verdicts.json

Thin over :func:`forecast_dojo.evaluation.verdicts.compare_verdicts`: prints whether the student's
searches returned the teacher's documents, how each document the teacher judged fared in the
student's final turn, and how often the student's ``submit_forecast(evidence=...)`` copied its own
verdicts; ``--json`` writes the same counts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.errors import DataError
from forecast_dojo.evaluation.verdicts import compare_verdicts


@dataclass
class CompareVerdictsConfig:
    """Arguments of the comparison."""

    teacher: str = field(metadata={"help": "the compact teacher's log (run directory or steps.jsonl)"})
    student: str = field(metadata={"help": "the student's log of the same events and memory mode"})
    json: str | None = field(default=None, metadata={"help": "also write the counts to this JSON file"})


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, compare the two logs and print the table."""
    (config,) = HfArgumentParser(CompareVerdictsConfig).parse_args_into_dataclasses(args=argv)
    try:
        comparison = compare_verdicts(config.teacher, config.student)
    except (DataError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(comparison.table())
    if config.json:
        write_json_atomic(config.json, comparison.to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
