"""The data model: documents, events and their on-disk forms (versioned, validated on load).

An :class:`Event` is one episode; its ``cutoffs`` are the instants of its forecast steps. A
:class:`Document` is one dated text; it is visible at a step iff ``available_at < cutoff``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from forecast_dojo.errors import InputNotFoundError
from forecast_dojo.errors import SchemaError as SchemaError
from forecast_dojo.timeutil import InstantError, iso, parse_instant
from forecast_dojo.untrusted import preview

EVENTS_FORMAT_VERSION = 1
PROBABILITY_TOLERANCE = 1e-6
# A resolution this long after the close is a typo (ForecastBench's longest is 28 days): see Event.
MAX_RESOLUTION_LAG = timedelta(days=5 * 366)


@dataclass(frozen=True)
class Document:
    """One dated text of a corpus.

    ``available_at`` is when the text became available (a day-precision date means the END of that UTC
    day); ``date_source`` names the rule that dated it (e.g. ``"wikipedia-day-page"``, ``"jsonld:datePublished"``).
    """

    id: str
    title: str
    text: str
    published_at: datetime
    available_at: datetime
    url: str | None = None
    source: str | None = None
    date_source: str = "given"

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise SchemaError(f"document id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.text, str) or not self.text.strip():
            raise SchemaError(f"document {self.id!r}: text must be a non-empty string")
        for name in ("published_at", "available_at"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise SchemaError(f"document {self.id!r}: {name} must be an aware datetime, got {value!r}")
        if self.available_at < self.published_at:
            raise SchemaError(f"document {self.id!r}: available_at precedes published_at")


@dataclass(frozen=True)
class MarketPoint:
    """The market's (or crowd's) probabilities over the K outcomes at one instant."""

    at: datetime
    probabilities: tuple[float, ...]


@dataclass(frozen=True)
class Event:
    """One resolved question: an episode whose steps are forecasts at ``cutoffs``.

    ``outcome`` is the realized label; it and ``market`` never reach the agent. Checked on
    construction (so on every load), each error naming the event and the field:

    * ``outcomes``: a list of K >= 2 distinct non-empty label strings (a bare string is refused, not
      read as one label per character); ``outcome`` one of them;
    * instants: timezone-aware; ``open_at <= close_at <= resolved_at``; every cutoff in
      ``[open_at, close_at]`` (an imported event's single cutoff is its ``open_at``), strictly
      increasing; ``resolved_at`` at most :data:`MAX_RESOLUTION_LAG` (5 years) after ``close_at``.
      The rule is relative, not against today's date, so loading is deterministic and worlds dated in
      the future (the synthetic 2031-2032 world) load, while a mistyped year (``2099``) is caught;
    * ``excluded_doc_ids`` (the leakage screen's exclusions): a list of non-empty document id
      strings; the legacy ``extra["excluded_doc_ids"]`` is absent, such a list, or an object whose
      keys are ``"all"``, a step index (``"0"`` .. ``"K-1"``) or a cutoff in ISO form, each mapping
      to such a list (merged into ``excluded_doc_ids``).
    """

    id: str
    question: str
    outcomes: tuple[str, ...]
    outcome: str
    open_at: datetime
    close_at: datetime
    resolved_at: datetime
    cutoffs: tuple[datetime, ...]
    background: str = ""
    resolution_criteria: str = ""
    source: str = ""
    url: str | None = None
    tags: tuple[str, ...] = ()
    market: tuple[MarketPoint, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    excluded_doc_ids: tuple[str, ...] = ()  # documents a leakage screen hid from this event's steps

    def __post_init__(self) -> None:
        where = f"event {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise SchemaError(f"event id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.question, str) or not self.question.strip():
            raise SchemaError(f"{where}: empty question")
        if not isinstance(self.outcomes, (tuple, list)) or not all(
            isinstance(o, str) and o.strip() for o in self.outcomes
        ):
            raise SchemaError(
                f"{where}: field 'outcomes' must be a list of non-empty label strings, got {preview(self.outcomes)}"
            )
        object.__setattr__(self, "outcomes", tuple(self.outcomes))
        if len(self.outcomes) < 2 or len(set(self.outcomes)) != len(self.outcomes):
            raise SchemaError(f"{where}: needs K >= 2 distinct outcome labels, got {list(self.outcomes)}")
        if self.outcome not in self.outcomes:
            raise SchemaError(f"{where}: outcome {self.outcome!r} is not one of {list(self.outcomes)}")
        if not self.cutoffs:
            raise SchemaError(f"{where}: no forecast cutoffs")
        if list(self.cutoffs) != sorted(set(self.cutoffs)):
            raise SchemaError(f"{where}: cutoffs must be strictly increasing")
        for name in ("open_at", "close_at", "resolved_at"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise SchemaError(f"{where}: field {name!r} must be an aware datetime, got {preview(value)}")
        for cutoff in self.cutoffs:
            if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
                raise SchemaError(
                    f"{where}: field 'cutoffs' must hold aware datetimes, got {preview(cutoff)}"
                )
        if not self.open_at <= self.close_at <= self.resolved_at:
            raise SchemaError(f"{where}: need open_at <= close_at <= resolved_at")
        if self.resolved_at - self.close_at > MAX_RESOLUTION_LAG:
            raise SchemaError(
                f"{where}: field 'resolved_at' {iso(self.resolved_at)} is more than {MAX_RESOLUTION_LAG.days} days "
                f"after close_at {iso(self.close_at)}"
            )
        if self.cutoffs[0] < self.open_at:
            raise SchemaError(
                f"{where}: field 'cutoffs': {iso(self.cutoffs[0])} is before open_at {iso(self.open_at)}"
            )
        if self.cutoffs[-1] > self.close_at:
            raise SchemaError(
                f"{where}: field 'cutoffs': {iso(self.cutoffs[-1])} is after close_at {iso(self.close_at)}"
            )
        self._check_excluded_doc_ids(where)
        object.__setattr__(
            self,
            "excluded_doc_ids",
            _excluded_ids(where, self.excluded_doc_ids, self.extra.get("excluded_doc_ids")),
        )
        for point in self.market:
            check_distribution(
                point.probabilities, len(self.outcomes), where=f"{where} market at {iso(point.at)}"
            )
        if [p.at for p in self.market] != sorted(p.at for p in self.market):
            raise SchemaError(f"{where}: market series must be ordered by time")

    def _check_excluded_doc_ids(self, where: str) -> None:
        if not isinstance(self.extra, dict):
            raise SchemaError(f"{where}: field 'extra' must be an object, got {preview(self.extra)}")
        excluded = self.extra.get("excluded_doc_ids")
        if excluded is None:
            return
        field_name = "extra['excluded_doc_ids']"

        def check_ids(ids: Any, key: str) -> None:
            if not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids):
                raise SchemaError(
                    f"{where}: field {field_name}{key} must be a list of document id strings, got {preview(ids)}"
                )

        if isinstance(excluded, list):
            check_ids(excluded, "")
            return
        if not isinstance(excluded, dict):
            raise SchemaError(
                f"{where}: field {field_name} must be a list of document ids or an object by step, got {preview(excluded)}"
            )
        keys = {"all"} | {str(i) for i in range(self.n_steps)} | {iso(c) for c in self.cutoffs}
        for key, ids in excluded.items():
            if key not in keys:
                raise SchemaError(
                    f"{where}: field {field_name} has key {preview(key)}; keys are 'all', a step index "
                    f"0..{self.n_steps - 1} or a cutoff in ISO form"
                )
            check_ids(ids, f"[{key!r}]")

    @property
    def outcome_index(self) -> int:
        """Position of the resolved outcome in ``outcomes``."""
        return self.outcomes.index(self.outcome)

    @property
    def n_steps(self) -> int:
        """Number of forecast steps (one per cutoff)."""
        return len(self.cutoffs)

    def text_at(self, step: int) -> tuple[str, str, str]:
        """(question, background, resolution criteria) as they stood at step ``step``'s cutoff.

        ``extra["text_versions"]`` (written by importers of sources that edit questions, see
        ``forecast_dojo.events.texts``) lists ``{"from", "question", "background",
        "resolution_criteria"}`` in time order; the latest version with ``from <= cutoff`` applies, and
        the event's own fields (the earliest text, every dated note removed) before the first.
        """
        cutoff = self.cutoffs[step]
        chosen = (self.question, self.background, self.resolution_criteria)
        for version in self.extra.get("text_versions") or ():
            try:
                if parse_instant(version["from"]) > cutoff:
                    break
                chosen = (
                    str(version.get("question") or self.question),
                    str(version.get("background") or ""),
                    str(version.get("resolution_criteria") or ""),
                )
            except (InstantError, KeyError, TypeError):
                continue
        return chosen

    def market_at(self, instant: datetime) -> tuple[float, ...] | None:
        """The latest market belief at or before ``instant`` (evaluation only; never shown to the agent)."""
        latest = None
        for point in self.market:
            if point.at <= instant:
                latest = point.probabilities
            else:
                break
        return latest


def _excluded_ids(where: str, value: Any, legacy: Any) -> tuple[str, ...]:
    """The sorted union of ``excluded_doc_ids`` and the legacy ``extra["excluded_doc_ids"]``.

    The legacy form is a list of ids or ``{step index | cutoff | "all": [ids]}``; a flagged document
    is hidden at every step (before its first flagged step it is not visible anyway).
    """
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise SchemaError(
            f"{where}: excluded_doc_ids must be a list of document ids, got {type(value).__name__}"
        )
    ids = list(value)
    if legacy is not None:
        if isinstance(legacy, dict) and all(isinstance(v, list) for v in legacy.values()):
            ids += [x for v in legacy.values() for x in v]
        elif isinstance(legacy, list):
            ids += legacy
        else:
            raise SchemaError(f"{where}: extra['excluded_doc_ids'] must be a list or a dict of lists")
    if not all(isinstance(x, str) and x for x in ids):
        raise SchemaError(f"{where}: excluded_doc_ids must hold non-empty document id strings")
    return tuple(sorted(set(ids)))


def check_distribution(values: Sequence[float], k: int, *, where: str = "distribution") -> tuple[float, ...]:
    """Validate a probability vector of length ``k``; renormalize tiny rounding; raise otherwise."""
    if len(values) != k:
        raise SchemaError(f"{where}: expected {k} probabilities, got {len(values)}")
    out = []
    for v in values:
        try:
            number = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
        except OverflowError:  # an integer beyond the float range
            number = math.inf
        if not math.isfinite(number) or number < 0:
            raise SchemaError(f"{where}: probabilities must be finite numbers >= 0, got {preview(v)}")
        out.append(number)
    total = sum(out)
    if abs(total - 1.0) > 1e-3:
        raise SchemaError(f"{where}: probabilities sum to {total:.6g}, not 1")
    return tuple(v / total for v in out)


# ---------------------------------------------------------------- events on disk (JSONL or parquet)


def event_to_record(event: Event) -> dict[str, Any]:
    """The documented JSON form of an event (format version ``EVENTS_FORMAT_VERSION``)."""
    return {
        "format_version": EVENTS_FORMAT_VERSION,
        "id": event.id,
        "question": event.question,
        "background": event.background,
        "resolution_criteria": event.resolution_criteria,
        "outcomes": list(event.outcomes),
        "outcome": event.outcome,
        "open_at": iso(event.open_at),
        "close_at": iso(event.close_at),
        "resolved_at": iso(event.resolved_at),
        "cutoffs": [iso(c) for c in event.cutoffs],
        "source": event.source,
        "url": event.url,
        "tags": list(event.tags),
        "market": [{"at": iso(p.at), "probabilities": list(p.probabilities)} for p in event.market],
        "extra": json.dumps(event.extra, sort_keys=True),
        "excluded_doc_ids": list(event.excluded_doc_ids),
    }


def event_from_record(record: dict[str, Any]) -> Event:
    """Parse and validate one event record; errors name the event and the field."""
    rid = record.get("id", "<no id>")
    version = record.get("format_version", EVENTS_FORMAT_VERSION)
    if version != EVENTS_FORMAT_VERSION:
        raise SchemaError(
            f"event {rid!r}: unsupported format_version {version} (this library reads {EVENTS_FORMAT_VERSION})"
        )
    missing = [
        k
        for k in ("id", "question", "outcomes", "outcome", "open_at", "close_at", "resolved_at", "cutoffs")
        if record.get(k) is None
    ]
    if missing:
        raise SchemaError(f"event {rid!r}: missing field(s) {missing}")
    outcomes = record["outcomes"]
    if not isinstance(outcomes, (list, tuple)):
        raise SchemaError(
            f"event {rid!r}: field 'outcomes' must be a list of labels, got {preview(outcomes)}"
        )
    try:
        extra = record.get("extra") or {}
        if isinstance(extra, str):
            extra = json.loads(extra)
        if not isinstance(extra, dict):
            raise SchemaError(f"event {rid!r}: field 'extra' must be a JSON object, got {preview(extra)}")
        return Event(
            id=str(record["id"]),
            question=str(record["question"]),
            background=str(record.get("background") or ""),
            resolution_criteria=str(record.get("resolution_criteria") or ""),
            outcomes=tuple(outcomes),
            outcome=str(record["outcome"]),
            open_at=parse_instant(record["open_at"]),
            close_at=parse_instant(record["close_at"]),
            resolved_at=parse_instant(record["resolved_at"]),
            cutoffs=tuple(parse_instant(c) for c in record["cutoffs"]),
            source=str(record.get("source") or ""),
            url=record.get("url"),
            tags=tuple(record.get("tags") or ()),
            market=tuple(
                MarketPoint(parse_instant(p["at"]), tuple(float(x) for x in p["probabilities"]))
                for p in (record.get("market") or ())
            ),
            extra=dict(extra),
            excluded_doc_ids=record.get("excluded_doc_ids") or (),
        )
    except (InstantError, KeyError, TypeError, json.JSONDecodeError) as err:
        raise SchemaError(f"event {rid!r}: {err}") from err


def save_events(events: Iterable[Event], path: str | Path) -> Path:
    """Write events as JSONL (``.jsonl``) or parquet (``.parquet``), in the given order."""
    path = Path(path)
    records = [event_to_record(e) for e in events]
    ids = [r["id"] for r in records]
    if len(ids) != len(set(ids)):
        raise SchemaError("duplicate event ids: " + ", ".join(sorted({i for i in ids if ids.count(i) > 1})))
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records), path)
    elif path.suffix == ".jsonl":
        tmp = path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        tmp.replace(path)
    else:
        raise SchemaError(f"{path}: events files end in .jsonl or .parquet")
    return path


def load_events(path: str | Path) -> list[Event]:
    """Read and validate an events file (JSONL or parquet). Any bad record fails the whole load."""
    path = Path(path)
    if not path.exists():
        raise InputNotFoundError(f"events file not found: {path}")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        records = pq.read_table(path).to_pylist()
    elif path.suffix == ".jsonl":
        records = []
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        raise SchemaError(f"{path}:{lineno}: not JSON: {err}") from err
    else:
        raise SchemaError(f"{path}: events files end in .jsonl or .parquet")
    events = [event_from_record(r) for r in records]
    ids = [e.id for e in events]
    if len(ids) != len(set(ids)):
        raise SchemaError(f"{path}: duplicate event ids")
    return events
