"""Importers: turn raw sources (Wikipedia day pages, dated JSONL/parquet, WARC crawls) into documents.

Every importer reads one input file at a time and returns ``(documents, ImportReport)``. The report
says what was read, what was left out and why (whole files excluded, records skipped), and which
rule dated the documents, so that nothing is silently dropped or half-imported. :data:`IMPORTERS`
names each source kind's :class:`Importer` (how to list its input files, how to read one, which
``[import]`` options it takes); the importer modules themselves are imported only when used (they
pull in YAML, lxml, trafilatura...), so importing this package stays cheap.

:func:`import_file` (read one file, keep the documents published within ``[start, end]``) is the unit
of work of both corpus-build executors; :func:`import_source` runs it over every file in one process.
"""

from __future__ import annotations

import importlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_dojo.errors import ConfigError

if TYPE_CHECKING:
    from forecast_dojo.schema import Document

MAX_EXAMPLES = 20
OUTSIDE_RANGE = "outside --start/--end"


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
        """Record that the whole file ``path`` contributed nothing, and why."""
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
        """The report as plain JSON values (excluded files sorted by path)."""
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
        """Read back :meth:`to_dict`'s output (e.g. from a parallel worker)."""
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


@dataclass(frozen=True)
class Importer:
    """How to import one source kind: list its input files, read one file (both looked up lazily).

    Attributes:
        kind: The source kind (``wikipedia``, ``generic``, ``warc``).
        list_files: ``"module:function"``, ``fn(path) -> list[Path]``: the files to read, in order; with
            ``dated_file_names``, ``fn(path, start=, end=)`` leaves out files named for other days.
        read_file: ``"module:function"``, ``fn(path, **options) -> (documents, ImportReport)``: one file.
        options: The ``[import]`` recipe options that ``read_file`` accepts.
        unit: What one file is, for progress bars.
        dated_file_names: Whether a file's name gives its day, so files outside the range are not read.
    """

    kind: str
    list_files: str
    read_file: str
    options: frozenset[str] = frozenset()
    unit: str = "file"
    dated_file_names: bool = False

    @staticmethod
    def _function(target: str) -> Callable[..., Any]:
        module, _, name = target.partition(":")
        return getattr(importlib.import_module(module), name)

    def files(self, path: Path, start: date | None = None, end: date | None = None) -> list[Path]:
        """The input files under ``path`` (a file or a folder) that an import reads, in order."""
        list_files = self._function(self.list_files)
        if self.dated_file_names:
            return list(list_files(Path(path), start=start, end=end))
        return list(list_files(Path(path)))

    def read(self, path: Path, **options: Any) -> tuple[list[Document], ImportReport]:
        """Import one input file with the given ``[import]`` options."""
        return self._function(self.read_file)(Path(path), **options)


def wikipedia_day_files(path: Path, *, start: date | None = None, end: date | None = None) -> list[Path]:
    """The Wikipedia day pages under ``path`` named for a day in ``[start, end]``, in date order."""
    from forecast_dojo.corpus.importers.wikipedia import list_day_files

    return [file for _, file in list_day_files(path, start=start, end=end)]


_PACKAGE = "forecast_dojo.corpus.importers"
IMPORTERS: dict[str, Importer] = {
    "wikipedia": Importer(
        "wikipedia",
        f"{_PACKAGE}:wikipedia_day_files",
        f"{_PACKAGE}.wikipedia:parse_day_file",
        unit="day",
        dated_file_names=True,
    ),
    "generic": Importer(
        "generic",
        f"{_PACKAGE}.generic:input_files",
        f"{_PACKAGE}.generic:read_generic_file",
        frozenset({"on_bad_record"}),
    ),
    "warc": Importer(
        "warc",
        f"{_PACKAGE}.warc:warc_files",
        f"{_PACKAGE}.warc:read_warc_file",
        frozenset({"min_year", "max_year"}),
    ),
}


def get_importer(kind: str) -> Importer:
    """The :class:`Importer` of a source kind (``wikipedia``, ``generic``, ``warc``)."""
    if kind not in IMPORTERS:
        raise ConfigError(f"unknown source kind {kind!r}; known: {', '.join(sorted(IMPORTERS))}")
    return IMPORTERS[kind]


def published_within(document: Document, start: date | None, end: date | None) -> bool:
    """Whether a document's publication day lies in ``[start, end]`` (either bound may be open)."""
    day = document.published_at.date()
    return (start is None or day >= start) and (end is None or day <= end)


def import_file(
    kind: str,
    path: Path,
    *,
    start: date | None = None,
    end: date | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[list[Document], ImportReport]:
    """Read one input file and keep the documents published within ``[start, end]`` (the rest counted)."""
    documents, report = get_importer(kind).read(path, **(options or {}))
    kept = [d for d in documents if published_within(d, start, end)]
    if len(kept) != len(documents):
        report.notes[OUTSIDE_RANGE] += len(documents) - len(kept)
        report.documents = len(kept)
    return kept, report


def check_unique_ids(ids: Sequence[str], where: str | Path) -> None:
    """Raise :class:`~forecast_dojo.schema.SchemaError` naming the first ids used by two documents."""
    if len(set(ids)) == len(ids):
        return
    from forecast_dojo.schema import SchemaError

    seen: set[str] = set()
    repeated: set[str] = set()
    for i in ids:
        (repeated if i in seen else seen).add(i)
    dupes = sorted(repeated)
    raise SchemaError(f"{where}: duplicate document ids {dupes[:10]}")


def import_source(
    kind: str,
    path: Path,
    *,
    start: date | None = None,
    end: date | None = None,
    progress: bool = True,
    **options: Any,
) -> tuple[list[Document], ImportReport]:
    """Import every input file of a source in this process; one merged report, unique ids checked."""
    from tqdm.auto import tqdm

    importer = get_importer(kind)
    report = ImportReport(source=kind)
    documents: list[Document] = []
    files = importer.files(Path(path), start, end)
    for file in tqdm(files, desc=f"import {kind}", unit=importer.unit, disable=not progress):
        file_documents, file_report = import_file(kind, file, start=start, end=end, options=options)
        report.merge(file_report)
        documents.extend(file_documents)
    check_unique_ids([d.id for d in documents], path)
    return documents, report


__all__ = [
    "IMPORTERS",
    "ImportReport",
    "Importer",
    "check_unique_ids",
    "get_importer",
    "import_file",
    "import_source",
    "published_within",
    "wikipedia_day_files",
]
