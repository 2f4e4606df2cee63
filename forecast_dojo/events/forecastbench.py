"""ForecastBench importer: question sets joined with resolution sets into binary events.

Layout read (``root`` is a ``forecastbench`` folder as described in the shared data README)::

    root/question_sets/YYYY-MM-DD-<llm|human>.json      {"forecast_due_date", "questions": [...]}
    root/resolution_sets/YYYY-MM-DD_resolution_set.json {"forecast_due_date", "resolutions": [...]}

Representation (documented in docs/events.md):

* A market question (polymarket, manifold, metaculus, infer) becomes one event per question id with
  ``outcomes == ("Yes", "No")``; market probabilities are ``(p, 1 - p)`` where ``p`` is the market's
  probability of Yes. ``resolved_at`` is the end of the UTC day of the resolved row's
  ``resolution_date``; ``close_at`` is the earlier of the recorded market close and ``resolved_at``.
* The market-belief series joins every ``freeze_datetime_value`` (at ``freeze_datetime``) and every
  unresolved resolution row (at the end of its ``resolution_date``) across all sets; duplicates are
  merged, conflicting values at one instant keep the one from the latest set, and points after the
  close are dropped.
* A data-source question (acled, dbnomics, fred, wikipedia, yfinance) becomes, when
  ``include_data_sources`` is set, one event per (question set, id, resolution date), with its
  template filled in, no market series, ``open_at`` at the set's forecast due date and ``close_at``
  at the start of the resolution date.

Until a schedule is applied (``forecast_dojo.events.schedule``) an imported event has one step, at
its open: the only instant that is safe without knowing anything else about the event.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from forecast_dojo.errors import ForecastBenchError as ForecastBenchError
from forecast_dojo.errors import InputNotFoundError
from forecast_dojo.events.result import ImportResult
from forecast_dojo.events.texts import FIELDS, Snapshot, clean_text, earliest_text, strip_notes, text_versions
from forecast_dojo.schema import Event, MarketPoint, SchemaError
from forecast_dojo.timeutil import InstantError, end_of_day, iso, parse_instant

MARKET_SOURCES = frozenset({"polymarket", "manifold", "metaculus", "infer"})
DATA_SOURCES = frozenset({"acled", "dbnomics", "fred", "wikipedia", "yfinance"})
BINARY_OUTCOMES = ("Yes", "No")
_MISSING = {"", "n/a", "na", "none", "null", "nan"}


# ---------------------------------------------------------------- text cleaning

_BLOCK_TAGS = frozenset(
    {"p", "br", "div", "li", "ul", "ol", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "table"}
)
_SKIP_TAGS = frozenset({"script", "style", "iframe"})
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP_TAGS:
            self._skip_depth += 1
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip_depth:
            self.parts.append(data)


def html_to_text(value: str | None) -> str:
    r"""Readable plain text from a background that may hold HTML, entities, autolinks and ``\r\n``.

    Block tags become line breaks, list items become ``- `` lines, links keep their anchor text,
    ``<https://...>`` autolinks keep the URL, and runs of blank lines collapse to one.
    """
    if not value:
        return ""
    text = value.replace("\r\n", "\n").replace("\r", "\n")
    text = _AUTOLINK.sub(r"\1", text)
    parser = _TextExtractor()
    parser.feed(text)
    parser.close()
    lines = [re.sub(r"[ \t\u00a0]+", " ", line).strip() for line in "".join(parser.parts).split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


# ---------------------------------------------------------------- reading files


@dataclass(frozen=True)
class _QuestionRow:
    due: date
    set_name: str
    index: int
    record: dict[str, Any]


@dataclass(frozen=True)
class _ResolutionRow:
    due: date
    set_name: str
    record: dict[str, Any]


def _read_json(path: Path, list_key: str) -> tuple[date, list[dict[str, Any]]]:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ForecastBenchError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(payload, dict) or not isinstance(payload.get(list_key), list):
        raise ForecastBenchError(f"{path}: expected an object with a list {list_key!r}")
    try:
        due = date.fromisoformat(str(payload.get("forecast_due_date")))
    except ValueError as err:
        raise ForecastBenchError(
            f"{path}: bad forecast_due_date {payload.get('forecast_due_date')!r}"
        ) from err
    rows = payload[list_key]
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or "id" not in row or "source" not in row:
            raise ForecastBenchError(f"{path}: {list_key}[{i}] lacks 'id' or 'source'")
    return due, rows


def _is_missing(value: object) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in _MISSING)


def parse_probability(value: object) -> float | None:
    """A market value as a float in [0, 1], or None when it is missing, not a number or out of range."""
    if _is_missing(value) or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return None
    return number


def _optional_instant(value: object, *, date_means: str = "start") -> datetime | None:
    if _is_missing(value):
        return None
    try:
        return parse_instant(value, date_means=date_means)
    except InstantError:
        return None


def _row_key(record: object) -> str:
    return json.dumps(record, sort_keys=True, default=str)


def _is_combination(record: dict[str, Any]) -> bool:
    return isinstance(record.get("id"), list) or isinstance(record.get("combination_of"), list)


def _binary_probs(p: float) -> tuple[float, float]:
    return (p, 1.0 - p)


# ---------------------------------------------------------------- the importer


def load_forecastbench(
    root: str | Path, *, include_data_sources: bool = False, progress: bool = True
) -> ImportResult:
    """Import every resolved ForecastBench question under ``root`` as events; skips are counted by reason.

    Reasons: ``combination`` (list-valued ids), ``ambiguous_id`` (one id naming different questions), ``data_source_question`` (data-source questions when
    ``include_data_sources`` is false), ``unresolved``, ``conflicting_resolutions``,
    ``non_binary_resolution``, ``resolution_without_question``, ``unknown_source``, ``bad_dates``.
    """
    from tqdm.auto import tqdm

    root = Path(root)
    q_dir, r_dir = root / "question_sets", root / "resolution_sets"
    for folder in (q_dir, r_dir):
        if not folder.is_dir():
            raise InputNotFoundError(
                f"ForecastBench folder {folder} not found (expected question_sets/ and resolution_sets/)"
            )
    result = ImportResult(source="forecastbench")

    question_rows: list[_QuestionRow] = []
    for path in tqdm(sorted(q_dir.glob("*.json")), desc="forecastbench question sets", disable=not progress):
        due, rows = _read_json(path, "questions")
        question_rows.extend(_QuestionRow(due, path.name, i, row) for i, row in enumerate(rows))
    resolution_rows: list[_ResolutionRow] = []
    seen_rows: set[str] = set()
    for path in tqdm(
        sorted(r_dir.glob("*.json")), desc="forecastbench resolution sets", disable=not progress
    ):
        due, rows = _read_json(path, "resolutions")
        for raw in rows:
            key = f"{due}|{_row_key(raw)}"
            if key in seen_rows:
                result.note("duplicate_resolution_rows")
                continue
            seen_rows.add(key)
            resolution_rows.append(_ResolutionRow(due, path.name, raw))
    question_rows.sort(key=lambda r: (r.due, r.set_name, r.index))

    market_questions: dict[str, list[_QuestionRow]] = defaultdict(list)
    data_questions: dict[tuple[date, str], _QuestionRow] = {}
    combination_ids: set[str] = set()
    for qrow in question_rows:
        record, source = qrow.record, str(qrow.record["source"])
        if _is_combination(record):
            combination_ids.add(f"q|{_row_key(record.get('id'))}")
            continue
        qid = str(record["id"])
        if source in MARKET_SOURCES:
            # Keyed by source too: one id can name different questions on two platforms (1385).
            market_questions[f"{source}\t{qid}"].append(qrow)
        elif source in DATA_SOURCES:
            if (qrow.due, qid) in data_questions:
                result.note("duplicate_question_rows")
            data_questions[(qrow.due, qid)] = qrow
        else:
            result.skip("unknown_source", f"{source}:{qid}")
    for qid, qrows in market_questions.items():
        unique: dict[str, _QuestionRow] = {}
        for qrow in qrows:
            unique.setdefault(f"{qrow.due}|{_row_key(qrow.record)}", qrow)
        if len(unique) < len(qrows):
            result.note("duplicate_question_rows", len(qrows) - len(unique))
            market_questions[qid] = list(unique.values())

    market_resolutions: dict[str, list[_ResolutionRow]] = defaultdict(list)
    data_resolutions: dict[tuple[date, str, str], list[_ResolutionRow]] = defaultdict(list)
    for rrow in resolution_rows:
        record = rrow.record
        if _is_combination(record):
            combination_ids.add(f"r|{_row_key(record.get('id'))}|{record.get('source')}")
            continue
        qid, source = str(record["id"]), str(record["source"])
        if source in MARKET_SOURCES:
            market_resolutions[f"{source}\t{qid}"].append(rrow)
        elif source in DATA_SOURCES:
            data_resolutions[(rrow.due, qid, str(record.get("resolution_date")))].append(rrow)
    for _ in combination_ids:
        result.skip("combination")

    for key in sorted(set(market_resolutions) - set(market_questions)):
        result.skip("resolution_without_question", key.replace("\t", ":"))
    for key in tqdm(sorted(market_questions), desc="forecastbench market questions", disable=not progress):
        qid = key.split("\t", 1)[1]
        event = _market_event(qid, market_questions[key], market_resolutions.get(key, []), result)
        if event is not None:
            result.events.append(event)

    if include_data_sources:
        for (due, qid), row in sorted(data_questions.items()):
            result.events.extend(_data_events(due, qid, row, data_resolutions, result))
    else:
        for _ in data_questions:
            result.skip("data_source_question")
    result.events.sort(key=lambda e: (e.close_at, e.id))
    return result


def _market_event(
    qid: str, rows: list[_QuestionRow], resolutions: list[_ResolutionRow], result: ImportResult
) -> Event | None:
    latest = rows[-1].record
    source = str(latest["source"])
    per_set: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        per_set[row.set_name].add(str(row.record.get("question")))
    if any(len(texts) > 1 for texts in per_set.values()):
        result.skip("ambiguous_id", qid)  # one id, several different questions in one set
        return None
    resolved = [r for r in resolutions if r.record.get("resolved") is True]
    if not resolved:
        result.skip("unresolved", qid)
        return None
    outcomes_seen = {(str(r.record.get("resolution_date")), r.record.get("resolved_to")) for r in resolved}
    if len(outcomes_seen) > 1:
        result.skip("conflicting_resolutions", qid)
        return None
    resolution_date, resolved_to = next(iter(outcomes_seen))
    if resolved_to not in (0, 1, 0.0, 1.0) or isinstance(resolved_to, bool):
        result.skip("non_binary_resolution", qid)
        return None
    resolved_at = _optional_instant(resolution_date, date_means="end")
    if resolved_at is None:
        result.skip("bad_dates", qid)
        return None

    for name in ("question", "market_info_open_datetime", "market_info_close_datetime", "background"):
        if len({str(r.record.get(name)) for r in rows}) > 1:
            result.note(f"changed_across_sets:{name}")
    recorded_close = _optional_instant(latest.get("market_info_close_datetime"))
    close_at = resolved_at if recorded_close is None else min(recorded_close, resolved_at)

    points: dict[datetime, tuple[date, float]] = {}

    def add_point(at: datetime | None, value: object, due: date) -> None:
        probability = parse_probability(value)
        if at is None or probability is None:
            result.note("bad_market_value")
            return
        previous = points.get(at)
        if previous is not None:
            if abs(previous[1] - probability) > 1e-9:
                result.note("conflicting_market_values")
                if previous[0] > due:
                    return
            else:
                result.note("duplicate_market_values")
                return
        points[at] = (due, probability)

    for row in rows:
        add_point(
            _optional_instant(row.record.get("freeze_datetime")),
            row.record.get("freeze_datetime_value"),
            row.due,
        )
    for rrow in resolutions:
        if rrow.record.get("resolved") is False:
            add_point(
                _optional_instant(rrow.record.get("resolution_date"), date_means="end"),
                rrow.record.get("resolved_to"),
                rrow.due,
            )
    series = sorted((at, value) for at, (_, value) in points.items() if at <= close_at)
    if len(series) < len(points):
        result.note("market_points_after_close", len(points) - len(series))

    open_at = _optional_instant(latest.get("market_info_open_datetime"))
    earliest_known = min([parse_instant(r.due) for r in rows] + [at for at, _ in series])
    if open_at is None:
        result.note("open_at_imputed")
        open_at = earliest_known
    if open_at > close_at:
        result.skip("bad_dates", qid)
        return None
    texts, versions = _snapshot_texts(rows, result)
    if not texts["question"]:
        result.skip("invalid_record", qid)
        return None
    extra_texts = {"text_versions": versions} if versions else {}
    try:
        return Event(
            id=f"forecastbench:{source}:{qid}",
            question=texts["question"],
            outcomes=BINARY_OUTCOMES,
            outcome="Yes" if float(resolved_to) == 1.0 else "No",
            open_at=open_at,
            close_at=close_at,
            resolved_at=resolved_at,
            cutoffs=(open_at,),
            background=texts["background"],
            resolution_criteria=texts["resolution_criteria"],
            source=f"forecastbench/{source}",
            url=None if _is_missing(latest.get("url")) else str(latest["url"]),
            tags=(source,),
            market=tuple(MarketPoint(at, _binary_probs(p)) for at, p in series),
            extra={
                "source_id": qid,
                "market_granularity": "sparse" if series else "none",
                "question_sets": sorted({r.set_name for r in rows}),
                "recorded_close_at": None if recorded_close is None else iso(recorded_close),
                "deadline_at": iso(close_at if recorded_close is None else max(recorded_close, close_at)),
                "resolution_date": str(resolution_date),
                **extra_texts,
            },
        )
    except SchemaError as err:
        result.skip("invalid_record", qid)
        result.note(f"invalid_record:{str(err)[:80]}")
        return None


def _snapshot_texts(
    rows: list[_QuestionRow], result: ImportResult
) -> tuple[dict[str, str], list[dict[str, str]]]:
    """The event's base texts (first snapshot, every note removed) and its per-snapshot versions.

    A question set's texts count as published at 00:00 UTC of its forecast due date (the texts were
    frozen about ten days earlier, so this is late, never early). Versions identical to the base text
    are not stored. Removed notes are counted under ``notes["dated_notes_removed"]`` (base text) and
    ``notes["late_notes_removed"]`` (versions).
    """
    snapshots = []
    for row in sorted(rows, key=lambda r: (r.due, r.set_name)):
        record = row.record
        snapshots.append(
            Snapshot(
                published_at=parse_instant(row.due),
                question=" ".join(str(record.get("question") or "").split()),
                background=html_to_text(record.get("background")),
                resolution_criteria=html_to_text(record.get("resolution_criteria")),
            )
        )
    base, removed = earliest_text(snapshots)
    if removed:
        result.note("dated_notes_removed", removed)
    versions, late = text_versions(snapshots)
    if late:
        result.note("late_notes_removed", late)
    if all(all(v[k] == base[k] for k in FIELDS) for v in versions):
        versions = []
    return base, versions


def _data_events(
    due: date,
    qid: str,
    row: _QuestionRow,
    resolutions: dict[tuple[date, str, str], list[_ResolutionRow]],
    result: ImportResult,
) -> Iterable[Event]:
    record = row.record
    source = str(record["source"])
    dates = record.get("resolution_dates")
    if not isinstance(dates, list) or not dates:
        result.skip("bad_dates", f"{source}:{qid}")
        return []
    events = []
    for day in dates:
        rows = resolutions.get((due, qid, str(day)), [])
        outcomes = {r.record.get("resolved_to") for r in rows if r.record.get("resolved") is True}
        where = f"{source}:{qid}:{due}:{day}"
        if not outcomes:
            result.skip("unresolved", where)
            continue
        if len(outcomes) > 1:
            result.skip("conflicting_resolutions", where)
            continue
        value = outcomes.pop()
        if value not in (0, 1, 0.0, 1.0) or isinstance(value, bool):
            result.skip("non_binary_resolution", where)
            continue
        close_at = _optional_instant(day)
        if close_at is None:
            result.skip("bad_dates", where)
            continue
        open_at = parse_instant(due)
        if close_at < open_at:
            result.skip("bad_dates", where)
            continue
        text = str(record.get("question") or "")
        text = text.replace("{resolution_date}", str(day)).replace("{forecast_due_date}", due.isoformat())
        # One snapshot, published on its due date, which is the event's open: every note goes.
        background = strip_notes(clean_text(html_to_text(record.get("background"))), None)[0]
        criteria = strip_notes(clean_text(html_to_text(record.get("resolution_criteria"))), None)[0]
        events.append(
            Event(
                id=f"forecastbench:{source}:{qid}:{due}:{day}",
                question=text.strip(),
                outcomes=BINARY_OUTCOMES,
                outcome="Yes" if float(value) == 1.0 else "No",
                open_at=open_at,
                close_at=close_at,
                resolved_at=end_of_day(close_at.date()),
                cutoffs=(open_at,),
                background=background,
                resolution_criteria=criteria,
                source=f"forecastbench/{source}",
                url=None if _is_missing(record.get("url")) else str(record["url"]),
                tags=(source, "data-source"),
                extra={
                    "source_id": qid,
                    "market_granularity": "none",
                    "question_sets": [row.set_name],
                    "resolution_date": str(day),
                },
            )
        )
    return events
