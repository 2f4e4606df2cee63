"""A student against its teacher, document by document, on identical steps of the compact profile.

The compact teacher (:class:`forecast_dojo.agents.honest.HonestEvidenceAgent`, ``compact=True``) ends a
step with one verdict per search hit that bears on the question
(``syn0-00102: Yes ('document+leak+verified', +2).``; a hit it passes over is of no bearing, and
until 2026-12-07 it wrote ``syn0-00079: no bearing.``) and a ``submit_forecast(evidence=...)`` call
that copies the weighed ones. A fine-tuned student writes the same form, so the two logs of the same
held-out steps can be compared where the score is decided: did the student search the same documents,
judge each one as the teacher did, and copy its own verdicts into the call? The Brier score says how
far a student is from its teacher; this says where.

    from forecast_dojo.evaluation.verdicts import compare_verdicts
    comparison = compare_verdicts("runs/teacher-eval/honest-none", "runs/eval/hf-sft-model-none")
    print(comparison.table())

Steps are paired by ``(event_id, step, rollout)``; the logs should be of the same events and memory
mode (``forecast-dojo run --agents honest --split eval`` beside the student's evaluation).
Researcher-facing only.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_dojo.agents.honest import NO_BEARING, Verdict, parse_verdicts
from forecast_dojo.errors import DataError
from forecast_dojo.records import StepRecord
from forecast_dojo.tools import SUBMIT_FORECAST
from forecast_dojo.trajectory import load_records

#: Every way a document the teacher judged can fare in the student's turn, in the table's order.
CATEGORIES = (
    "same verdict (outcome and points)",
    "both: no bearing",
    "other outcome, same points",
    "same outcome, other points",
    "other outcome and points",
    "student: no bearing, teacher weighed it",
    "student weighed it, teacher: no bearing",
    "not judged by the student",
)
# "not judged by the student": a document the teacher judged that the student neither judged nor had among
# its own hits (a hit the student passed over is of no bearing, as the teacher's are).


@dataclass(frozen=True)
class StepVerdicts:
    """What one step's final turn decided.

    Attributes:
        hits: the documents the step's searches returned, in order.
        verdicts: the final turn's verdicts (:func:`forecast_dojo.agents.honest.parse_verdicts`).
        evidence: the ``evidence`` of the step's last ``submit_forecast`` call, or None without one.
        no_bearing: whether the final turn opens with :data:`~forecast_dojo.agents.honest.NO_BEARING`,
            the one-line turn that judges every hit at once (the twentieth learning run's student wrote
            it in 58 % of its held-out steps, the teacher in 16 %).
    """

    hits: list[str]
    verdicts: list[Verdict]
    evidence: list[Any] | None
    no_bearing: bool = False

    @property
    def copied(self) -> bool:
        """Whether ``evidence`` is the weighed verdicts as ``[outcome, points]`` pairs, in their order."""
        if self.evidence is None:
            return False
        weighed = [(v.outcome, v.points) for v in self.verdicts if v.weighed]
        try:
            pairs = [(label, float(value)) for label, value in self.evidence]
        except (TypeError, ValueError):
            return False
        return len(pairs) == len(weighed) and all(
            label == outcome and points is not None and math.isclose(value, points)
            for (label, value), (outcome, points) in zip(pairs, weighed, strict=True)
        )

    def judged(self) -> dict[str, Verdict]:
        """Document id -> verdict: the written verdicts, then every hit without one as of no bearing.

        The compact teacher writes no line for a hit that does not bear on the question (since
        2026-12-07), so a hit passed over is a "no bearing" verdict, for the teacher and for a student
        that imitates it; an explicit ``doc: no bearing.`` (the earlier form) reads the same.
        """
        verdicts = {v.doc_id: v for v in self.verdicts}
        for doc_id in self.hits:
            verdicts.setdefault(doc_id, Verdict(doc_id))
        return verdicts


def final_turn_index(record: StepRecord) -> int | None:
    """The index in ``record.messages`` of the step's final turn, the one that decides the forecast.

    That is the last assistant message calling ``submit_forecast`` when the step submitted, else the
    last assistant message; None when the step has no assistant message.
    """
    submitted = any(call.name == SUBMIT_FORECAST for call in record.tool_calls)
    for index in range(len(record.messages) - 1, -1, -1):
        message = record.messages[index]
        if message["role"] != "assistant":
            continue
        calls = message.get("tool_calls") or []
        if not submitted or any(call["function"]["name"] == SUBMIT_FORECAST for call in calls):
            return index
    return None


def step_verdicts(record: StepRecord) -> StepVerdicts:
    """Read a step record's searches, final-turn verdicts and submitted evidence."""
    hits = [doc for call in record.tool_calls if call.name == "search" for doc in call.doc_ids]
    submits = [call for call in record.tool_calls if call.name == SUBMIT_FORECAST]
    evidence = None
    if submits and isinstance(submits[-1].arguments, dict):
        given = submits[-1].arguments.get("evidence")
        evidence = given if isinstance(given, list) else None
    index = final_turn_index(record)
    final = "" if index is None else record.messages[index].get("content") or ""
    return StepVerdicts(hits, parse_verdicts(final), evidence, final.strip().startswith(NO_BEARING))


def _category(teacher: Verdict, student: Verdict | None) -> str:
    if student is None:
        return "not judged by the student"
    if teacher.outcome is None:
        return "both: no bearing" if student.outcome is None else "student weighed it, teacher: no bearing"
    if student.outcome is None:
        return "student: no bearing, teacher weighed it"
    same_outcome, same_points = teacher.outcome == student.outcome, teacher.points == student.points
    if same_outcome and same_points:
        return "same verdict (outcome and points)"
    if same_points:
        return "other outcome, same points"
    return "same outcome, other points" if same_outcome else "other outcome and points"


@dataclass
class VerdictComparison:
    """Counts over the paired steps (see :func:`compare_verdicts`).

    Attributes:
        steps: steps in both logs.
        unpaired: teacher steps the student's log lacks.
        same_hits: paired steps whose searches returned the teacher's documents in the teacher's order.
        documents: the teacher's verdicts over the paired steps (one per document it judged).
        categories: documents per entry of :data:`CATEGORIES`.
        submitted: paired steps in which the student called ``submit_forecast`` with ``evidence``.
        copied: those whose evidence is the student's own weighed verdicts (:attr:`StepVerdicts.copied`).
        teacher_copied: the same for the teacher (all of them, unless its format changed).
        no_bearing: paired steps whose student's final turn is the one-line "no report bears" turn
            (:attr:`StepVerdicts.no_bearing`).
        teacher_no_bearing: the same for the teacher.
        no_bearing_teacher_weighed: steps of ``no_bearing`` in which the teacher weighed at least one
            report: the whole step's evidence lost at one decision.
    """

    steps: int = 0
    unpaired: int = 0
    same_hits: int = 0
    documents: int = 0
    categories: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    submitted: int = 0
    copied: int = 0
    teacher_copied: int = 0
    no_bearing: int = 0
    teacher_no_bearing: int = 0
    no_bearing_teacher_weighed: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form."""
        return {
            "steps": self.steps,
            "unpaired": self.unpaired,
            "same_hits": self.same_hits,
            "documents": self.documents,
            "categories": dict(self.categories),
            "submitted": self.submitted,
            "copied": self.copied,
            "teacher_copied": self.teacher_copied,
            "no_bearing": self.no_bearing,
            "teacher_no_bearing": self.teacher_no_bearing,
            "no_bearing_teacher_weighed": self.no_bearing_teacher_weighed,
        }

    def table(self) -> str:
        """A plain-text summary: the step counts, then the documents by category with their share."""

        def share(n: int, of: int) -> str:
            return f"{n} of {of} ({100 * n / of:.0f} %)" if of else f"{n} of 0"

        unpaired = f" ({self.unpaired} teacher steps not in the student's log)" if self.unpaired else ""
        teacher = share(self.teacher_copied, self.steps)
        lines = [
            f"paired steps: {self.steps}{unpaired}",
            f"searches returned the teacher's documents: {share(self.same_hits, self.steps)}",
            f"evidence copied from its own verdicts: {share(self.copied, self.steps)} (teacher: {teacher})",
            f"final turn '{NO_BEARING}': {share(self.no_bearing, self.steps)} "
            f"(teacher: {share(self.teacher_no_bearing, self.steps)}; where the teacher weighed a report: "
            f"{self.no_bearing_teacher_weighed})",
            f"the teacher's {self.documents} document verdicts, in the student's turn:",
        ]
        width = max(map(len, CATEGORIES))
        lines += [f"  {name:<{width}}  {share(n, self.documents)}" for name, n in self.categories.items()]
        return "\n".join(lines)


def _records(log: str | Path | Sequence[StepRecord]) -> list[StepRecord]:
    if isinstance(log, (str, Path)):
        return load_records(log)
    return list(log)


def compare_verdicts(
    teacher: str | Path | Sequence[StepRecord], student: str | Path | Sequence[StepRecord]
) -> VerdictComparison:
    """Compare a student's final turns with the teacher's on the steps both logs played.

    Args:
        teacher: the teacher's log (a run directory, its ``steps.jsonl``, or records).
        student: the student's log of the same events and memory mode.

    Returns:
        A :class:`VerdictComparison`: every document the teacher judged (its search hits, and the
        notebook's reports it weighed again) falls in one of :data:`CATEGORIES` (the student's verdict
        on the same document, wherever it wrote it; a hit of its own it passed over is of no bearing).

    Raises:
        DataError: when the logs share no step.
    """
    teacher_steps = {(r.event_id, r.step, r.rollout): r for r in _records(teacher)}
    student_steps = {(r.event_id, r.step, r.rollout): r for r in _records(student)}
    paired = sorted(teacher_steps.keys() & student_steps.keys())
    if not paired:
        raise DataError(
            "the two logs share no (event, step, rollout): compare logs of the same events "
            f"({len(teacher_steps)} teacher steps, {len(student_steps)} student steps)"
        )
    comparison = VerdictComparison(steps=len(paired), unpaired=len(teacher_steps) - len(paired))
    counts: Counter[str] = Counter()
    for key in paired:
        taught, learnt = step_verdicts(teacher_steps[key]), step_verdicts(student_steps[key])
        comparison.same_hits += taught.hits == learnt.hits
        comparison.submitted += learnt.evidence is not None
        comparison.copied += learnt.copied
        comparison.teacher_copied += taught.copied
        comparison.no_bearing += learnt.no_bearing
        comparison.teacher_no_bearing += taught.no_bearing
        comparison.no_bearing_teacher_weighed += learnt.no_bearing and any(v.weighed for v in taught.verdicts)
        theirs = learnt.judged()
        for verdict in taught.judged().values():
            counts[_category(verdict, theirs.get(verdict.doc_id))] += 1
    comparison.documents = sum(counts.values())
    comparison.categories.update(counts)
    return comparison
