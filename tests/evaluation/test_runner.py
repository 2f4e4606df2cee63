"""The one episode loop and the one rule for resuming a cut episode (library runner and CLI study alike)."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.agents.scripted import EvidenceAgent
from forecast_dojo.env import NO_NOTEBOOK_NOTE
from forecast_dojo.evaluation.runner import Episode, play_episode, resume_episode, run_episodes
from forecast_dojo.evaluation.study import run_study
from forecast_dojo.trajectory import TrajectoryWriter, load_records, log_status
from tests.conftest import tiny_events


class ForgetsAtStepOne(EvidenceAgent):
    """A deterministic evidence reader that submits no notebook at step 1 (memory-on)."""

    def act(self, observation):
        action = super().act(observation)
        if observation["step"] == 1:
            for call in action.get("tool_calls") or []:
                if call["function"]["name"] == "submit_forecast":
                    arguments = call["function"]["arguments"]
                    arguments = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
                    arguments.pop("notebook", None)
                    call["function"]["arguments"] = arguments
        return action


def cut_log(source, target, env, keep):
    """A log of the same run holding only the records for which ``keep(record)`` is true (a killed run)."""
    with TrajectoryWriter(target, env.run_metadata, run_id=env.run_id) as writer:
        for record in load_records(source):
            if keep(record):
                writer.write(record)


def test_the_resume_rule_continues_in_the_state_the_env_carried():
    from forecast_dojo.records import StepRecord

    event = tiny_events()[0]
    after = StepRecord.reference(event, 1, [0.5, 0.5], agent="x").replace(memory="notebook", rollout=2)
    assert resume_episode(after, "notebook", seed=7) == Episode(
        event.id, 2, 7, 2, None, notebook_missing=True
    )
    with_notebook = after.replace(notebook_out='{"assessment": {}}')
    assert resume_episode(with_notebook, "notebook").notebook == '{"assessment": {}}'
    assert resume_episode(with_notebook, "none") == Episode(event.id, 2, None, 2)
    assert Episode("e", 0, 0, 2, None, notebook_missing=True).reset_options("notebook") == {
        "rollout": 0,
        "step": 2,
        "notebook_missing": True,
    }


@pytest.mark.parametrize("cut_after", [0, 1])
def test_a_cut_notebook_episode_resumes_to_the_uninterrupted_log(make_tiny_env, tmp_path, cut_after):
    """Cut after a step with a notebook (0) and after one without (1): the resumed log equals the whole one."""
    ids = [e.id for e in tiny_events()]
    reference_dir = tmp_path / "reference"
    env = make_tiny_env(memory="notebook", log_dir=reference_dir)
    run_episodes(env, ForgetsAtStepOne, ids, progress=False)
    env.close()
    reference = load_records(reference_dir)
    step_two = next(r for r in reference if r.step == 2)
    assert "no_notebook" in next(r for r in reference if r.step == 1).flags
    assert step_two.notebook_in is None and NO_NOTEBOOK_NOTE in step_two.messages[1]["content"]

    cut = tmp_path / "cut"
    env = make_tiny_env(memory="notebook", log_dir=cut)
    cut_log(reference_dir, cut, env, lambda r: r.event_id == ids[0] and r.step <= cut_after)
    assert list(log_status(cut).partial) == [(ids[0], 0)]
    run_episodes(env, ForgetsAtStepOne, ids, progress=False, resume=True)
    env.close()
    resumed = load_records(cut)
    assert len(resumed) == len(reference)
    assert all(a.same_as(b) for a, b in zip(resumed, reference, strict=True))


def test_a_memory_free_log_with_gaps_resumes_to_exactly_the_missing_steps(make_tiny_env, tmp_path):
    """A study at --concurrency logs steps out of order; resuming plays each missing step once, alone."""
    events = tiny_events()
    ids = [e.id for e in events]
    reference_dir = tmp_path / "reference"
    env = make_tiny_env(memory="none", log_dir=reference_dir)
    run_episodes(env, EvidenceAgent, ids, progress=False)
    env.close()
    reference = {(r.event_id, r.step): r for r in load_records(reference_dir)}
    assert events[0].n_steps >= 3
    gaps = {(ids[0], 1), (ids[1], 0)}  # a step between logged ones, and an event's first step

    cut = tmp_path / "cut"
    env = make_tiny_env(memory="none", log_dir=cut)
    cut_log(reference_dir, cut, env, lambda r: (r.event_id, r.step) not in gaps)
    played = run_episodes(env, EvidenceAgent, ids, progress=False, resume=True)
    env.close()
    assert sorted((row["event_id"], row["step"]) for row in played) == sorted(gaps)
    resumed = load_records(cut)
    assert len(resumed) == len(reference)  # no step logged twice
    assert all(r.same_as(reference[(r.event_id, r.step)]) for r in resumed)


def test_the_study_resumes_a_cut_episode_by_the_same_rule(make_tiny_env, tmp_path):
    events = tiny_events()

    def make(mode, metadata):
        return make_tiny_env(memory="notebook", run_metadata=metadata)

    agents = {"forgets": lambda env: ForgetsAtStepOne()}
    whole = tmp_path / "whole"
    run_study(whole, agents, ["notebook"], events, make, progress=False)
    reference = load_records(whole / "forgets-notebook")
    cut = tmp_path / "cut"
    run_study(cut, agents, ["notebook"], events, make, progress=False)
    log = cut / "forgets-notebook"
    steps = log / "steps.jsonl"
    lines = steps.read_text().splitlines(keepends=True)
    keep = [
        line
        for line in lines
        if json.loads(line)["event_id"] != events[0].id or json.loads(line)["step"] <= 1
    ]
    steps.write_text("".join(keep))
    result = run_study(cut, agents, ["notebook"], events, make, progress=False)
    assert result["played"] == len(lines) - len(keep) > 0
    by_key = {r.key: r for r in load_records(log)}
    assert len(by_key) == len(reference) and all(by_key[r.key].same_as(r) for r in reference)


def test_play_episode_hands_each_record_to_write_and_stops_after_a_single_step(make_tiny_env):
    env = make_tiny_env(memory="none")
    written = []
    records = play_episode(env, EvidenceAgent(), Episode("harbor"), written.append)
    assert [r.step for r in records] == list(range(tiny_events()[0].n_steps)) and written == records
    single = play_episode(env, EvidenceAgent(), Episode("harbor", start=1, single=True))
    assert [r.step for r in single] == [1]
