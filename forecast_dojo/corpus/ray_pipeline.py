"""The same corpus build on Ray Data, for inputs too large for one process (CC-News, many WARC files).

Stages: (1) extraction: one task per input file runs the importer's per-file function; (2) cleaning:
the per-document stages and the MinHash signature run on every document in parallel; (3) the
duplicate filters, which need the whole collection, run on the driver over compact columns;
(4) embedding: an actor pool encodes the survivors in batches; (5) the driver seals the corpus with
the same :func:`~forecast_dojo.corpus.store.build_corpus` call as the single-process build, so both
write the same directory (same documents, order and content hash). ``address`` points at a cluster
(``ray://head:10001`` or ``auto``); without it Ray starts locally. Needs the ``ray`` extra.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from forecast_dojo.corpus.cleaning import (
    COLLECTION_STAGES,
    PER_DOCUMENT_STAGES,
    CleaningConfig,
    StageReport,
    apply_document_stage,
    minhash_signatures,
    run_collection_stage,
)
from forecast_dojo.corpus.importers import ImportReport
from forecast_dojo.corpus.pipeline import BuildRecipe, BuildResult, default_recipe, make_report, write_corpus
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import from_micros, to_micros

EMBED_BATCH_ROWS = 256


def _document_row(document: Document) -> dict[str, Any]:
    return {
        "id": document.id,
        "title": document.title,
        "text": document.text,
        "url": document.url,
        "source": document.source,
        "published_us": to_micros(document.published_at),
        "available_us": to_micros(document.available_at),
        "date_source": document.date_source,
    }


def _row_document(row: dict[str, Any]) -> Document:
    return Document(
        id=str(row["id"]),
        title=str(row["title"] or ""),
        text=str(row["text"]),
        url=row["url"] or None,
        source=row["source"] or None,
        published_at=from_micros(int(row["published_us"])),
        available_at=from_micros(int(row["available_us"])),
        date_source=str(row["date_source"]),
    )


def input_files(source: str, input_path: Path, start: date | None, end: date | None) -> list[Path]:
    """The files one extraction task each will read, as the single-process importer would read them."""
    if source == "wikipedia":
        from forecast_dojo.corpus.importers.wikipedia import list_day_files

        return [path for _, path in list_day_files(input_path, start=start, end=end)]
    if source == "generic":
        from forecast_dojo.corpus.importers.generic import input_files as generic_files

        return generic_files(input_path)
    if source == "warc":
        from forecast_dojo.corpus.importers.warc import warc_files

        return warc_files(input_path)
    raise ValueError(f"unknown source {source!r}")


def extract_file(row: dict[str, Any], *, source: str, options: dict[str, Any]) -> dict[str, Any]:
    """Ray task: import one file; returns its report and its documents (JSON, one row per file)."""
    path = Path(row["path"])
    if source == "wikipedia":
        from forecast_dojo.corpus.importers.wikipedia import parse_day_file

        documents, report = parse_day_file(path)
    elif source == "generic":
        from forecast_dojo.corpus.importers.generic import read_generic_file

        documents, report = read_generic_file(path, **options)
    else:
        from forecast_dojo.corpus.importers.warc import read_warc_file

        documents, report = read_warc_file(path, **options)
    return {
        "path": str(path),
        "report": json.dumps(report.to_dict()),
        "documents": json.dumps([_document_row(d) for d in documents]),
    }


def explode_documents(row: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(row["documents"])


def clean_row(row: dict[str, Any], *, config: CleaningConfig) -> dict[str, Any]:
    """Ray task: run the per-document stages; mark (not drop) a removed document so it is counted."""
    document = _row_document(row)
    out = dict(row)
    out["removed_by"], out["reason"] = "", ""
    for stage in PER_DOCUMENT_STAGES:
        if not getattr(config, stage).enabled:
            continue
        result, why = apply_document_stage(stage, document, config)
        if result is None:
            out["removed_by"], out["reason"] = stage, why or stage
            break
        document = result
    out["modified"] = document.text != row["text"] or document.title != (row["title"] or "")
    out["text"], out["title"] = document.text, document.title
    signature = b""
    if not out["removed_by"] and config.dedup_minhash.enabled:
        signature = minhash_signatures([document.text], config.dedup_minhash)[0].tobytes()
    out["minhash"] = signature
    return out


class EmbedBatch:
    """Ray actor: one embedder per worker (model loaded once), encoding batches of embedding texts."""

    def __init__(self, embedder_name: str) -> None:
        from forecast_dojo.corpus.embedders import get_embedder

        self.embedder = get_embedder(embedder_name)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = self.embedder.encode([str(t) for t in batch["embedding_text"]])
        return {"row": batch["row"], "vector": np.asarray(vectors, dtype=np.float32)}


class PrecomputedEmbedder:
    """Hands :func:`build_corpus` vectors computed by the Ray actors, looked up by embedding text."""

    def __init__(self, name: str, dim: int, texts: list[str], vectors: np.ndarray) -> None:
        self.name = name
        self.dim = dim
        self._rows = {text: row for row, text in enumerate(texts)}
        self._vectors = vectors

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        missing = [t for t in texts if t not in self._rows]
        if missing:
            raise KeyError(
                f"{len(missing)} text(s) were not embedded by the Ray stage, e.g. {missing[0][:80]!r}"
            )
        return self._vectors[[self._rows[t] for t in texts]]


def _ensure_ray(address: str | None, num_cpus: int | None, progress: bool) -> Any:
    try:
        import ray
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            'the Ray runner needs the "ray" extra: pip install "forecast-dojo[ray]"'
        ) from err
    if not ray.is_initialized():
        kwargs: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "ignore_reinit_error": True,
        }
        if address:
            kwargs["address"] = address
        elif num_cpus:
            kwargs["num_cpus"] = num_cpus
        ray.init(**kwargs)
    ray.data.DataContext.get_current().enable_progress_bars = progress
    return ray


def build_with_ray(
    source: str,
    input_path: str | Path,
    out_dir: str | Path,
    *,
    recipe: BuildRecipe | None = None,
    embedder_name: str | None = None,
    start: date | None = None,
    end: date | None = None,
    progress: bool = True,
    overwrite: bool = False,
    address: str | None = None,
    num_cpus: int | None = None,
    embed_actors: int = 1,
) -> BuildResult:
    """Build a corpus with Ray Data; the result equals :func:`~forecast_dojo.corpus.pipeline.build_from_source`."""
    from forecast_dojo.corpus.embedders import get_embedder
    from forecast_dojo.corpus.store import embedding_text

    recipe = recipe or default_recipe(source)
    if embedder_name:
        recipe = replace(recipe, embedder=embedder_name)
    if recipe.source != source:
        raise ValueError(f"recipe is for source {recipe.source!r}, not {source!r}")
    ray = _ensure_ray(address, num_cpus, progress)
    input_path = Path(input_path).resolve()
    seconds: dict[str, float] = {}

    started = time.perf_counter()
    files = input_files(source, input_path, start, end)
    per_file = (
        ray.data.from_items([{"path": str(p)} for p in files])
        .map(extract_file, fn_kwargs={"source": source, "options": recipe.import_options})
        .materialize()
    )
    import_report = ImportReport(source=source)
    for row in per_file.select_columns(["report"]).iter_rows():
        import_report.merge(ImportReport.from_dict(json.loads(row["report"])))
    seconds["import"] = time.perf_counter() - started

    started = time.perf_counter()
    cleaned_rows = (
        per_file.flat_map(explode_documents).map(clean_row, fn_kwargs={"config": recipe.cleaning}).take_all()
    )
    documents, stages, signatures = _finish_cleaning(cleaned_rows, recipe.cleaning, import_report, start, end)
    seconds["cleaning"] = time.perf_counter() - started

    started = time.perf_counter()
    template = get_embedder(recipe.embedder)
    texts = [embedding_text(d.title, d.text) for d in documents]
    vectors = np.zeros((len(texts), template.dim), dtype=np.float32)
    if texts:
        embedded = ray.data.from_items(
            [{"row": i, "embedding_text": t} for i, t in enumerate(texts)]
        ).map_batches(
            EmbedBatch,
            fn_constructor_kwargs={"embedder_name": recipe.embedder},
            batch_size=EMBED_BATCH_ROWS,
            compute=ray.data.ActorPoolStrategy(size=embed_actors),
        )
        for batch in embedded.iter_batches(batch_size=EMBED_BATCH_ROWS, batch_format="numpy"):
            vectors[np.asarray(batch["row"], dtype=np.int64)] = np.stack(batch["vector"])
    seconds["embedding"] = time.perf_counter() - started

    report = make_report(
        recipe,
        input_path,
        start=start,
        end=end,
        import_report=import_report,
        stages=stages,
        documents=documents,
        embedder_name=template.name,
        runner="ray",
        seconds=seconds,
    )
    embedder = PrecomputedEmbedder(template.name, template.dim, texts, vectors)
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


def _finish_cleaning(
    rows: list[dict[str, Any]],
    config: CleaningConfig,
    import_report: ImportReport,
    start: date | None,
    end: date | None,
) -> tuple[list[Document], list[StageReport], np.ndarray | None]:
    """Driver side: apply the date range, count the per-document stages, run the duplicate filters."""
    in_range = []
    for row in rows:
        day = from_micros(int(row["published_us"])).date()
        if (start is None or day >= start) and (end is None or day <= end):
            in_range.append(row)
    if len(in_range) != len(rows):
        import_report.notes["outside --start/--end"] += len(rows) - len(in_range)
        import_report.documents = len(in_range)
    remaining = len(in_range)
    stages: list[StageReport] = []
    for stage in PER_DOCUMENT_STAGES:
        report = StageReport(stage, remaining, enabled=getattr(config, stage).enabled)
        removed = [r for r in in_range if r["removed_by"] == stage]
        report.removed = len(removed)
        for row in removed:
            report.reasons[row["reason"]] += 1
        if stage == "normalize":
            report.modified = sum(1 for r in in_range if r["modified"])
        remaining -= report.removed
        stages.append(report)
    kept = [r for r in in_range if not r["removed_by"]]
    pairs = sorted(
        ((_row_document(r), r["minhash"]) for r in kept),
        key=lambda p: (to_micros(p[0].available_at), p[0].id),
    )
    documents = [d for d, _ in pairs]  # availability order, as the single-process build
    signatures = None
    if config.dedup_minhash.enabled and pairs:
        signatures = np.stack([np.frombuffer(sig, dtype=np.uint32) for _, sig in pairs])
    for stage in COLLECTION_STAGES:
        documents, report, signatures = run_collection_stage(stage, documents, config, signatures=signatures)
        stages.append(report)
    return documents, stages, signatures
