"""Environment specs, gymnasium registration, ``make`` and the embedded synthetic world as an env."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import forecast_dojo
from forecast_dojo.agents.base import tool_call
from forecast_dojo.registration import DojoSpec, SpecError, builtin_spec_paths, make
from tests.conftest import tiny_events


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(text)
    return path


def test_registered_ids():
    assert "forecast_dojo/Synthetic-v0" in gym.registry
    assert "forecast_dojo/SyntheticNotebook-v0" in gym.registry


def test_every_spec_in_envs_parses():
    specs = [DojoSpec.from_toml(p) for p in builtin_spec_paths()]
    assert specs and len({s.name for s in specs}) == len(specs)


def test_spec_on_disk_events_and_corpus(tmp_path, tiny_corpus_dir):
    from forecast_dojo.schema import save_events

    save_events(tiny_events(), tmp_path / "events.jsonl")
    path = write(
        tmp_path,
        f'name = "Tiny-v0"\n[data]\nevents = "events.jsonl"\ncorpus = "{tiny_corpus_dir}"\n'
        '[env]\nmemory = "notebook"\nreward = "spherical"\n[budgets]\nmax_tool_calls = 3\nmax_turns = 4\n',
    )
    env = forecast_dojo.make(path, python_runner=None)
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
        ('name = "x"\n[data]\nworld = "synthetic"\ntrain_events = -1\n', "train_events"),
        ('name = "x"\n[data]\nworld = "synthetic"\ntrain_events = "many"\n', "train_events"),
        ('name = "x"\n[data]\nevents = "e.jsonl"\ncorpus = "c"\ntrain_events = 4\n', "needs world"),
    ],
)
def test_bad_specs_fail_clearly(tmp_path, text, message):
    with pytest.raises(SpecError, match=message.replace("[", r"\[").replace("]", r"\]")):
        DojoSpec.from_toml(write(tmp_path, text))


def test_synthetic_env_via_gym_make(tmp_path, monkeypatch):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(tmp_path / "cache"))
    env = gym.make("forecast_dojo/Synthetic-v0", memory="notebook", embedder="hashing", python_runner=None)
    obs, info = env.reset(seed=0, options={"event_id": env.unwrapped.events[0].id})
    assert obs["step"] == 0 and "notebook" in obs["messages"][0]["content"]
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_training_world_from_spec_key_make_and_gym_make(tmp_path, monkeypatch):
    from forecast_dojo.synthetic.split import synthetic_split

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(tmp_path / "cache"))
    path = write(
        tmp_path, 'name = "Train-v0"\n[data]\nworld = "synthetic"\nembedder = "hashing"\ntrain_events = 3\n'
    )
    assert DojoSpec.from_toml(path).train_events == 3
    from_spec = forecast_dojo.make(path, python_runner=None)
    ids = [e.id for e in from_spec.events]
    assert ids[-3:] == ["syn-t00000", "syn-t00001", "syn-t00002"] and len(ids) == 43
    assert from_spec.run_metadata["env_spec"]["train_events"] == 3
    from_kwarg = gym.make(
        "forecast_dojo/Synthetic-v0", embedder="hashing", train_events=3, python_runner=None
    )
    assert [e.id for e in from_kwarg.unwrapped.events] == ids
    assert set(synthetic_split(0).held_out) <= set(ids)
    from_kwarg.close()


def test_make_env_overrides_budgets(tiny_corpus_dir, tmp_path):
    from forecast_dojo.schema import save_events

    save_events(tiny_events(), tmp_path / "events.parquet")
    spec = DojoSpec(name="t", events=tmp_path / "events.parquet", corpus=tiny_corpus_dir)
    env = make(spec, max_turns=2, memory="notebook", python_runner=None)
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
    env = forecast_dojo.make(path, python_runner=None)
    env.reset("harbor")
    obs, *_ = env.step(tool_call("search", query="Harbor Act lawmakers", top_k=5))
    assert len(json.loads(obs["messages"][0]["content"])) == 5
    with pytest.raises(ValueError):
        forecast_dojo.make(
            write(
                tmp_path,
                f'name = "x"\n[data]\nevents = "events.jsonl"\ncorpus = "{tiny_corpus_dir}"\n[env]\nretriever = "bm25"\n[retriever]\nnprobe = 3\n',
            ),
            python_runner=None,
        )


def test_make_accepts_names_ids_paths_and_specs(synthetic_cache, monkeypatch):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    by_name = make("SyntheticNotebook-v0", embedder="hashing", python_runner=None)
    by_id = make("forecast_dojo/SyntheticNotebook-v0", embedder="hashing", python_runner=None)
    path = next(p for p in builtin_spec_paths() if p.name == "synthetic-notebook.toml")
    by_path = make(path, embedder="hashing", python_runner=None)
    by_spec = make(DojoSpec.from_toml(path), embedder="hashing", python_runner=None)
    assert {e.memory for e in (by_name, by_id, by_path, by_spec)} == {"notebook"}
    assert len({e.run_id for e in (by_name, by_id, by_path, by_spec)}) == 1
    via_gym = gym.make("forecast_dojo/SyntheticNotebook-v0", embedder="hashing", python_runner=None)
    assert via_gym.unwrapped.run_id == by_name.run_id
    with pytest.raises(SpecError, match="unknown environment"):
        make("Nope-v0")


def test_every_shipped_spec_is_registered_from_package_data():
    from pathlib import Path

    for path in builtin_spec_paths():
        spec = DojoSpec.from_toml(path)
        assert spec.env_id in gym.registry
        assert gym.spec(spec.env_id).entry_point == "forecast_dojo.registration:make"
        assert Path(forecast_dojo.__file__).parent in path.parents  # inside the package, not the repo


def test_register_a_spec_and_an_env_folder(tmp_path, tiny_corpus_dir, monkeypatch):
    import subprocess
    import sys

    from forecast_dojo.registration import register
    from forecast_dojo.schema import save_events

    save_events(tiny_events(), tmp_path / "events.jsonl")
    path = write(
        tmp_path, f'name = "TinyReg-v0"\n[data]\nevents = "events.jsonl"\ncorpus = "{tiny_corpus_dir}"\n'
    )
    assert register(path) == "forecast_dojo/TinyReg-v0"
    env = gym.make("forecast_dojo/TinyReg-v0", python_runner=None)
    assert env.reset(options={"event_id": "harbor"})[0]["event_id"] == "harbor"
    spec = DojoSpec(name="TinyObj-v0", events=tmp_path / "events.jsonl", corpus=tiny_corpus_dir)
    assert register(spec) == "forecast_dojo/TinyObj-v0"
    assert gym.make("forecast_dojo/TinyObj-v0", python_runner=None).unwrapped.events[0].id == "harbor"
    code = "import gymnasium as gym, forecast_dojo; print('forecast_dojo/TinyReg-v0' in gym.registry)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**__import__("os").environ, "FORECAST_DOJO_ENVS": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "True"


def test_every_error_class_derives_from_the_base():
    import importlib
    import inspect
    import pkgutil

    from forecast_dojo.errors import ForecastDojoError

    found = []
    for info in pkgutil.walk_packages(forecast_dojo.__path__, "forecast_dojo."):
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # a module of an optional extra that is not installed
            continue
        for name, obj in vars(module).items():
            if (
                inspect.isclass(obj)
                and issubclass(obj, Exception)
                and not issubclass(obj, Warning)
                and obj.__module__ == info.name
            ):
                found.append(obj)
                assert issubclass(obj, ForecastDojoError), f"{info.name}.{name}"
    assert len(found) >= 15


def test_version_comes_from_package_metadata():
    from importlib.metadata import version

    assert forecast_dojo.__version__ == version("forecast-dojo")
