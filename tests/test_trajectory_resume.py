"""Crash safety of the trajectory log: torn lines, duplicates, and runs killed with SIGKILL then resumed."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from forecast_dojo.evaluation.runner import run_episodes
from forecast_dojo.trajectory import (
    TornLogWarning,
    TrajectoryWriter,
    completed_keys,
    load_records,
    load_steps,
    log_status,
)
from tests.conftest import REPO_ROOT, tiny_events


def call(name, **arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def write_log(make_tiny_env, directory: Path) -> None:
    env = make_tiny_env(log_dir=directory)
    env.reset("harbor")
    for _ in range(3):
        env.step(call("submit_forecast", probabilities=[0.6, 0.4]))
    env.close()


def test_a_torn_last_line_is_dropped_with_a_warning(make_tiny_env, tmp_path):
    write_log(make_tiny_env, tmp_path)
    steps = tmp_path / "steps.jsonl"
    whole = steps.read_bytes()
    lines = whole.splitlines(keepends=True)
    for cut in (1, len(lines[-1]) // 2, len(lines[-1]) - 1):  # the last byte cut = the newline only
        steps.write_bytes(b"".join(lines[:-1]) + lines[-1][:cut])
        with pytest.warns(TornLogWarning, match="incomplete"):
            assert len(load_records(tmp_path)) == 2
        with pytest.warns(TornLogWarning):
            assert load_steps(tmp_path).num_rows == 2
    # A corrupt line that is not the last is an error, not something to drop silently.
    steps.write_bytes(lines[0] + b"{garbage\n" + lines[1])
    with pytest.raises(ValueError, match="line 2"):
        load_records(tmp_path)


def test_reopening_cuts_the_torn_line_before_appending(make_tiny_env, tmp_path):
    write_log(make_tiny_env, tmp_path)
    steps = tmp_path / "steps.jsonl"
    lines = steps.read_bytes().splitlines(keepends=True)
    original = load_records(tmp_path)
    steps.write_bytes(b"".join(lines[:-1]) + lines[-1][:40])
    with pytest.warns(TornLogWarning, match="cut off"):
        write_log(make_tiny_env, tmp_path)  # same run: the missing step is written again, others skipped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        records = load_records(tmp_path)
    assert [r.step for r in records] == [0, 1, 2] and steps.read_bytes().startswith(b"".join(lines[:-1]))
    assert all(a.same_as(b) for a, b in zip(records, original, strict=True))


def test_a_finished_run_appended_again_is_not_duplicated(make_tiny_env, tmp_path):
    write_log(make_tiny_env, tmp_path)
    before = (tmp_path / "steps.jsonl").read_bytes()
    write_log(make_tiny_env, tmp_path)
    assert (tmp_path / "steps.jsonl").read_bytes() == before
    env = make_tiny_env(log_dir=tmp_path)
    records = load_records(tmp_path)
    with TrajectoryWriter(tmp_path, env.run_metadata) as writer:
        assert writer.write(records[0]) is False
        assert writer.write(records[0].replace(rollout=1)) is True  # another rollout is another record
    assert {r.key for r in load_records(tmp_path)} == completed_keys(tmp_path)
    with pytest.raises(ValueError, match="run"), TrajectoryWriter(tmp_path, env.run_metadata) as writer:
        writer.write(records[0].replace(run_id="run-other", step=9))


def test_log_status_finds_half_logged_events(make_tiny_env, tmp_path):
    env = make_tiny_env(log_dir=tmp_path)
    env.reset("mayor")
    env.step(call("submit_forecast", probabilities=[0.5, 0.3, 0.2]))
    env.step(call("submit_forecast", probabilities=[0.5, 0.3, 0.2]))
    env.close()
    write_log(make_tiny_env, tmp_path)
    status = log_status(tmp_path)
    assert status.complete == {("harbor", 0)}
    assert list(status.partial) == [("mayor", 0)] and status.partial[("mayor", 0)].step == 1
    assert log_status(tmp_path / "missing").keys == set()


CHILD = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {repo!r})
    from forecast_dojo.agents import EvidenceAgent
    from forecast_dojo.corpus import Corpus, HashingEmbedder
    from forecast_dojo.corpus.retrieval import ExactDenseRetriever
    from forecast_dojo.env import ForecastDojoEnv
    from forecast_dojo.evaluation.runner import run_episodes
    from tests.conftest import tiny_events

    class SlowAgent(EvidenceAgent):
        def act(self, observation):
            time.sleep({delay})
            return super().act(observation)

    corpus = Corpus.load({corpus!r})
    env = ForecastDojoEnv(tiny_events(), corpus, ExactDenseRetriever(corpus, HashingEmbedder()),
                          memory="notebook", python_runner=None, log_dir=sys.argv[1])
    print("ready", flush=True)
    run_episodes(env, SlowAgent, ["harbor", "mayor"], progress=False, resume=True)
    env.close()
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_runs_killed_at_random_points_resume_to_the_uninterrupted_log(
    tiny_corpus_dir, make_tiny_env, tmp_path
):
    from forecast_dojo.agents import EvidenceAgent

    turns = []

    class CountingAgent(EvidenceAgent):
        def act(self, observation):
            turns.append(1)
            return super().act(observation)

    reference_dir = tmp_path / "reference"
    env = make_tiny_env(memory="notebook", log_dir=reference_dir)
    run_episodes(env, CountingAgent, ["harbor", "mayor"], progress=False)
    env.close()
    reference = load_records(reference_dir)
    assert len(reference) == sum(e.n_steps for e in tiny_events())

    script = tmp_path / "child.py"
    delay = 0.1  # seconds per agent turn: the run lasts about len(turns) * delay after "ready"
    script.write_text(CHILD.format(repo=str(REPO_ROOT), corpus=str(tiny_corpus_dir), delay=delay))
    rng = random.Random(0)
    log = tmp_path / "killed"
    kills = 0
    logged_at_kill = []
    for _ in range(8):
        child = subprocess.Popen(
            [sys.executable, str(script), str(log)], stdout=subprocess.PIPE, cwd=REPO_ROOT, text=True
        )
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        left = 1 - (logged_at_kill[-1] if logged_at_kill else 0) / len(reference)
        time.sleep(rng.uniform(0.0, len(turns) * delay * left))
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            kills += 1
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TornLogWarning)
                logged_at_kill.append(len(load_records(log)) if (log / "steps.jsonl").exists() else 0)
        else:
            assert child.wait() == 0
            break
        if kills >= 3:
            break
    finished = subprocess.run(
        [sys.executable, str(script), str(log)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert kills >= 1 and logged_at_kill == sorted(logged_at_kill)
    assert any(0 < n < len(reference) for n in logged_at_kill)  # at least one kill left a half-done run
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torn line and no duplicate is left behind
        resumed = load_records(log)
    assert [r.key for r in resumed] == [r.key for r in reference]
    assert [r.deterministic_dict() for r in resumed] == [r.deterministic_dict() for r in reference]
    assert json.loads((log / "run.json").read_text())["run_id"] == reference[0].run_id


def test_a_lone_surrogate_does_not_break_the_log(make_tiny_env, tmp_path):
    """A model can write "\\ud800": the step still ends, is logged (as U+FFFD) and loads."""
    env = make_tiny_env(log_dir=tmp_path)
    env.reset("harbor")
    env.step("thinking \ud800")
    _, reward, _, _, info = env.step(
        call("submit_forecast", probabilities=[0.6, 0.4], rationale="why \udfff")
    )
    assert info["step_ended"] and info["record"].rationale == "why \ufffd"  # cleaned on the way in
    _, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.6, 0.4]))
    assert info["step_ended"]
    env.close()
    records = load_records(tmp_path)
    assert [r.step for r in records] == [0, 1]
    assert records[0].rationale == "why \ufffd" and "thinking \ufffd" in records[0].messages[2]["content"]
    assert load_steps(tmp_path).num_rows == 2
