"""The corpus build plan: import a source, clean it, embed and store it, and report every count.

One :class:`BuildPlan` describes a build as five steps, and two executors run them: this module's
single-process :func:`build_from_source` and :func:`~forecast_dojo.corpus.ray_pipeline.build_with_ray`
on Ray Data. The steps and the functions both executors call for them:

1. import, one input file at a time (:meth:`BuildPlan.import_file`: the importer of the source kind,
   then the ``--start``/``--end`` filter on the publication day);
2. the per-document cleaning stages (:meth:`BuildPlan.clean`), counted per stage
   (:meth:`BuildPlan.count_stages`);
3. the duplicate filters over the whole collection in availability order (:meth:`BuildPlan.deduplicate`),
   then the removal check (:meth:`BuildPlan.check`: a stage that removed more than half of its input is
   a warning, or an error with ``strict``);
4. embedding; 5. sealing the corpus directory with its report (:meth:`BuildPlan.write`).

A build's settings are a :class:`BuildRecipe` (source kind, importer options, cleaning settings,
embedder), read from a TOML file such as ``corpus/wikipedia-current-events.toml`` over per-source
defaults. The report lands in the corpus manifest (``build``) and as ``build_report.json`` beside it.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from forecast_dojo.corpus.cleaning import (
    CleaningConfig,
    StageReport,
    Verdict,
    clean_document,
    clean_documents,
    count_document_stages,
    removal_warnings,
    run_collection_stages,
)
from forecast_dojo.corpus.importers import (
    IMPORTERS,
    Importer,
    ImportReport,
    get_importer,
    import_file,
    import_source,
)
from forecast_dojo.errors import ConfigError, InputNotFoundError
from forecast_dojo.errors import RecipeError as RecipeError
from forecast_dojo.errors import StrictBuildError as StrictBuildError
from forecast_dojo.schema import Document

REPORT_FILE = "build_report.json"
_RECIPE_KEYS = {"name", "source", "description", "import", "cleaning", "embedding"}
_EMBEDDING_KEYS = {"embedder", "batch_size"}


@dataclass(frozen=True)
class BuildRecipe:
    """Everything that decides what a corpus build produces, apart from the input and date range."""

    source: str
    name: str = ""
    cleaning: CleaningConfig = field(default_factory=CleaningConfig)
    import_options: dict[str, Any] = field(default_factory=dict)
    embedder: str = "minilm"
    batch_size: int = 64

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str | None = None) -> BuildRecipe:
        """A recipe from its TOML tables, over the defaults of its source kind."""
        unknown = set(data) - _RECIPE_KEYS
        if unknown:
            raise RecipeError(f"unknown recipe key(s) {sorted(unknown)}; known: {sorted(_RECIPE_KEYS)}")
        kind = source or data.get("source")
        if not kind:
            raise RecipeError("the recipe names no source (add source = 'wikipedia' | 'generic' | 'warc')")
        if data.get("source") and source and data["source"] != source:
            raise RecipeError(f"the recipe is for source {data['source']!r}, but --source is {source!r}")
        base = default_recipe(kind)
        options = dict(data.get("import", {}))
        known = IMPORTERS[kind].options
        bad = set(options) - known
        if bad:
            raise RecipeError(
                f"unknown [import] option(s) {sorted(bad)} for source {kind!r}; known: {sorted(known)}"
            )
        embedding = dict(data.get("embedding", {}))
        bad = set(embedding) - _EMBEDDING_KEYS
        if bad:
            raise RecipeError(
                f"unknown [embedding] option(s) {sorted(bad)}; known: {sorted(_EMBEDDING_KEYS)}"
            )
        return cls(
            source=kind,
            name=str(data.get("name", base.name)),
            cleaning=CleaningConfig.from_dict(data.get("cleaning"), base.cleaning),
            import_options={**base.import_options, **options},
            embedder=str(embedding.get("embedder", base.embedder)),
            batch_size=int(embedding.get("batch_size", base.batch_size)),
        )

    @classmethod
    def from_toml(cls, path: str | Path, *, source: str | None = None) -> BuildRecipe:
        """A recipe from a TOML file; ``source`` (the --source flag) must agree with the file's."""
        path = Path(path)
        if not path.exists():
            raise InputNotFoundError(f"recipe not found: {path}")
        import tomllib

        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as err:
            raise RecipeError(f"{path}: not valid TOML ({err})") from err
        try:
            return cls.from_dict(data, source=source)
        except (RecipeError, ValueError) as err:
            raise RecipeError(f"{path}: {err}") from err

    def to_dict(self) -> dict[str, Any]:
        """The recipe as TOML-shaped tables (what ``from_dict`` reads back)."""
        return {
            "name": self.name,
            "source": self.source,
            "import": dict(self.import_options),
            "embedding": {"embedder": self.embedder, "batch_size": self.batch_size},
            "cleaning": self.cleaning.to_dict(),
        }


def default_recipe(source: str) -> BuildRecipe:
    """The built-in settings of a source kind (the recipes in ``corpus/`` spell them out).

    Wikipedia summaries are single short sentences ("Roy Jenkins dies.", "Spain closes 19 airports.")
    under recurring topic headers, all sharing their day page's URL: word-count, alphabetic-word,
    stop-word and punctuation rules, URL and title deduplication would wrongly remove them, and
    language identification is unreliable on them (English summaries come out as Nigerian Pidgin),
    so it only removes long texts confidently in another language.
    """
    if source not in IMPORTERS:
        raise RecipeError(f"unknown source {source!r}; known: {', '.join(sorted(IMPORTERS))}")
    if source == "wikipedia":
        cleaning = CleaningConfig.from_dict(
            {
                "language": {"min_chars": 150, "min_confidence": 0.9},
                "quality": {
                    "min_words": 3,
                    "min_alpha_word_ratio": 0.5,
                    "min_stop_words": None,
                    "min_punctuated_line_ratio": None,
                },
                "dedup_url": {"enabled": False},
                "dedup_title": {"enabled": False},
            }
        )
        return BuildRecipe(source=source, name="wikipedia-current-events", cleaning=cleaning)
    if source == "generic":
        cleaning = CleaningConfig.from_dict({"quality": {"min_words": 20}})
        return BuildRecipe(
            source=source, name="generic", cleaning=cleaning, import_options={"on_bad_record": "fail"}
        )
    return BuildRecipe(source=source, name="web-news", import_options={"min_year": 2010, "max_year": 2030})


@dataclass
class BuildResult:
    """What a build produced: the loaded corpus and its report."""

    corpus: Any
    report: dict[str, Any]


@dataclass(frozen=True)
class BuildPlan:
    """One corpus build: what to import, how to clean it, and what to write (see the module docstring).

    Attributes:
        recipe: The build's settings.
        input_path: The input file or folder.
        start: First publication day kept (inclusive), or None.
        end: Last publication day kept (inclusive), or None.
        strict: Fail (:class:`StrictBuildError`) instead of warning when a stage removes over half.
    """

    recipe: BuildRecipe
    input_path: Path
    start: date | None = None
    end: date | None = None
    strict: bool = False

    @classmethod
    def make(
        cls,
        source: str,
        input_path: str | Path,
        *,
        recipe: BuildRecipe | None = None,
        start: date | None = None,
        end: date | None = None,
        strict: bool = False,
    ) -> BuildPlan:
        """The plan for ``source`` (its default recipe unless one is given); checks the arguments."""
        recipe = recipe or default_recipe(source)
        if recipe.source != source:
            raise RecipeError(f"recipe is for source {recipe.source!r}, not {source!r}")
        if start and end and start > end:
            raise ConfigError(f"start {start} is after end {end}")
        return cls(recipe, Path(input_path).resolve(), start, end, strict)

    @property
    def source(self) -> str:
        """The source kind."""
        return self.recipe.source

    @property
    def importer(self) -> Importer:
        """The importer of the source kind."""
        return get_importer(self.source)

    @property
    def cleaning(self) -> CleaningConfig:
        """The cleaning settings."""
        return self.recipe.cleaning

    def files(self) -> list[Path]:
        """The input files, in the order the documents are imported (step 1 runs once per file)."""
        return self.importer.files(self.input_path, self.start, self.end)

    def import_file(self, path: Path) -> tuple[list[Document], ImportReport]:
        """Step 1 for one file: its documents published within ``[start, end]``, and its report."""
        return import_file(
            self.source, path, start=self.start, end=self.end, options=self.recipe.import_options
        )

    def import_all(self, *, progress: bool = False) -> tuple[list[Document], ImportReport]:
        """Step 1 over every file in this process (ids checked for uniqueness)."""
        return import_source(
            self.source,
            self.input_path,
            start=self.start,
            end=self.end,
            progress=progress,
            **self.recipe.import_options,
        )

    def clean(self, document: Document, seconds: dict[str, float] | None = None) -> Verdict:
        """Step 2 for one document: every per-document cleaning stage."""
        return clean_document(document, self.cleaning, seconds=seconds)

    def count_stages(self, verdicts: Iterable[tuple[str, str, bool]], n_documents: int) -> list[StageReport]:
        """Step 2's reports from ``(removed_by, reason, modified)`` of each document."""
        return count_document_stages(verdicts, n_documents, self.cleaning)

    def deduplicate(
        self, documents: list[Document], *, signatures: np.ndarray | None = None, progress: bool = False
    ) -> tuple[list[Document], list[StageReport]]:
        """Step 3: the duplicate filters over the survivors, which come back in availability order."""
        return run_collection_stages(documents, self.cleaning, signatures=signatures, progress=progress)

    def check(self, stages: list[StageReport]) -> list[str]:
        """Warn (stderr) about each stage that removed more than half of its input; strict: raise."""
        warnings = removal_warnings(stages)
        if warnings and self.recipe.source == "generic" and self.recipe.name != "headlines":
            warnings.append(
                "for headline-only or other short texts, use the recipe corpus/headlines.toml (--config)"
            )
        if warnings and self.strict:
            raise StrictBuildError(
                "--strict: a cleaning stage removed more than half of its input:\n  " + "\n  ".join(warnings)
            )
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return warnings

    def report(self, documents: list[Document], embedder_name: str, log: BuildLog) -> dict[str, Any]:
        """The build report: inputs, recipe, import exclusions, per-stage counts, the result and timings."""
        from forecast_dojo._version import __version__

        return {
            "forecast_dojo_version": __version__,
            "runner": log.runner,
            "recipe": self.recipe.to_dict(),
            "input": str(self.input_path),
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "import": log.import_report.to_dict(),
            "cleaning": [stage.to_dict() for stage in log.stages],
            "warnings": list(log.warnings),
            "documents": len(documents),
            "embedder": embedder_name,
            "seconds": {k: round(v, 3) for k, v in log.seconds.items()},
        }

    def write(
        self,
        documents: list[Document],
        out_dir: str | Path,
        embedder: Any,
        log: BuildLog,
        *,
        progress: bool,
        overwrite: bool,
    ) -> BuildResult:
        """Steps 4-5: embed the survivors and seal the corpus directory.

        ``embedder`` may hand back vectors computed already. The report goes into the manifest and
        into ``build_report.json`` beside the corpus directory.
        """
        from forecast_dojo.corpus.store import CorpusError, build_corpus

        report = self.report(documents, embedder.name, log)
        if not documents:
            raise CorpusError(
                "no documents left after import and cleaning; see the stage counts:\n" + format_report(report)
            )
        started = time.perf_counter()
        corpus = build_corpus(
            documents,
            out_dir,
            embedder,
            batch_size=self.recipe.batch_size,
            build_config=report,
            progress=progress,
            overwrite=overwrite,
        )
        report["seconds"]["index"] = round(time.perf_counter() - started, 3)
        report["content_hash"] = corpus.content_hash
        (Path(out_dir) / REPORT_FILE).write_text(
            json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False)
        )
        return BuildResult(corpus=corpus, report=report)


@dataclass
class BuildLog:
    """What an executor's steps recorded, for the build report.

    Attributes:
        runner: Which executor ran the plan (``single-process`` or ``ray``).
        import_report: Step 1's merged report.
        stages: One report per cleaning stage (steps 2 and 3), in order.
        warnings: The removal warnings of :meth:`BuildPlan.check`.
        seconds: Wall time per step.
    """

    runner: str
    import_report: ImportReport = field(default_factory=lambda: ImportReport(source=""))
    stages: list[StageReport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


@contextmanager
def timed(seconds: dict[str, float], name: str) -> Iterator[None]:
    """Add the wall time of the ``with`` block to ``seconds[name]``."""
    started = time.perf_counter()
    try:
        yield
    finally:
        seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - started


def build_from_source(
    source: str,
    input_path: str | Path,
    out_dir: str | Path,
    *,
    recipe: BuildRecipe | None = None,
    embedder: Any = None,
    start: date | None = None,
    end: date | None = None,
    progress: bool = True,
    overwrite: bool = False,
    strict: bool = False,
) -> BuildResult:
    """Run the build plan in this process: import, clean, embed and store one source.

    Raises:
        StrictBuildError: with ``strict``, when a cleaning stage removed more than half of its input.
    """
    from forecast_dojo.corpus.embedders import get_embedder

    plan = BuildPlan.make(source, input_path, recipe=recipe, start=start, end=end, strict=strict)
    embedder = embedder if embedder is not None else get_embedder(plan.recipe.embedder)
    log = BuildLog("single-process")
    with timed(log.seconds, "import"):
        documents, log.import_report = plan.import_all(progress=progress)
    with timed(log.seconds, "cleaning"):
        documents, log.stages = clean_documents(documents, plan.cleaning, progress=progress)
    log.warnings = plan.check(log.stages)
    return plan.write(documents, out_dir, embedder, log, progress=progress, overwrite=overwrite)


def format_report(report: dict[str, Any]) -> str:
    """A readable summary of a build report for the terminal."""
    imp = report["import"]
    lines = [
        f"corpus build ({report['runner']}): source {report['recipe']['source']} "
        f"(recipe {report['recipe']['name'] or '-'}) from {report['input']}",
        f"  date range: {report['start'] or 'any'} .. {report['end'] or 'any'}",
        f"  import: {imp['files_seen']} files seen, {imp['files_imported']} imported, "
        f"{len(imp['excluded_files'])} excluded; {imp['records_seen']} records -> {imp['documents']} documents",
    ]
    for item in imp["excluded_files"]:
        lines.append(f"    excluded {item['path']}: {item['reason']}")
    for reason, count in imp["skipped"].items():
        lines.append(f"    skipped {count} record(s): {reason}")
    if imp["date_sources"]:
        lines.append("  dated by: " + ", ".join(f"{k} {v}" for k, v in imp["date_sources"].items()))
    for note, count in imp["notes"].items():
        lines.append(f"    note: {note}: {count}")
    lines.append(f"  {'cleaning stage':<16}{'in':>10}{'removed':>10}{'out':>10}  reasons")
    for stage in report["cleaning"]:
        reasons = ", ".join(f"{k} {v}" for k, v in stage["reasons"].items())
        if not stage["enabled"]:
            reasons = "(disabled)"
        elif stage["modified"]:
            reasons = (reasons + "; " if reasons else "") + f"{stage['modified']} modified"
        lines.append(
            f"  {stage['stage']:<16}{stage['in']:>10}{stage['removed']:>10}{stage['out']:>10}  {reasons}"
        )
    for warning in report.get("warnings", []):
        lines.append(f"  WARNING: {warning}")
    lines.append(f"  documents: {report['documents']}  embedder: {report['embedder']}")
    if "content_hash" in report:
        lines.append(f"  content hash: {report['content_hash']}")
    lines.append("  seconds: " + ", ".join(f"{k} {v}" for k, v in report["seconds"].items()))
    return "\n".join(lines)


def print_report(report: dict[str, Any]) -> None:
    """Print :func:`format_report` to standard output."""
    print(format_report(report), file=sys.stdout)
