"""The reference evidence sets that evidence quality (source precision, evidence recall) is measured against.

A reference lists, per event, the documents that bear on its question with the instant each became
available; a step's reference set is those available strictly before the step's cutoff (the
gateway's rule), so a document is in it only if it was both time-valid and relevant at that step.

* **synthetic** (:func:`synthetic_reference`): exact. The generator knows every evidence document of
  every event and its signal (:attr:`forecast_dojo.synthetic.SyntheticWorld.evidence`); distractors,
  look-alikes, background noise and resolution reports are not in it.
* **hindsight** (:func:`hindsight_reference`): real events. The documents the events build's
  relevance rule (:class:`forecast_dojo.events.relevance.RelevanceIndex`, the evidence filter and
  the leakage screen's rule) marks as bearing on the question, available between ``lookback_days``
  before the open and the close, minus the event's excluded (leaking) documents. An approximation:
  lexical relevance, not a judge.

A study folder keeps its reference in ``evidence.json`` (:func:`save_reference`), and
:func:`forecast_dojo.evaluation.study.study_rows` gives each row its step's set as ``reference_docs``.
Researcher-facing only: never shown to an agent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_dojo.errors import DataError
from forecast_dojo.schema import Event
from forecast_dojo.timeutil import from_micros, iso, parse_instant, to_micros

if TYPE_CHECKING:
    from forecast_dojo.corpus.store import Corpus
    from forecast_dojo.synthetic.model import SyntheticWorld

EVIDENCE_FILE = "evidence.json"
REFERENCE_KINDS = ("synthetic", "hindsight")
EVIDENCE_FORMAT_VERSION = 1


@dataclass(frozen=True)
class EvidenceReference:
    """Per event, the documents bearing on its question and when each became available.

    Attributes:
        kind: ``synthetic`` (the generator's exact evidence) or ``hindsight`` (see the module docstring).
        documents: event id -> ``[(doc_id, available_at ISO)]`` in time order.
        note: How the reference was built (shown in the report).
    """

    kind: str
    documents: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    note: str = ""

    def at(self, event_id: str, cutoff: str | datetime) -> list[str] | None:
        """The step's reference set: the event's documents available strictly before ``cutoff``.

        Args:
            event_id: The event.
            cutoff: The step's cutoff (ISO text or an aware datetime).

        Returns:
            The sorted ids, or None when the reference does not cover the event.
        """
        if event_id not in self.documents:
            return None
        limit = to_micros(parse_instant(cutoff) if isinstance(cutoff, str) else cutoff)
        return sorted(d for d, at in self.documents[event_id] if to_micros(parse_instant(at)) < limit)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of ``evidence.json``."""
        return {
            "format_version": EVIDENCE_FORMAT_VERSION,
            "kind": self.kind,
            "note": self.note,
            "documents": {e: [list(d) for d in docs] for e, docs in sorted(self.documents.items())},
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
        out: dict[str, list[tuple[str, str]]] = {}
        for event_id, docs in documents.items():
            if not isinstance(docs, list) or not all(
                isinstance(d, list) and len(d) == 2 and all(isinstance(x, str) for x in d) for d in docs
            ):
                raise DataError(
                    f"{where}: field 'documents'[{event_id!r}] must be a list of [doc_id, available_at]"
                )
            for _, at in docs:
                try:
                    parse_instant(at)
                except (ValueError, TypeError) as err:
                    raise DataError(
                        f"{where}: field 'documents'[{event_id!r}]: bad instant {at!r} ({err})"
                    ) from err
            out[event_id] = [(d, at) for d, at in docs]
        return cls(kind=data["kind"], documents=out, note=str(data.get("note") or ""))


def save_reference(out: str | Path, reference: EvidenceReference) -> Path:
    """Write a reference to ``<out>/evidence.json`` (replacing it); returns the path."""
    path = Path(out) / EVIDENCE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(reference.to_dict(), indent=1, sort_keys=True))
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
    chosen = list(events) if events is not None else list(world.events)
    documents = {}
    for event in chosen:
        hidden = set(event.excluded_doc_ids)
        documents[event.id] = [
            (ev.doc_id, iso(ev.available_at))
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
    min_coverage: float = 0.6,
    lookback_days: int = 90,
    top_k: int = 200,
) -> EvidenceReference:
    """A hindsight reference for real events: documents the relevance rule marks as bearing on each question.

    Args:
        events: The events.
        corpus: Their corpus.
        min_coverage: Share of the question's salient terms a document must contain.
        lookback_days: How long before the open a document may have appeared.
        top_k: At most this many documents per event (best matches first).

    Returns:
        A ``hindsight`` reference (documents available in ``[open - lookback, close)``, minus the
        event's excluded ones).
    """
    from forecast_dojo.events.relevance import RelevanceIndex

    index = RelevanceIndex(corpus)
    documents: dict[str, list[tuple[str, str]]] = {}
    for event in events:
        lo, hi = index.rows_between(event.open_at - timedelta(days=lookback_days), event.close_at)
        hidden = set(event.excluded_doc_ids)
        found = index.matches(event.question, lo, hi, min_coverage=min_coverage, top_k=top_k)
        rows = sorted(m.row for m in found)
        docs = []
        for row in rows:
            doc_id = corpus.field("id", row)
            if doc_id not in hidden:
                docs.append((doc_id, iso(from_micros(int(corpus.available_us[row])))))
        documents[event.id] = docs
    return EvidenceReference(
        "hindsight",
        documents,
        note=f"lexical relevance (>= {min_coverage:.0%} of the question's salient terms, a name), "
        f"available from {lookback_days} days before the open to the close; excluded documents left out",
    )


def attach_reference(rows: Sequence[dict[str, Any]], reference: EvidenceReference | None) -> None:
    """Give every agent row its step's reference set (``reference_docs``) in place; references' rows get none.

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
