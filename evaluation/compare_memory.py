"""The memory study: memory-free vs memory-on (notebook) for any agent or endpoint, with notebook controls.

    python evaluation/compare_memory.py --agent honest                                # synthetic world
    python evaluation/compare_memory.py --agent openai --base_url http://127.0.0.1:8000/v1 --model NAME \
        --spec envs/forecastbench-wce.toml --concurrency 4

Thin over the library (``forecast-dojo run`` with the memory modes, then its report): the same folder
resumes when rerun, and ``report.md`` / ``report.json`` hold the paired notebook - none differences, the
controls (empty, stale, shuffled, and on the synthetic world oracle notebooks) and the research cost.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from transformers import HfArgumentParser

from forecast_dojo.cli import main as forecast_dojo


@dataclass
class CompareMemoryConfig:
    """Arguments of the memory study."""

    agent: str = field(
        default="honest", metadata={"help": "honest, evidence-oracle-lite, openai, hf:<path>, ..."}
    )
    spec: str | None = field(default=None, metadata={"help": "an env spec; default: the synthetic world"})
    base_url: str | None = field(default=None, metadata={"help": "OpenAI-compatible server (agent 'openai')"})
    model: str | None = field(default=None, metadata={"help": "model name on that server"})
    tool_mode: str = field(default="native", metadata={"help": "native or text tool calls"})
    controls: list[str] = field(
        default_factory=lambda: ["empty", "stale", "shuffled", "oracle"],
        metadata={"help": "notebook controls (oracle only on the synthetic world)"},
    )
    no_tools: bool = field(default=False, metadata={"help": "also run the no-tools mode"})
    max_events: int | None = field(default=None, metadata={"help": "only the first N events"})
    rollouts: int = 1
    concurrency: int = 1
    seed: int = 0
    embedder: str | None = field(
        default=None, metadata={"help": "synthetic world embedder (minilm, hashing)"}
    )
    out: str = "runs/compare-memory"
    overwrite: bool = False


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the study."""
    (config,) = HfArgumentParser(CompareMemoryConfig).parse_args_into_dataclasses(args=argv)
    controls = [c for c in config.controls if c != "oracle" or config.spec is None]
    modes = [
        "none",
        "notebook",
        *([f"notebook-{c}" for c in controls]),
        *(["no-tools"] if config.no_tools else []),
    ]
    argv_run = ["run", "--agents", config.agent, "--modes", *modes, "--rollouts", str(config.rollouts),
                "--concurrency", str(config.concurrency), "--seed", str(config.seed), "--out", config.out,
                "--tool-mode", config.tool_mode]  # fmt: skip
    for flag, value in (("--spec", config.spec), ("--base-url", config.base_url), ("--model", config.model),
                        ("--max-events", config.max_events), ("--embedder", config.embedder)):  # fmt: skip
        if value is not None:
            argv_run += [flag, str(value)]
    if config.overwrite:
        argv_run.append("--overwrite")
    return forecast_dojo(argv_run)


if __name__ == "__main__":
    sys.exit(main())
