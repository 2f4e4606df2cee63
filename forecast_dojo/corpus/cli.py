"""``forecast-dojo corpus build``: import, clean, embed and store a news corpus, then print the report.

Heavy libraries (YAML, trafilatura, torch, Ray) are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from forecast_dojo.arguments import Flag, add_command, at_least, calendar_day, option
from forecast_dojo.errors import InputNotFoundError, UsageError

ERROR_EXIT = 2
STRICT_EXIT = 3


# the choices of --source (the importers' names) are filled in by register, which imports them
@dataclass(kw_only=True)
class CorpusBuildArguments:
    """The flags of ``forecast-dojo corpus build``."""

    source: str = option(help="kind of input")
    input: Path = option(help="input file or folder")
    out: Path = option(help="corpus directory to write")
    start: date | None = option(None, parse=calendar_day, help="first day to import (YYYY-MM-DD, inclusive)")
    end: date | None = option(None, parse=calendar_day, help="last day to import (YYYY-MM-DD, inclusive)")
    embedder: str | None = option(
        None,
        help="minilm | static-minilm (fast) | hashing | all-MiniLM-L6-v2@<len> | hashing-bow-<dim> (default: recipe)",
    )
    config: Path | None = option(None, help="build recipe (TOML), e.g. corpus/wikipedia-current-events.toml")
    runner: str = option("single", choices=("single", "ray"), help="single process or Ray Data")
    ray_address: str | None = option(None, help="Ray cluster address for --runner ray (default: local)")
    ray_cpus: int | None = option(
        None,
        parse=at_least(1),
        help="CPUs a local Ray instance may use (--runner ray without --ray-address; default: all)",
    )
    embed_actors: int = option(
        1, parse=at_least(1), help="embedding actors (one model each) for --runner ray (default: 1)"
    )
    dense_index: str = option(
        "auto",
        choices=("auto", "exact", "ivf-flat", "ivf-sq8", "ivf-pq", "none"),
        help="dense index to build after embedding (auto: exact scan for small corpora, IVF for large)",
    )
    no_bm25: bool = option(False, help="do not build the BM25 index")
    overwrite: bool = option(False, help="replace an existing corpus in --out")
    no_progress: bool = option(False, help="no progress bars")
    strict: bool = option(
        False,
        help=f"fail (exit {STRICT_EXIT}) when a cleaning stage removes more than half of its input, "
        "instead of warning",
    )


@dataclass(kw_only=True)
class CorpusCheckArguments:
    """The arguments of ``forecast-dojo corpus verify`` and ``corpus migrate``."""

    dir: Path = option(positional=True, help="corpus directory")
    no_progress: bool = option(False, help="no progress bars")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``corpus`` command group (``build``, ``verify``, ``migrate``) to the top-level parser."""
    from forecast_dojo.corpus.importers import IMPORTERS

    corpus = add_command(subparsers, "corpus", help="build news corpora", description="Build news corpora.")
    commands = corpus.add_subparsers(dest="corpus_command", required=True)
    add_command(
        commands,
        "build",
        run_build,
        help="import, clean, embed and store a corpus",
        description="Import a source, clean it, embed it and write a corpus directory with build_report.json.",
        arguments=CorpusBuildArguments,
        flags={"source": Flag(choices=sorted(IMPORTERS))},
    )
    for name, text in (
        ("verify", "check every byte of a corpus (file hashes, row digests, order, ids)"),
        ("migrate", "rewrite a format-1 corpus (documents.parquet) to the memory-mapped format 2"),
    ):
        description = text[0].upper() + text[1:] + "."
        add_command(
            commands, name, run_check, help=text, description=description, arguments=CorpusCheckArguments
        )


def run_check(args: argparse.Namespace) -> int:
    """``corpus verify`` / ``corpus migrate``: exit 0 when the corpus is intact, 2 with the error otherwise."""
    from forecast_dojo.corpus.store import CorpusError, migrate_corpus, verify_corpus

    try:
        if args.corpus_command == "migrate":
            corpus = migrate_corpus(args.dir, progress=not args.no_progress)
            print(f"{args.dir}: migrated to format 2, content hash {corpus.content_hash}")
        else:
            summary = verify_corpus(args.dir, progress=not args.no_progress)
            print(
                f"{args.dir}: OK ({summary['rows']} documents, {summary['files']} files, {summary['seconds']} s)"
            )
    except CorpusError as err:
        print(f"forecast-dojo corpus {args.corpus_command}: error: {err}", file=sys.stderr)
        return 2
    return 0


def run_build(args: argparse.Namespace) -> int:
    """Run one build from parsed arguments; prints the report, returns the exit status."""
    from dataclasses import replace

    from forecast_dojo.corpus.pipeline import (
        BuildRecipe,
        StrictBuildError,
        build_from_source,
        default_recipe,
        print_report,
    )
    from forecast_dojo.errors import ForecastDojoError

    try:
        recipe = (
            BuildRecipe.from_toml(args.config, source=args.source)
            if args.config
            else default_recipe(args.source)
        )
        if args.embedder:
            recipe = replace(recipe, embedder=args.embedder)
        if args.runner != "ray" and (args.ray_address or args.ray_cpus or args.embed_actors != 1):
            raise UsageError("--ray-address, --ray-cpus and --embed-actors need --runner ray")
        if args.ray_address and args.ray_cpus:
            raise UsageError("--ray-cpus sizes a local Ray instance; a cluster (--ray-address) has its own")
        if not args.input.exists():
            raise InputNotFoundError(f"input not found: {args.input}")
        options = {
            "recipe": recipe,
            "start": args.start,
            "end": args.end,
            "progress": not args.no_progress,
            "overwrite": args.overwrite,
            "strict": args.strict,
        }
        if args.runner == "ray":
            from forecast_dojo.corpus.ray_pipeline import build_with_ray

            result = build_with_ray(
                args.source,
                args.input,
                args.out,
                address=args.ray_address,
                num_cpus=args.ray_cpus,
                embed_actors=args.embed_actors,
                **options,
            )
        else:
            result = build_from_source(args.source, args.input, args.out, **options)
        from forecast_dojo.corpus.retrieval import build_indexes

        dense = None if args.dense_index == "none" else args.dense_index
        built = build_indexes(
            result.corpus, dense=dense, bm25=not args.no_bm25, progress=not args.no_progress
        )
    except StrictBuildError as err:
        print(f"forecast-dojo corpus build: error: {err}", file=sys.stderr)
        return STRICT_EXIT
    except (ForecastDojoError, FileNotFoundError, ValueError) as err:
        print(f"forecast-dojo corpus build: error: {err}", file=sys.stderr)
        return ERROR_EXIT
    print_report(result.report)
    print(
        f"  indexes: {', '.join(f'{k}={v}' for k, v in built.items()) or 'none (exact scan at search time)'}"
    )
    print(f"  written to {args.out}")
    return 0
