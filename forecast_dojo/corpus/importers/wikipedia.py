"""Wikipedia "Portal:Current events" day pages (``YYYY/MM/YYYY-MM-DD.yaml``) as dated documents.

A day page lists, per category, a flat mix of short topic headers ("Russo-Ukrainian war") and
one-sentence event summaries ending with the reporting outlet in parentheses ("... (Reuters)").
Each summary becomes one document: its ``title`` holds the category (unless "Uncategorized") and
the topic headers directly above it, joined by " > ", so that a summary is findable under its topic;
its ``source`` holds the outlets. A page describes its day, so its documents become available at
the END of that UTC day. Files in another schema (the LLM-written 2026 days) or that do not parse
are excluded whole and listed in the report, never half-imported.

Topic headers are article titles as they stand today, so they can know the future: "War in
Afghanistan (2001–2021)" on a 2010 page says when the war ends. :func:`neutralize_header` removes
every year after the page's year and every year range ending after it (with its parentheses) from
category and header text; the report counts the changed headers under
``notes["headers_later_year_removed"]``. A title named in the page's own year ("2024 Iran–Israel
conflict" on an early-2024 page) is not caught: the year alone cannot tell.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from forecast_dojo.corpus.importers import ImportReport
from forecast_dojo.errors import InputNotFoundError, SchemaError
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import UTC, end_of_day

DATE_SOURCE = "wikipedia-day-page"
SOURCE_KIND = "wikipedia"
TITLE_SEPARATOR = " > "
_FILE_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})\.yaml$")
_UNCATEGORIZED = {"uncategorized", "uncategorised"}
# A trailing parenthesized group, allowing one level of nesting: "(Link dead as of 21:17, ... (UTC))".
_TRAILING_GROUP = re.compile(r"\s*,?\s*\(((?:[^()]|\([^()]*\))*)\)[\s,.]*$")
_NOTE = re.compile(
    r"^(link dead|dead link|archived|in [A-Z][a-z]+$|subscription required|paywall)", re.IGNORECASE
)
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# Parentheses that disambiguate an article title ("War in Afghanistan (2001–2021)", "(state)").
_DISAMBIGUATOR = re.compile(rf"^([a-z]|\d|({_MONTHS})\s+\d{{4}})")
_TRAILING_URL = re.compile(r"\s*\[?(https?://[^\s\]]*)\]?\s*$")
_SENTENCE_END = re.compile(r"[.!?][\"'”’\]]*$")
# Title-final abbreviations that end in a period without ending a sentence ("James Byrd Jr.", "D.C.").
_ABBREVIATION_END = re.compile(r"(\b(Jr|Sr|Inc|Ltd|Co|Corp|St|Bros|No|Mt)\.|\b([A-Z]\.)+)$")
_SEGMENT_SPLIT = re.compile(r"[,;:]")
_WORD = re.compile(r"[^\W\d_]+")
# A year (1800-2099) or a year range "2001–2021", "2015–16", "2014-2017", optionally in parentheses.
_YEAR_EXPR = re.compile(
    r"(?P<open>\(\s*)?(?<!\d)(?P<start>1[89]\d\d|20\d\d)"
    r"(?:\s*[–—-]\s*(?P<end>\d{4}|\d{2})(?!\d))?(?(open)\s*\)|(?!\d))"
)
HEADER_NOTE = "headers_later_year_removed"
MAX_HEADER_SEGMENT_WORDS = 14
MAX_HEADER_WORDS = 40
# Words too generic to tie a summary to a topic header.
_GENERIC = frozenset(
    [
        "about",
        "after",
        "against",
        "also",
        "among",
        "amid",
        "between",
        "during",
        "from",
        "have",
        "into",
        "more",
        "over",
        "than",
        "that",
        "their",
        "there",
        "these",
        "this",
        "under",
        "were",
        "which",
        "while",
        "with",
        "united",
        "states",
        "state",
        "international",
        "foreign",
        "relations",
        "list",
        "timeline",
        "people",
        "killed",
        "others",
        "government",
        "national",
        "president",
        "minister",
        "election",
        "elections",
        "country",
        "crisis",
        "conflict",
        "world",
        "year",
        "years",
        "former",
        "first",
        "second",
        "third",
        "new",
    ]
)


@dataclass(frozen=True)
class ListItem:
    """One list entry of a day page, classified: a topic ``header`` or an event ``summary``."""

    kind: str
    body: str
    outlets: tuple[str, ...] = ()


def _split_trailing_groups(text: str) -> tuple[str, list[str], list[str]]:
    """Peel outlet citations "(Reuters) (AP)" and notes "(in French)" off the end of an item."""
    outlets: list[str] = []
    notes: list[str] = []
    body = text
    while True:
        match = _TRAILING_GROUP.search(body)
        if match is None:
            break
        content = " ".join(match.group(1).split())
        if not content:
            body = body[: match.start()]
            continue
        if _NOTE.match(content):
            notes.append(content)
        elif _DISAMBIGUATOR.match(content) and not _SENTENCE_END.search(body[: match.start()]):
            break  # part of an article title ("War in Afghanistan (2001–2021)"), not a citation
        else:
            outlets.append(content)
        body = body[: match.start()]
    outlets.reverse()
    return body.rstrip(" ,;"), outlets, notes


def _split_trailing_urls(text: str) -> tuple[str, list[str]]:
    """Peel bare or bracketed citation URLs glued to the end of an item ("...Comoros.https://apnews.com/x")."""
    hosts: list[str] = []
    while True:
        match = _TRAILING_URL.search(text)
        if match is None:
            return text, hosts
        url = match.group(1)
        inner = url.rfind(
            "http", 8
        )  # an archived copy names the original: web.archive.org/web/.../http://...
        hosts.insert(0, (urlsplit(url[inner:] if inner > 0 else url).hostname or "").removeprefix("www."))
        text = text[: match.start()].rstrip()


def classify_item(raw: str) -> ListItem:
    """Tell a topic header from an event summary.

    Summaries cite an outlet in trailing parentheses or end like a sentence; headers are article
    titles, alone or comma-separated, each short and without terminal punctuation. The few old
    summaries with neither (scrape losses) are recognised by length.
    """
    text = " ".join(raw.split())
    without_urls, url_hosts = _split_trailing_urls(text)
    body, outlets, _notes = _split_trailing_groups(without_urls)
    if url_hosts and not outlets:
        outlets = [host for host in url_hosts if host]
    if outlets:
        return ListItem("summary", body, tuple(outlets))
    words = len(body.split())
    longest_segment = max(len(segment.split()) for segment in _SEGMENT_SPLIT.split(body))
    long_text = words > MAX_HEADER_WORDS or longest_segment > MAX_HEADER_SEGMENT_WORDS
    if long_text or (_SENTENCE_END.search(body) and not _ABBREVIATION_END.search(body)):
        return ListItem("summary", body)
    return ListItem("header", text)


def _expression_end_year(match: re.Match[str]) -> int:
    start, end = int(match.group("start")), match.group("end")
    if end is None:
        return start
    if len(end) == 2:
        return (start // 100) * 100 + int(end)
    return int(end)


def neutralize_header(text: str, page_day: date) -> tuple[str, bool]:
    """Header or category text without any year after ``page_day``'s year or range ending after it.

    "War in Afghanistan (2001–2021)" on a 2010 page becomes "War in Afghanistan", "2014 FIFA World
    Cup" on a 2013 page "FIFA World Cup", "2015–16 Premier League" on a 2015 page "Premier League"
    (a season or scheduled event loses its year too: the rule does not guess which later years were
    known in advance). Returns the text and whether it changed; a header left with no words is ``""``.
    """
    changed = False

    def replace(match: re.Match[str]) -> str:
        nonlocal changed
        if _expression_end_year(match) <= page_day.year:
            return match.group(0)
        changed = True
        return " "

    out = _YEAR_EXPR.sub(replace, text)
    if not changed:
        return text, False
    out = re.sub(r"\(\s*\)", " ", out)
    out = re.sub(r"\s+([,;:)])", r"\1", " ".join(out.split()))
    out = re.sub(r"(\s+(?:of|in|from|since|the))+$", "", out.strip(" ,;:–—-"), flags=re.IGNORECASE)
    return (out if _WORD.search(out) else ""), True


def _content_keys(text: str) -> set[str]:
    """Five-letter prefixes of the non-generic words: "Ukrainian" and "Ukraine" share "ukrai"."""
    keys = set()
    for word in _WORD.findall(text.lower()):
        if len(word) >= 4 and word not in _GENERIC:
            keys.add(word[:5])
    return keys


def _day_documents(
    day: date, payload: dict[str, Any], notes: Counter[str] | None = None
) -> tuple[list[Document], int]:
    """The documents of one day page, with headers attached; raises ValueError on a malformed payload.

    Category and header text pass through :func:`neutralize_header`; each changed one is counted in
    ``notes[HEADER_NOTE]`` when ``notes`` is given.

    A run of headers applies to the first summary after it. The page was a nested list that the
    scrape flattened, so a later summary may be a sibling outside the topic: it keeps the headers
    only while it shares a content word with them; the first one that does not ends the run.
    """
    published = datetime.combine(day, time(0), tzinfo=UTC)
    available = end_of_day(day)
    documents: list[Document] = []
    n_items = 0
    for category, items in payload.items():
        if not isinstance(items, list):
            raise SchemaError(f"category {category!r} holds {type(items).__name__}, not a list")
        category_text = " ".join(str(category).split())
        category_title = []
        if category_text.lower() not in _UNCATEGORIZED:
            category_text, changed = neutralize_header(category_text, day)
            if changed and notes is not None:
                notes[HEADER_NOTE] += 1
            category_title = [category_text] if category_text else []
        headers: list[str] = []
        header_keys: set[str] = set()
        previous_kind = None
        first_after_headers = False
        for raw in items:
            n_items += 1
            if not isinstance(raw, str):
                raise SchemaError(f"category {category!r} item {n_items} is {type(raw).__name__}, not text")
            if not raw.strip():
                continue
            item = classify_item(raw)
            if item.kind == "header":
                if previous_kind != "header":
                    headers, header_keys = [], set()
                header, changed = neutralize_header(item.body, day)
                if changed and notes is not None:
                    notes[HEADER_NOTE] += 1
                if header:
                    headers.append(header)
                    header_keys |= _content_keys(header)
                first_after_headers = True
                previous_kind = "header"
                continue
            previous_kind = "summary"
            if not item.body:
                continue
            if headers and not first_after_headers and not (header_keys & _content_keys(item.body)):
                headers, header_keys = [], set()
            first_after_headers = False
            documents.append(
                Document(
                    id=f"wce-{day.isoformat()}-{len(documents) + 1:04d}",
                    title=TITLE_SEPARATOR.join(category_title + headers),
                    text=item.body,
                    published_at=published,
                    available_at=available,
                    url=f"https://en.wikipedia.org/wiki/Portal:Current_events/{day.year}_{day:%B}_{day.day}",
                    source="; ".join(item.outlets) or None,
                    date_source=DATE_SOURCE,
                )
            )
    return documents, n_items


def _yaml_loader() -> type:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_day_file(path: Path, day: date | None = None) -> tuple[list[Document], ImportReport]:
    """Import one day page. A file in another schema or that fails to parse contributes nothing."""
    import yaml

    report = ImportReport(source=SOURCE_KIND, files_seen=1)
    path = Path(path)
    if day is None:
        match = _FILE_NAME.match(path.name)
        if match is None:
            report.exclude_file(str(path), "file name is not YYYY-MM-DD.yaml")
            return [], report
        day = date.fromisoformat(match.group(1))
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        report.exclude_file(str(path), f"unparseable YAML: {first_line}")
        return [], report
    if not isinstance(data, dict):
        report.exclude_file(str(path), f"not a mapping but {type(data).__name__}")
        return [], report
    if "Intelligence_Payload" not in data:
        if "events" in data or "dataset" in data:
            mode = (
                (data.get("dataset") or {}).get("compiler", {})
                if isinstance(data.get("dataset"), dict)
                else {}
            )
            mode = mode.get("mode") if isinstance(mode, dict) else None
            report.exclude_file(
                str(path), f"LLM-written schema (events list, compiler mode {mode!r}), not Wikipedia text"
            )
        else:
            report.exclude_file(str(path), f"unknown schema (keys {sorted(map(str, data))})")
        return [], report
    stated = str(data.get("Date", ""))
    if stated != day.isoformat():
        report.exclude_file(
            str(path), f"Date field {stated!r} does not match the file's day {day.isoformat()}"
        )
        return [], report
    payload = data["Intelligence_Payload"]
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        report.exclude_file(str(path), f"Intelligence_Payload is {type(payload).__name__}, not a mapping")
        return [], report
    try:
        documents, n_items = _day_documents(day, payload, report.notes)
    except ValueError as err:
        report.exclude_file(str(path), f"malformed payload: {err}")
        return [], report
    report.files_imported = 1
    report.records_seen = n_items
    report.documents = len(documents)
    report.date_sources[DATE_SOURCE] += len(documents)
    if not documents:
        report.notes["days without summaries"] += 1
    return documents, report


def list_day_files(
    root: Path, *, start: date | None = None, end: date | None = None
) -> list[tuple[date, Path]]:
    """The day files under ``root`` with ``start <= day <= end``, in date order (by file name)."""
    root = Path(root)
    if not root.is_dir():
        raise InputNotFoundError(f"Wikipedia current events folder not found: {root}")
    found = []
    for path in root.rglob("*.yaml"):
        match = _FILE_NAME.match(path.name)
        if match is None:
            continue
        day = date.fromisoformat(match.group(1))
        if (start is None or day >= start) and (end is None or day <= end):
            found.append((day, path))
    found.sort()
    return found


def load_wikipedia_current_events(
    root: Path, *, start: date | None = None, end: date | None = None, progress: bool = True
) -> tuple[list[Document], ImportReport]:
    """Import every day page in ``[start, end]`` (inclusive) under ``root``: one document per summary."""
    from tqdm.auto import tqdm

    report = ImportReport(source=SOURCE_KIND)
    documents: list[Document] = []
    files = list_day_files(Path(root), start=start, end=end)
    for day, path in tqdm(files, desc="wikipedia day pages", unit="day", disable=not progress):
        day_documents, day_report = parse_day_file(path, day)
        documents.extend(day_documents)
        report.merge(day_report)
    return documents, report
