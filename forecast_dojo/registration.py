"""One way to build an environment (like ``gymnasium.envs.registration``): spec files, registration, ``make``.

A spec is a TOML file (the package ships ``forecast_dojo/envs/*.toml``)::

    name = "Synthetic-v0"            # registered as gymnasium id "forecast_dojo/Synthetic-v0"
    [data]                           # either a synthetic world ...
    world = "synthetic"
    seed = 0
    embedder = "minilm"
    # train_events = 400             # extra training-only events (the held-out events stay identical)
    # events = "path/events.jsonl"   # ... or events + corpus on disk (relative to this file; $VARS and ~ expand)
    # corpus = "path/corpus_dir"
    # event_ids = ["id", ...]        # optional subset
    [env]
    retriever = "dense"              # dense | bm25 | hybrid
    memory = "none"                  # none | notebook
    reward = "brier"                 # brier | log | spherical
    tools = ["search", "read", "python", "submit_forecast"]
    # show_episode_length = false    # ablation only: tell the agent how many steps the episode has
    [retriever]                      # options for make_retriever: index, nprobe, depth, rrf_k ...
    [budgets]
    max_tool_calls = 8
    max_turns = 10

``make(spec_or_name, **overrides)`` builds the env: a :class:`DojoSpec`, a path to a spec file, a
spec name (``"Synthetic-v0"``) or a gymnasium id (``"forecast_dojo/Synthetic-v0"``). Importing
``forecast_dojo`` registers every shipped spec and every ``*.toml`` in the folders listed in
``FORECAST_DOJO_ENVS`` (``os.pathsep``-separated) as ``forecast_dojo/<name>``, with :func:`make` as
the entry point, so ``gymnasium.make(id, **overrides)`` and ``make(id, **overrides)`` are the same.

Loaded corpora and embedders are cached per process, so many envs (e.g. a SyncVectorEnv) share one copy.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_dojo.errors import ForecastDojoError
from forecast_dojo.prompts import Budgets
from forecast_dojo.tools import TOOL_NAMES

if TYPE_CHECKING:
    from forecast_dojo.corpus.embedders import Embedder
    from forecast_dojo.corpus.store import Corpus
    from forecast_dojo.env import ForecastDojoEnv

ENV_NAMESPACE = "forecast_dojo"
SPECS_ENV = "FORECAST_DOJO_ENVS"
_TOP_KEYS = {"name", "description", "data", "env", "budgets", "retriever"}
_ENV_KEYS = {"retriever", "memory", "reward", "tools", "show_episode_length"}
_DATA_KEYS = {"world", "seed", "embedder", "train_events", "events", "corpus", "event_ids"}

_corpora: dict[str, Corpus] = {}
_embedders: dict[str, Embedder] = {}


class SpecError(ForecastDojoError, ValueError):
    """A spec that cannot be used; the message names the file (or spec) and the key."""


@dataclass(frozen=True)
class DojoSpec:
    """A parsed environment spec (named so as not to clash with ``gymnasium.envs.registration.EnvSpec``).

    Attributes:
        name: The spec's name; its gymnasium id is ``forecast_dojo/<name>``.
        world: ``"synthetic"`` for the embedded world, else None (then ``events`` and ``corpus`` are given).
        seed: The synthetic world's seed.
        embedder: The embedder (synthetic world; for a corpus on disk, defaults to the corpus's own).
        train_events: Synthetic world: extra training-only events (``generate_world(train_events=N)``).
        events: The events file.
        corpus: The corpus directory.
        event_ids: Optional subset of event ids.
        retriever: ``dense``, ``bm25`` or ``hybrid``.
        retriever_options: Keyword options for ``make_retriever``.
        memory: ``none`` or ``notebook``.
        reward: ``brier``, ``log`` or ``spherical``.
        tools: The enabled tools (``submit_forecast`` always).
        budgets: Per-step budgets.
        show_episode_length: Ablation: show the number of steps to the agent.
        source: The file the spec was read from.
    """

    name: str
    world: str | None = None
    seed: int = 0
    embedder: str | None = None
    train_events: int = 0
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

    @property
    def env_id(self) -> str:
        """The gymnasium id: ``forecast_dojo/<name>``."""
        return f"{ENV_NAMESPACE}/{self.name}"

    @classmethod
    def from_toml(cls, path: str | Path) -> DojoSpec:
        """Parse and validate a spec file.

        Args:
            path: The TOML file.

        Returns:
            The spec; relative ``events``/``corpus`` paths resolve against the file's folder.

        Raises:
            FileNotFoundError: No such file.
            SpecError: Invalid TOML, unknown or missing keys, or inconsistent data sources.
        """
        path = Path(path)
        try:
            raw = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as err:
            raise SpecError(f"{path}: not valid TOML ({err})") from err
        unknown = set(raw) - _TOP_KEYS
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
                train_events=data.get("train_events", 0),
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
        """Check that the data sources are consistent.

        Raises:
            SpecError: An unknown world, or neither/both of a world and events + corpus.
        """
        where = str(self.source or self.name)
        if self.world is not None and self.world != "synthetic":
            raise SpecError(f"{where}: unknown world {self.world!r} (known: 'synthetic')")
        if self.world is None and (self.events is None or self.corpus is None):
            raise SpecError(f"{where}: give either world = 'synthetic' or both events and corpus")
        if self.world is not None and (self.events is not None or self.corpus is not None):
            raise SpecError(f"{where}: a synthetic world brings its own events and corpus")
        train = self.train_events
        if isinstance(train, bool) or not isinstance(train, int) or train < 0:
            raise SpecError(f"{where}: train_events must be a non-negative integer, got {train!r}")
        if train and self.world is None:
            raise SpecError(f"{where}: train_events needs world = 'synthetic'")


def builtin_spec_paths() -> list[Path]:
    """The spec files shipped inside the package (``forecast_dojo/envs/*.toml``)."""
    folder = resources.files("forecast_dojo") / "envs"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml"))


def _spec_paths() -> list[Path]:
    folders = [Path(p) for p in os.environ.get(SPECS_ENV, "").split(os.pathsep) if p]
    extra = [p for folder in folders if folder.is_dir() for p in sorted(folder.glob("*.toml"))]
    return builtin_spec_paths() + extra


def _spec_name(path: Path) -> str | None:
    try:
        name = tomllib.loads(path.read_text()).get("name")
    except (OSError, tomllib.TOMLDecodeError):
        return None  # reported with a clear error when someone makes it
    return name if isinstance(name, str) and name else None


def resolve_spec(spec_or_name: DojoSpec | str | os.PathLike[str]) -> DojoSpec:
    """The spec meant by a :class:`DojoSpec`, a spec file, a spec name or a gymnasium id.

    Args:
        spec_or_name: What to resolve.

    Returns:
        The parsed spec.

    Raises:
        SpecError: A name that no shipped or ``FORECAST_DOJO_ENVS`` spec has.
    """
    if isinstance(spec_or_name, DojoSpec):
        return spec_or_name
    text = os.fspath(spec_or_name)
    if text.endswith(".toml") or Path(text).is_file():
        return DojoSpec.from_toml(text)
    name = text.removeprefix(f"{ENV_NAMESPACE}/")
    known: dict[str, Path] = {}
    for path in _spec_paths():
        spec_name = _spec_name(path)
        if spec_name is not None:
            known.setdefault(spec_name, path)
    if name not in known:
        raise SpecError(f"unknown environment {text!r}; known: {sorted(known)}")
    return DojoSpec.from_toml(known[name])


def _embedder(name: str) -> Embedder:
    from forecast_dojo.corpus.embedders import get_embedder

    if name not in _embedders:
        _embedders[name] = get_embedder(name)
    return _embedders[name]


def _corpus(path: Path) -> Corpus:
    from forecast_dojo.corpus.store import Corpus

    key = str(Path(path).resolve())
    if key not in _corpora:
        _corpora[key] = Corpus.load(path)
    return _corpora[key]


def make(spec: DojoSpec | str | os.PathLike[str], **overrides: Any) -> ForecastDojoEnv:
    """Build the env a spec describes.

    Args:
        spec: A :class:`DojoSpec`, a spec file, a spec name (``"Synthetic-v0"``) or a gymnasium id.
        **overrides: Spec fields (``memory``, ``reward``, ``retriever``, ``seed``, ``embedder``,
            ``budgets``, ``tools``, ``show_episode_length``...), the budget fields ``max_tool_calls`` and
            ``max_turns``, or env constructor arguments (``log_dir``, ``python_runner``,
            ``render_mode``, ``run_metadata``).

    Returns:
        The environment (unwrapped; ``gymnasium.make`` adds its usual wrappers).
    """
    from forecast_dojo.corpus.retrieval import make_retriever
    from forecast_dojo.env import ForecastDojoEnv
    from forecast_dojo.schema import load_events

    resolved = resolve_spec(spec)
    spec_fields = {f.name for f in dataclasses.fields(DojoSpec)}
    budget_overrides = {k: overrides.pop(k) for k in ("max_tool_calls", "max_turns") if k in overrides}
    resolved = dataclasses.replace(
        resolved, **{k: overrides.pop(k) for k in list(overrides) if k in spec_fields}
    )
    if budget_overrides:
        resolved = dataclasses.replace(
            resolved, budgets=dataclasses.replace(resolved.budgets, **budget_overrides)
        )
    resolved.validate()
    if resolved.world == "synthetic":
        from forecast_dojo.synthetic import ensure_synthetic_world

        paths = ensure_synthetic_world(
            resolved.seed, embedder=resolved.embedder or "minilm", train_events=resolved.train_events
        )
        events_path, corpus_path = paths.events_path, paths.corpus_dir
    else:
        assert resolved.events is not None and resolved.corpus is not None
        events_path, corpus_path = resolved.events, resolved.corpus
    events = load_events(events_path)
    if resolved.event_ids is not None:
        wanted = set(resolved.event_ids)
        missing = wanted - {e.id for e in events}
        if missing:
            raise SpecError(f"{resolved.name}: event ids not in {events_path}: {sorted(missing)[:5]}")
        events = [e for e in events if e.id in wanted]
    corpus = _corpus(corpus_path)
    embedder = _embedder(resolved.embedder or corpus.embedder_name)
    retriever = make_retriever(resolved.retriever, corpus, embedder, **resolved.retriever_options)
    metadata = {
        "env_spec": {
            "name": resolved.name,
            "world": resolved.world,
            "seed": resolved.seed,
            **({"train_events": resolved.train_events} if resolved.train_events else {}),
            "events": str(events_path),
            "corpus": str(corpus_path),
            "retriever": resolved.retriever,
        },
        **overrides.pop("run_metadata", {}),
    }
    return ForecastDojoEnv(
        events,
        corpus,
        retriever,
        memory=resolved.memory,
        reward=resolved.reward,
        budgets=resolved.budgets,
        tools=resolved.tools,
        show_episode_length=resolved.show_episode_length,
        run_metadata=metadata,
        **overrides,
    )


def register(spec: DojoSpec | str | os.PathLike[str], *, force: bool = False) -> str:
    """Register a spec (object or file) as the gymnasium id ``forecast_dojo/<name>``.

    Args:
        spec: A :class:`DojoSpec` or a spec file.
        force: Replace an id that is already registered (otherwise it is kept).

    Returns:
        The gymnasium id.
    """
    import gymnasium as gym

    target: DojoSpec | str
    if isinstance(spec, DojoSpec):
        env_id, target = spec.env_id, spec
    else:
        path = Path(spec)
        name = _spec_name(path)
        if name is None:
            raise SpecError(f"{path}: not a spec file with a 'name'")
        env_id, target = f"{ENV_NAMESPACE}/{name}", str(path)
    if env_id in gym.registry and not force:
        return env_id
    if env_id in gym.registry:
        del gym.registry[env_id]
    gym.register(env_id, entry_point="forecast_dojo.registration:make", kwargs={"spec": target})
    return env_id


def register_specs() -> list[str]:
    """Register every shipped spec and every spec in ``$FORECAST_DOJO_ENVS`` (first name wins).

    Returns:
        The gymnasium ids, in registration order.
    """
    ids = []
    for path in _spec_paths():
        if _spec_name(path) is not None:
            ids.append(register(path))
    return ids
