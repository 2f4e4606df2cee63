"""The belief notebook: the only thing a memory-on agent carries from one forecast step to the next.

It is a validated, size-capped structure, never free text, so that what crosses steps is auditable.
:data:`SCHEMA` is its one description (``{"assessment": {label: probability}, "evidence": [{"claim",
"date", "doc_ids"}], "open_questions": [...]}``): the prompts of every profile, the ``notebook``
argument's description and the agents' notebooks are rendered from it (:func:`schema_shape`,
:func:`schema_words`, :func:`notebook_value`).

A notebook submitted with ``submit_forecast`` may leave ``assessment`` out: it is then the forecast
the call recorded (:func:`parse_notebook`'s ``forecast``). The env derives it as it derives the forecast
from ``log_odds`` or ``evidence``, so an agent that never writes probabilities itself (the compact
profile's teacher and its students) cannot carry a malformed one: a small model that wrote ``0.5`` for
every outcome of a four-outcome question had its notebook refused at every turn (docs/training.md).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from typing import Any

from forecast_dojo.errors import NotebookError as NotebookError
from forecast_dojo.schema import SchemaError, check_distribution, values_in_outcome_order
from forecast_dojo.scoring import read_free_form
from forecast_dojo.untrusted import UntrustedInputError, preview, read_json

MAX_NOTEBOOK_CHARS = 8000
MAX_EVIDENCE = 40
MAX_OPEN_QUESTIONS = 10
MAX_CLAIM_CHARS = 500
MAX_DOC_IDS_PER_CLAIM = 10
MAX_NOTEBOOK_INPUT_CHARS = 4 * MAX_NOTEBOOK_CHARS  # room for whitespace before the JSON-size cap applies


# The one description of the schema: (key, its shape as a prompt writes it, its meaning in words).
# Every text that tells an agent (or a person) what a notebook looks like is rendered from this table.
SCHEMA: tuple[tuple[str, str, str], ...] = (
    ("assessment", "{label: probability}", "probability by outcome label (optional: the forecast submitted)"),
    (
        "evidence",
        '[{"claim": ..., "date": "YYYY-MM-DD", "doc_ids": [...]}]',
        'list of {"claim", "date", "doc_ids"}',
    ),
    ("open_questions", "[...]", "list of strings"),
)
NOTEBOOK_KEYS = tuple(key for key, _, _ in SCHEMA)
EVIDENCE_KEYS = ("claim", "date", "doc_ids")


def schema_shape(*, compact: bool = False) -> str:
    """The notebook's shape as a JSON-like line: ``{"assessment": {label: probability}, ...}``.

    Args:
        compact: for the compact prompt profile: the evidence entries by their keys only
            (``[{"claim", "date", "doc_ids"}]``) and no ``assessment`` (the env fills it with the
            forecast submitted).
    """
    shapes = {key: shape for key, shape, _ in SCHEMA}
    if compact:
        shapes["evidence"] = "[{" + ", ".join(f'"{key}"' for key in EVIDENCE_KEYS) + "}]"
        del shapes["assessment"]
    return "{" + ", ".join(f'"{key}": {shape}' for key, shape in shapes.items()) + "}"


def schema_words() -> str:
    """The notebook's keys and their meaning in words (the ``notebook`` argument's description)."""
    parts = [f'"{key}" ({meaning})' for key, _, meaning in SCHEMA]
    return "an object with " + ", ".join(parts[:-1]) + " and " + parts[-1]


def notebook_value(
    assessment: dict[str, float] | None,
    evidence: list[dict[str, Any]] | tuple[dict[str, Any], ...] = (),
    open_questions: list[str] | tuple[str, ...] = (),
) -> dict[str, Any]:
    """A notebook as the plain JSON value an agent submits, keys in schema order.

    Args:
        assessment: probability by outcome label; None leaves the key out (in ``submit_forecast``
            the env fills it with the forecast submitted). ``open_questions`` is likewise left out
            when the assessment is and there are none.
        evidence: entries with ``claim``, ``date`` (``YYYY-MM-DD``) and ``doc_ids``.
        open_questions: what is still unknown.

    Returns:
        ``{"assessment": ..., "evidence": [...], "open_questions": [...]}``.
    """
    value: dict[str, Any] = {} if assessment is None else {"assessment": dict(assessment)}
    value["evidence"] = [{key: entry[key] for key in EVIDENCE_KEYS if key in entry} for entry in evidence]
    if assessment is not None or open_questions:
        value["open_questions"] = list(open_questions)
    return value


@dataclass(frozen=True)
class EvidenceEntry:
    """One ledger line: a claim, its date (ISO day, never after the forecast date) and the documents behind it."""

    claim: str
    date: str
    doc_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Notebook:
    """Current assessment (probabilities by outcome label), evidence ledger, open questions."""

    assessment: tuple[tuple[str, float], ...]
    evidence: tuple[EvidenceEntry, ...] = ()
    open_questions: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The notebook as plain JSON values."""
        return notebook_value(
            dict(self.assessment),
            [{"claim": e.claim, "date": e.date, "doc_ids": list(e.doc_ids)} for e in self.evidence],
            list(self.open_questions),
        )

    def to_json(self, *, drop_empty: bool = False) -> str:
        """The notebook as a JSON string (keys in schema order, non-ASCII kept).

        Args:
            drop_empty: leave out empty lists (the compact prompt's rendering; logs keep every key).
        """
        value = self.to_dict()
        if drop_empty:
            value = {key: item for key, item in value.items() if item != []}
        return json.dumps(value, ensure_ascii=False, sort_keys=False)


def parse_notebook(
    value: Any,
    outcomes: tuple[str, ...],
    *,
    forecast_date: date | None = None,
    forecast: dict[str, float] | None = None,
) -> Notebook:
    """Validate a notebook (dict or JSON string) against the event's outcome labels.

    ``forecast`` is the distribution the notebook's ``submit_forecast`` call recorded: a notebook
    without ``assessment`` takes it as its assessment (without ``forecast``, e.g. a notebook given to
    ``reset``, the assessment is required). An assessment that is given is checked as always, never
    replaced. A free-form question (``outcomes`` empty) has a free-form assessment: the outcomes the agent
    proposes with their probabilities, read as its forecast is (:func:`forecast_dojo.scoring.read_free_form`).
    Evidence may not be dated after ``forecast_date``: a notebook only records what was knowable.
    Any input is read as untrusted (``forecast_dojo.untrusted``): sizes and nesting are capped and
    strings cleaned before the schema is checked.

    Raises:
        NotebookError: with a message that tells the agent what to fix.
    """
    try:
        value = read_json(value, max_chars=MAX_NOTEBOOK_INPUT_CHARS, what="notebook")
    except UntrustedInputError as err:
        raise NotebookError(str(err)) from None
    if not isinstance(value, dict):
        raise NotebookError(
            "notebook must be an object with keys " + ", ".join(f"'{key}'" for key in NOTEBOOK_KEYS)
        )
    unknown = set(value) - set(NOTEBOOK_KEYS)
    if unknown:
        raise NotebookError(
            f"notebook has unknown keys {preview(sorted(unknown))}; allowed: {', '.join(NOTEBOOK_KEYS)}"
        )
    assessment = value.get("assessment")
    if "assessment" not in value:
        if forecast is None:
            raise NotebookError("notebook.assessment is missing: map every outcome label to a probability")
        labels, probabilities = tuple(forecast), tuple(float(p) for p in forecast.values())
    elif not outcomes:  # a free-form question: the assessment proposes outcomes, as its forecast does
        free_form, error = read_free_form(assessment)
        if free_form is None:
            raise NotebookError(f"notebook.assessment (a free-form question's): {error}")
        labels, probabilities = tuple(free_form), tuple(free_form.values())
    else:
        if not isinstance(assessment, dict):
            raise NotebookError(
                f"notebook.assessment must map every outcome label {list(outcomes)} to a probability"
            )
        values, error = values_in_outcome_order(assessment, outcomes, "notebook.assessment")
        if values is None:
            raise NotebookError(f"notebook.assessment must map every outcome label to a probability: {error}")
        try:
            probabilities = check_distribution(values, len(outcomes), where="notebook.assessment")
        except SchemaError as err:
            raise NotebookError(str(err)) from err
        labels = tuple(outcomes)

    evidence_raw = value.get("evidence", [])
    if not isinstance(evidence_raw, list):
        raise NotebookError("notebook.evidence must be a list")
    if len(evidence_raw) > MAX_EVIDENCE:
        raise NotebookError(f"notebook.evidence has {len(evidence_raw)} entries; keep at most {MAX_EVIDENCE}")
    evidence = []
    for i, entry in enumerate(evidence_raw):
        where = f"notebook.evidence[{i}]"
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("claim"), str)
            or not entry["claim"].strip()
        ):
            raise NotebookError(f"{where} must be an object with a non-empty 'claim' string")
        if len(entry["claim"]) > MAX_CLAIM_CHARS:
            raise NotebookError(f"{where}.claim is longer than {MAX_CLAIM_CHARS} characters")
        if set(entry) - set(EVIDENCE_KEYS):
            raise NotebookError(
                f"{where} has unknown keys {preview(sorted(set(entry) - set(EVIDENCE_KEYS)))}"
            )
        try:
            stated = entry.get("date")
            day = date.fromisoformat(stated) if isinstance(stated, str) else None
        except ValueError:
            day = None
        if day is None:
            raise NotebookError(f"{where}.date must be a YYYY-MM-DD date")
        if forecast_date is not None and day > forecast_date:
            raise NotebookError(f"{where}.date {day} is after the forecast date {forecast_date}")
        doc_ids = entry.get("doc_ids", [])
        if not isinstance(doc_ids, list) or not all(isinstance(d, str) for d in doc_ids):
            raise NotebookError(f"{where}.doc_ids must be a list of document id strings")
        if len(doc_ids) > MAX_DOC_IDS_PER_CLAIM:
            raise NotebookError(f"{where}.doc_ids has more than {MAX_DOC_IDS_PER_CLAIM} ids")
        evidence.append(EvidenceEntry(entry["claim"].strip(), day.isoformat(), tuple(doc_ids)))

    questions = value.get("open_questions", [])
    if not isinstance(questions, list) or not all(isinstance(q, str) for q in questions):
        raise NotebookError("notebook.open_questions must be a list of strings")
    if len(questions) > MAX_OPEN_QUESTIONS:
        raise NotebookError(
            f"notebook.open_questions has {len(questions)} entries; keep at most {MAX_OPEN_QUESTIONS}"
        )
    notebook = Notebook(
        assessment=tuple(zip(labels, probabilities, strict=True)),
        evidence=tuple(evidence),
        open_questions=tuple(q.strip() for q in questions),
    )
    size = len(notebook.to_json())
    if size > MAX_NOTEBOOK_CHARS:
        raise NotebookError(f"notebook is {size} characters as JSON; the cap is {MAX_NOTEBOOK_CHARS}")
    return notebook
