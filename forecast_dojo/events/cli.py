"""``forecast-dojo events build``: real resolved questions -> train/eval events files and a report.

Heavy work (reading sources, loading the corpus) happens only when the command runs.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from forecast_dojo.arguments import (
    Flag,
    add_command,
    add_dataclass_arguments,
    calendar_day,
    dataclass_from_arguments,
    option,
)
from forecast_dojo.paths import DATA_ENV, default_data_root, missing_data_message

# BuildConfig's own options are flags (types and defaults from the dataclass); windows and sections
# come from --train-window/--eval-window and --config.
BUILD_FIELDS = ("min_eval_steps", "exclude_leaks", "trim_into_eval", "outcome_rate_gap")
BUILD_FLAGS = {
    "min_eval_steps": Flag(help="evaluation events need at least this many steps"),
    "exclude_leaks": Flag("--keep-leaks", "list flagged documents but do not exclude them", invert=True),
    "trim_into_eval": Flag(
        help="an event that closes in the evaluation window but opened before it keeps only its forecast "
        "dates inside the window (if at least --min-eval-steps) and goes to evaluation"
    ),
    "outcome_rate_gap": Flag(
        help="the report notes when the train and eval outcome rates (share of Yes) differ by more than this"
    ),
}


@dataclass(kw_only=True)
class EventsBuildArguments:
    """The flags of ``forecast-dojo events build`` besides :class:`~forecast_dojo.events.build.BuildConfig`'s own."""

    forecastbench: Path | None = option(
        None,
        help=f"ForecastBench folder (default when no source is given: ${DATA_ENV}/forecastbench, else "
        "../shared/data/forecastbench from the working directory)",
    )
    include_data_sources: bool = option(
        False, help="also import ForecastBench data-source questions (acled, fred, ...)"
    )
    polymarket: tuple[Path, ...] = option((), append=True, help="Polymarket export folder (repeatable)")
    corpus: Path | None = option(
        None, help="corpus directory (evidence filter, schedule document counts, leakage screen)"
    )
    out: Path = option(help="output directory")
    train_window: str = option(help="START:END ISO dates, inclusive, e.g. 2024-01-01:2025-10-31")
    eval_window: str = option(help="START:END ISO dates, inclusive, e.g. 2025-11-01:2026-03-28")
    config: Path | None = option(
        None,
        help="TOML with sections [selection], [schedule], [leakage] overriding defaults",
    )
    seed: int | None = option(None, help="schedule tie-breaking seed (default 0)")
    # BuildConfig's flags stand here
    leakage_labels: tuple[Path, ...] = option(
        (),
        append=True,
        help="labelled (question, document) pairs, JSON lines (repeatable): the build measures the leakage "
        "screen's precision and recall on them (e.g. tests/events/fixtures/leakage_labels_unseen.jsonl)",
    )
    judge_base_url: str | None = option(
        None,
        help="an OpenAI-compatible /v1 URL: an LLM judges the leakage screen's documents (with --judge-model)",
    )
    judge_model: str | None = option(None, help="the judge's model name (with --judge-base-url)")
    judge_scope: str = option(
        "flags",
        choices=("flags", "matches"),
        help="flags: the judge confirms the lexical flags; matches: it reads every matching document",
    )
    judge_cache: Path | None = option(
        None,
        help="folder of cached judge prompts and replies (default: $FORECAST_DOJO_CACHE/leakage-judge, else ~/.cache/forecast_dojo/leakage-judge)",
    )
    overwrite: bool = option(False, help="replace existing output files")
    strict: bool = option(
        False,
        help="fail (exit 3, nothing written) instead of warning when the build keeps under 10 % of its input",
    )
    no_progress: bool = option(False, help="no progress bars")


# the flags in their order: the sources and windows, BuildConfig's own, then the screen's measures and how to write
LATER_FIELDS = (
    "leakage_labels",
    "judge_base_url",
    "judge_model",
    "judge_scope",
    "judge_cache",
    "overwrite",
    "strict",
    "no_progress",
)
INPUT_FIELDS = tuple(f.name for f in dataclasses.fields(EventsBuildArguments) if f.name not in LATER_FIELDS)


@dataclass(kw_only=True)
class EventsGenerateArguments:
    """The flags of ``forecast-dojo events generate``."""

    corpus: Path = option(help="corpus directory")
    base_url: str = option(help="the server's /v1 URL, e.g. http://127.0.0.1:8000/v1")
    model: str = option(help="the model name the server expects")
    api_key: str | None = option(None, help="API key (default: $OPENAI_API_KEY; local servers take any)")
    # GenerateConfig's start and end stand here
    out: Path = option(help="output directory (events, reports, cache)")
    train_window: str | None = option(
        None, help="START:END (default: the first 70 % of --start..--end + the resolution span)"
    )
    eval_window: str | None = option(None, help="START:END (default: the rest)")
    # GenerateConfig's window_days, questions_per_cluster and resolve_days stand here
    min_eval_steps: int = option(1, help="evaluation events need this many steps")
    overwrite: bool = option(False, help="replace existing output files (the cache stays)")
    no_progress: bool = option(False, help="no progress bars")


# GenerateConfig's fields are flags (types and defaults from the dataclass), in --help order among the command's own.
GENERATE_FLAGS = {
    "start": Flag(help="first document day, YYYY-MM-DD", type=calendar_day, required=True),
    "end": Flag(help="last document day, YYYY-MM-DD", type=calendar_day, required=True),
    "window_days": Flag(help="days per clustering window"),
    "questions_per_cluster": Flag(help="questions asked per cluster"),
    "resolve_days": Flag(help="days after the resolution date searched"),
}
GENERATE_LAYOUT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("arguments", ("corpus", "base_url", "model", "api_key")),
    ("config", ("start", "end")),
    ("arguments", ("out", "train_window", "eval_window")),
    ("config", ("window_days", "questions_per_cluster", "resolve_days")),
    ("arguments", ("min_eval_steps", "overwrite", "no_progress")),
)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``events`` command group (``events build``, ``events generate``) to the top-level parser."""
    from forecast_dojo.events.build import BuildConfig

    events = add_command(
        subparsers, "events", help="build replayable events", description="Build replayable events."
    )
    commands = events.add_subparsers(dest="events_command", required=True)
    build = add_command(
        commands,
        "build",
        run_build,
        help="import, select, schedule, screen and split real events",
        description=(
            "Import resolved questions (ForecastBench and/or Polymarket exports), keep the ones worth replaying, "
            "give each a forecast-date schedule, screen visible documents for leaked outcomes, split by time and "
            "write train.jsonl, eval.jsonl, all.jsonl, report.json and report.md into --out."
        ),
    )
    add_dataclass_arguments(build, EventsBuildArguments, only=INPUT_FIELDS)
    add_dataclass_arguments(build, BuildConfig, only=BUILD_FIELDS, flags=BUILD_FLAGS)
    add_dataclass_arguments(build, EventsBuildArguments, only=LATER_FIELDS)
    _register_generate(commands)


def _register_generate(commands: argparse._SubParsersAction) -> None:
    """``events generate``: questions written by a model from dated document clusters (FABench)."""
    generate = add_command(
        commands,
        "generate",
        run_generate,
        help="write questions from the corpus with an OpenAI-compatible model, resolve them, build events",
        description=(
            "Cluster the corpus's documents by date and names, have an OpenAI-compatible model propose questions "
            "(resolution criteria, resolution date, supporting documents), resolve each from documents dated after "
            "its resolution date only, then select, schedule, screen and split them like imported events. Every "
            "prompt and reply is cached in --out (a rerun sends nothing) and logged in llm-log.jsonl."
        ),
    )
    from forecast_dojo.events.generate import GenerateConfig

    for source, names in GENERATE_LAYOUT:
        if source == "config":
            add_dataclass_arguments(generate, GenerateConfig, only=names, flags=GENERATE_FLAGS)
        else:
            add_dataclass_arguments(generate, EventsGenerateArguments, only=names)


def run_generate(args: argparse.Namespace) -> int:
    """Generate, resolve and build events from a corpus; prints the summary, returns the exit status."""
    import json
    import sys
    from datetime import timedelta

    from forecast_dojo.corpus.store import Corpus, CorpusError
    from forecast_dojo.errors import ConfigError, OutputExistsError
    from forecast_dojo.events.build import BuildConfig, build_events, render_summary, write_outputs
    from forecast_dojo.events.generate import (
        GenerateConfig,
        ReplyCache,
        generate_events,
        openai_completion,
        render_generate_markdown,
    )
    from forecast_dojo.events.split import SplitError, parse_window

    progress = not args.no_progress
    try:
        config = dataclass_from_arguments(GenerateConfig, args, only=GENERATE_FLAGS, flags=GENERATE_FLAGS)
        last = args.end + timedelta(days=args.resolve_days)
        middle = args.start + timedelta(days=int(0.7 * (last - args.start).days))
        train = parse_window(args.train_window or f"{args.start}:{middle}")
        evaluation = parse_window(args.eval_window or f"{middle + timedelta(days=1)}:{last}")
        corpus = Corpus.load(args.corpus)
        args.out.mkdir(parents=True, exist_ok=True)
        cache = ReplyCache(
            args.out, args.model, openai_completion(args.base_url, args.model, api_key=args.api_key)
        )
        imported, report = generate_events(corpus, config, cache, progress=progress)
        build = BuildConfig(train_window=train, eval_window=evaluation, min_eval_steps=args.min_eval_steps)
        output = build_events([imported], build, corpus=corpus, progress=progress)
        write_outputs(output, args.out, overwrite=args.overwrite)
    except (ConfigError, SplitError, CorpusError, FileNotFoundError, OutputExistsError) as err:
        print(f"events generate: error: {err}", file=sys.stderr)
        return 2
    (args.out / "generate.json").write_text(json.dumps(report, indent=2, ensure_ascii=False))
    (args.out / "generate.md").write_text(render_generate_markdown(report), encoding="utf-8")
    print(
        f"{len(report['proposals'])} questions proposed from {len(report['clusters'])} clusters, "
        f"{report['kept']} resolved; requests: {report['requests']['sent']} sent, {report['requests']['cached']} cached"
    )
    print(render_summary(output.report))
    print(
        f"wrote {args.out}/train.jsonl, eval.jsonl, all.jsonl, report.md, generate.json, generate.md, llm-log.jsonl"
    )
    return 0


def run_build(args: argparse.Namespace) -> int:
    """Run one build from parsed arguments; prints the summary, returns the exit status."""
    import sys
    from dataclasses import replace

    from forecast_dojo.corpus.store import Corpus, CorpusError
    from forecast_dojo.errors import ConfigError, InputNotFoundError
    from forecast_dojo.events.build import (
        BuildConfig,
        BuildConfigError,
        build_events,
        load_config_file,
        override,
        render_summary,
        write_outputs,
    )
    from forecast_dojo.events.forecastbench import load_forecastbench
    from forecast_dojo.events.leakage import LeakageConfig
    from forecast_dojo.events.polymarket import load_polymarket
    from forecast_dojo.events.result import ImportResult
    from forecast_dojo.events.schedule import ScheduleConfig
    from forecast_dojo.events.selection import SelectionConfig
    from forecast_dojo.events.split import SplitError, parse_window
    from forecast_dojo.schema import SchemaError

    progress = not args.no_progress
    try:
        sections = load_config_file(args.config) if args.config else {}
        selection = override(SelectionConfig(), sections.get("selection", {}), "selection")
        schedule = override(ScheduleConfig(), sections.get("schedule", {}), "schedule")
        leakage = override(LeakageConfig(), sections.get("leakage", {}), "leakage")
        if args.seed is not None:
            schedule = replace(schedule, seed=args.seed)
        config = dataclass_from_arguments(
            BuildConfig,
            args,
            only=BUILD_FIELDS,
            flags=BUILD_FLAGS,
            train_window=parse_window(args.train_window),
            eval_window=parse_window(args.eval_window),
            selection=selection,
            schedule=schedule,
            leakage=leakage,
        )
        forecastbench = args.forecastbench
        if forecastbench is None and not args.polymarket:
            forecastbench = default_data_root() / "forecastbench"
            if not forecastbench.is_dir():
                raise InputNotFoundError(
                    f"--forecastbench not given and {missing_data_message(forecastbench)}"
                )
        imports: list[ImportResult] = []
        if forecastbench is not None:
            imports.append(
                load_forecastbench(
                    forecastbench, include_data_sources=args.include_data_sources, progress=progress
                )
            )
        for folder in args.polymarket:
            imports.append(load_polymarket(folder, progress=progress))
        leakage_judge = None
        if args.judge_base_url or args.judge_model:
            from forecast_dojo.events.judge import JudgeConfig, LeakageJudge
            from forecast_dojo.synthetic.cache import default_cache_dir

            leakage_judge = LeakageJudge(
                JudgeConfig(
                    base_url=args.judge_base_url or "",
                    model=args.judge_model or "",
                    cache_dir=args.judge_cache or default_cache_dir() / "leakage-judge",
                    scope=args.judge_scope,
                )
            )
        for labels in args.leakage_labels:
            if not labels.is_file():
                raise InputNotFoundError(f"{labels}: labels file not found (--leakage-labels)")
        corpus = Corpus.load(args.corpus) if args.corpus else None
        output = build_events(
            imports,
            config,
            corpus=corpus,
            progress=progress,
            leakage_labels=args.leakage_labels,
            leakage_judge=leakage_judge,
        )
        for warning in output.report.get("warnings") or []:
            print(f"events build: warning: {warning}", file=sys.stderr)
        if args.strict and output.report.get("warnings"):
            print(
                "events build: --strict: not writing a build that keeps under 10 % of its input",
                file=sys.stderr,
            )
            return 3
        write_outputs(output, args.out, overwrite=args.overwrite)
    except (
        ConfigError,
        BuildConfigError,
        SplitError,
        SchemaError,
        CorpusError,
        FileNotFoundError,
        FileExistsError,
    ) as err:
        print(f"events build: error: {err}", file=sys.stderr)
        return 2
    print(render_summary(output.report))
    print(f"wrote {args.out}/train.jsonl, eval.jsonl, all.jsonl, decisions.jsonl, report.json, report.md")
    return 0
