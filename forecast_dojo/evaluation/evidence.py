"""The reference evidence sets that evidence quality (source precision, evidence recall) is measured against.

A reference lists, per event, the documents that bear on its question with the instant each became
available; a step's reference set is those available strictly before the step's cutoff (the
gateway's rule), so a document is in it only if it was both time-valid and relevant at that step.

* **synthetic** (:func:`synthetic_reference`): exact. The generator knows every evidence document of
  every event and its signal (:attr:`forecast_dojo.synthetic.SyntheticWorld.evidence`); distractors,
  look-alikes, background noise and resolution reports are not in it.
* **hindsight** (:func:`hindsight_reference`): real events. The documents the events build's
  relevance rule (:class:`forecast_dojo.events.relevance.RelevanceIndex`, with the thresholds of the
  build's evidence filter) marks as bearing on the question, available between ``lookback_days``
  before the open and the close, minus the event's excluded (leaking) documents. An approximation:
  lexical relevance, not a judge.

A study folder keeps its reference in ``evidence.json`` (:func:`save_reference`), and
:func:`forecast_dojo.evaluation.study.study_rows` gives each row its step's set as ``reference_docs``.
Researcher-facing only: never shown to an agent.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_dojo.atomic import write_text_atomic
from forecast_dojo.errors import DataError
from forecast_dojo.schema import Event
from forecast_dojo.timeutil import from_micros, iso, parse_instant, to_micros

if TYPE_CHECKING:
    from forecast_dojo.corpus.store import Corpus
    from forecast_dojo.env import ForecastDojoEnv
    from forecast_dojo.synthetic.model import SyntheticWorld

EVIDENCE_FILE = "evidence.json"
REFERENCE_KINDS = ("synthetic", "hindsight")
EVIDENCE_FORMAT_VERSION = 1
KEY_EVENTS = 5  # WorldReasoner's top-K hindsight events per step
KEY_TEXT_CHARS = 300


@dataclass(frozen=True)
class ReferenceDocument:
    """One document of a reference: when it became available, its date and text, and how much it bears.

    Attributes:
        doc_id: The document id.
        available_at: When it became visible (ISO 8601 UTC).
        date: Its publication day (``YYYY-MM-DD``): the date a key event is matched on.
        text: Its title and the start of its text (for key-event matching).
        weight: How strongly it bears on the question (synthetic: the tier's log likelihood ratio;
            hindsight: the share of the question's salient terms it holds); key events are the heaviest.
    """

    doc_id: str
    available_at: str
    date: str = ""
    text: str = ""
    weight: float = 1.0


@dataclass(frozen=True)
class EvidenceReference:
    """Per event, the documents bearing on its question (see the module docstring).

    Attributes:
        kind: ``synthetic`` (the generator's exact evidence) or ``hindsight``.
        documents: event id -> its reference documents in time order.
        note: How the reference was built (shown in the report).
    """

    kind: str
    documents: dict[str, list[ReferenceDocument]] = field(default_factory=dict)
    note: str = ""

    def _before(self, event_id: str, cutoff: str | datetime) -> list[ReferenceDocument] | None:
        if event_id not in self.documents:
            return None
        limit = to_micros(parse_instant(cutoff) if isinstance(cutoff, str) else cutoff)
        return [d for d in self.documents[event_id] if to_micros(parse_instant(d.available_at)) < limit]

    def at(self, event_id: str, cutoff: str | datetime) -> list[str] | None:
        """The step's reference set: the event's documents available strictly before ``cutoff``.

        Args:
            event_id: The event.
            cutoff: The step's cutoff (ISO text or an aware datetime).

        Returns:
            The sorted ids, or None when the reference does not cover the event.
        """
        docs = self._before(event_id, cutoff)
        return None if docs is None else sorted(d.doc_id for d in docs)

    def key_events(self, event_id: str, cutoff: str | datetime, k: int = KEY_EVENTS) -> list[dict[str, str]]:
        """The step's hindsight key events: its ``k`` heaviest reference documents before ``cutoff``.

        Args:
            event_id: The event.
            cutoff: The step's cutoff.
            k: How many (WorldReasoner's top-K).

        Returns:
            ``[{"doc_id", "date", "text"}]``, heaviest first (then latest, then by id); empty when
            the reference does not cover the event.
        """
        docs = self._before(event_id, cutoff) or []
        docs = sorted(docs, key=lambda d: (-d.weight, _negated(d.date), d.doc_id))[:k]
        return [{"doc_id": d.doc_id, "date": d.date, "text": d.text} for d in docs]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``evidence.json``."""
        return {
            "format_version": EVIDENCE_FORMAT_VERSION,
            "kind": self.kind,
            "note": self.note,
            "documents": {e: [vars(d) for d in docs] for e, docs in sorted(self.documents.items())},
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "evidence reference") -> EvidenceReference:
        """Read :meth:`to_dict`'s form.

        Raises:
            DataError: A malformed reference (the message names the field).
        """
        if not isinstance(data, dict):
            raise DataError(f"{where}: expected a JSON object")
        if data.get("format_version") != EVIDENCE_FORMAT_VERSION:
            raise DataError(f"{where}: field 'format_version' must be {EVIDENCE_FORMAT_VERSION}")
        if data.get("kind") not in REFERENCE_KINDS:
            raise DataError(
                f"{where}: field 'kind' must be one of {REFERENCE_KINDS}, got {data.get('kind')!r}"
            )
        documents = data.get("documents")
        if not isinstance(documents, dict):
            raise DataError(f"{where}: field 'documents' must be an object by event id")
        out: dict[str, list[ReferenceDocument]] = {}
        for event_id, docs in documents.items():
            if not isinstance(docs, list):
                raise DataError(f"{where}: field 'documents'[{event_id!r}] must be a list")
            out[event_id] = [
                _document(d, f"{where}: field 'documents'[{event_id!r}][{i}]") for i, d in enumerate(docs)
            ]
        return cls(kind=data["kind"], documents=out, note=str(data.get("note") or ""))


def _negated(day: str) -> tuple[int, ...]:
    """A sort key that puts later days first."""
    return tuple(-ord(c) for c in day)


def _document(data: Any, where: str) -> ReferenceDocument:
    if not isinstance(data, dict) or not isinstance(data.get("doc_id"), str) or not data["doc_id"]:
        raise DataError(f"{where}: expected an object with a string 'doc_id'")
    try:
        parse_instant(data.get("available_at"))
    except (ValueError, TypeError) as err:
        raise DataError(f"{where}: field 'available_at' is not an instant ({err})") from err
    weight = data.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise DataError(f"{where}: field 'weight' must be a number")
    return ReferenceDocument(
        data["doc_id"],
        str(data["available_at"]),
        str(data.get("date") or ""),
        str(data.get("text") or ""),
        float(weight),
    )


def save_reference(out: str | Path, reference: EvidenceReference) -> Path:
    """Write a reference to ``<out>/evidence.json`` (replacing it); returns the path."""
    path = Path(out) / EVIDENCE_FILE
    write_text_atomic(path, json.dumps(reference.to_dict(), indent=1, sort_keys=True))
    return path


def load_reference(out: str | Path) -> EvidenceReference | None:
    """The reference of a study folder (``<out>/evidence.json``), or None when it has none.

    Raises:
        DataError: The file is not valid JSON or not a reference.
    """
    path = Path(out) / EVIDENCE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from err
    return EvidenceReference.from_dict(data, where=str(path))


def synthetic_reference(world: SyntheticWorld, events: Sequence[Event] | None = None) -> EvidenceReference:
    """The exact reference of the synthetic world: every event's evidence documents (the generator's).

    Args:
        world: The generated world (:func:`forecast_dojo.synthetic.generate_world`).
        events: The events to cover (default: all of the world's); their excluded documents are left out.

    Returns:
        A ``synthetic`` reference.
    """
    from forecast_dojo.synthetic.model import TIER_LIKELIHOOD_RATIO

    chosen = list(events) if events is not None else list(world.events)
    by_id = {d.id: d for d in world.documents}
    documents = {}
    for event in chosen:
        if event.id not in world.evidence:  # not this world's event: not covered
            continue
        hidden = set(event.excluded_doc_ids)
        documents[event.id] = [
            _reference_document(
                by_id[ev.doc_id].title,
                by_id[ev.doc_id].text,
                ev.doc_id,
                ev.available_at,
                by_id[ev.doc_id].published_at,
                math.log(TIER_LIKELIHOOD_RATIO[ev.tier]),
            )
            for ev in world.evidence.get(event.id, [])
            if ev.doc_id not in hidden
        ]
    return EvidenceReference(
        "synthetic",
        documents,
        note=f"synthetic world seed {world.seed}: the generator's evidence documents (exact)",
    )


def hindsight_reference(
    events: Sequence[Event],
    corpus: Corpus,
    *,
    min_coverage: float | None = None,
    min_shared: int | None = None,
    lookback_days: int = 90,
    top_k: int = 200,
) -> EvidenceReference:
    """A hindsight reference for real events: documents the relevance rule marks as bearing on each question.

    The rule is the events build's evidence filter (:func:`forecast_dojo.events.selection.evidence_documents`,
    its :class:`~forecast_dojo.events.selection.SelectionConfig` thresholds by default), so every event the
    build kept for its evidence has documents here, over a window that runs from before the open to the close.

    Args:
        events: The events.
        corpus: Their corpus.
        min_coverage: Share of the question's salient terms a document must contain (default: the
            build's ``evidence_min_coverage``).
        min_shared: Salient terms a document must share at least (default: the build's
            ``evidence_min_shared_terms``).
        lookback_days: How long before the open a document may have appeared.
        top_k: At most this many documents per event (best matches first).

    Returns:
        A ``hindsight`` reference (documents available in ``[open - lookback, close)``, minus the
        event's excluded ones).
    """
    from forecast_dojo.events.relevance import RelevanceIndex
    from forecast_dojo.events.selection import SelectionConfig

    build = SelectionConfig()
    min_coverage = build.evidence_min_coverage if min_coverage is None else min_coverage
    min_shared = build.evidence_min_shared_terms if min_shared is None else min_shared
    index = RelevanceIndex(corpus)
    documents: dict[str, list[ReferenceDocument]] = {}
    for event in events:
        lo, hi = index.rows_between(event.open_at - timedelta(days=lookback_days), event.close_at)
        hidden = set(event.excluded_doc_ids)
        found = index.matches(
            event.question, lo, hi, min_coverage=min_coverage, min_shared=min_shared, top_k=top_k
        )
        docs = []
        for match in sorted(found, key=lambda m: m.row):
            doc_id = corpus.field("id", match.row)
            if doc_id in hidden:
                continue
            docs.append(
                _reference_document(
                    corpus.field("title", match.row) or "",
                    corpus.text(match.row),
                    doc_id,
                    from_micros(int(corpus.available_us[match.row])),
                    from_micros(int(corpus.published_us[match.row])),
                    match.coverage,
                )
            )
        documents[event.id] = docs
    return EvidenceReference(
        "hindsight",
        documents,
        note=f"lexical relevance, the events build's evidence rule (>= {min_coverage:.0%} of the question's "
        f"salient terms and at least {min_shared}, a name), "
        f"available from {lookback_days} days before the open to the close; excluded documents left out",
    )


def study_reference(env: ForecastDojoEnv, events: Sequence[Event]) -> EvidenceReference:
    """The reference a study of ``events`` in ``env`` is measured against.

    The synthetic world (``env_spec.world``) gets its generator's exact evidence (the base world of
    the spec's seed: training-only events are not covered); real events a hindsight set over the env's corpus.

    Args:
        env: An env of the study (its ``run_metadata["env_spec"]`` and corpus are read).
        events: The study's events.

    Returns:
        The reference.
    """
    spec = env.run_metadata.get("env_spec") or {}
    if spec.get("world") == "synthetic":
        from forecast_dojo.synthetic.world import generate_world

        return synthetic_reference(generate_world(int(spec.get("seed") or 0)), events)
    return hindsight_reference(events, env.corpus)


def _reference_document(
    title: str, text: str, doc_id: str, available: datetime, published: datetime, weight: float
) -> ReferenceDocument:
    body = " ".join(f"{title}. {text}".split()) if title else " ".join(text.split())
    return ReferenceDocument(
        doc_id, iso(available), published.date().isoformat(), body[:KEY_TEXT_CHARS], weight
    )


def attach_reference(rows: Sequence[dict[str, Any]], reference: EvidenceReference | None) -> None:
    """Give every agent row its step's reference set (``reference_docs``) and key events in place.

    Reference forecasters' rows get neither; ``key_events`` (:meth:`EvidenceReference.key_events`) is
    attached only to rows that submitted a reasoning graph (``graph_events``).

    Args:
        rows: Study rows (with ``event_id``, ``cutoff`` and ``memory``).
        reference: The study's reference, or None (nothing is attached).
    """
    if reference is None:
        return
    cache: dict[tuple[str, str], list[str] | None] = {}
    for row in rows:
        if row.get("memory") == "-":
            continue
        key = (row["event_id"], row["cutoff"])
        if key not in cache:
            cache[key] = reference.at(*key)
        if cache[key] is not None:
            row["reference_docs"] = cache[key]
            if row.get("graph_events") is not None:
                row["key_events"] = reference.key_events(*key)
