"""Importers: turn raw sources (Wikipedia day pages, dated JSONL/parquet, WARC crawls) into documents.

Every importer returns ``(documents, ImportReport)``. The report says what was read, what was left out
and why (whole files excluded, records skipped), and which rule dated the documents, so that nothing
is silently dropped or half-imported. Importer modules are looked up lazily through :data:`IMPORTERS`
(they pull in YAML, lxml, trafilatura...), so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# source kind -> "module:function" with signature (path, *, start, end, progress, **options)
IMPORTERS: dict[str, str] = {
    "wikipedia": "forecast_dojo.corpus.importers.wikipedia:load_wikipedia_current_events",
    "generic": "forecast_dojo.corpus.importers.generic:load_generic_documents",
    "warc": "forecast_dojo.corpus.importers.warc:load_warc",
}
MAX_EXAMPLES = 20


@dataclass
class ImportReport:
    """What one import read, produced and left out (goes into the corpus build report).

    ``excluded_files`` lists whole input files that contributed nothing, each with its reason;
    ``skipped`` counts records left out inside otherwise good files, by reason, with a few examples.
    """

    source: str
    files_seen: int = 0
    files_imported: int = 0
    records_seen: int = 0
    documents: int = 0
    excluded_files: list[dict[str, str]] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_examples: dict[str, list[str]] = field(default_factory=dict)
    date_sources: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)

    def exclude_file(self, path: str, reason: str) -> None:
        self.excluded_files.append({"path": path, "reason": reason})

    def skip(self, reason: str, example: str) -> None:
        """Count one skipped record under ``reason`` and keep the first few examples for the report."""
        self.skipped[reason] += 1
        examples = self.skipped_examples.setdefault(reason, [])
        if len(examples) < MAX_EXAMPLES:
            examples.append(example)

    def merge(self, other: ImportReport) -> None:
        """Add another report (e.g. of one more file, or from a parallel worker) into this one."""
        self.files_seen += other.files_seen
        self.files_imported += other.files_imported
        self.records_seen += other.records_seen
        self.documents += other.documents
        self.excluded_files.extend(other.excluded_files)
        self.skipped.update(other.skipped)
        for reason, examples in other.skipped_examples.items():
            mine = self.skipped_examples.setdefault(reason, [])
            mine.extend(examples[: max(0, MAX_EXAMPLES - len(mine))])
        self.date_sources.update(other.date_sources)
        self.notes.update(other.notes)

    def to_dict(self) -> dict[str, Any]:
        self.excluded_files.sort(key=lambda item: item["path"])
        return {
            "source": self.source,
            "files_seen": self.files_seen,
            "files_imported": self.files_imported,
            "records_seen": self.records_seen,
            "documents": self.documents,
            "excluded_files": list(self.excluded_files),
            "skipped": dict(sorted(self.skipped.items())),
            "skipped_examples": {k: list(v) for k, v in sorted(self.skipped_examples.items())},
            "date_sources": dict(sorted(self.date_sources.items())),
            "notes": dict(sorted(self.notes.items())),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ImportReport:
        return cls(
            source=data["source"],
            files_seen=int(data.get("files_seen", 0)),
            files_imported=int(data.get("files_imported", 0)),
            records_seen=int(data.get("records_seen", 0)),
            documents=int(data.get("documents", 0)),
            excluded_files=[dict(item) for item in data.get("excluded_files", [])],
            skipped=Counter(data.get("skipped", {})),
            skipped_examples={k: list(v) for k, v in data.get("skipped_examples", {}).items()},
            date_sources=Counter(data.get("date_sources", {})),
            notes=Counter(data.get("notes", {})),
        )


def get_importer(kind: str) -> Callable[..., Any]:
    """The load function of a source kind (``wikipedia``, ``generic``, ``warc``), imported on demand."""
    if kind not in IMPORTERS:
        raise ValueError(f"unknown source kind {kind!r}; known: {', '.join(sorted(IMPORTERS))}")
    module_name, _, function = IMPORTERS[kind].partition(":")
    return getattr(importlib.import_module(module_name), function)


__all__ = ["IMPORTERS", "ImportReport", "get_importer"]
