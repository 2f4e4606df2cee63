"""Writes small WARC files of hand-made news pages at test time, one page per dating rule or trap."""

from __future__ import annotations

import json
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

BODY = (
    "<p>The city council of Springfield voted on Tuesday to approve a new budget for the public library system, "
    "which will extend opening hours and fund the purchase of several thousand new books for the branches.</p>"
    "<p>Council members said that the decision followed months of public consultation with residents, teachers "
    "and local businesses, and that the money would come from savings in the transport department.</p>"
    "<p>The mayor welcomed the vote and said the first changes would be visible to readers within a few weeks, "
    "starting with longer weekend hours at the central library and a new reading room for children.</p>"
)


@dataclass(frozen=True)
class Page:
    """One fetched page: the URL, the crawl timestamp, the head markup and a topic word for its body."""

    url: str
    crawled: str
    head: str = ""
    topic: str = "library"
    status: str = "200 OK"
    content_type: str = "text/html; charset=utf-8"
    body: str | None = None

    def html(self) -> str:
        if self.body is not None:
            return self.body
        article = BODY.replace("library", self.topic)
        return (
            f"<html><head>{self.head}</head><body><nav>Home | World | Sport</nav>"
            f"<article><h1>{self.topic.title()} news</h1>{article}</article>"
            "<footer>Copyright Example News</footer></body></html>"
        )


def jsonld(**fields: str) -> str:
    return f'<script type="application/ld+json">{json.dumps({"@type": "NewsArticle", **fields})}</script>'


def meta(key: str, value: str, attribute: str = "property") -> str:
    return f'<meta {attribute}="{key}" content="{value}">'


def title(text: str) -> str:
    return f"<title>{text}</title>"


# name -> page; each covers one rule of the dating cascade or one tricky case.
PAGES: dict[str, Page] = {
    "jsonld_published": Page(
        "https://news.example.com/politics/budget-vote",
        "2024-03-07T10:00:00Z",
        title("Budget vote") + jsonld(datePublished="2024-03-05T14:30:00+01:00", headline="Budget vote"),
        topic="budget",
    ),
    "jsonld_modified_only": Page(
        "https://news.example.com/a/modified-only",
        "2024-03-09T00:00:00Z",
        title("Modified only") + jsonld(dateModified="2024-03-06T08:00:00Z"),
        topic="bridge",
    ),
    "meta_published": Page(
        "https://news.example.com/story/meta",
        "2024-03-08T12:00:00Z",
        title("Meta story") + meta("article:published_time", "2024-03-04T09:15:00Z"),
        topic="harbour",
    ),
    "url_date": Page(
        "https://news.example.com/2024/03/02/url-dated-story",
        "2024-03-10T00:00:00Z",
        title("URL dated"),
        topic="railway",
    ),
    "warc_date": Page(
        "https://news.example.com/undated-story",
        "2024-03-11T06:30:00Z",
        title("Undated"),
        topic="museum",
    ),
    # JSON-LD and meta disagree: JSON-LD wins by priority.
    "conflicting": Page(
        "https://news.example.com/2023/01/01/conflict",
        "2024-03-12T00:00:00Z",
        title("Conflict")
        + jsonld(datePublished="2024-03-01T12:00:00Z")
        + meta("article:published_time", "2024-02-01T12:00:00Z"),
        topic="stadium",
    ),
    # Late evening in New York is the next day in UTC.
    "timezone": Page(
        "https://news.example.com/tz",
        "2024-03-13T00:00:00Z",
        title("Time zone") + meta("article:published_time", "2024-03-05T23:30:00-05:00"),
        topic="airport",
    ),
    # Edited after publication: the crawled text may hold the edit.
    "modified_after": Page(
        "https://news.example.com/updated",
        "2024-03-14T00:00:00Z",
        title("Updated story")
        + jsonld(datePublished="2024-03-05T10:00:00Z", dateModified="2024-03-06T18:00:00Z"),
        topic="hospital",
    ),
    # Claims publication after it was crawled.
    "claimed_after_crawl": Page(
        "https://news.example.com/future",
        "2024-03-05T08:00:00Z",
        title("Future story") + jsonld(datePublished="2024-03-20T00:00:00Z"),
        topic="festival",
    ),
    # Day-precision date whose end of day is after the crawl: capped at the crawl.
    "day_same_as_crawl": Page(
        "https://news.example.com/same-day",
        "2024-03-05T15:00:00Z",
        title("Same day") + meta("article:published_time", "2024-03-05"),
        topic="school",
    ),
    # Out-of-range dates are discarded and the cascade moves on (to the URL here).
    "out_of_range": Page(
        "https://news.example.com/2024/03/03/old-template",
        "2024-03-15T00:00:00Z",
        title("Old template") + jsonld(datePublished="1999-12-31T00:00:00Z"),
        topic="theatre",
    ),
    # A time without a zone: read as UTC wall clock, available 12 hours later.
    "naive_time": Page(
        "https://news.example.com/naive",
        "2024-03-16T00:00:00Z",
        title("Naive time") + meta("article:published_time", "2024-03-05T10:00:00"),
        topic="factory",
    ),
    "not_found": Page("https://news.example.com/missing", "2024-03-16T00:00:00Z", status="404 Not Found"),
    "not_html": Page(
        "https://news.example.com/data.json",
        "2024-03-16T00:00:00Z",
        content_type="application/json",
        body="{}",
    ),
    "market": Page(
        "https://polymarket.com/event/who-wins",
        "2024-03-16T00:00:00Z",
        title("Who wins?") + jsonld(datePublished="2024-03-05T10:00:00Z"),
        topic="market",
    ),
}


def write_warc(path: Path, pages: list[Page], *, gzip: bool = True) -> Path:
    """Write ``pages`` as WARC response records (plus one request record, which importers skip)."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        writer = WARCWriter(fh, gzip=gzip)
        for page in pages:
            payload = page.html().encode("utf-8")
            http_headers = StatusAndHeaders(
                page.status,
                [("Content-Type", page.content_type), ("Content-Length", str(len(payload)))],
                protocol="HTTP/1.1",
            )
            request = writer.create_warc_record(
                page.url,
                "request",
                payload=BytesIO(b"GET / HTTP/1.1\r\n\r\n"),
                warc_headers_dict={"WARC-Date": page.crawled},
            )
            writer.write_record(request)
            record = writer.create_warc_record(
                page.url,
                "response",
                payload=BytesIO(payload),
                http_headers=http_headers,
                warc_headers_dict={"WARC-Date": page.crawled},
            )
            writer.write_record(record)
    return path
