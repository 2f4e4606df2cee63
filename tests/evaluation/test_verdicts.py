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


@pytest.fixture
def teacher_steps(make_synthetic_env, tmp_path: Path) -> Path:
    """The compact honest teacher on three held-out events, memory-free; returns its log directory."""
    from forecast_dojo.agents.honest import HonestEvidenceAgent, fit_cue_model
    from forecast_dojo.evaluation.runner import run_episode

    fitting = make_synthetic_env(prompt="compact")  # fitting plays the training events: not in the log
    ids = sorted(e.id for e in fitting.events)
    agent = HonestEvidenceAgent(fit_cue_model(fitting, ids[0::2]), compact=True)
    fitting.close()
    log = tmp_path / "teacher"
    env = make_synthetic_env(prompt="compact", log_dir=log, run_metadata={"agent": "honest"})
    for event_id in ids[1:6:2]:
        run_episode(env, agent, event_id)
    env.close()
    return log


def _edit_final_turn(record: StepRecord, content: str, evidence: object) -> StepRecord:
    """The record as if a student had written ``content`` and submitted ``evidence``."""
    messages = [dict(m) for m in record.messages]
    final = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    messages[final]["content"] = content
    calls = [
        c.__class__(**{**c.to_dict(), "arguments": {"evidence": evidence}})
        if c.name == "submit_forecast"
        else c
        for c in record.tool_calls
    ]
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
    weighed = [(r, step_verdicts(r)) for r in records]
    # a step whose first hit the teacher weighed and whose second it judged of no bearing
    record, taught = next(
        (r, s) for r, s in weighed
        if len(s.verdicts) >= 2 and s.verdicts[0].weighed and not s.verdicts[1].outcome
    )  # fmt: skip
    first, second = taught.verdicts[0], taught.verdicts[1]
    other = next(label for label in record.outcomes if label != first.outcome)
    text = f"{first.doc_id}: {other} ('{first.signature}', +{first.points:g}).\n{second.doc_id}: {other} ('x', +1)."
    # judged: the first with the other outcome, the second weighed; the rest left out; evidence miscopied
    student = [_edit_final_turn(r, text, [[other, 5]]) if r.key == record.key else r for r in records]
    student_log = save_records(tmp_path / "student", student[:-1])  # and the last step never played
    comparison = compare_verdicts(teacher_steps, student_log)
    assert comparison.steps == len(records) - 1 and comparison.unpaired == 1
    assert comparison.copied == comparison.steps - 1 and comparison.submitted == comparison.steps
    assert comparison.categories["other outcome, same points"] == 1
    assert comparison.categories["student weighed it, teacher: no bearing"] == 1
    assert comparison.categories["not judged by the student"] == len(taught.verdicts) - 2
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
