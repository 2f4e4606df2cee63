"""Every subcommand's flags, listed: the flags generated from config dataclasses are the ones written by hand before.

``FLAGS`` was taken from the parser when its flags were still hand-written ``add_argument`` calls (and
checked equal, help texts included, after they became dataclass fields). A flag that disappears, is
renamed, or changes its default, type, choices or arity fails here; a new flag or subcommand does not
(add it to ``FLAGS`` to protect it too).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest

from forecast_dojo.arguments import dataclass_from_arguments
from forecast_dojo.cli import build_parser

# subcommand -> (option strings, dest, default, "required nargs=... choices=...|... type=... Action")
FLAGS: dict[str, list[tuple[str, str, str, str]]] = {
    "run": [
        ("--spec", "spec", "None", ""),
        ("--seed", "seed", "0", "type=int"),
        ("--embedder", "embedder", "None", ""),
        ("--agents", "agents", "['honest', 'evidence-oracle', 'evidence-oracle-lite']", "nargs=+"),
        ("--modes --memory", "modes", "['none', 'notebook']", "nargs=+"),
        ("--rollouts", "rollouts", "1", "type=integer >= 1"),
        ("--split", "split", "None", "choices=train|eval|all"),
        ("--event-ids", "event_ids", "None", "nargs=+"),
        ("--sample", "sample", "None", "type=integer >= 1"),
        ("--max-events", "max_events", "None", "type=integer >= 1"),
        ("--train-events", "train_events", "None", "type=Path"),
        ("--step", "step", "None", "type=integer >= 0"),
        ("--notebook", "notebook", "None", "type=Path"),
        ("--out", "out", "None", "type=Path"),
        ("--overwrite", "overwrite", "False", "StoreTrue"),
        ("--concurrency", "concurrency", "1", "type=integer >= 1"),
        ("--no-python", "no_python", "False", "StoreTrue"),
        ("--prompt", "prompt", "None", "choices=default|compact"),
        ("--max-turns", "max_turns", "None", "type=integer >= 1"),
        ("--max-tool-calls", "max_tool_calls", "None", "type=integer >= 0"),
        ("--knowledge-cutoff", "knowledge_cutoff", "None", "type=iso_day"),
        ("--base-url", "base_url", "None", ""),
        ("--model", "model", "None", ""),
        ("--api-key", "api_key", "None", ""),
        ("--temperature", "temperature", "0.0", "type=float"),
        ("--max-tokens", "max_tokens", "512", "type=int"),
        ("--timeout", "timeout_s", "120.0", "type=float"),
        ("--retries", "max_retries", "4", "type=int"),
        ("--tool-mode", "tool_mode", "'native'", "choices=native|text"),
        ("--local-dtype", "local_dtype", "'auto'", "choices=auto|float32|bfloat16"),
        ("--local-max-new-tokens", "local_max_new_tokens", "256", "type=integer >= 1"),
        ("--local-constrain-labels", "local_constrain_labels", "False", "StoreTrue"),
    ],
    "report": [
        ("runs", "runs", "None", "required nargs=+ type=Path"),
        ("--out", "out", "None", "type=Path"),
        ("--knowledge-cutoff", "knowledge_cutoff", "None", "type=iso_day"),
        ("--no-plots", "no_plots", "False", "StoreTrue"),
    ],
    "world": [
        ("--seed", "seed", "0", "type=integer >= 0"),
        ("--embedder", "embedder", "'minilm'", ""),
        ("--train-events", "train_events", "0", "type=integer >= 0"),
    ],
    "corpus build": [
        ("--source", "source", "None", "required choices=generic|warc|wikipedia"),
        ("--input", "input", "None", "required type=Path"),
        ("--out", "out", "None", "required type=Path"),
        ("--start", "start", "None", "type=calendar_day"),
        ("--end", "end", "None", "type=calendar_day"),
        ("--embedder", "embedder", "None", ""),
        ("--config", "config", "None", "type=Path"),
        ("--runner", "runner", "'single'", "choices=single|ray"),
        ("--ray-address", "ray_address", "None", ""),
        ("--ray-cpus", "ray_cpus", "None", "type=integer >= 1"),
        ("--embed-actors", "embed_actors", "1", "type=integer >= 1"),
        ("--dense-index", "dense_index", "'auto'", "choices=auto|exact|ivf-flat|ivf-sq8|ivf-pq|none"),
        ("--no-bm25", "no_bm25", "False", "StoreTrue"),
        ("--overwrite", "overwrite", "False", "StoreTrue"),
        ("--no-progress", "no_progress", "False", "StoreTrue"),
        ("--strict", "strict", "False", "StoreTrue"),
    ],
    "corpus verify": [
        ("dir", "dir", "None", "required type=Path"),
        ("--no-progress", "no_progress", "False", "StoreTrue"),
    ],
    "corpus migrate": [
        ("dir", "dir", "None", "required type=Path"),
        ("--no-progress", "no_progress", "False", "StoreTrue"),
    ],
    "events build": [
        ("--forecastbench", "forecastbench", "None", "type=Path"),
        ("--include-data-sources", "include_data_sources", "False", "StoreTrue"),
        ("--polymarket", "polymarket", "[]", "type=Path Append"),
        ("--corpus", "corpus", "None", "type=Path"),
        ("--out", "out", "None", "required type=Path"),
        ("--train-window", "train_window", "None", "required"),
        ("--eval-window", "eval_window", "None", "required"),
        ("--config", "config", "None", "type=Path"),
        ("--seed", "seed", "None", "type=int"),
        ("--min-eval-steps", "min_eval_steps", "3", "type=int"),
        ("--keep-leaks", "exclude_leaks", "True", "StoreFalse"),
        ("--trim-into-eval", "trim_into_eval", "False", "StoreTrue"),
        ("--outcome-rate-gap", "outcome_rate_gap", "0.1", "type=float"),
        ("--leakage-labels", "leakage_labels", "[]", "type=Path Append"),
        ("--judge-base-url", "judge_base_url", "None", ""),
        ("--judge-model", "judge_model", "None", ""),
        ("--judge-scope", "judge_scope", "'flags'", "choices=flags|matches"),
        ("--judge-cache", "judge_cache", "None", "type=Path"),
        ("--overwrite", "overwrite", "False", "StoreTrue"),
        ("--strict", "strict", "False", "StoreTrue"),
        ("--no-progress", "no_progress", "False", "StoreTrue"),
    ],
    "events generate": [
        ("--corpus", "corpus", "None", "required type=Path"),
        ("--base-url", "base_url", "None", "required"),
        ("--model", "model", "None", "required"),
        ("--api-key", "api_key", "None", ""),
        ("--start", "start", "None", "required type=calendar_day"),
        ("--end", "end", "None", "required type=calendar_day"),
        ("--out", "out", "None", "required type=Path"),
        ("--train-window", "train_window", "None", ""),
        ("--eval-window", "eval_window", "None", ""),
        ("--window-days", "window_days", "7", "type=int"),
        ("--questions-per-cluster", "questions_per_cluster", "2", "type=int"),
        ("--resolve-days", "resolve_days", "30", "type=int"),
        ("--min-eval-steps", "min_eval_steps", "1", "type=int"),
        ("--overwrite", "overwrite", "False", "StoreTrue"),
        ("--no-progress", "no_progress", "False", "StoreTrue"),
    ],
    "export sft": [
        ("logs", "logs", "None", "required nargs=+ type=Path"),
        ("--out", "out", "None", "required type=Path"),
        ("--keep-invalid", "valid_only", "True", "StoreFalse"),
        ("--min-score", "min_score", "None", "type=float"),
        ("--max-regret", "max_regret", "None", "type=float"),
        ("--score-rule", "score_rule", "'brier'", "choices=brier|log|spherical"),
        ("--best-of", "best_per_step", "1", "type=int"),
        ("--keep-duplicates", "deduplicate", "True", "StoreFalse"),
        ("--max-tokens", "max_tokens", "2048", "type=int"),
        ("--tokenizer", "tokenizer", "'smollm2'", ""),
        ("--eval-events", "eval_events", "[]", "nargs=*"),
        ("--assume-all-training", "assume_all_training", "False", "StoreTrue"),
    ],
    "sft": [
        ("--model", "model", "'smollm2'", ""),
        ("--data", "data", "[]", "nargs=*"),
        ("--output_dir --output-dir", "output_dir", "'sft-out'", ""),
        ("--max_steps --max-steps", "max_steps", "-1", "type=int"),
        ("--num_train_epochs --num-train-epochs", "num_train_epochs", "1.0", "type=float"),
        (
            "--per_device_train_batch_size --per-device-train-batch-size",
            "per_device_train_batch_size",
            "1",
            "type=int",
        ),
        (
            "--gradient_accumulation_steps --gradient-accumulation-steps",
            "gradient_accumulation_steps",
            "4",
            "type=int",
        ),
        ("--learning_rate --learning-rate", "learning_rate", "5e-05", "type=float"),
        ("--warmup_ratio --warmup-ratio", "warmup_ratio", "0.05", "type=float"),
        ("--max_length --max-length", "max_length", "1024", "type=int"),
        ("--bf16", "bf16", "computed when the run starts", "nargs=? type=parse_bool"),
        ("--no_bf16", "bf16", "'==SUPPRESS=='", "StoreFalse"),
        (
            "--gradient_checkpointing --gradient-checkpointing",
            "gradient_checkpointing",
            "True",
            "nargs=? type=parse_bool",
        ),
        ("--lora_rank --lora-rank", "lora_rank", "0", "type=int"),
        ("--lora_alpha --lora-alpha", "lora_alpha", "32", "type=int"),
        ("--lora_dropout --lora-dropout", "lora_dropout", "0.05", "type=float"),
        ("--seed", "seed", "0", "type=int"),
        ("--logging_steps --logging-steps", "logging_steps", "1", "type=int"),
        ("--use_cpu --use-cpu", "use_cpu", "False", "nargs=? type=parse_bool"),
        ("--extra", "extra", "{}", "type=JsonObject"),
    ],
    "grpo": [
        ("--model", "model", "'smollm2'", ""),
        ("--spec", "spec", "'Synthetic-v0'", ""),
        ("--output_dir --output-dir", "output_dir", "'grpo-out'", ""),
        ("--memory", "memory", "'none'", "choices=none|notebook"),
        ("--prompt", "prompt", "''", ""),
        ("--events", "events", "[]", "nargs=*"),
        ("--notebook_logs --notebook-logs", "notebook_logs", "[]", "nargs=*"),
        ("--max_steps --max-steps", "max_steps", "10", "type=int"),
        ("--num_generations --num-generations", "num_generations", "4", "type=int"),
        (
            "--per_device_train_batch_size --per-device-train-batch-size",
            "per_device_train_batch_size",
            "4",
            "type=int",
        ),
        ("--max_completion_length --max-completion-length", "max_completion_length", "512", "type=int"),
        (
            "--max_tool_calling_iterations --max-tool-calling-iterations",
            "max_tool_calling_iterations",
            "4",
            "type=int",
        ),
        ("--learning_rate --learning-rate", "learning_rate", "1e-06", "type=float"),
        ("--temperature", "temperature", "1.0", "type=float"),
        ("--rule", "rule", "'brier'", "choices=brier|log|spherical"),
        ("--invalid_penalty --invalid-penalty", "invalid_penalty", "0.25", "type=float"),
        ("--missing_penalty --missing-penalty", "missing_penalty", "0.5", "type=float"),
        ("--python", "python", "None", "nargs=? type=parse_bool"),
        ("--embedder", "embedder", "''", ""),
        ("--seed", "seed", "0", "type=int"),
        ("--use_vllm --use-vllm", "use_vllm", "False", "nargs=? type=parse_bool"),
        ("--use_cpu --use-cpu", "use_cpu", "False", "nargs=? type=parse_bool"),
        ("--extra", "extra", "{}", "type=JsonObject"),
    ],
}


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every (nested) subcommand's parser by its words, e.g. ``"corpus build"``."""
    found = {" ".join(path): parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= subcommands(sub, (*path, name))
    return found


def describe(action: argparse.Action) -> tuple[str, str, str, str]:
    """An action as a ``FLAGS`` row."""
    words = []
    if action.required:
        words.append("required")
    if action.nargs:
        words.append(f"nargs={action.nargs}")
    if action.choices:
        words.append("choices=" + "|".join(action.choices))
    type_name = getattr(action.type, "__name__", None)
    if type_name not in (None, "str"):
        words.append(f"type={type_name}")
    if type(action).__name__ != "_StoreAction":
        words.append(type(action).__name__.strip("_").replace("Action", ""))
    names = " ".join(action.option_strings) or action.dest
    return (names, action.dest, repr(action.default), " ".join(words))


@pytest.mark.parametrize("command", sorted(FLAGS))
def test_no_flag_disappears_or_changes(command):
    parser = subcommands(build_parser())[command]
    now = {row[0]: row for row in map(describe, parser._actions) if row[1] != "help"}
    for row in FLAGS[command]:
        assert row[0] in now, f"{command}: flag {row[0]} disappeared"
        assert now[row[0]] == row, f"{command}: flag {row[0]} changed"
    order = [name for name in now if name in {row[0] for row in FLAGS[command]}]
    assert order == [row[0] for row in FLAGS[command]], "the --help order changed"


def test_no_hand_written_flags_are_left():
    """Each subcommand's flags come from dataclasses: every dest is a field of one of its config dataclasses."""
    from forecast_dojo.agents.openai_agent import OpenAIConfig
    from forecast_dojo.corpus.cli import CorpusBuildArguments, CorpusCheckArguments
    from forecast_dojo.evaluation.cli import ReportArguments, RunArguments, WorldArguments
    from forecast_dojo.events.build import BuildConfig
    from forecast_dojo.events.cli import EventsBuildArguments, EventsGenerateArguments
    from forecast_dojo.events.generate import GenerateConfig
    from forecast_dojo.training.cli import ExportSFTArguments
    from forecast_dojo.training.export import ExportConfig
    from forecast_dojo.training.grpo import GRPOArguments
    from forecast_dojo.training.sft import SFTArguments

    sources = {
        "run": (RunArguments, OpenAIConfig),
        "report": (ReportArguments,),
        "world": (WorldArguments,),
        "corpus build": (CorpusBuildArguments,),
        "corpus verify": (CorpusCheckArguments,),
        "corpus migrate": (CorpusCheckArguments,),
        "events build": (EventsBuildArguments, BuildConfig),
        "events generate": (EventsGenerateArguments, GenerateConfig),
        "export sft": (ExportSFTArguments, ExportConfig),
        "sft": (SFTArguments,),
        "grpo": (GRPOArguments,),
    }
    parsers = subcommands(build_parser())
    for command, classes in sources.items():
        fields = {f.name for cls in classes for f in dataclasses.fields(cls)}
        dests = {a.dest for a in parsers[command]._actions if a.dest != "help"}
        assert dests <= fields, f"{command}: flags not from a dataclass: {sorted(dests - fields)}"


@pytest.mark.parametrize(
    ("words", "argv", "cls", "only"),
    [
        ("world", [], "WorldArguments", None),
        ("report", ["study"], "ReportArguments", None),
        ("run", [], "RunArguments", None),
        ("corpus verify", ["c"], "CorpusCheckArguments", None),
        ("corpus build", ["--source", "generic", "--input", "i", "--out", "o"], "CorpusBuildArguments", None),
    ],
)
def test_the_parsed_flags_build_the_dataclass_back(words, argv, cls, only):
    """Parsing no optional flag gives the dataclass's defaults (the flags and the fields agree)."""
    import forecast_dojo.corpus.cli as corpus_cli
    import forecast_dojo.evaluation.cli as evaluation_cli

    arguments = getattr(evaluation_cli, cls, None) or getattr(corpus_cli, cls)
    args = build_parser().parse_args([*words.split(), *argv])
    built = dataclass_from_arguments(arguments, args, only=only)
    required = {
        f.name: getattr(built, f.name)
        for f in dataclasses.fields(arguments)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert built == arguments(**required)
