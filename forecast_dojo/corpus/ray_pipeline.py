"""The corpus build plan on Ray Data, for inputs too large for one process (CC-News, many WARC files).

It runs the same :class:`~forecast_dojo.corpus.pipeline.BuildPlan` as the single-process build:
(1) import: one task per input file runs :meth:`BuildPlan.import_file`; (2) cleaning: every document
goes through :meth:`BuildPlan.clean` in parallel and gets its MinHash signature; (3) the duplicate
filters, which need the whole collection, run on the driver (:meth:`BuildPlan.deduplicate`);
(4) embedding: an actor pool encodes the survivors in batches; (5) the driver seals the corpus with
:meth:`BuildPlan.write`, so both executors write the same directory (same documents, order and
content hash). ``address`` points at a cluster (``ray://head:10001`` or ``auto``); without it Ray
starts locally. Needs the ``ray`` extra.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from forecast_dojo.corpus.cleaning import minhash_signatures
from forecast_dojo.corpus.importers import ImportReport, check_unique_ids
from forecast_dojo.corpus.pipeline import BuildLog, BuildPlan, BuildRecipe, BuildResult, default_recipe, timed
from forecast_dojo.errors import NotFoundError
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import from_micros, to_micros

EMBED_BATCH_ROWS = 256


def document_row(document: Document) -> dict[str, Any]:
    """A document as a row of plain values (instants as integer microseconds) for Ray Data."""
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


def row_document(row: dict[str, Any]) -> Document:
    """The document of a :func:`document_row` row."""
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


def import_task(row: dict[str, Any], *, plan: BuildPlan) -> dict[str, Any]:
    """Ray task, step 1: import one file; its report and documents as JSON (one row per file)."""
    documents, report = plan.import_file(Path(row["path"]))
    return {
        "path": row["path"],
        "report": json.dumps(report.to_dict()),
        "documents": json.dumps([document_row(d) for d in documents]),
    }


def explode_documents(row: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per document of a file row."""
    return json.loads(row["documents"])


def clean_task(row: dict[str, Any], *, plan: BuildPlan) -> dict[str, Any]:
    """Ray task, step 2: the per-document stages; marks (not drops) a removed document so it is counted."""
    verdict = plan.clean(row_document(row))
    out = document_row(verdict.document)
    out.update(removed_by=verdict.removed_by, reason=verdict.reason, modified=verdict.modified, minhash=b"")
    if not verdict.removed_by and plan.cleaning.dedup_minhash.enabled:
        out["minhash"] = minhash_signatures([verdict.document.text], plan.cleaning.dedup_minhash)[0].tobytes()
    return out


class EmbedBatch:
    """Ray actor: one embedder per worker (model loaded once), encoding batches of embedding texts."""

    def __init__(self, embedder_name: str) -> None:
        from forecast_dojo.corpus.embedders import get_embedder

        self.embedder = get_embedder(embedder_name)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Encode one batch of ``embedding_text``; rows keep their ``row`` number."""
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
        """The precomputed vectors of ``texts``; a text the actors did not embed is an error."""
        missing = [t for t in texts if t not in self._rows]
        if missing:
            raise NotFoundError(
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
    strict: bool = False,
    address: str | None = None,
    num_cpus: int | None = None,
    embed_actors: int = 1,
) -> BuildResult:
    """Run the build plan on Ray Data; the result equals :func:`~forecast_dojo.corpus.pipeline.build_from_source`.

    Raises:
        StrictBuildError: with ``strict``, when a cleaning stage removed more than half of its input.
    """
    from forecast_dojo.corpus.embedders import get_embedder
    from forecast_dojo.corpus.store import embedding_text

    recipe = recipe or default_recipe(source)
    if embedder_name:
        recipe = replace(recipe, embedder=embedder_name)
    plan = BuildPlan.make(source, input_path, recipe=recipe, start=start, end=end, strict=strict)
    ray = _ensure_ray(address, num_cpus, progress)
    log = BuildLog("ray", ImportReport(source=source))

    with timed(log.seconds, "import"):
        per_file = (
            ray.data.from_items([{"path": str(p)} for p in plan.files()])
            .map(import_task, fn_kwargs={"plan": plan})
            .materialize()
        )
        for row in per_file.select_columns(["report"]).iter_rows():
            log.import_report.merge(ImportReport.from_dict(json.loads(row["report"])))

    with timed(log.seconds, "cleaning"):
        rows = per_file.flat_map(explode_documents).map(clean_task, fn_kwargs={"plan": plan}).take_all()
        check_unique_ids([r["id"] for r in rows], plan.input_path)
        log.stages = plan.count_stages(
            ((r["removed_by"], r["reason"], r["modified"]) for r in rows), len(rows)
        )
        kept = [r for r in rows if not r["removed_by"]]
        signatures = None
        if plan.cleaning.dedup_minhash.enabled and kept:
            signatures = np.stack([np.frombuffer(r["minhash"], dtype=np.uint32) for r in kept])
        documents, dedup_stages = plan.deduplicate([row_document(r) for r in kept], signatures=signatures)
        log.stages += dedup_stages
    log.warnings = plan.check(log.stages)

    with timed(log.seconds, "embedding"):
        template = get_embedder(plan.recipe.embedder)
        texts = [embedding_text(d.title, d.text) for d in documents]
        vectors = np.zeros((len(texts), template.dim), dtype=np.float32)
        if texts:
            embedded = ray.data.from_items(
                [{"row": i, "embedding_text": t} for i, t in enumerate(texts)]
            ).map_batches(
                EmbedBatch,
                fn_constructor_kwargs={"embedder_name": plan.recipe.embedder},
                batch_size=EMBED_BATCH_ROWS,
                compute=ray.data.ActorPoolStrategy(size=embed_actors),
            )
            for batch in embedded.iter_batches(batch_size=EMBED_BATCH_ROWS, batch_format="numpy"):
                vectors[np.asarray(batch["row"], dtype=np.int64)] = np.stack(batch["vector"])

    embedder = PrecomputedEmbedder(template.name, template.dim, texts, vectors)
    return plan.write(documents, out_dir, embedder, log, progress=progress, overwrite=overwrite)
