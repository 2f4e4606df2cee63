"""The corpus build pipeline: import a source, clean it, embed and store it, and report every count.

A build is described by a :class:`BuildRecipe` (source kind, importer options, cleaning settings,
embedder), read from a TOML file such as ``corpus/wikipedia-current-events.toml`` over per-source
defaults. The report lands in the corpus manifest (``build``) and as ``build_report.json`` beside it.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from forecast_dojo.corpus.cleaning import CleaningConfig, StageReport, clean_documents
from forecast_dojo.corpus.importers import IMPORTERS, ImportReport, get_importer
from forecast_dojo.errors import ForecastDojoError
from forecast_dojo.paths import DATA_ENV, default_data_root  # noqa: F401  (re-exported for callers)
from forecast_dojo.schema import Document

REPORT_FILE = "build_report.json"
_RECIPE_KEYS = {"name", "source", "description", "import", "cleaning", "embedding"}
_EMBEDDING_KEYS = {"embedder", "batch_size"}
_IMPORT_OPTIONS = {
    "wikipedia": set(),
    "generic": {"on_bad_record"},
    "warc": {"min_year", "max_year"},
}


class RecipeError(ForecastDojoError, ValueError):
    """A build recipe that names an unknown source, table or option."""


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
        bad = set(options) - _IMPORT_OPTIONS[kind]
        if bad:
            raise RecipeError(
                f"unknown [import] option(s) {sorted(bad)} for source {kind!r}; known: {sorted(_IMPORT_OPTIONS[kind])}"
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
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"recipe not found: {path}")
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


def import_documents(
    recipe: BuildRecipe,
    input_path: str | Path,
    *,
    start: date | None = None,
    end: date | None = None,
    progress: bool = True,
) -> tuple[list[Document], ImportReport]:
    """Run the importer of the recipe's source kind over ``input_path``."""
    load = get_importer(recipe.source)
    return load(Path(input_path), start=start, end=end, progress=progress, **recipe.import_options)


def make_report(
    recipe: BuildRecipe,
    input_path: str | Path,
    *,
    start: date | None,
    end: date | None,
    import_report: ImportReport,
    stages: list[StageReport],
    documents: list[Document],
    embedder_name: str,
    runner: str,
    seconds: dict[str, float],
) -> dict[str, Any]:
    """The build report: inputs, recipe, import exclusions, per-stage counts, the result and timings."""
    from forecast_dojo._version import __version__

    return {
        "forecast_dojo_version": __version__,
        "runner": runner,
        "recipe": recipe.to_dict(),
        "input": str(input_path),
        "start": start.isoformat() if start else None,
        "end": end.isoformat() if end else None,
        "import": import_report.to_dict(),
        "cleaning": [stage.to_dict() for stage in stages],
        "documents": len(documents),
        "embedder": embedder_name,
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
    }


def write_corpus(
    documents: list[Document],
    out_dir: str | Path,
    embedder: Any,
    report: dict[str, Any],
    *,
    batch_size: int,
    progress: bool,
    overwrite: bool,
) -> Any:
    """Seal the corpus directory (report in the manifest) and write ``build_report.json`` beside it."""
    from forecast_dojo.corpus.store import CorpusError, build_corpus

    if not documents:
        raise CorpusError(
            "no documents left after import and cleaning; see the stage counts:\n" + format_report(report)
        )
    started = time.perf_counter()
    corpus = build_corpus(
        documents,
        out_dir,
        embedder,
        batch_size=batch_size,
        build_config=report,
        progress=progress,
        overwrite=overwrite,
    )
    report["seconds"]["index"] = round(time.perf_counter() - started, 3)
    report["content_hash"] = corpus.content_hash
    (Path(out_dir) / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False))
    return corpus


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
) -> BuildResult:
    """Import, clean, embed and store one source in a single process."""
    from forecast_dojo.corpus.embedders import get_embedder

    recipe = recipe or default_recipe(source)
    if recipe.source != source:
        raise RecipeError(f"recipe is for source {recipe.source!r}, not {source!r}")
    if start and end and start > end:
        raise ValueError(f"start {start} is after end {end}")
    embedder = embedder if embedder is not None else get_embedder(recipe.embedder)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    documents, import_report = import_documents(recipe, input_path, start=start, end=end, progress=progress)
    seconds["import"] = time.perf_counter() - started
    started = time.perf_counter()
    documents, stages = clean_documents(documents, recipe.cleaning, progress=progress)
    seconds["cleaning"] = time.perf_counter() - started
    report = make_report(
        recipe,
        input_path,
        start=start,
        end=end,
        import_report=import_report,
        stages=stages,
        documents=documents,
        embedder_name=embedder.name,
        runner="single-process",
        seconds=seconds,
    )
    corpus = write_corpus(
        documents,
        out_dir,
        embedder,
        report,
        batch_size=recipe.batch_size,
        progress=progress,
        overwrite=overwrite,
    )
    return BuildResult(corpus=corpus, report=report)


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
    lines.append(f"  documents: {report['documents']}  embedder: {report['embedder']}")
    if "content_hash" in report:
        lines.append(f"  content hash: {report['content_hash']}")
    lines.append("  seconds: " + ", ".join(f"{k} {v}" for k, v in report["seconds"].items()))
    return "\n".join(lines)


def print_report(report: dict[str, Any]) -> None:
    print(format_report(report), file=sys.stdout)
