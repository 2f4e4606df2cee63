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
    DuplicateRecordWarning,
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
    with pytest.warns(DuplicateRecordWarning, match="already in the log"):  # said, not silent (issue 18)
        write_log(make_tiny_env, tmp_path)
    assert (tmp_path / "steps.jsonl").read_bytes() == before
    env = make_tiny_env(log_dir=tmp_path)
    records = load_records(tmp_path)
    with TrajectoryWriter(tmp_path, env.run_metadata) as writer:
        with pytest.warns(DuplicateRecordWarning):
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


# ----------------------------------------------------------------------------- one writer per directory (issue 18)

HOLDER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from forecast_dojo.trajectory import TrajectoryWriter

    with TrajectoryWriter(sys.argv[1], {{"seed": 1}}) as writer:
        print("holding", flush=True)
        sys.stdin.readline()  # hold the directory until the parent says so
    print("released", flush=True)
    """
)


def _a_record(make_tiny_env, tmp_path):
    """One real step record of the tiny world (played in a throwaway log)."""
    env = make_tiny_env(log_dir=tmp_path / "source")
    env.reset("harbor")
    _, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.6, 0.4]))
    env.close()
    return info["record"].replace(run_id=None)


def test_a_second_process_cannot_write_a_directory_another_process_writes(make_tiny_env, tmp_path):
    """The live writer's records survive; the second writer gets a clear error naming the holder."""
    from forecast_dojo.errors import ForecastDojoError
    from forecast_dojo.trajectory import LogLockedError

    record = _a_record(make_tiny_env, tmp_path)
    log = tmp_path / "log"
    with TrajectoryWriter(log, {"seed": 1}) as writer:
        for rollout in range(5):
            assert writer.write(record.replace(rollout=rollout))
    before = (log / "steps.jsonl").read_bytes()
    # The live writer's last line is half written (a write in flight) when the second writer opens.
    (log / "steps.jsonl").write_bytes(before + before.splitlines(keepends=True)[0][:50])
    script = tmp_path / "holder.py"
    script.write_text(HOLDER.format(repo=str(REPO_ROOT)))
    child = subprocess.Popen(
        [sys.executable, str(script), str(log)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=REPO_ROOT,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        with pytest.raises(LogLockedError) as caught:
            TrajectoryWriter(log, {"seed": 1})
        message = str(caught.value)
        assert isinstance(caught.value, ForecastDojoError)
        assert f"pid {child.pid}" in message and "holder.py" in message and "started 20" in message
        assert (log / "steps.jsonl").read_bytes().startswith(before)  # nothing was cut or truncated
    finally:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(timeout=120) == 0
    with TrajectoryWriter(log, {"seed": 1}) as writer:  # released: the next writer opens (and repairs)
        assert writer.write(record.replace(rollout=5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r.rollout for r in load_records(log)] == [0, 1, 2, 3, 4, 5]


def test_a_second_writer_in_the_same_process_is_refused_until_the_first_closes(tmp_path):
    from forecast_dojo.trajectory import LogLockedError

    first = TrajectoryWriter(tmp_path, {"seed": 1})
    with pytest.raises(LogLockedError, match="this process"):
        TrajectoryWriter(tmp_path, {"seed": 1})
    first.close()
    TrajectoryWriter(tmp_path, {"seed": 1}).close()


def _open_at_once(args):
    """Worker: wait at the barrier, open a writer on the shared new directory, write 4 records, hold it."""
    directory, index, record = args
    from forecast_dojo.trajectory import LogLockedError

    _BARRIER.wait(timeout=60)
    try:
        with TrajectoryWriter(directory, {"seed": 1}) as writer:
            for step in range(4):
                writer.write(record.replace(rollout=index, step=step))
            time.sleep(0.5)  # hold it while the others try
        return "wrote"
    except LogLockedError:
        return "locked"
    except Exception as err:  # noqa: BLE001 - what today's main raises (FileNotFoundError on run.json.tmp)
        return f"{type(err).__name__}: {err}"


def _init_barrier(barrier):
    global _BARRIER
    _BARRIER = barrier


def test_concurrent_opens_of_one_new_directory_leave_one_writer_and_a_clean_log(make_tiny_env, tmp_path):
    """Eight processes open the same new directory at once: exactly one writes, the others get the lock error."""
    import multiprocessing

    record = _a_record(make_tiny_env, tmp_path)
    context = multiprocessing.get_context("fork")
    n = 8
    for trial in range(3):
        directory = tmp_path / f"new-{trial}"
        barrier = context.Barrier(n)
        with context.Pool(n, initializer=_init_barrier, initargs=(barrier,)) as pool:
            outcomes = pool.map(_open_at_once, [(directory, i, record) for i in range(n)])
        assert sorted(outcomes) == ["locked"] * (n - 1) + ["wrote"], outcomes
        assert not [
            p.name for p in directory.iterdir() if p.name.endswith(".tmp")
        ]  # unique temp names, renamed
        assert json.loads((directory / "run.json").read_text())["seed"] == 1
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            records = load_records(directory)
        assert len(records) == 4 and len({r.rollout for r in records}) == 1  # one writer's records, unmixed


# ----------------------------------------------------------------------------- a full disk, and replays (issue 18)


def _fail_once(monkeypatch, *, partial: bool = True, times: int = 1):
    """Make the log's next ``times`` appends fail with ENOSPC (after writing half the line, as a full disk can)."""
    import errno

    from forecast_dojo import trajectory

    real = trajectory._append
    failures = {"left": times}

    def append(fh, data):
        if failures["left"] > 0:
            failures["left"] -= 1
            if partial:
                fh.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fh, data)

    monkeypatch.setattr(trajectory, "_append", append)
    return failures


def test_a_full_disk_never_escapes_step_and_loses_or_duplicates_nothing(make_tiny_env, tmp_path, monkeypatch):
    env = make_tiny_env(log_dir=tmp_path)
    env.reset("harbor")
    _fail_once(monkeypatch)
    _, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.6, 0.4]))  # no OSError escapes
    assert info["step_ended"] and info["logged"] is False
    assert "No space left" in info["log_error"] and "will be written" in info["log_error"]
    assert not (tmp_path / "steps.jsonl").read_bytes()  # the half-written line was undone
    infos = [info]
    for _ in range(2):  # space is back: the held record goes first, then this step's, each once
        _, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.7, 0.3]))
        assert info["logged"] is True and "log_error" not in info
        infos.append(info)
    env.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no torn line, no duplicate
        records = load_records(tmp_path)
    assert [r.step for r in records] == [0, 1, 2]
    assert all(r.same_as(i["record"]) for r, i in zip(records, infos, strict=True))


def test_a_record_held_back_by_a_full_disk_is_written_at_close(make_tiny_env, tmp_path, monkeypatch):
    env = make_tiny_env(log_dir=tmp_path)
    env.reset("harbor")
    for _ in range(2):
        env.step(call("submit_forecast", probabilities=[0.6, 0.4]))
    _fail_once(monkeypatch, partial=False)
    _, _, terminated, _, info = env.step(call("submit_forecast", probabilities=[0.6, 0.4]))
    assert terminated and info["logged"] is False
    env.close()
    assert [r.step for r in load_records(tmp_path)] == [0, 1, 2]
    # A disk that stays full: close says how many records are lost (a warning), never silently.
    other = make_tiny_env(log_dir=tmp_path / "full")
    other.reset("harbor")
    _fail_once(monkeypatch, times=10)
    other.step(call("submit_forecast", probabilities=[0.6, 0.4]))
    with pytest.warns(RuntimeWarning, match="1 step record"):
        other.close()


def test_the_writer_undoes_a_failed_append(make_tiny_env, tmp_path, monkeypatch):
    import errno

    from forecast_dojo.trajectory import LogWriteError

    record = _a_record(make_tiny_env, tmp_path)
    with TrajectoryWriter(tmp_path / "log", {"seed": 1}) as writer:
        assert writer.write(record)
        before = (tmp_path / "log" / "steps.jsonl").read_bytes()
        _fail_once(monkeypatch)
        with pytest.raises(LogWriteError) as caught:
            writer.write(record.replace(rollout=1))
        assert caught.value.errno == errno.ENOSPC and isinstance(caught.value, OSError)
        assert (tmp_path / "log" / "steps.jsonl").read_bytes() == before
        assert writer.write(record.replace(rollout=1))  # the same record later: logged once
    assert [r.rollout for r in load_records(tmp_path / "log")] == [0, 1]


def test_replaying_a_logged_step_says_it_was_not_logged(make_tiny_env, tmp_path):
    write_log(make_tiny_env, tmp_path)
    before = (tmp_path / "steps.jsonl").read_bytes()
    env = make_tiny_env(log_dir=tmp_path)
    env.reset("harbor", options={"step": 1})
    with pytest.warns(DuplicateRecordWarning, match="already in the log"):
        _, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.1, 0.9]))
    assert info["logged"] is False and "already holds a record" in info["log_error"]
    assert (tmp_path / "steps.jsonl").read_bytes() == before  # de-duplication is kept: the first record stays
    env.reset("harbor", options={"step": 1, "rollout": 1})  # another rollout is another record
    _, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.1, 0.9]))
    assert info["logged"] is True and "log_error" not in info
    env.close()
    assert [(r.step, r.rollout) for r in load_records(tmp_path)] == [(0, 0), (1, 0), (2, 0), (1, 1)]
