"""Resumable studies: interrupted runs continue with no duplicate and no missing step; finished runs are reused."""

from __future__ import annotations

import json
import threading

import pytest

from forecast_dojo.agents.scripted import EvidenceAgent
from forecast_dojo.evaluation.study import StudyError, control_notebook, run_study, study_rows
from forecast_dojo.trajectory import load_records


class Interrupt(BaseException):
    """Stands for Ctrl-C in the middle of a run."""


class Flaky(EvidenceAgent):
    """An evidence reader that 'crashes' after a given number of turns (counted across all instances)."""

    budget = {"turns": 10**9}

    def act(self, observation):
        Flaky.budget["turns"] -= 1
        if Flaky.budget["turns"] < 0:
            raise Interrupt
        return super().act(observation)


def make_env_factory(make_synthetic_env):
    def make(mode, metadata):
        return make_synthetic_env(
            memory="notebook" if mode.startswith("notebook") else "none", run_metadata=metadata
        )

    return make


def same_notebook(a, b):
    a, b = json.loads(a), json.loads(b)
    return a["evidence"] == b["evidence"] and a["assessment"] == pytest.approx(b["assessment"], abs=1e-12)


def keys(directory):
    return [(r.event_id, r.step, r.rollout) for r in load_records(directory)]


def test_interrupted_study_resumes_without_duplicates(make_synthetic_env, tmp_path):
    make = make_env_factory(make_synthetic_env)
    events = sorted(make("none", {}).events, key=lambda e: e.id)[:3]
    expected = sum(e.n_steps for e in events) * 2
    agents = {"flaky": lambda env: Flaky()}
    Flaky.budget["turns"] = 9  # dies inside the second or third episode
    with pytest.raises(Interrupt):
        run_study(tmp_path, agents, ["notebook"], events, make, rollouts=2, progress=False)
    partial = keys(tmp_path / "flaky-notebook")
    assert 0 < len(partial) < expected
    Flaky.budget["turns"] = 10**9
    result = run_study(tmp_path, agents, ["notebook"], events, make, rollouts=2, progress=False)
    final = keys(tmp_path / "flaky-notebook")
    assert len(final) == len(set(final)) == expected
    assert final[: len(partial)] == partial and result["reused"] == len(partial)
    assert result["played"] == expected - len(partial)
    # the resumed episode carried the notebook its last logged step submitted
    records = {(r.event_id, r.step, r.rollout): r for r in load_records(tmp_path / "flaky-notebook")}
    for (event_id, step, rollout), record in records.items():
        if step > 0:
            carried, submitted = (
                json.loads(records[(event_id, step - 1, rollout)].notebook_out),
                json.loads(record.notebook_in),
            )
            assert (
                carried["evidence"] == submitted["evidence"]
            )  # (a re-validated assessment may differ by 1 ulp)
            assert carried["assessment"] == pytest.approx(submitted["assessment"], abs=1e-12)
    # a finished study is reused as it is
    again = run_study(tmp_path, agents, ["notebook"], events, make, rollouts=2, progress=False)
    assert again == {"played": 0, "reused": expected, "logs": again["logs"]}
    assert keys(tmp_path / "flaky-notebook") == final


def test_other_configuration_needs_overwrite(make_synthetic_env, tmp_path):
    make = make_env_factory(make_synthetic_env)
    events = sorted(make("none", {}).events, key=lambda e: e.id)[:1]
    agents = {"a": lambda env: EvidenceAgent()}
    run_study(tmp_path, agents, ["none"], events, make, seed=0, progress=False)
    with pytest.raises(StudyError, match="overwrite"):
        run_study(tmp_path, agents, ["none"], events, make, seed=1, progress=False)
    result = run_study(tmp_path, agents, ["none"], events, make, seed=1, overwrite=True, progress=False)
    assert result["played"] == events[0].n_steps


def test_concurrent_study_logs_every_step_once(make_synthetic_env, tmp_path):
    make = make_env_factory(make_synthetic_env)
    events = sorted(make("none", {}).events, key=lambda e: e.id)[:4]
    run_study(
        tmp_path, {"e": lambda env: EvidenceAgent()}, ["none"], events, make, concurrency=3, progress=False
    )
    logged = keys(tmp_path / "e-none")
    assert sorted(logged) == sorted((e.id, s, 0) for e in events for s in range(e.n_steps))
    sequential = tmp_path / "seq"
    run_study(sequential, {"e": lambda env: EvidenceAgent()}, ["none"], events, make, progress=False)
    by_key = {(r.event_id, r.step): r.forecast for r in load_records(tmp_path / "e-none")}
    assert by_key == {(r.event_id, r.step): r.forecast for r in load_records(sequential / "e-none")}


def test_memory_free_steps_of_one_event_play_side_by_side(make_synthetic_env, tmp_path):
    make = make_env_factory(make_synthetic_env)
    event = max(make("none", {}).events, key=lambda e: e.n_steps)
    assert event.n_steps >= 2
    # every step's agent waits until all of them have started: only steps played at once get through
    barrier = threading.Barrier(event.n_steps, timeout=20)

    class Together(EvidenceAgent):
        started = False

        def act(self, observation):
            if not self.started:
                self.started = True
                barrier.wait()
            return super().act(observation)

    result = run_study(
        tmp_path,
        {"t": lambda env: Together()},
        ["none"],
        [event],
        make,
        concurrency=event.n_steps,
        progress=False,
    )
    assert result["played"] == event.n_steps
    assert sorted(keys(tmp_path / "t-none")) == [(event.id, s, 0) for s in range(event.n_steps)]
    sequential = tmp_path / "seq"
    run_study(sequential, {"e": lambda env: EvidenceAgent()}, ["none"], [event], make, progress=False)
    assert {r.step: r.forecast for r in load_records(tmp_path / "t-none")} == {
        r.step: r.forecast for r in load_records(sequential / "e-none")
    }


def test_memory_free_log_with_a_gap_plays_only_the_missing_steps(make_synthetic_env, tmp_path):
    make = make_env_factory(make_synthetic_env)
    events = sorted(make("none", {}).events, key=lambda e: -e.n_steps)[:2]
    assert events[0].n_steps >= 3
    agents = {"e": lambda env: EvidenceAgent()}
    run_study(tmp_path, agents, ["none"], events, make, progress=False)
    steps_file = tmp_path / "e-none" / "steps.jsonl"
    complete = steps_file.read_text().splitlines(keepends=True)
    gap = (events[0].id, 1, 0)
    rows = [json.loads(line) for line in complete]
    kept = [
        line
        for line, r in zip(complete, rows, strict=True)
        if (r["event_id"], r["step"], r["rollout"]) != gap
    ]
    assert len(kept) == len(complete) - 1
    steps_file.write_text("".join(kept))
    result = run_study(tmp_path, agents, ["none"], events, make, progress=False)
    assert result == {"played": 1, "reused": len(complete) - 1, "logs": result["logs"]}
    final = keys(tmp_path / "e-none")
    assert len(final) == len(set(final)) == len(complete) and final[-1] == gap
    before = {(r["event_id"], r["step"]): r["forecast"] for r in rows}
    assert {(r.event_id, r.step): r.forecast for r in load_records(tmp_path / "e-none")} == before


def test_notebook_controls_replay_single_steps(make_synthetic_env, tmp_path):
    make = make_env_factory(make_synthetic_env)
    events = sorted(make("none", {}).events, key=lambda e: e.id)[:4]
    oracle = {
        (e.id, s): tuple(1 / len(e.outcomes) for _ in e.outcomes) for e in events for s in range(e.n_steps)
    }
    modes = ["notebook", "notebook-empty", "notebook-stale", "notebook-shuffled", "notebook-oracle"]
    # some of the 4 events have no other event with as many outcomes to lend a notebook: said, not silent
    with pytest.warns(UserWarning, match="notebook-shuffled replays"):
        run_study(
            tmp_path, {"e": lambda env: EvidenceAgent()}, modes, events, make, oracle=oracle, progress=False
        )
    source = {(r.event_id, r.step): r for r in load_records(tmp_path / "e-notebook")}
    empty = load_records(tmp_path / "e-notebook-empty")
    assert {(r.event_id, r.step) for r in empty} == {k for k in source if k[1] >= 1}
    assert all(r.notebook_in is None for r in empty)
    for record in load_records(tmp_path / "e-notebook-stale"):
        assert record.step >= 2
        assert same_notebook(record.notebook_in, source[(record.event_id, record.step - 2)].notebook_out)
    for record in load_records(tmp_path / "e-notebook-oracle"):
        assert json.loads(record.notebook_in)["evidence"] == []
    shuffled = load_records(tmp_path / "e-notebook-shuffled")
    # another event's notebook: differs from the step's own one wherever the two events found different evidence
    assert shuffled and any(r.notebook_in != source[(r.event_id, r.step)].notebook_in for r in shuffled)
    rows = study_rows(tmp_path)
    assert {r["memory"] for r in rows} == set(modes)


def test_shuffled_control_maps_labels_by_position(make_synthetic_env):
    make = make_env_factory(make_synthetic_env)
    events = {e.id: e for e in make("none", {}).events}
    binary = sorted(e for e in events if len(events[e].outcomes) == 2)[:2]
    from forecast_dojo.records import StepRecord

    def record(event_id, step, notebook_in=None):
        return StepRecord.reference(events[event_id], step, [0.5, 0.5], agent="x").replace(
            memory="notebook", notebook_in=notebook_in
        )

    donor = json.dumps(
        {
            "assessment": {"Yes": 0.9, "No": 0.1},
            "evidence": [
                {"claim": "c", "date": "1999-01-01", "doc_ids": []},
                {"claim": "future", "date": "2999-01-01", "doc_ids": []},
            ],
            "open_questions": [],
        }
    )
    by_key = {(binary[0], 1, 0): record(binary[0], 1), (binary[1], 1, 0): record(binary[1], 1, donor)}
    applies, notebook = control_notebook("shuffled", by_key[(binary[0], 1, 0)], by_key, events, None)
    parsed = json.loads(notebook)
    assert applies and parsed["assessment"] == {"Yes": 0.9, "No": 0.1}
    assert [e["claim"] for e in parsed["evidence"]] == [
        "c"
    ]  # evidence dated after the forecast date is dropped


def test_evaluate_step_replays_one_step_from_a_given_notebook(make_synthetic_env):
    from forecast_dojo.evaluation.study import evaluate_step

    env = make_synthetic_env(memory="notebook")
    event = sorted(env.events, key=lambda e: e.id)[0]
    notebook = {
        "assessment": dict(zip(event.outcomes, [1 / len(event.outcomes)] * len(event.outcomes), strict=True)),
        "evidence": [],
        "open_questions": [],
    }
    record = evaluate_step(env, EvidenceAgent(), event.id, 2, notebook=notebook)
    assert record.step == 2 and json.loads(record.notebook_in)["evidence"] == []


def test_runs_one_per_agent_and_mode_fill_one_study(make_synthetic_env, tmp_path):
    """Two runs into one folder (another agent, another mode) leave a study.json that lists both."""
    make = make_env_factory(make_synthetic_env)
    events = sorted(make("none", {}).events, key=lambda e: e.id)[:2]
    run_study(tmp_path, {"a": lambda env: EvidenceAgent()}, ["none"], events, make, progress=False)
    run_study(tmp_path, {"b": lambda env: EvidenceAgent()}, ["notebook"], events, make, progress=False)
    study = json.loads((tmp_path / "study.json").read_text())
    assert study["agents"] == ["a", "b"] and study["modes"] == ["none", "notebook"]
    steps = sum(e.n_steps for e in events)
    forecasters = [
        (row["agent"], row["memory"]) for row in study_rows(tmp_path) if row["agent"] in ("a", "b")
    ]
    assert sorted(set(forecasters)) == [("a", "none"), ("b", "notebook")] and len(forecasters) == 2 * steps
    # a study of other events replaces the file rather than mixing two studies
    run_study(tmp_path / "other", {"a": lambda env: EvidenceAgent()}, ["none"], events, make, progress=False)
    run_study(
        tmp_path / "other", {"b": lambda env: EvidenceAgent()}, ["none"], events[:1], make, progress=False
    )
    other = json.loads((tmp_path / "other" / "study.json").read_text())
    assert other["agents"] == ["b"] and other["events"] == [events[0].id]
