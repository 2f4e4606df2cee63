"""Environment specs: which events, which corpus, retriever, budgets, memory mode and reward.

A spec is a TOML file (see ``envs/``)::

    name = "Synthetic-v0"            # registered as gymnasium id "forecast_dojo/Synthetic-v0"
    [data]                           # either a synthetic world ...
    world = "synthetic"
    seed = 0
    embedder = "minilm"
    # events = "path/events.jsonl"   # ... or events + corpus on disk (relative to this file; $VARS and ~ expand)
    # corpus = "path/corpus_dir"
    [env]
    retriever = "dense"              # dense | bm25 | hybrid
    # [retriever] index = "ivf-sq8", nprobe = 16, depth = 50, rrf_k = 60  (options for make_retriever)
    memory = "none"                  # none | notebook
    reward = "brier"                 # brier | log | spherical
    tools = ["search", "read", "python", "submit_forecast"]
    [budgets]
    max_tool_calls = 8
    max_turns = 10

Loaded corpora and embedders are cached per process, so many envs (e.g. a SyncVectorEnv) share one copy.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_dojo.corpus.embedders import Embedder, get_embedder
from forecast_dojo.corpus.retrieval import make_retriever
from forecast_dojo.corpus.store import Corpus
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.prompts import Budgets
from forecast_dojo.schema import load_events
from forecast_dojo.tools import TOOL_NAMES

ENV_NAMESPACE = "forecast_dojo"
_ENV_KEYS = {"retriever", "memory", "reward", "tools", "show_episode_length"}
_DATA_KEYS = {"world", "seed", "embedder", "events", "corpus", "event_ids"}

_corpora: dict[str, Corpus] = {}
_embedders: dict[str, Embedder] = {}


class SpecError(ValueError):
    """A spec file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class EnvSpec:
    name: str
    world: str | None = None
    seed: int = 0
    embedder: str | None = None
    events: Path | None = None
    corpus: Path | None = None
    event_ids: tuple[str, ...] | None = None
    retriever: str = "dense"
    retriever_options: dict[str, Any] = field(default_factory=dict)
    memory: str = "none"
    reward: str = "brier"
    tools: tuple[str, ...] = TOOL_NAMES
    budgets: Budgets = field(default_factory=Budgets)
    show_episode_length: bool = False
    source: Path | None = None

    @classmethod
    def from_toml(cls, path: str | Path) -> EnvSpec:
        path = Path(path)
        try:
            raw = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise
        except tomllib.TOMLDecodeError as err:
            raise SpecError(f"{path}: not valid TOML ({err})") from err
        unknown = set(raw) - {"name", "description", "data", "env", "budgets", "retriever"}
        if unknown:
            raise SpecError(f"{path}: unknown top-level keys {sorted(unknown)}")
        data, env, budgets = raw.get("data", {}), raw.get("env", {}), raw.get("budgets", {})
        for section, allowed, values in (("data", _DATA_KEYS, data), ("env", _ENV_KEYS, env)):
            if set(values) - allowed:
                raise SpecError(f"{path}: unknown keys in [{section}]: {sorted(set(values) - allowed)}")
        if "name" not in raw:
            raise SpecError(f"{path}: missing 'name'")

        def resolve(value: str | None) -> Path | None:
            if value is None:
                return None
            expanded = Path(os.path.expanduser(os.path.expandvars(value)))
            return expanded if expanded.is_absolute() else (path.parent / expanded).resolve()

        try:
            spec = cls(
                name=raw["name"],
                world=data.get("world"),
                seed=int(data.get("seed", 0)),
                embedder=data.get("embedder"),
                events=resolve(data.get("events")),
                corpus=resolve(data.get("corpus")),
                event_ids=tuple(data["event_ids"]) if "event_ids" in data else None,
                retriever=env.get("retriever", "dense"),
                retriever_options=dict(raw.get("retriever", {})),
                memory=env.get("memory", "none"),
                reward=env.get("reward", "brier"),
                tools=tuple(env.get("tools", TOOL_NAMES)),
                budgets=Budgets(**budgets),
                show_episode_length=bool(env.get("show_episode_length", False)),
                source=path,
            )
        except (TypeError, ValueError) as err:
            raise SpecError(f"{path}: {err}") from err
        spec.validate()
        return spec

    def validate(self) -> None:
        where = str(self.source or self.name)
        if self.world is not None and self.world != "synthetic":
            raise SpecError(f"{where}: unknown world {self.world!r} (known: 'synthetic')")
        if self.world is None and (self.events is None or self.corpus is None):
            raise SpecError(f"{where}: give either world = 'synthetic' or both events and corpus")
        if self.world is not None and (self.events is not None or self.corpus is not None):
            raise SpecError(f"{where}: a synthetic world brings its own events and corpus")


def _embedder(name: str) -> Embedder:
    if name not in _embedders:
        _embedders[name] = get_embedder(name)
    return _embedders[name]


def _corpus(path: Path) -> Corpus:
    key = str(Path(path).resolve())
    if key not in _corpora:
        _corpora[key] = Corpus.load(path)
    return _corpora[key]


def make_env(spec: EnvSpec, **overrides: Any) -> ForecastDojoEnv:
    """Build the env a spec describes. ``overrides`` replace spec fields (``memory``, ``reward``,
    ``retriever``, ``seed``, ``embedder``, ``budgets``, ``tools``...) or go to the env constructor
    (``log_dir``, ``python_runner``, ``render_mode``, ``run_metadata``)."""
    spec_fields = {f.name for f in dataclasses.fields(EnvSpec)}
    budget_overrides = {k: overrides.pop(k) for k in ("max_tool_calls", "max_turns") if k in overrides}
    spec = dataclasses.replace(spec, **{k: overrides.pop(k) for k in list(overrides) if k in spec_fields})
    if budget_overrides:
        spec = dataclasses.replace(spec, budgets=dataclasses.replace(spec.budgets, **budget_overrides))
    spec.validate()
    if spec.world == "synthetic":
        from forecast_dojo.synthetic import ensure_synthetic_world

        paths = ensure_synthetic_world(spec.seed, embedder=spec.embedder or "minilm")
        events_path, corpus_path = paths.events_path, paths.corpus_dir
    else:
        assert spec.events is not None and spec.corpus is not None
        events_path, corpus_path = spec.events, spec.corpus
    events = load_events(events_path)
    if spec.event_ids is not None:
        wanted = set(spec.event_ids)
        missing = wanted - {e.id for e in events}
        if missing:
            raise SpecError(f"{spec.name}: event ids not in {events_path}: {sorted(missing)[:5]}")
        events = [e for e in events if e.id in wanted]
    corpus = _corpus(corpus_path)
    embedder = _embedder(spec.embedder or corpus.embedder_name)
    retriever = make_retriever(spec.retriever, corpus, embedder, **spec.retriever_options)
    metadata = {
        "env_spec": {
            "name": spec.name,
            "world": spec.world,
            "seed": spec.seed,
            "events": str(events_path),
            "corpus": str(corpus_path),
            "retriever": spec.retriever,
        },
        **overrides.pop("run_metadata", {}),
    }
    return ForecastDojoEnv(
        events,
        corpus,
        retriever,
        memory=spec.memory,
        reward=spec.reward,
        budgets=spec.budgets,
        tools=spec.tools,
        show_episode_length=spec.show_episode_length,
        run_metadata=metadata,
        **overrides,
    )


def make_from_spec_file(spec_path: str | Path, **overrides: Any) -> ForecastDojoEnv:
    """Entry point used by gymnasium registration for spec files."""
    return make_env(EnvSpec.from_toml(spec_path), **overrides)


def make_synthetic_env(**overrides: Any) -> ForecastDojoEnv:
    """The embedded default world (``forecast_dojo/Synthetic-v0``)."""
    return make_env(EnvSpec(name="Synthetic-v0", world="synthetic"), **overrides)


def register_spec_dir(directory: str | Path) -> list[str]:
    """Register every ``*.toml`` spec in ``directory`` as ``forecast_dojo/<name>``; returns the ids."""
    import gymnasium as gym

    ids = []
    for path in sorted(Path(directory).glob("*.toml")):
        spec = EnvSpec.from_toml(path)
        env_id = f"{ENV_NAMESPACE}/{spec.name}"
        if env_id in gym.registry:
            continue
        gym.register(
            env_id,
            entry_point=make_from_spec_file,
            kwargs={"spec_path": str(path)},
            disable_env_checker=False,
        )
        ids.append(env_id)
    return ids
