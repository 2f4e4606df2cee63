"""A wheel built from this tree works on its own: specs are package data, every gym id makes an env."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import REPO_ROOT, tiny_events
from tests.venvs import make_venv, pip_install

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import gymnasium as gym
    import forecast_dojo
    from forecast_dojo.registration import DojoSpec, builtin_spec_paths

    assert forecast_dojo.__file__.startswith(sys.argv[1]), forecast_dojo.__file__  # the wheel, not the repo
    submit = lambda k: {"role": "assistant", "content": "", "tool_calls": [{"type": "function",
        "function": {"name": "submit_forecast", "arguments": {"probabilities": [1 / k] * k}}}]}
    report = {"version": forecast_dojo.__version__, "ids": {}}
    for path in builtin_spec_paths():
        spec = DojoSpec.from_toml(path)
        overrides = {"python_runner": None}
        if spec.world == "synthetic":
            overrides["embedder"] = "hashing"
        else:  # real data is not shipped: the same spec over the tiny world
            overrides.update(events=sys.argv[2], corpus=sys.argv[3])
        env = gym.make(spec.env_id, **overrides)
        obs, info = env.reset(seed=0)
        steps, terminated = 0, False
        while not terminated:
            obs, reward, terminated, truncated, info = env.step(submit(len(obs["outcomes"])))
            steps += 1
        report["ids"][spec.env_id] = {"steps": steps, "memory": env.unwrapped.memory, "n_steps": info["n_steps"]}
        env.close()
    print(json.dumps(report))
    """
)


@pytest.mark.slow
def test_wheel_installs_and_every_spec_makes_an_env(tmp_path, tiny_corpus_dir, synthetic_cache):
    from forecast_dojo.corpus.retrieval import build_indexes
    from forecast_dojo.corpus.store import Corpus
    from forecast_dojo.registration import builtin_spec_paths
    from forecast_dojo.schema import save_events

    source = tmp_path / "src"  # build from a copy so the working tree gets no build/ or egg-info
    shutil.copytree(
        REPO_ROOT / "forecast_dojo", source / "forecast_dojo", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(REPO_ROOT / "envs", source / "envs")  # the specs ship from the top-level envs/
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(source),
        ],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("forecast_dojo-*.whl"))
    venv = tmp_path / "venv"
    python = make_venv(venv)  # sees this environment's packages, also when that is itself a virtualenv
    # --ignore-installed: this environment may already hold forecast_dojo 0.1.0 (an editable install),
    # which pip would call "already satisfied", installing nothing.
    pip_install(python, "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheel))
    corpus = shutil.copytree(tiny_corpus_dir, tmp_path / "corpus")  # hybrid retrieval needs a BM25 index
    build_indexes(Corpus.load(corpus), dense=None, bm25=True, progress=False)
    save_events(tiny_events(), tmp_path / "events.jsonl")
    script = tmp_path / "check.py"
    script.write_text(SCRIPT)
    environment = {**os.environ, "FORECAST_DOJO_CACHE": str(synthetic_cache)}
    environment.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(python), str(script), str(venv), str(tmp_path / "events.jsonl"), str(corpus)],
        cwd=tmp_path,  # not the repository: its forecast_dojo must not be importable from the cwd
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report["ids"]) == len(builtin_spec_paths()) >= 3
    assert report["ids"]["forecast_dojo/Synthetic-v0"]["memory"] == "none"
    assert report["ids"]["forecast_dojo/SyntheticNotebook-v0"]["memory"] == "notebook"
    assert all(v["steps"] == v["n_steps"] >= 1 for v in report["ids"].values())
    assert report["version"] != "0+unknown"


def test_make_takes_the_data_paths_as_strings(tmp_path, tiny_corpus_dir):
    """What the wheel test's script does (events=..., corpus=... as str), without building a wheel."""
    from forecast_dojo.corpus.retrieval import build_indexes
    from forecast_dojo.corpus.store import Corpus
    from forecast_dojo.registration import DojoSpec, builtin_spec_paths, make
    from forecast_dojo.schema import save_events

    real = [p for p in builtin_spec_paths() if DojoSpec.from_toml(p).world != "synthetic"]
    assert real
    corpus = shutil.copytree(tiny_corpus_dir, tmp_path / "corpus")
    build_indexes(Corpus.load(corpus), dense=None, bm25=True, progress=False)
    save_events(tiny_events(), tmp_path / "events.jsonl")
    env = make(real[0], events=str(tmp_path / "events.jsonl"), corpus=str(corpus), python_runner=None)
    obs, _ = env.reset(seed=0)
    assert obs["outcomes"]
    env.close()
