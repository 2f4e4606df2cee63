"""How close a student is to the one-line "No report bears on the question." turn, on its teacher's steps.

    forecast-dojo run --spec runs/experiment/spec.toml --agents honest --modes none --split eval --out runs/teacher-eval
    python evaluation/gate_probe.py --model runs/experiment/sft-model --teacher runs/teacher-eval/honest-none \
        --json runs/gate.json

Thin over :func:`forecast_dojo.evaluation.gate.probe_no_bearing`: for each of the teacher's steps, the
student's probability (teacher-forced, float32, no generation) of opening its final turn with that
line; prints the mean and the count above one half for the steps where the teacher weighed a report
and for the rest. ``--json`` writes them with every step's probability.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.errors import DataError, InputNotFoundError


@dataclass
class GateProbeConfig:
    """Arguments of the probe."""

    model: str = field(metadata={"help": "the student: a checkpoint directory, an HF model id or 'smollm2'"})
    teacher: str = field(metadata={"help": "the compact teacher's log (run directory or steps.jsonl)"})
    limit: int | None = field(default=None, metadata={"help": "probe at most this many steps (the first)"})
    json: str | None = field(default=None, metadata={"help": "also write the summary and every probe here"})


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments, probe the teacher's steps with the student and print the summary."""
    (config,) = HfArgumentParser(GateProbeConfig).parse_args_into_dataclasses(args=argv)
    from forecast_dojo.agents.llm import load_model, load_tokenizer
    from forecast_dojo.evaluation.gate import probe_no_bearing, summarize_probes

    try:
        model, tokenizer = load_model(config.model).eval(), load_tokenizer(config.model)
        probes = probe_no_bearing(model, tokenizer, config.teacher, limit=config.limit)
    except (DataError, InputNotFoundError, FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    summary = summarize_probes(probes)
    for name, title in (
        ("weighed", "the teacher weighed a report"),
        ("not_weighed", "the teacher weighed none"),
    ):
        part = summary[name]
        mean = "-" if part["mean_p_no_bearing"] is None else f"{part['mean_p_no_bearing']:.3f}"
        print(f"{title}: {part['steps']} steps, mean P(no bearing) {mean}, above 0.5 in {part['above_half']}")
    if config.json:
        write_json_atomic(config.json, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
