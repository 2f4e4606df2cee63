"""Generic JSONL/parquet importer: date forms, availability rules, ids, and bad rows (fail or skip)."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from forecast_dojo.corpus.importers.generic import load_generic_documents, read_generic_file
from forecast_dojo.schema import SchemaError
from forecast_dojo.timeutil import UTC, end_of_day


def write_jsonl(path: Path, records: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_date_forms_and_availability(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "news.jsonl",
        [
            {
                "id": "a",
                "text": "Bare date.",
                "published_at": "2024-03-05",
                "title": "T",
                "url": "https://x.org/a",
            },
            {"text": "Zoned time.", "published_at": "2024-03-05T23:30:00-05:00", "source": "Wire"},
            {"text": "Naive time means UTC.", "published_at": "2024-03-05T10:00:00"},
            {"text": "Z time.", "published_at": "2024-03-05T10:00:00Z", "available_at": "2024-03-06"},
        ],
    )
    docs, report = read_generic_file(path)
    a, zoned, naive, explicit = docs
    assert a.id == "a" and a.title == "T" and a.url == "https://x.org/a"
    assert a.published_at == datetime(2024, 3, 5, tzinfo=UTC)
    assert a.available_at == end_of_day(date(2024, 3, 5))  # a bare date: the end of its day
    assert a.date_source == "given:published_at(day)"
    assert zoned.id == "news-2"  # default id: file stem and row number
    assert zoned.published_at == datetime(2024, 3, 5, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert zoned.available_at == datetime(2024, 3, 6, 4, 30, tzinfo=UTC) and zoned.source == "Wire"
    assert naive.available_at == datetime(2024, 3, 5, 10, tzinfo=UTC)
    assert explicit.available_at == end_of_day(date(2024, 3, 6))  # available_at as a date: its end
    assert explicit.date_source == "given:available_at"
    assert report.documents == 4 and report.date_sources["given:published_at"] == 2


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"text": "No date."}, "row 1: published_at: missing"),
        ({"text": "Bad date.", "published_at": "last Tuesday"}, "row 1: published_at: not a usable date"),
        ({"text": " ", "published_at": "2024-01-01"}, "row 1: text: missing or empty"),
        (
            {"id": "x", "text": "Early.", "published_at": "2024-01-02", "available_at": "2023-12-01"},
            "row 1 (id 'x'): available_at: precedes",
        ),
        ({"text": "Title.", "published_at": "2024-01-02", "title": 5}, "title: not text"),
    ],
)
def test_bad_rows_fail_naming_the_row_and_field(tmp_path: Path, record: dict, message: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [record])
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_generic_file(path)


def test_bad_rows_can_be_skipped_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"text": "Good.", "published_at": "2024-01-01"})
        + "\nnot json\n"
        + json.dumps({"text": "No date."})
        + "\n"
        + json.dumps({"text": "No date either.", "published_at": ""})
        + "\n",
        encoding="utf-8",
    )
    docs, report = read_generic_file(path, on_bad_record="skip")
    assert [d.id for d in docs] == ["mixed-1"]
    assert report.skipped == {"record: unreadable": 1, "published_at: missing": 2}
    assert "row 3" in report.skipped_examples["published_at: missing"][0]
    with pytest.raises(ValueError, match="on_bad_record"):
        read_generic_file(path, on_bad_record="ignore")


def test_parquet_folder_date_range_and_duplicate_ids(tmp_path: Path) -> None:
    table = pa.Table.from_pylist(
        [
            {"id": "p1", "text": "Timestamp column.", "published_at": datetime(2024, 2, 1, 8, tzinfo=UTC)},
            {"id": "p2", "text": "Later.", "published_at": datetime(2024, 5, 1, 8, tzinfo=UTC)},
        ]
    )
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(table, folder / "part.parquet")
    write_jsonl(folder / "more.jsonl", [{"id": "j1", "text": "Date object.", "published_at": "2024-02-10"}])
    docs, report = load_generic_documents(
        folder, start=date(2024, 1, 1), end=date(2024, 3, 1), progress=False
    )
    assert sorted(d.id for d in docs) == ["j1", "p1"]
    assert report.notes["outside --start/--end"] == 1 and report.files_seen == 2
    assert docs[[d.id for d in docs].index("p1")].available_at == datetime(2024, 2, 1, 8, tzinfo=UTC)
    write_jsonl(folder / "zdupe.jsonl", [{"id": "p1", "text": "Same id.", "published_at": "2024-02-11"}])
    with pytest.raises(SchemaError, match="duplicate document ids"):
        load_generic_documents(folder, progress=False)
    with pytest.raises(FileNotFoundError):
        load_generic_documents(tmp_path / "nothing", progress=False)
    with pytest.raises(SchemaError, match=r"\.jsonl or \.parquet"):
        load_generic_documents(write_jsonl(tmp_path / "x.csv", []), progress=False)
