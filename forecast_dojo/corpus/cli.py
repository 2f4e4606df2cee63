"""``forecast-dojo corpus build``: import, clean, embed and store a news corpus, then print the report.

Heavy libraries (YAML, trafilatura, torch, Ray) are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

from forecast_dojo.errors import InputNotFoundError, UsageError

ERROR_EXIT = 2
STRICT_EXIT = 3


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a YYYY-MM-DD date: {value!r}") from err


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from err
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value!r}")
    return number


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``corpus`` command group (``build``, ``verify``, ``migrate``) to the top-level parser."""
    from forecast_dojo.corpus.importers import IMPORTERS

    corpus = subparsers.add_parser("corpus", help="build news corpora", description="Build news corpora.")
    commands = corpus.add_subparsers(dest="corpus_command", required=True)
    build = commands.add_parser(
        "build",
        help="import, clean, embed and store a corpus",
        description="Import a source, clean it, embed it and write a corpus directory with build_report.json.",
    )
    build.add_argument("--source", required=True, choices=sorted(IMPORTERS), help="kind of input")
    build.add_argument("--input", required=True, type=Path, help="input file or folder")
    build.add_argument("--out", required=True, type=Path, help="corpus directory to write")
    build.add_argument("--start", type=_day, help="first day to import (YYYY-MM-DD, inclusive)")
    build.add_argument("--end", type=_day, help="last day to import (YYYY-MM-DD, inclusive)")
    build.add_argument(
        "--embedder",
        help="minilm | static-minilm (fast) | hashing | all-MiniLM-L6-v2@<len> | hashing-bow-<dim> (default: recipe)",
    )
    build.add_argument(
        "--config", type=Path, help="build recipe (TOML), e.g. corpus/wikipedia-current-events.toml"
    )
    build.add_argument(
        "--runner", choices=("single", "ray"), default="single", help="single process or Ray Data"
    )
    build.add_argument("--ray-address", help="Ray cluster address for --runner ray (default: local)")
    build.add_argument(
        "--ray-cpus",
        type=_positive_int,
        help="CPUs a local Ray instance may use (--runner ray without --ray-address; default: all)",
    )
    build.add_argument(
        "--embed-actors",
        type=_positive_int,
        default=1,
        help="embedding actors (one model each) for --runner ray (default: 1)",
    )
    build.add_argument(
        "--dense-index",
        default="auto",
        choices=["auto", "exact", "ivf-flat", "ivf-sq8", "ivf-pq", "none"],
        help="dense index to build after embedding (auto: exact scan for small corpora, IVF for large)",
    )
    build.add_argument("--no-bm25", action="store_true", help="do not build the BM25 index")
    build.add_argument("--overwrite", action="store_true", help="replace an existing corpus in --out")
    build.add_argument("--no-progress", action="store_true", help="no progress bars")
    build.add_argument(
        "--strict",
        action="store_true",
        help=f"fail (exit {STRICT_EXIT}) when a cleaning stage removes more than half of its input, "
        "instead of warning",
    )
    build.set_defaults(func=run_build)
    for name, text in (
        ("verify", "check every byte of a corpus (file hashes, row digests, order, ids)"),
        ("migrate", "rewrite a format-1 corpus (documents.parquet) to the memory-mapped format 2"),
    ):
        sub = commands.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        sub.add_argument("dir", type=Path, help="corpus directory")
        sub.add_argument("--no-progress", action="store_true", help="no progress bars")
        sub.set_defaults(func=run_check)


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
