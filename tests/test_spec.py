"""Environment specs, gymnasium registration and the embedded synthetic world as an env."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import forecast_dojo
from forecast_dojo.agents.base import tool_call
from forecast_dojo.spec import EnvSpec, SpecError, make_env
from tests.conftest import REPO_ROOT, tiny_events


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_registered_ids():
    assert "forecast_dojo/Synthetic-v0" in gym.registry
    assert "forecast_dojo/SyntheticNotebook-v0" in gym.registry


def test_every_spec_in_envs_parses():
    specs = [EnvSpec.from_toml(p) for p in sorted((REPO_ROOT / "envs").glob("*.toml"))]
    assert specs and len({s.name for s in specs}) == len(specs)


def test_spec_on_disk_events_and_corpus(tmp_path, tiny_corpus_dir):
    from forecast_dojo.schema import save_events

    save_events(tiny_events(), tmp_path / "events.jsonl")
    path = write(
        tmp_path,
        f'name = "Tiny-v0"\n[data]\nevents = "events.jsonl"\ncorpus = "{tiny_corpus_dir}"\n'
        '[env]\nmemory = "notebook"\nreward = "spherical"\n[budgets]\nmax_tool_calls = 3\nmax_turns = 4\n',
    )
    env = forecast_dojo.ForecastDojoEnv.from_spec(path, python_runner=None)
    assert env.memory == "notebook" and env.reward_name == "spherical" and env.budgets.max_tool_calls == 3
    obs, _ = env.reset("harbor")
    assert obs["event_id"] == "harbor"
    _, reward, _, _, info = env.step(tool_call("submit_forecast", probabilities=[1.0, 0.0]))
    assert reward == pytest.approx(1.0) and info["scores"]["spherical"] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "text, message",
    [
        ('name = "x"\n[data]\nworld = "synthetic"\nevents = "e.jsonl"\n', "brings its own"),
        ('name = "x"\n[data]\nevents = "e.jsonl"\n', "both events and corpus"),
        ('name = "x"\n[data]\nworld = "mars"\n', "unknown world"),
        ('name = "x"\n[data]\nworld = "synthetic"\n[env]\nmemroy = "none"\n', "unknown keys in [env]"),
        ('name = "x"\n[data]\nworld = "synthetic"\n[budgets]\nmax_turns = 0\n', "max_turns"),
        ('[data]\nworld = "synthetic"\n', "missing 'name'"),
        ("name = \n", "not valid TOML"),
    ],
)
def test_bad_specs_fail_clearly(tmp_path, text, message):
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        EnvSpec.from_toml(write(tmp_path, text))


def test_synthetic_env_via_gym_make(tmp_path, monkeypatch):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(tmp_path / "cache"))
    env = gym.make("forecast_dojo/Synthetic-v0", memory="notebook", embedder="hashing", python_runner=None)
    obs, info = env.reset(seed=0, options={"event_id": env.unwrapped.events[0].id})
    assert obs["step"] == 0 and "notebook" in obs["messages"][0]["content"]
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_make_env_overrides_budgets(tiny_corpus_dir, tmp_path):
    from forecast_dojo.schema import save_events

    save_events(tiny_events(), tmp_path / "events.parquet")
    spec = EnvSpec(name="t", events=tmp_path / "events.parquet", corpus=tiny_corpus_dir)
    env = make_env(spec, max_turns=2, memory="notebook", python_runner=None)
    assert env.budgets.max_turns == 2 and env.budgets.max_tool_calls == 8 and env.memory == "notebook"


@pytest.mark.slow
def test_default_synthetic_env_uses_minilm_and_finds_evidence():
    """The registered default (MiniLM world, built once into the cache): a question finds its own evidence."""
    import json

    env = gym.make("forecast_dojo/Synthetic-v0", python_runner=None)
    assert env.unwrapped.corpus.embedder_name.startswith("all-MiniLM-L6-v2")
    event = env.unwrapped.events[7]
    obs, _ = env.reset(seed=0, options={"event_id": "syn-0007"})
    assert obs["event_id"] == "syn-0007" == event.id
    # At the last step the event's own coverage exists: semantic search must surface it.
    env.reset(seed=0, options={"event_id": "syn-0007", "step": event.n_steps - 1})
    obs, *_ = env.step(tool_call("search", query=event.question, top_k=10))
    hits = json.loads(obs["messages"][0]["content"])
    name = [w for w in event.question.split() if w[:1].isupper()][1]
    assert sum(name in h["title"] + h["snippet"] for h in hits) >= 3
    env.close()


def test_spec_retriever_and_options(tmp_path, tiny_corpus_dir):
    import shutil

    from forecast_dojo.corpus.retrieval import build_indexes
    from forecast_dojo.corpus.store import Corpus
    from forecast_dojo.schema import save_events

    tiny_corpus_dir = shutil.copytree(tiny_corpus_dir, tmp_path / "corpus")  # indexes go into a copy
    build_indexes(Corpus.load(tiny_corpus_dir), dense=None, bm25=True, progress=False)
    save_events(tiny_events(), tmp_path / "events.jsonl")
    path = write(
        tmp_path,
        f'name = "Tiny-v0"\n[data]\nevents = "events.jsonl"\ncorpus = "{tiny_corpus_dir}"\n'
        '[env]\nretriever = "hybrid"\n[retriever]\ndepth = 30\nrrf_k = 10\n',
    )
    env = forecast_dojo.ForecastDojoEnv.from_spec(path, python_runner=None)
    env.reset("harbor")
    obs, *_ = env.step(tool_call("search", query="Harbor Act lawmakers", top_k=5))
    assert len(json.loads(obs["messages"][0]["content"])) == 5
    with pytest.raises(ValueError):
        forecast_dojo.ForecastDojoEnv.from_spec(
            write(
                tmp_path,
                f'name = "x"\n[data]\nevents = "events.jsonl"\ncorpus = "{tiny_corpus_dir}"\n[env]\nretriever = "bm25"\n[retriever]\nnprobe = 3\n',
            ),
            python_runner=None,
        )
