"""Web pages from WARC files (CC-News or any crawl): main text, title, and a defensible date.

Dating is a fixed-priority cascade; the first rule that yields a date inside ``[min_year, max_year]``
wins and is recorded in ``date_source``:

1. ``jsonld:datePublished``  schema.org JSON-LD
2. ``jsonld:dateModified``
3. ``meta:<name>``           OpenGraph / meta tags (``article:published_time`` and friends, then
                             modification tags such as ``article:modified_time``)
4. ``url``                   a ``/2024/03/05/``-style date in the URL
5. ``warc-date``             the crawl timestamp

Availability (when the text we hold could first have been read), chosen so no later text leaks:

* a time with a zone is available at that instant; a bare date at the END of its UTC day; a time
  without a zone (wall-clock of an unknown zone) 12 hours after it read as UTC (zones west of UTC lag
  by at most 12 h);
* the crawl captured the page as it was at crawl time, which may include edits: when the page declares
  a modification after its publication, ``available_at`` is never earlier than that modification;
* the page provably existed, with this very text, at the crawl: ``available_at`` is never later than the
  crawl timestamp. A page whose claimed publication is AFTER its crawl is lying about its date (or is
  mis-zoned); it is dated by the crawl (``date_source="warc-date:claimed-after-crawl"``) and counted.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from forecast_dojo.corpus.importers import ImportReport
from forecast_dojo.errors import InputNotFoundError, SchemaError
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import UTC, end_of_day, parse_instant

SOURCE_KIND = "warc"
MIN_YEAR = 2010
MAX_YEAR = 2030
NAIVE_TIME_SLACK = timedelta(hours=12)
WARC_SUFFIXES = (".warc", ".warc.gz", ".arc", ".arc.gz")
# Meta tags (property / name / itemprop, lower-cased) in priority order: publication first, then modification.
PUBLISHED_META = (
    "article:published_time",
    "og:article:published_time",
    "og:published_time",
    "datepublished",
    "pubdate",
    "publishdate",
    "publish-date",
    "publish_date",
    "parsely-pub-date",
    "sailthru.date",
    "article.published",
    "dc.date.issued",
    "dcterms.issued",
    "dc.date",
    "dcterms.created",
    "date",
)
MODIFIED_META = (
    "article:modified_time",
    "og:updated_time",
    "datemodified",
    "dcterms.modified",
    "last-modified",
)
_URL_DATE = re.compile(r"(?<!\d)(20\d{2})([/_-])(0[1-9]|1[0-2])\2(0[1-9]|[12]\d|3[01])(?!\d)")
_URL_COMPACT_DATE = re.compile(r"(?<![\d])(20\d{2})(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])(?![\d])")
_ISO_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_OFFSET_NO_COLON = re.compile(r"([+-]\d{2})(\d{2})$")


@dataclass(frozen=True)
class DateClaim:
    """A date a page claims: the earliest instant it can mean and when its content was surely out."""

    rule: str
    published_at: datetime
    available_at: datetime
    precision: str  # "instant", "local-time" (no zone) or "day"


@dataclass(frozen=True)
class PageDate:
    """The dating decision for one page."""

    published_at: datetime
    available_at: datetime
    date_source: str
    notes: tuple[str, ...] = ()


def parse_web_date(value: str, rule: str) -> DateClaim | None:
    """Read the date formats pages use (ISO 8601 in its variants, RFC 2822, ``YYYYMMDD``); None if unreadable."""
    text = " ".join(str(value).split())
    if not text:
        return None
    try:
        if _ISO_DAY.match(text):
            day = date.fromisoformat(text)
            return DateClaim(rule, datetime.combine(day, time(0), tzinfo=UTC), end_of_day(day), "day")
        if re.fullmatch(r"\d{8}", text):
            day = date(int(text[:4]), int(text[4:6]), int(text[6:]))
            return DateClaim(rule, datetime.combine(day, time(0), tzinfo=UTC), end_of_day(day), "day")
        if _ISO_TIME.match(text):
            iso_text = text.replace(" ", "T", 1)
            if iso_text.endswith(("Z", "z")):
                iso_text = iso_text[:-1] + "+00:00"
            iso_text = _OFFSET_NO_COLON.sub(r"\1:\2", iso_text)
            iso_text = re.sub(r"(\.\d{6})\d+", r"\1", iso_text)  # nanoseconds -> microseconds
            parsed = datetime.fromisoformat(iso_text)
        else:
            parsed = parsedate_to_datetime(text)
    except (ValueError, TypeError, IndexError):
        return None
    if parsed.tzinfo is None:
        as_utc = parsed.replace(tzinfo=UTC)
        return DateClaim(rule, as_utc, as_utc + NAIVE_TIME_SLACK, "local-time")
    instant = parse_instant(parsed)
    return DateClaim(rule, instant, instant, "instant")


def _jsonld_objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            if isinstance(value, (dict, list)):
                yield from _jsonld_objects(value)
    elif isinstance(node, list):
        for item in node:
            yield from _jsonld_objects(item)


@dataclass
class PageMetadata:
    """What the HTML head says about a page: JSON-LD and meta dates, title and site name."""

    jsonld_published: list[str]
    jsonld_modified: list[str]
    meta: dict[str, list[str]]
    title: str
    site_name: str | None


def read_page_metadata(html: str) -> PageMetadata:
    """Collect JSON-LD dates, meta tags and the title from a page (malformed JSON-LD is ignored)."""
    from lxml import html as lxml_html

    try:
        tree = lxml_html.fromstring(html)
    except (ValueError, TypeError) as err:  # empty or undecodable document
        raise SchemaError(f"not HTML: {err}") from err
    published: list[str] = []
    modified: list[str] = []
    headlines: list[str] = []
    for script in tree.xpath('//script[@type="application/ld+json"]'):
        try:
            data = json.loads(script.text_content() or "null")
        except json.JSONDecodeError:
            continue
        for obj in _jsonld_objects(data):
            for key, bucket in (
                ("datePublished", published),
                ("dateModified", modified),
                ("headline", headlines),
            ):
                value = obj.get(key)
                if isinstance(value, str) and value.strip():
                    bucket.append(value.strip())
    meta: dict[str, list[str]] = {}
    for element in tree.xpath("//meta"):
        key = (
            element.get("property")
            or element.get("name")
            or element.get("itemprop")
            or element.get("http-equiv")
        )
        value = element.get("content")
        if key and value and value.strip():
            meta.setdefault(key.strip().lower(), []).append(value.strip())
    for element in tree.xpath("//time[@itemprop]"):
        key, value = element.get("itemprop", "").lower(), element.get("datetime")
        if key in ("datepublished", "datemodified") and value:
            meta.setdefault(key, []).append(value.strip())
    title = ""
    for candidate in (
        meta.get("og:title", [""])[0],
        headlines[0] if headlines else "",
        tree.findtext(".//title") or "",
    ):
        if candidate and candidate.strip():
            title = " ".join(candidate.split())
            break
    site = meta.get("og:site_name", [None])[0]
    return PageMetadata(published, modified, meta, title, site)


def _valid(claim: DateClaim | None, min_year: int, max_year: int, notes: list[str]) -> DateClaim | None:
    if claim is None:
        return None
    if not min_year <= claim.published_at.year <= max_year:
        notes.append(f"discarded out-of-range date from {claim.rule}")
        return None
    return claim


def date_page(
    metadata: PageMetadata,
    url: str,
    crawled_at: datetime,
    *,
    min_year: int = MIN_YEAR,
    max_year: int = MAX_YEAR,
) -> PageDate:
    """Apply the dating cascade and the availability rules of this module's docstring to one page."""
    notes: list[str] = []

    def first(values: list[str], rule: str, sink: list[str] = notes) -> DateClaim | None:
        for value in values:
            claim = parse_web_date(value, rule)
            if claim is None:
                sink.append(f"unreadable date in {rule}")
                continue
            claim = _valid(claim, min_year, max_year, sink)
            if claim is not None:
                return claim
        return None

    cascade: list[tuple[str, list[str]]] = [
        ("jsonld:datePublished", metadata.jsonld_published),
        ("jsonld:dateModified", metadata.jsonld_modified),
    ]
    cascade += [(f"meta:{key}", metadata.meta.get(key, [])) for key in PUBLISHED_META + MODIFIED_META]
    chosen = None
    for rule, values in cascade:
        chosen = first(values, rule)
        if chosen is not None:
            break
    if chosen is None:
        chosen = _valid(url_date(url), min_year, max_year, notes)
    crawl = parse_instant(crawled_at)
    if chosen is None:
        return PageDate(crawl, crawl, "warc-date", tuple(notes))
    published, available = chosen.published_at, chosen.available_at
    already_noted: list[str] = []  # problems of modification tags are noted once, by the cascade
    modifications = [first(metadata.jsonld_modified, "jsonld:dateModified", already_noted)]
    modifications += [
        first(metadata.meta.get(key, []), f"meta:{key}", already_noted) for key in MODIFIED_META
    ]
    latest = max((m.available_at for m in modifications if m is not None), default=None)
    if latest is not None and latest > available:
        available = latest
        notes.append("available_at raised to the declared modification")
    if published > crawl:
        notes.append("claimed publication after the crawl")
        return PageDate(crawl, crawl, "warc-date:claimed-after-crawl", tuple(notes))
    if available > crawl:
        available = crawl
        notes.append("available_at capped at the crawl")
    return PageDate(published, available, chosen.rule, tuple(notes))


def url_date(url: str) -> DateClaim | None:
    """A day-precision date in a URL path (``/2024/03/05/``, ``2024-03-05``, ``20240305``)."""
    path = urlsplit(url).path
    match = _URL_DATE.search(path)
    groups: tuple[str, ...] | None = (match.group(1), match.group(3), match.group(4)) if match else None
    if groups is None:
        compact = _URL_COMPACT_DATE.search(path)
        groups = compact.groups() if compact else None
    if groups is None:
        return None
    try:
        day = date(int(groups[0]), int(groups[1]), int(groups[2]))
    except ValueError:
        return None
    return DateClaim("url", datetime.combine(day, time(0), tzinfo=UTC), end_of_day(day), "day")


def extract_main_text(html: str, url: str) -> str | None:
    """The article body (trafilatura, precision-leaning, no comments or tables); None if there is none."""
    import trafilatura

    text = trafilatura.extract(
        html, url=url, include_comments=False, include_tables=False, with_metadata=False, favor_precision=True
    )
    return text.strip() if text and text.strip() else None


def _decode(body: bytes, content_type: str) -> str:
    match = re.search(r"charset=([\w-]+)", content_type or "", re.IGNORECASE)
    for encoding in ([match.group(1)] if match else []) + ["utf-8"]:
        try:
            return body.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    return body.decode("utf-8", errors="replace")


def _host(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host.removeprefix("www.")


def read_warc_file(
    path: Path, *, min_year: int = MIN_YEAR, max_year: int = MAX_YEAR
) -> tuple[list[Document], ImportReport]:
    """Import the HTML responses of one WARC file; other records are counted and skipped."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    report = ImportReport(source=SOURCE_KIND, files_seen=1)
    documents: list[Document] = []
    valid_records = 0
    try:
        with Path(path).open("rb") as stream:
            for record in ArchiveIterator(stream, arc2warc=True):
                url = record.rec_headers.get_header("WARC-Target-URI") or ""
                if urlsplit(url).scheme not in ("http", "https", "dns", "urn"):
                    continue  # warcio reads any text as an ARC header line; real records name a URL
                valid_records += 1
                if record.rec_type != "response":
                    continue
                report.records_seen += 1
                document = _record_document(record, report, min_year=min_year, max_year=max_year)
                if document is not None:
                    documents.append(document)
    except (ArchiveLoadFailed, OSError, EOFError, ValueError) as err:
        report.exclude_file(str(path), f"unreadable WARC: {err}")
        return [], report
    if valid_records == 0:
        report.exclude_file(str(path), "not a WARC/ARC file (no record with a URL)")
        return [], report
    report.files_imported = 1
    report.documents = len(documents)
    return documents, report


def _record_document(record: Any, report: ImportReport, *, min_year: int, max_year: int) -> Document | None:
    url = record.rec_headers.get_header("WARC-Target-URI") or ""
    warc_date = record.rec_headers.get_header("WARC-Date")
    record_id = record.rec_headers.get_header("WARC-Record-ID") or url
    if record.http_headers is None:
        report.skip("no HTTP headers", url)
        return None
    status = record.http_headers.get_statuscode()
    if status != "200":
        report.skip(f"HTTP status {status}", url)
        return None
    content_type = record.http_headers.get_header("Content-Type") or ""
    if "html" not in content_type.lower():
        report.skip("not HTML", f"{url} ({content_type})")
        return None
    if not warc_date:
        report.skip("no WARC-Date", url)
        return None
    html = _decode(record.content_stream().read(), content_type)
    try:
        metadata = read_page_metadata(html)
    except ValueError as err:
        report.skip("not HTML", f"{url} ({err})")
        return None
    text = extract_main_text(html, url)
    if text is None:
        report.skip("no main text", url)
        return None
    dated = date_page(metadata, url, parse_instant(warc_date), min_year=min_year, max_year=max_year)
    report.date_sources[dated.date_source] += 1
    report.notes.update(dated.notes)
    return Document(
        id="warc-" + hashlib.sha1(record_id.encode("utf-8")).hexdigest()[:16],
        title=metadata.title,
        text=text,
        published_at=dated.published_at,
        available_at=dated.available_at,
        url=url or None,
        source=metadata.site_name or _host(url) or None,
        date_source=dated.date_source,
    )


def warc_files(path: Path) -> list[Path]:
    """``path`` itself, or every WARC/ARC file (optionally gzipped) under a folder, in name order."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputNotFoundError(f"WARC input not found: {path}")
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(WARC_SUFFIXES))
    if not files:
        raise InputNotFoundError(f"{path}: no .warc / .warc.gz files")
    return files


def load_warc(
    path: Path,
    *,
    start: date | None = None,
    end: date | None = None,
    progress: bool = True,
    min_year: int = MIN_YEAR,
    max_year: int = MAX_YEAR,
) -> tuple[list[Document], ImportReport]:
    """Import a WARC file or a folder of them; keep pages published within ``[start, end]``."""
    from forecast_dojo.corpus.importers import import_source

    return import_source(
        SOURCE_KIND, Path(path), start=start, end=end, progress=progress, min_year=min_year, max_year=max_year
    )
