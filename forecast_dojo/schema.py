"""The data model: documents, events and their on-disk forms (versioned, validated on load).

An :class:`Event` is one episode; its ``cutoffs`` are the instants of its forecast steps. A
:class:`Document` is one dated text; it is visible at a step iff ``available_at < cutoff``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
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
# Size limits of an event, checked on construction (so on every load). The env's observation space
# is built from the same constants (``forecast_dojo.env``), so every loaded event's observations lie
# inside it. Real data sits far below them: ForecastBench's longest id is 66 characters, question
# 703, background 9,290; its labels are "Yes"/"No".
MAX_EVENT_ID_CHARS = 512
MAX_OUTCOMES = 64
MAX_LABEL_CHARS = 200
MAX_FREE_FORM_OUTCOMES = 20  # outcomes one free-form forecast may propose
# All labels together: the notebook's assessment (one entry per label) must fit its 8,000-character cap.
MAX_LABELS_TOTAL_CHARS = 2_000
MAX_QUESTION_CHARS = 10_000
MAX_TEXT_CHARS = 100_000  # background, resolution criteria (each), and every text version's


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
        if not isinstance(self.title, str) or not isinstance(self.date_source, str):
            raise SchemaError(f"document {self.id!r}: title and date_source must be strings")
        for name in ("url", "source"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise SchemaError(
                    f"document {self.id!r}: {name} must be a string or None, got {preview(value)}"
                )
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
    * or a **free-form** question (world mode): no fixed ``outcomes`` (an empty tuple); ``outcome`` is
      then the answer (:attr:`answer`, a label of at most :data:`MAX_LABEL_CHARS` characters) and
      ``aliases`` its other names (at most :data:`MAX_OUTCOMES`, each a label); it has no ``market``.
      The forecaster proposes outcomes, scored by :func:`forecast_dojo.scoring.free_form_score`.
      ``aliases`` are refused on a question with fixed outcomes;
    * sizes: ``id`` at most :data:`MAX_EVENT_ID_CHARS` characters, at most :data:`MAX_OUTCOMES`
      labels of at most :data:`MAX_LABEL_CHARS` (:data:`MAX_LABELS_TOTAL_CHARS` together), ``question`` at most :data:`MAX_QUESTION_CHARS`,
      ``background`` and ``resolution_criteria`` at most :data:`MAX_TEXT_CHARS` (the same for every
      version in ``extra["text_versions"]``); texts are valid Unicode (no lone surrogates);
    * types: texts are strings (``url`` a string or None), ``tags`` a list of non-empty strings
      (a bare string is refused, not read as one tag per character); nothing is converted with
      ``str()`` or ``float()``;
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
    aliases: tuple[str, ...] = ()  # free-form questions: other names of the answer

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise SchemaError(f"event id must be a non-empty string, got {preview(self.id)}")
        if len(self.id) > MAX_EVENT_ID_CHARS:
            raise SchemaError(
                f"event {preview(self.id)}: field 'id' has {len(self.id)} characters; the limit is {MAX_EVENT_ID_CHARS}"
            )
        where = f"event {self.id!r}"
        _check_text(where, "id", self.id, MAX_EVENT_ID_CHARS)
        _check_text(where, "question", self.question, MAX_QUESTION_CHARS)
        if not self.question.strip():
            raise SchemaError(f"{where}: empty question")
        for name in ("background", "resolution_criteria", "source"):
            _check_text(where, name, getattr(self, name), MAX_TEXT_CHARS)
        if self.url is not None:
            _check_text(where, "url", self.url, MAX_TEXT_CHARS)
        if not isinstance(self.outcomes, (tuple, list)) or not all(
            isinstance(o, str) and o.strip() for o in self.outcomes
        ):
            raise SchemaError(
                f"{where}: field 'outcomes' must be a list of non-empty label strings, got {preview(self.outcomes)}"
            )
        object.__setattr__(self, "outcomes", tuple(self.outcomes))
        self._check_aliases(where)
        if len(self.outcomes) > MAX_OUTCOMES:
            raise SchemaError(
                f"{where}: field 'outcomes' has {len(self.outcomes)} labels; the limit is {MAX_OUTCOMES}"
            )
        for label in self.outcomes:
            _check_text(where, "outcomes", label, MAX_LABEL_CHARS)
        total = sum(len(label) for label in self.outcomes)
        if total > MAX_LABELS_TOTAL_CHARS:
            raise SchemaError(
                f"{where}: field 'outcomes' has {total:,} characters in all; the limit is {MAX_LABELS_TOTAL_CHARS:,}"
            )
        if self.outcomes and (len(self.outcomes) < 2 or len(set(self.outcomes)) != len(self.outcomes)):
            raise SchemaError(
                f"{where}: needs K >= 2 distinct outcome labels, got {preview(list(self.outcomes))}"
            )
        if not isinstance(self.outcome, str):
            raise SchemaError(f"{where}: field 'outcome' must be a label string, got {preview(self.outcome)}")
        if not isinstance(self.tags, (tuple, list)) or not all(isinstance(t, str) and t for t in self.tags):
            raise SchemaError(
                f"{where}: field 'tags' must be a list of non-empty strings, got {preview(self.tags)}"
            )
        object.__setattr__(self, "tags", tuple(self.tags))
        for tag in self.tags:
            _check_text(where, "tags", tag, MAX_LABEL_CHARS)
        if self.free_form:
            _check_text(where, "answer", self.outcome, MAX_LABEL_CHARS)
            if not self.outcome.strip():
                raise SchemaError(
                    f"{where}: field 'answer' of a free-form question must be a non-empty label"
                )
        elif self.outcome not in self.outcomes:
            raise SchemaError(f"{where}: outcome {self.outcome!r} is not one of {list(self.outcomes)}")
        if isinstance(self.cutoffs, (str, bytes)) or not isinstance(self.cutoffs, (tuple, list)):
            raise SchemaError(
                f"{where}: field 'cutoffs' must be a list of instants, got {preview(self.cutoffs)}"
            )
        object.__setattr__(self, "cutoffs", tuple(self.cutoffs))
        if not self.cutoffs:
            raise SchemaError(f"{where}: no forecast cutoffs")
        for name in ("open_at", "close_at", "resolved_at"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise SchemaError(f"{where}: field {name!r} must be an aware datetime, got {preview(value)}")
        for cutoff in self.cutoffs:
            if not isinstance(cutoff, datetime) or cutoff.tzinfo is None:
                raise SchemaError(
                    f"{where}: field 'cutoffs' must hold aware datetimes, got {preview(cutoff)}"
                )
        if list(self.cutoffs) != sorted(set(self.cutoffs)):
            raise SchemaError(f"{where}: cutoffs must be strictly increasing")
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
        if not isinstance(self.market, (tuple, list)) or not all(
            isinstance(p, MarketPoint) for p in self.market
        ):
            raise SchemaError(
                f"{where}: field 'market' must be a list of market points, got {preview(self.market)}"
            )
        object.__setattr__(self, "market", tuple(self.market))
        for point in self.market:
            if not isinstance(point.at, datetime) or point.at.tzinfo is None:
                raise SchemaError(
                    f"{where}: field 'market': 'at' must be an aware datetime, got {preview(point.at)}"
                )
            if not isinstance(point.probabilities, (tuple, list)):
                raise SchemaError(
                    f"{where}: field 'market' at {iso(point.at)}: probabilities must be a list, got {preview(point.probabilities)}"
                )
            check_distribution(
                point.probabilities, len(self.outcomes), where=f"{where}: field 'market' at {iso(point.at)}"
            )
        if [p.at for p in self.market] != sorted(p.at for p in self.market):
            raise SchemaError(f"{where}: market series must be ordered by time")

    def _check_text_versions(self, where: str) -> None:
        versions = self.extra.get("text_versions")
        if versions is None:
            return
        field_name = "extra['text_versions']"
        if not isinstance(versions, list):
            raise SchemaError(
                f"{where}: field {field_name} must be a list of versions, got {preview(versions)}"
            )
        previous = None
        for index, version in enumerate(versions):
            at = f"{field_name}[{index}]"
            if not isinstance(version, dict):
                raise SchemaError(f"{where}: field {at} must be an object, got {preview(version)}")
            unknown = set(version) - {"from", "question", "background", "resolution_criteria"}
            if unknown:
                raise SchemaError(f"{where}: field {at} has unknown key(s) {sorted(unknown)}")
            start = version.get("from")
            if not isinstance(start, str):
                raise SchemaError(
                    f"{where}: field {at}['from'] must be an ISO 8601 instant, got {preview(start)}"
                )
            try:
                instant = parse_instant(start)
            except InstantError as err:
                raise SchemaError(f"{where}: field {at}['from']: {err}") from err
            if previous is not None and instant < previous:
                raise SchemaError(
                    f"{where}: field {field_name} must be in time order ({at} is earlier than the one before)"
                )
            previous = instant
            for name, limit in (
                ("question", MAX_QUESTION_CHARS),
                ("background", MAX_TEXT_CHARS),
                ("resolution_criteria", MAX_TEXT_CHARS),
            ):
                if version.get(name) is not None:
                    _check_text(where, f"{at}[{name!r}]", version[name], limit)

    def _check_excluded_doc_ids(self, where: str) -> None:
        if not isinstance(self.extra, dict):
            raise SchemaError(f"{where}: field 'extra' must be an object, got {preview(self.extra)}")
        self._check_text_versions(where)
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

    def _check_aliases(self, where: str) -> None:
        if isinstance(self.aliases, (str, bytes)) or not isinstance(self.aliases, (tuple, list)):
            raise SchemaError(
                f"{where}: field 'aliases' must be a list of labels, got {preview(self.aliases)}"
            )
        object.__setattr__(self, "aliases", tuple(self.aliases))
        if self.aliases and self.outcomes:
            raise SchemaError(
                f"{where}: field 'aliases' is for free-form questions (no 'outcomes'); this one has fixed outcomes"
            )
        if len(self.aliases) > MAX_OUTCOMES:
            raise SchemaError(
                f"{where}: field 'aliases' has {len(self.aliases)} labels; the limit is {MAX_OUTCOMES}"
            )
        for alias in self.aliases:
            _check_text(where, "aliases", alias, MAX_LABEL_CHARS)
            if not alias.strip():
                raise SchemaError(f"{where}: field 'aliases' must hold non-empty labels")
        if self.free_form and self.market:
            raise SchemaError(f"{where}: field 'market': a free-form question has no fixed outcomes to price")

    @property
    def free_form(self) -> bool:
        """Whether this is a free-form question (no fixed outcomes; ``answer`` and ``aliases``)."""
        return not self.outcomes

    @property
    def answer(self) -> str:
        """The realized answer: the outcome label (of a free-form question: its answer)."""
        return self.outcome

    @property
    def outcome_index(self) -> int:
        """Position of the resolved outcome in ``outcomes``.

        Raises:
            SchemaError: A free-form question, which has no fixed outcomes.
        """
        if self.free_form:
            raise SchemaError(f"event {self.id!r}: a free-form question has no outcome index")
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
        for version in self.extra.get("text_versions") or ():  # checked on construction
            if parse_instant(version["from"]) > cutoff:
                break
            chosen = (
                version.get("question") or self.question,
                version.get("background") or "",
                version.get("resolution_criteria") or "",
            )
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


def _check_text(where: str, name: str, value: Any, limit: int) -> None:
    """A field that must be a string of at most ``limit`` characters of valid Unicode."""
    shown = name if "[" in name else f"'{name}'"
    if not isinstance(value, str):
        raise SchemaError(f"{where}: field {shown} must be a string, got {preview(value)}")
    if len(value) > limit:
        raise SchemaError(f"{where}: field {shown} has {len(value):,} characters; the limit is {limit:,}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise SchemaError(
            f"{where}: field {shown} holds a lone surrogate at character {err.start} (not valid Unicode text)"
        ) from err


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


def as_number(value: Any) -> float:
    """A JSON number as a float: NaN for anything else (bools, strings, None), inf for an integer beyond the float range."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return math.nan
    try:
        return float(value)
    except OverflowError:
        return math.inf


def outcome_index(label: str, outcomes: Sequence[str]) -> int | None:
    """The position of a label a model wrote among the outcomes, or None when it names none of them.

    The label as written when it is one of the outcomes; else the label without surrounding
    whitespace, when that is exactly one outcome (a tokenizer's leading space, as in ``" Harbor
    Works"``, names the same outcome). Nothing else is forgiven: case, inner spaces and spelling
    must match, so a near-name (``"Degradro Labs"`` for ``"Degro Labs"``) is still refused.
    """
    if label in outcomes:
        return list(outcomes).index(label)
    stripped = label.strip()
    matches = [i for i, outcome in enumerate(outcomes) if outcome.strip() == stripped]
    return matches[0] if len(matches) == 1 else None


def values_in_outcome_order(
    value: Any, outcomes: Sequence[str], name: str
) -> tuple[list[Any] | None, str | None]:
    """One number per outcome from ``{label: x}`` (each label once, see :func:`outcome_index`) or a list."""
    if isinstance(value, dict):
        by_index: dict[int, Any] = {}
        unknown, repeated = [], []
        for label, number in value.items():
            index = outcome_index(str(label), outcomes)
            if index is None:
                unknown.append(str(label))
            elif index in by_index:
                repeated.append(outcomes[index])
            else:
                by_index[index] = number
        missing = [label for i, label in enumerate(outcomes) if i not in by_index]
        if unknown or missing or repeated:
            named_twice = f", named twice: {preview(repeated)}" if repeated else ""
            return (
                None,
                f"labels must be exactly {list(outcomes)} (unknown: {preview(sorted(unknown))},"
                f" missing: {missing}{named_twice})",
            )
        return [by_index[i] for i in range(len(outcomes))], None
    if isinstance(value, list):
        return value, None
    return None, f"{name} must be an object keyed by outcome label or a list"


def check_distribution(values: Sequence[float], k: int, *, where: str = "distribution") -> tuple[float, ...]:
    """Validate a probability vector of length ``k``; renormalize tiny rounding; raise otherwise."""
    if len(values) != k:
        raise SchemaError(f"{where}: expected {k} probabilities, got {len(values)}")
    out = []
    for v in values:
        number = as_number(v)
        if not math.isfinite(number) or number < 0:
            raise SchemaError(f"{where}: probabilities must be finite numbers >= 0, got {preview(v)}")
        out.append(number)
    total = sum(out)
    if abs(total - 1.0) > 1e-3:
        raise SchemaError(f"{where}: probabilities sum to {total:.6g}, not 1")
    return tuple(v / total for v in out)


# ---------------------------------------------------------------- events on disk (JSONL or parquet)


def decode_json_text(value: Any, error: Callable[[json.JSONDecodeError], Exception]) -> Any:
    """A field that may arrive JSON-encoded as a string: the decoded string, any other value as is.

    Args:
        value: The field's value.
        error: Makes the error to raise when the string is not valid JSON (raised from the decode error).

    Returns:
        The decoded value when ``value`` is a string, else ``value``.
    """
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as err:
        raise error(err) from err


def event_to_record(event: Event) -> dict[str, Any]:
    """The documented JSON form of an event (format version ``EVENTS_FORMAT_VERSION``).

    A free-form question is written with ``"outcomes": []``, ``answer`` and ``aliases`` instead of ``outcome``.
    """
    record = _fixed_record(event)
    if event.free_form:
        del record["outcome"]
        record["answer"] = event.answer
        record["aliases"] = list(event.aliases)
    return record


def _fixed_record(event: Event) -> dict[str, Any]:
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


_REQUIRED_FIELDS = ("id", "question", "outcomes", "outcome", "open_at", "close_at", "resolved_at", "cutoffs")


def _instant_field(rid: str, name: str, value: Any) -> datetime:
    """An instant of an events record: an ISO 8601 string (or a datetime, from parquet); never a number."""
    if isinstance(value, float) and not math.isfinite(value):
        raise SchemaError(f"event {rid!r}: field {name!r} must be an ISO 8601 instant, got {value!r}")
    if not isinstance(value, (str, datetime)):
        raise SchemaError(
            f"event {rid!r}: field {name!r} must be an ISO 8601 instant string, got {preview(value)}"
        )
    try:
        return parse_instant(value)
    except InstantError as err:
        raise SchemaError(f"event {rid!r}: field {name!r}: {err}") from err


def _probability(rid: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SchemaError(
            f"event {rid!r}: field 'market': probabilities must be numbers, got {preview(value)}"
        )
    try:
        return float(value)
    except OverflowError:
        return math.inf  # refused by check_distribution, which names the point


def _market(rid: str, value: Any) -> tuple[MarketPoint, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SchemaError(f"event {rid!r}: field 'market' must be a list of points, got {preview(value)}")
    points = []
    for index, point in enumerate(value):
        if not isinstance(point, dict) or set(point) != {"at", "probabilities"}:
            raise SchemaError(
                f"event {rid!r}: field 'market'[{index}] must be an object with 'at' and 'probabilities', "
                f"got {preview(point)}"
            )
        probabilities = point["probabilities"]
        if not isinstance(probabilities, list):
            raise SchemaError(
                f"event {rid!r}: field 'market'[{index}]['probabilities'] must be a list, got {preview(probabilities)}"
            )
        at = _instant_field(rid, f"market'[{index}]['at", point["at"])
        points.append(MarketPoint(at, tuple(_probability(rid, x) for x in probabilities)))
    return tuple(points)


def _optional_text(rid: str, record: dict[str, Any], name: str) -> str:
    value = record.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SchemaError(f"event {rid!r}: field {name!r} must be a string, got {preview(value)}")
    return value


def event_from_record(record: dict[str, Any]) -> Event:
    """Parse and validate one event record; errors name the event and the field.

    Types are checked, never converted: texts must be strings, instants ISO 8601 strings, ``outcomes``,
    ``cutoffs``, ``tags`` and ``market`` lists, probabilities numbers.
    """
    if not isinstance(record, dict):
        raise SchemaError(
            f"an event record must be a JSON object, got {type(record).__name__} {preview(record)}"
        )
    raw_id = record.get("id")
    rid = raw_id if isinstance(raw_id, str) else "<no id>"
    version = record.get("format_version", EVENTS_FORMAT_VERSION)
    if isinstance(version, bool) or version != EVENTS_FORMAT_VERSION:
        raise SchemaError(
            f"event {rid!r}: unsupported format_version {preview(version)} (this library reads {EVENTS_FORMAT_VERSION})"
        )
    free_form = record.get("answer") is not None
    if free_form:
        if record.get("outcomes") or record.get("outcome") is not None:
            raise SchemaError(
                f"event {rid!r}: a free-form question has 'answer' (and optional 'aliases') and no "
                "'outcomes' or 'outcome'"
            )
        record = {**record, "outcomes": [], "outcome": record["answer"]}
    elif record.get("aliases") is not None:
        raise SchemaError(f"event {rid!r}: field 'aliases' is for free-form questions (with 'answer')")
    missing = [k for k in _REQUIRED_FIELDS if record.get(k) is None]
    if missing:
        raise SchemaError(f"event {rid!r}: missing field(s) {missing}")
    if free_form and not isinstance(record["answer"], str):
        raise SchemaError(f"event {rid!r}: field 'answer' must be a string, got {preview(record['answer'])}")
    for name in ("id", "question", "outcome"):
        if not isinstance(record[name], str):
            raise SchemaError(f"event {rid!r}: field {name!r} must be a string, got {preview(record[name])}")
    outcomes = record["outcomes"]
    if not isinstance(outcomes, (list, tuple)):
        raise SchemaError(
            f"event {rid!r}: field 'outcomes' must be a list of labels, got {preview(outcomes)}"
        )
    for name in ("cutoffs", "tags", "excluded_doc_ids", "aliases"):
        value = record.get(name)
        if value is not None and not isinstance(value, (list, tuple)):
            raise SchemaError(f"event {rid!r}: field {name!r} must be a list, got {preview(value)}")
    url = record.get("url")
    if url is not None and not isinstance(url, str):
        raise SchemaError(f"event {rid!r}: field 'url' must be a string or null, got {preview(url)}")
    extra = decode_json_text(
        record.get("extra") or {},
        lambda err: SchemaError(f"event {rid!r}: field 'extra' is not valid JSON ({err})"),
    )
    if not isinstance(extra, dict):
        raise SchemaError(f"event {rid!r}: field 'extra' must be a JSON object, got {preview(extra)}")
    return Event(
        id=record["id"],
        question=record["question"],
        background=_optional_text(rid, record, "background"),
        resolution_criteria=_optional_text(rid, record, "resolution_criteria"),
        outcomes=tuple(outcomes),
        outcome=record["outcome"],
        open_at=_instant_field(rid, "open_at", record["open_at"]),
        close_at=_instant_field(rid, "close_at", record["close_at"]),
        resolved_at=_instant_field(rid, "resolved_at", record["resolved_at"]),
        cutoffs=tuple(_instant_field(rid, "cutoffs", c) for c in record["cutoffs"]),
        source=_optional_text(rid, record, "source"),
        url=url,
        tags=tuple(record.get("tags") or ()),
        market=_market(rid, record.get("market")),
        extra=dict(extra),
        excluded_doc_ids=record.get("excluded_doc_ids") or (),
        aliases=tuple(record.get("aliases") or ()),
    )


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

        keys = list(dict.fromkeys(k for r in records for k in r))  # free-form and fixed rows side by side
        pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in records]), path)
    elif path.suffix == ".jsonl":
        tmp = path.with_suffix(".jsonl.tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for record in records:
                fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        tmp.replace(path)
    else:
        raise SchemaError(f"{path}: events files end in .jsonl or .parquet")
    return path


def _first_non_utf8_field(raw: bytes) -> str | None:
    """The field (a JSON path) of a line whose text holds bytes that are not UTF-8, when it parses."""
    try:
        record = json.loads(raw.decode("utf-8", errors="surrogateescape"))
    except json.JSONDecodeError:
        return None

    def bad(text: str) -> bool:
        return any("\udc80" <= ch <= "\udcff" for ch in text)

    def find(value: Any, where: str) -> str | None:
        if isinstance(value, str):
            return where if bad(value) else None
        if isinstance(value, dict):
            for key, item in value.items():
                path = f"{where}[{key!r}]" if where else repr(key)
                if bad(key):
                    return path
                found = find(item, path)
                if found:
                    return found
        if isinstance(value, list):
            for index, item in enumerate(value):
                found = find(item, f"{where}[{index}]")
                if found:
                    return found
        return None

    return find(record, "")


def _read_jsonl(path: Path) -> list[tuple[int, Any]]:
    """(line number, parsed value) of every non-blank line; errors name the file, the line and the field."""
    records = []
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte order mark
                raw = raw[3:]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                field_name = _first_non_utf8_field(raw)
                in_field = f"field {field_name} " if field_name else ""
                raise SchemaError(
                    f"{path}:{lineno}: {in_field}is not UTF-8 text (byte 0x{raw[err.start]:02x} at byte "
                    f"{err.start + 1} of the line; latin-1 or another encoding?); events files are UTF-8"
                ) from err
            if not line.strip():
                continue
            try:
                records.append((lineno, json.loads(line)))
            except json.JSONDecodeError as err:
                raise SchemaError(f"{path}:{lineno}: not JSON: {err}") from err
            except RecursionError as err:
                raise SchemaError(f"{path}:{lineno}: not JSON: nested too deeply") from err
    return records


def load_events(path: str | Path) -> list[Event]:
    """Read and validate an events file (JSONL or parquet). Any bad record fails the whole load.

    Errors are :class:`SchemaError` naming the file, the line (JSONL) or row (parquet, from 1), the
    event and the field.
    """
    path = Path(path)
    if not path.is_file():
        raise InputNotFoundError(f"events file not found: {path}")
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except (pa.ArrowException, OSError) as err:
            raise SchemaError(f"{path}: not a readable parquet file ({err})") from err
        records = [(f"{path}: row {i}", r) for i, r in enumerate(rows, 1)]
    elif path.suffix == ".jsonl":
        try:
            records = [(f"{path}:{lineno}", r) for lineno, r in _read_jsonl(path)]
        except OSError as err:
            raise SchemaError(f"{path}: cannot read the events file ({err.strerror or err})") from err
    else:
        raise SchemaError(f"{path}: events files end in .jsonl or .parquet")
    events = []
    first_at: dict[str, str] = {}
    for where, record in records:
        try:
            event = event_from_record(record)
        except SchemaError as err:
            raise SchemaError(f"{where}: {err}") from err
        if event.id in first_at:
            raise SchemaError(f"{where}: duplicate event id {event.id!r} (first at {first_at[event.id]})")
        first_at[event.id] = where
        events.append(event)
    return events
