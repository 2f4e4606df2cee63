"""Generic dated documents from JSONL or parquet: the way to bring any pre-dated collection in.

Each record needs ``text`` and ``published_at`` (ISO 8601 date or instant, with or without zone;
naive times are UTC). Optional: ``id``, ``title``, ``url``, ``source``, ``available_at``. Without
``available_at``, a timed ``published_at`` is available at that instant and a bare date at the END of
its UTC day. A record without a usable date either fails the import (naming file, row and field) or
is skipped and counted, as the caller chooses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from forecast_dojo.corpus.importers import ImportReport
from forecast_dojo.errors import ConfigError, InputNotFoundError
from forecast_dojo.errors import RecordError as RecordError
from forecast_dojo.jsonl import nonblank_lines
from forecast_dojo.schema import Document, SchemaError
from forecast_dojo.timeutil import InstantError, parse_instant

SOURCE_KIND = "generic"
SUFFIXES = (".jsonl", ".parquet")
ON_BAD_RECORD = ("fail", "skip")


def _records(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """(row number, record or None, problem) for each row; rows are numbered from 1."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
        row = 0
        for batch in parquet.iter_batches(batch_size=4096):
            for record in batch.to_pylist():
                row += 1
                yield row, record, None
        return
    for row, line in nonblank_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            yield row, None, f"not JSON ({err.msg})"
            continue
        if not isinstance(record, dict):
            yield row, None, f"not a JSON object but {type(record).__name__}"
            continue
        yield row, record, None


def _is_day_precision(value: object) -> bool:
    if isinstance(value, date) and not isinstance(value, datetime):
        return True
    return isinstance(value, str) and len(value.strip()) == 10 and value.strip()[4] == "-"


def record_to_document(record: dict[str, Any], *, default_id: str, where: str) -> Document:
    """One record as a document; raises :class:`SchemaError` naming ``where`` and the bad field."""
    text = record.get("text")
    if not isinstance(text, str) or not text.strip():
        raise RecordError(where, "text: missing or empty")
    raw_published = record.get("published_at")
    if raw_published is None or (isinstance(raw_published, str) and not raw_published.strip()):
        raise RecordError(where, "published_at: missing")
    try:
        published = parse_instant(raw_published, date_means="start")
    except InstantError as err:
        raise RecordError(where, "published_at: not a usable date", str(err)) from err
    raw_available = record.get("available_at")
    if raw_available is None or (isinstance(raw_available, str) and not raw_available.strip()):
        day_precision = _is_day_precision(raw_published)
        available = parse_instant(raw_published, date_means="end") if day_precision else published
        date_source = "given:published_at(day)" if day_precision else "given:published_at"
    else:
        try:
            available = parse_instant(raw_available, date_means="end")
        except InstantError as err:
            raise RecordError(where, "available_at: not a usable date", str(err)) from err
        date_source = "given:available_at"
    if available < published:
        raise RecordError(
            where, "available_at: precedes published_at", f"{raw_available!r} < {raw_published!r}"
        )
    doc_id = record.get("id")
    doc_id = default_id if doc_id is None or str(doc_id).strip() == "" else str(doc_id)
    optional = {}
    for name in ("title", "url", "source"):
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            raise RecordError(where, f"{name}: not text", type(value).__name__)
        optional[name] = value
    return Document(
        id=doc_id,
        title=optional["title"] or "",
        text=text,
        published_at=published,
        available_at=available,
        url=optional["url"] or None,
        source=optional["source"] or None,
        date_source=date_source,
    )


def input_files(path: Path) -> list[Path]:
    """``path`` itself, or the ``.jsonl``/``.parquet`` files under a folder, in name order."""
    path = Path(path)
    if path.is_file():
        if path.suffix not in SUFFIXES:
            raise SchemaError(f"{path}: generic documents files end in .jsonl or .parquet")
        return [path]
    if not path.is_dir():
        raise InputNotFoundError(f"generic documents input not found: {path}")
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    if not files:
        raise InputNotFoundError(f"{path}: no .jsonl or .parquet files")
    return files


def read_generic_file(path: Path, *, on_bad_record: str = "fail") -> tuple[list[Document], ImportReport]:
    """Import one JSONL/parquet file. Ids default to ``<file stem>-<row>``, stable for the same file."""
    if on_bad_record not in ON_BAD_RECORD:
        raise ConfigError(f"on_bad_record must be one of {ON_BAD_RECORD}, not {on_bad_record!r}")
    report = ImportReport(source=SOURCE_KIND, files_seen=1)
    documents: list[Document] = []
    for row, record, problem in _records(Path(path)):
        report.records_seen += 1
        where = f"{path}: row {row}"
        try:
            if record is None:
                raise RecordError(where, "record: unreadable", problem or "")
            rid = record.get("id")
            if rid is not None and str(rid).strip():
                where = f"{where} (id {rid!r})"
            documents.append(record_to_document(record, default_id=f"{Path(path).stem}-{row}", where=where))
        except RecordError as err:
            if on_bad_record == "fail":
                raise
            report.skip(err.reason, str(err))
    for doc in documents:
        report.date_sources[doc.date_source] += 1
    report.documents = len(documents)
    report.files_imported = 1 if documents else 0
    if not documents:
        report.exclude_file(str(path), "no usable records")
    return documents, report


def load_generic_documents(
    path: Path,
    *,
    start: date | None = None,
    end: date | None = None,
    progress: bool = True,
    on_bad_record: str = "fail",
) -> tuple[list[Document], ImportReport]:
    """Import a JSONL/parquet file or folder of them; keep documents published within ``[start, end]``.

    Raises:
        SchemaError: a bad record (with ``on_bad_record="fail"``), or two documents with one id.
    """
    from forecast_dojo.corpus.importers import import_source

    return import_source(
        SOURCE_KIND, Path(path), start=start, end=end, progress=progress, on_bad_record=on_bad_record
    )
