"""The student-vs-teacher verdict comparison on logs of the compact teacher and an edited copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_dojo.errors import DataError
from forecast_dojo.evaluation.verdicts import CATEGORIES, compare_verdicts, step_verdicts
from forecast_dojo.records import StepRecord
from forecast_dojo.trajectory import load_records, save_records

REPO = Path(__file__).resolve().parents[2]


def _edit_final_turn(
    record: StepRecord, content: str, evidence: object, hits: list[str] | None = None
) -> StepRecord:
    """The record as if a student had written ``content`` and submitted ``evidence`` (its search: ``hits``)."""
    messages = [dict(m) for m in record.messages]
    final = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    messages[final]["content"] = content
    calls = []
    for call in record.tool_calls:
        if call.name == "submit_forecast":
            call = call.__class__(**{**call.to_dict(), "arguments": {"evidence": evidence}})
        elif call.name == "search" and hits is not None:
            call = call.__class__(**{**call.to_dict(), "doc_ids": hits})
        calls.append(call)
    return record.replace(messages=messages, tool_calls=calls)


def test_the_teacher_agrees_with_itself(teacher_steps: Path) -> None:
    comparison = compare_verdicts(teacher_steps, teacher_steps)
    records = load_records(teacher_steps)
    assert comparison.steps == len(records) > 3 and comparison.unpaired == 0
    assert comparison.same_hits == comparison.steps == comparison.copied == comparison.teacher_copied
    agreeing = (
        comparison.categories["same verdict (outcome and points)"] + comparison.categories["both: no bearing"]
    )
    assert comparison.documents == agreeing > 0
    assert list(comparison.categories) == list(CATEGORIES)


def test_each_way_a_student_departs_is_counted(teacher_steps: Path, tmp_path: Path) -> None:
    records = load_records(teacher_steps)
    # a step of 3 hits or more: the first weighed by the teacher, a later one of no bearing (no line)
    record, taught = next(
        (r, s) for r, s in ((r, step_verdicts(r)) for r in records)
        if len(set(s.hits)) >= 3 and s.judged()[s.hits[0]].weighed
        and any(s.judged()[h].outcome is None for h in s.hits[1:])
    )  # fmt: skip
    judged = taught.judged()
    assert "no bearing" not in record.messages[-2]["content"]  # the teacher writes no line for such a hit
    first = judged[taught.hits[0]]
    second = next(judged[h] for h in taught.hits[1:] if judged[h].outcome is None)
    gone = next(h for h in taught.hits if h not in (first.doc_id, second.doc_id))
    other = next(label for label in record.outcomes if label != first.outcome)
    text = f"{first.doc_id}: {other} ('{first.signature}', +{first.points:g}).\n{second.doc_id}: {other} ('x', +1)."
    # judged: the first with the other outcome, the second weighed; one hit not among the student's own
    # (its search returned the others); the rest passed over, so of no bearing; evidence miscopied
    edited = _edit_final_turn(record, text, [[other, 5]], [h for h in taught.hits if h != gone])
    rest = [v for d, v in judged.items() if d not in (first.doc_id, second.doc_id, gone)]
    one = compare_verdicts([record], [edited])
    assert one.steps == 1 and one.same_hits == 0 and one.copied == 0 and one.teacher_copied == 1
    assert one.documents == len(judged) >= 3
    assert {name: n for name, n in one.categories.items() if n} == {
        name: n
        for name, n in {
            "other outcome, same points": 1,
            "student weighed it, teacher: no bearing": 1,
            "not judged by the student": 1,
            "student: no bearing, teacher weighed it": sum(v.outcome is not None for v in rest),
            "both: no bearing": sum(v.outcome is None for v in rest),
        }.items()
        if n
    }
    # the whole log, the last step never played by the student
    student = [edited if r.key == record.key else r for r in records]
    student_log = save_records(tmp_path / "student", student[:-1])
    comparison = compare_verdicts(teacher_steps, student_log)
    assert comparison.steps == len(records) - 1 and comparison.unpaired == 1
    assert comparison.copied == comparison.steps - 1 and comparison.submitted == comparison.steps
    assert comparison.categories["other outcome, same points"] == 1
    assert comparison.categories["not judged by the student"] == 1
    assert sum(comparison.categories.values()) == comparison.documents
    assert "other outcome, same points" in comparison.table()


def test_logs_of_different_steps_are_refused(teacher_steps: Path, tmp_path: Path) -> None:
    records = load_records(teacher_steps)
    elsewhere = save_records(tmp_path / "other", [r.replace(event_id=f"other-{r.event_id}") for r in records])
    with pytest.raises(DataError, match="share no"):
        compare_verdicts(teacher_steps, elsewhere)


def test_the_script_prints_the_table_and_writes_json(teacher_steps: Path, tmp_path: Path) -> None:
    out = tmp_path / "verdicts.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "evaluation" / "compare_verdicts.py"), "--teacher", str(teacher_steps),
         "--student", str(teacher_steps), "--json", str(out)],
        capture_output=True, text=True, timeout=300, env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "searches returned the teacher's documents" in done.stdout
    counts = json.loads(out.read_text())
    assert counts["steps"] == counts["copied"] > 0 and counts["categories"]["not judged by the student"] == 0
    missing = subprocess.run(
        [sys.executable, str(REPO / "evaluation" / "compare_verdicts.py"), "--teacher", str(teacher_steps),
         "--student", str(tmp_path / "nowhere")],
        capture_output=True, text=True, timeout=300, env=os.environ | {"PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert missing.returncode == 2 and "error:" in missing.stderr


def test_a_one_line_no_bearing_turn_is_counted(teacher_steps: Path) -> None:
    from forecast_dojo.agents.honest import NO_BEARING

    records = load_records(teacher_steps)
    weighed = next(r for r in records if any(v.weighed for v in step_verdicts(r).verdicts))
    edited = _edit_final_turn(weighed, NO_BEARING, [])
    assert step_verdicts(edited).no_bearing and not step_verdicts(weighed).no_bearing
    teacher_gate = sum(step_verdicts(r).no_bearing for r in records)
    student = [edited if r.key == weighed.key else r for r in records]
    comparison = compare_verdicts(records, student)
    assert comparison.no_bearing == teacher_gate + 1 and comparison.teacher_no_bearing == teacher_gate
    assert comparison.no_bearing_teacher_weighed == 1
    assert comparison.categories["student: no bearing, teacher weighed it"] >= 1
    assert f"final turn '{NO_BEARING}': {teacher_gate + 1} of {len(records)}" in comparison.table()
    assert comparison.to_dict()["no_bearing_teacher_weighed"] == 1
    # the teacher against itself: its gate turns are its own, never where it weighed a report
    itself = compare_verdicts(records, records)
    assert itself.no_bearing == itself.teacher_no_bearing == teacher_gate
    assert itself.no_bearing_teacher_weighed == 0
