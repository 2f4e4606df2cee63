"""WARC importer: text and title extraction and every rule of the dating cascade, on WARCs we write."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

pytest.importorskip("warcio")
pytest.importorskip("trafilatura")

from forecast_dojo.corpus.importers.warc import (  # noqa: E402
    date_page,
    load_warc,
    parse_web_date,
    read_page_metadata,
    read_warc_file,
    url_date,
)
from forecast_dojo.timeutil import UTC, end_of_day  # noqa: E402

from .warc_fixtures import PAGES, Page, jsonld, meta, title, write_warc  # noqa: E402


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, object]:
    path = write_warc(tmp_path_factory.mktemp("warc") / "crawl.warc.gz", list(PAGES.values()))
    docs, report = read_warc_file(path)
    by_url = {d.url: d for d in docs}
    return {name: by_url.get(page.url) for name, page in PAGES.items()}, report


# name -> (date_source, published_at, available_at)
EXPECTED = {
    "jsonld_published": ("jsonld:datePublished", utc(2024, 3, 5, 13, 30), utc(2024, 3, 5, 13, 30)),
    "jsonld_modified_only": ("jsonld:dateModified", utc(2024, 3, 6, 8), utc(2024, 3, 6, 8)),
    "meta_published": ("meta:article:published_time", utc(2024, 3, 4, 9, 15), utc(2024, 3, 4, 9, 15)),
    "url_date": ("url", utc(2024, 3, 2), end_of_day(date(2024, 3, 2))),
    "warc_date": ("warc-date", utc(2024, 3, 11, 6, 30), utc(2024, 3, 11, 6, 30)),
    "conflicting": ("jsonld:datePublished", utc(2024, 3, 1, 12), utc(2024, 3, 1, 12)),
    "timezone": ("meta:article:published_time", utc(2024, 3, 6, 4, 30), utc(2024, 3, 6, 4, 30)),
    "modified_after": ("jsonld:datePublished", utc(2024, 3, 5, 10), utc(2024, 3, 6, 18)),
    "claimed_after_crawl": ("warc-date:claimed-after-crawl", utc(2024, 3, 5, 8), utc(2024, 3, 5, 8)),
    "day_same_as_crawl": ("meta:article:published_time", utc(2024, 3, 5), utc(2024, 3, 5, 15)),
    "out_of_range": ("url", utc(2024, 3, 3), end_of_day(date(2024, 3, 3))),
    "naive_time": ("meta:article:published_time", utc(2024, 3, 5, 10), utc(2024, 3, 5, 22)),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dating_rule(imported: tuple[dict, object], name: str) -> None:
    doc = imported[0][name]
    assert doc is not None, f"page {name} was not imported"
    assert (doc.date_source, doc.published_at, doc.available_at) == EXPECTED[name]
    crawled = datetime.fromisoformat(PAGES[name].crawled.replace("Z", "+00:00"))
    assert doc.available_at <= crawled  # the crawled text existed at the crawl: never later than it


def test_text_title_source_and_skips(imported: tuple[dict, object]) -> None:
    docs, report = imported
    budget = docs["jsonld_published"]
    assert budget.title == "Budget vote"
    assert "city council of Springfield voted" in budget.text and "new budget" in budget.text
    assert "Copyright Example News" not in budget.text and "Home | World" not in budget.text
    assert budget.source == "news.example.com" and budget.id.startswith("warc-")
    assert docs["not_found"] is None and docs["not_html"] is None
    assert report.skipped["HTTP status 404"] == 1 and report.skipped["not HTML"] == 1
    assert report.records_seen == len(PAGES)  # request records are not counted as pages
    assert report.notes["claimed publication after the crawl"] == 1
    assert report.notes["discarded out-of-range date from jsonld:datePublished"] == 1
    assert report.notes["available_at raised to the declared modification"] == 1
    assert report.notes["available_at capped at the crawl"] == 1
    assert len({d.id for d in docs.values() if d is not None}) == report.documents


def test_parse_web_date_forms() -> None:
    assert parse_web_date("2024-03-05T10:00:00.123456789+0100", "r").published_at == utc(
        2024, 3, 5, 9, 0, 0, 123456
    )
    assert parse_web_date("Tue, 05 Mar 2024 10:00:00 GMT", "r").published_at == utc(2024, 3, 5, 10)
    assert parse_web_date("20240305", "r").precision == "day"
    assert parse_web_date("2024-03-05 10:00", "r").precision == "local-time"
    assert parse_web_date("yesterday", "r") is None
    assert parse_web_date("2024-02-30", "r") is None


def test_url_date_forms() -> None:
    assert url_date("https://a.com/2024/03/05/x").published_at == utc(2024, 3, 5)
    assert url_date("https://a.com/news/2024-03-05-story").published_at == utc(2024, 3, 5)
    assert url_date("https://a.com/article-20240305.html").published_at == utc(2024, 3, 5)
    assert url_date("https://a.com/2024/13/05/x") is None
    assert url_date("https://a.com/story?id=20240305") is None  # only the path counts


def test_cascade_falls_through_unreadable_and_modification_meta() -> None:
    head = (
        title("T")
        + jsonld(datePublished="not a date")
        + meta("article:published_time", "2024-03-05T10:00:00Z")
        + meta("article:modified_time", "2024-03-07T10:00:00Z")
        + meta("og:site_name", "Example Daily")
    )
    metadata = read_page_metadata(Page("https://e.com/x", "2024-03-09T00:00:00Z", head).html())
    dated = date_page(metadata, "https://e.com/x", utc(2024, 3, 9))
    assert dated.date_source == "meta:article:published_time"
    assert dated.available_at == utc(2024, 3, 7, 10)
    assert "unreadable date in jsonld:datePublished" in dated.notes
    assert metadata.site_name == "Example Daily"
    # Every date out of range: the crawl dates the page.
    old = read_page_metadata(Page("https://e.com/y", "", jsonld(datePublished="2035-01-01")).html())
    assert date_page(old, "https://e.com/y", utc(2024, 3, 9)).date_source == "warc-date"
    # A modification claimed after the crawl cannot be in the crawled text: capped at the crawl.
    late = read_page_metadata(
        Page("", "", jsonld(datePublished="2024-03-01", dateModified="2024-04-01T00:00:00Z")).html()
    )
    assert date_page(late, "https://e.com/z", utc(2024, 3, 9)).available_at == utc(2024, 3, 9)


def test_load_folder_date_range_and_bad_files(tmp_path: Path) -> None:
    write_warc(tmp_path / "a.warc.gz", [PAGES["jsonld_published"], PAGES["url_date"]])
    write_warc(tmp_path / "b.warc", [PAGES["meta_published"]], gzip=False)
    (tmp_path / "broken.warc.gz").write_bytes(b"this is not a warc file at all")
    docs, report = load_warc(tmp_path, start=date(2024, 3, 3), end=date(2024, 3, 31), progress=False)
    assert sorted(d.date_source for d in docs) == ["jsonld:datePublished", "meta:article:published_time"]
    assert report.notes["outside --start/--end"] == 1
    assert [Path(e["path"]).name for e in report.excluded_files] == ["broken.warc.gz"]
    assert report.files_seen == 3 and report.files_imported == 2
    with pytest.raises(FileNotFoundError):
        load_warc(tmp_path / "missing", progress=False)
    assert timedelta(0) <= docs[0].available_at - docs[0].published_at
