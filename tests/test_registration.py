"""Environment specs, gymnasium registration, ``make`` and the embedded synthetic world as an env."""

from __future__ import annotations

import dataclasses
import json
import re
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


def test_the_prompt_profile_comes_from_the_spec_or_make(tiny_corpus_dir, tmp_path):
    from forecast_dojo.schema import save_events

    save_events(tiny_events(), tmp_path / "events.jsonl")
    path = write(
        tmp_path,
        f'name = "Tiny-v0"\n[data]\nevents = "events.jsonl"\ncorpus = "{tiny_corpus_dir}"\n[env]\nprompt = "compact"\n',
    )
    assert DojoSpec.from_toml(path).prompt == "compact"
    env = forecast_dojo.make(path, python_runner=None)
    assert env.prompt == "compact" and env.run_metadata["prompt"] == "compact"
    assert forecast_dojo.make(path, python_runner=None, prompt="default").prompt == "default"
    spec = DojoSpec(name="t", events=tmp_path / "events.jsonl", corpus=tiny_corpus_dir)
    assert make(spec, python_runner=None).prompt == "default"
    assert (
        make(spec, python_runner=None, prompt="compact")
        .reset("harbor")[0]["messages"][0]["content"]
        .startswith("Only news before the forecast date exists.")
    )
    with pytest.raises(SpecError, match="unknown prompt .huge."):
        make(spec, prompt="huge")


def test_training_world_from_spec_key_make_and_gym_make(tmp_path, monkeypatch):
    from forecast_dojo.synthetic.split import synthetic_split

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(tmp_path / "cache"))
    path = write(
        tmp_path, 'name = "Train-v0"\n[data]\nworld = "synthetic"\nembedder = "hashing"\ntrain_events = 3\n'
    )
    assert DojoSpec.from_toml(path).train_events == 3
    from_spec = forecast_dojo.make(path, python_runner=None)
    ids = [e.id for e in from_spec.events]
    assert ids[-3:] == ["syn-t00000", "syn-t00001", "syn-t00002"] and len(ids) == 23  # the train split
    assert from_spec.run_metadata["env_spec"]["train_events"] == 3
    from_kwarg = gym.make(
        "forecast_dojo/Synthetic-v0", embedder="hashing", train_events=3, python_runner=None
    )
    assert [e.id for e in from_kwarg.unwrapped.events] == ids
    assert not set(synthetic_split(0).held_out) & set(ids)
    everything = forecast_dojo.make(path, python_runner=None, split="all")
    assert len(everything.events) == 43 and set(synthetic_split(0).held_out) <= {
        e.id for e in everything.events
    }
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

    env = gym.make("forecast_dojo/Synthetic-v0", python_runner=None, split="all")
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


def test_every_shipped_spec_is_registered_from_the_top_level_envs_folder():
    from pathlib import Path

    from tests.conftest import REPO_ROOT

    paths = builtin_spec_paths()
    assert paths == sorted((REPO_ROOT / "envs").glob("*.toml")) and len(paths) >= 3  # the card's envs/
    assert not (Path(forecast_dojo.__file__).parent / "envs").exists()  # only a wheel has forecast_dojo/envs/
    for path in paths:
        spec = DojoSpec.from_toml(path)
        assert spec.env_id in gym.registry
        assert gym.spec(spec.env_id).entry_point == "forecast_dojo.registration:make"


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


def test_an_events_build_folder_is_split_by_its_files(tmp_path, tiny_corpus_dir):
    from forecast_dojo.errors import UnknownEventError
    from forecast_dojo.events.split import SplitError
    from forecast_dojo.schema import save_events

    events = tiny_events()
    build = tmp_path / "build"
    build.mkdir()
    save_events(events[:1], build / "train.jsonl")
    save_events(events[1:], build / "eval.jsonl")
    save_events(events, build / "all.jsonl")
    spec = DojoSpec(name="Build-v0", events=build / "all.jsonl", corpus=tiny_corpus_dir)
    train = make(spec, python_runner=None)
    assert train.split == "train" and [e.id for e in train.events] == [events[0].id]
    with pytest.raises(UnknownEventError, match="train split"):
        train.reset(events[1].id)
    assert [e.id for e in make(spec, python_runner=None, split="eval").events] == [e.id for e in events[1:]]
    assert len(make(spec, python_runner=None, split="all").events) == len(events)
    assert make(spec, python_runner=None, default_split="eval").split == "eval"  # forecast-dojo run's default
    spec_eval = dataclasses.replace(spec, split="eval")  # the spec's own split beats make's default
    assert make(spec_eval, python_runner=None).split == "eval"
    with pytest.raises(SplitError, match="no event of the train split"):
        make(dataclasses.replace(spec, events=build / "eval.jsonl"), python_runner=None)
    # a plain events file carries no split: used whole by default, an explicit train/eval part is an error
    save_events(events, tmp_path / "events.jsonl")
    plain = dataclasses.replace(spec, events=tmp_path / "events.jsonl")
    assert make(plain, python_runner=None).split == "all"
    with pytest.raises(SplitError, match="no train/eval split"):
        make(plain, python_runner=None, split="eval")


def test_a_spec_names_its_split(tmp_path):
    path = write(tmp_path, 'name = "x"\n[data]\nworld = "synthetic"\nsplit = "eval"\n')
    assert DojoSpec.from_toml(path).split == "eval"
    with pytest.raises(SpecError, match=r"\[data\] split: unknown split 'test'"):
        DojoSpec.from_toml(write(tmp_path, 'name = "x"\n[data]\nworld = "synthetic"\nsplit = "test"\n'))


SYNTHETIC = 'name = "x"\n[data]\nworld = "synthetic"\n'


@pytest.mark.parametrize(
    "extra, where, message",
    [
        (
            '[env]\nshow_episode_length = "false"\n',
            "[env] show_episode_length",
            "must be true or false, not 'false'",
        ),
        ("[budgets]\nmax_turns = 2.5\n", "[budgets] max_turns", "must be an integer, not 2.5"),
        ("[budgets]\nmax_tool_calls = true\n", "[budgets] max_tool_calls", "must be an integer"),
        ("[budgets]\nmax_tool_calls = -1\n", "[budgets] max_tool_calls", "must be at least 0"),
        ("[budgets]\nmax_wall_s = 3\n", "unknown keys in [budgets]", "max_wall_s"),
        (
            '[budgets]\nmax_python_seconds = "20"\n',
            "[budgets] max_python_seconds",
            "positive number of seconds",
        ),
        (
            "[budgets]\nmax_python_seconds = -1.5\n",
            "[budgets] max_python_seconds",
            "positive number of seconds",
        ),
        (
            '[env]\nmemory = "notebok"\n',
            "[env] memory",
            "unknown memory 'notebok'; known: ['none', 'notebook']",
        ),
        ('[env]\nreward = "brir"\n', "[env] reward", "unknown reward 'brir'"),
        ('[env]\nretriever = "dns"\n', "[env] retriever", "unknown retriever 'dns'"),
        ('[env]\ntools = ["search", "serch", "submit_forecast"]\n', "[env] tools", "unknown ['serch']"),
        ('[env]\ntools = ["search"]\n', "[env] tools", "must include 'submit_forecast'"),
        ('[env]\ntools = "search"\n', "[env] tools", "must be a list of non-empty strings"),
        ('[env]\nprompt = "tiny"\n', "[env] prompt", "unknown prompt 'tiny'"),
        ('embedder = "minilmm"\n', "[data] embedder", "unknown embedder 'minilmm'"),
        ('seed = "0"\n', "[data] seed", "must be an integer, not '0'"),
        ('split = "test"\n', "[data] split", "unknown split 'test'; known: ['train', 'eval', 'all']"),
        ("train_events = -5\n", "[data] train_events", "must be at least 0"),
        ('event_ids = "syn-0001"\n', "[data] event_ids", "must be a list of non-empty strings"),
        ('[retriever]\nindex = "ivf"\n', "[retriever] index", "unknown index 'ivf'"),
        ('[retriever]\nnprobe = "8"\n', "[retriever] nprobe", "must be an integer"),
        ("[retriever]\nbatch = 8\n", "unknown keys in [retriever]", "batch"),
        ("env = 3\n", "env must be a table", ""),
        ("colour = 3\n", "unknown top-level keys", "colour"),
    ],
)
def test_spec_values_are_checked_against_the_schema(tmp_path, extra, where, message):
    top_level = extra.startswith(("env =", "colour ="))  # else a [section] or a key of [data]
    path = write(tmp_path, extra + SYNTHETIC if top_level else SYNTHETIC + extra)
    with pytest.raises(SpecError) as raised:
        DojoSpec.from_toml(path)
    assert (
        str(raised.value).startswith(f"{path}: ")
        and where in str(raised.value)
        and message in str(raised.value)
    )


def test_a_name_that_cannot_be_a_gym_id_is_refused(tmp_path):
    with pytest.raises(SpecError, match="cannot be a gymnasium id"):
        DojoSpec.from_toml(write(tmp_path, 'name = "a/b c"\n[data]\nworld = "synthetic"\n'))


def test_make_overrides_are_checked_like_the_file(tiny_corpus_dir, tmp_path):
    from forecast_dojo.schema import save_events

    save_events(tiny_events(), tmp_path / "events.jsonl")
    spec = DojoSpec(name="t", events=tmp_path / "events.jsonl", corpus=tiny_corpus_dir)
    for overrides, message in (
        ({"memory": "notebok"}, "[env] memory: unknown memory 'notebok'"),
        ({"show_episode_length": "false"}, "[env] show_episode_length: must be true or false"),
        ({"max_turns": 2.5}, "[budgets] max_turns: must be an integer, not 2.5"),
        ({"retriever": "dns"}, "[env] retriever: unknown retriever"),
        ({"embedder": "minilmm"}, "[data] embedder: unknown embedder"),
        ({"tools": ("search",)}, "must include 'submit_forecast'"),
    ):
        with pytest.raises(SpecError, match=re.escape(message)):
            make(spec, python_runner=None, **overrides)


def test_a_bad_spec_in_the_env_folder_is_skipped_with_a_warning(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "slash.toml").write_text('name = "a/b c"\n[data]\nworld = "synthetic"\n')
    (tmp_path / "ablation.toml").write_text(
        'name = "Ablation-v0"\n[data]\nworld = "synthetic"\n[env]\nshow_episode_length = "false"\n'
    )
    (tmp_path / "good.toml").write_text('name = "Good-v0"\n[data]\nworld = "synthetic"\n')
    code = "import gymnasium as gym, forecast_dojo; print(sorted(i for i in gym.registry if 'Good' in i or 'Abl' in i))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "FORECAST_DOJO_ENVS": str(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['forecast_dojo/Good-v0']"
    assert (
        f"skipping spec file {tmp_path / 'slash.toml'}" in out.stderr
        and "cannot be a gymnasium id" in out.stderr
    )
    assert (
        f"skipping spec file {tmp_path / 'ablation.toml'}" in out.stderr
        and "show_episode_length" in out.stderr
    )


def test_the_schema_is_one_table_of_keys():
    from forecast_dojo.registration import SPEC_KEYS

    keys = [(k.section, k.key) for k in SPEC_KEYS]
    assert len(keys) == len(set(keys))
    assert {("data", "split"), ("env", "prompt"), ("data", "train_events")} <= set(keys)
    fields = {f.name for f in dataclasses.fields(DojoSpec)}
    for k in SPEC_KEYS:
        if (
            k.section in ("", "data", "env")
            and k.field is not None
            and k.key not in ("split", "prompt", "train_events")
        ):
            assert k.field in fields, k


def test_make_parses_an_events_file_once_per_version_of_it(tmp_path, tiny_corpus_dir, monkeypatch):
    """A server builds one env per session: make() rereads the events file only when the file changed."""
    import os

    import forecast_dojo.schema as schema

    parsed: list[Path] = []
    load = schema.load_events

    def counting(path):
        parsed.append(Path(path))
        return load(path)

    monkeypatch.setattr(schema, "load_events", counting)
    events = tiny_events()
    path = tmp_path / "events.jsonl"
    schema.save_events(events, path)
    spec = DojoSpec(name="Cached-v0", events=path, corpus=tiny_corpus_dir)
    first, second = make(spec, python_runner=None), make(spec, python_runner=None)
    assert parsed == [path]
    assert [e.id for e in first.events] == [e.id for e in second.events] == [e.id for e in events]
    assert first.events is not second.events  # each env its own list (the events themselves are frozen)
    first.events.clear()
    assert len(make(spec, python_runner=None).events) == len(events) and len(parsed) == 1
    schema.save_events(events[:1], path)  # a new version of the file is read again
    os.utime(path, ns=(1, 1))  # a different mtime even on a coarse clock
    assert [e.id for e in make(spec, python_runner=None).events] == [events[0].id] and len(parsed) == 2
    path.write_text("not json\n")
    with pytest.raises(forecast_dojo.errors.SchemaError, match="not JSON"):  # errors are never cached
        make(spec, python_runner=None)
