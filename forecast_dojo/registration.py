"""One way to build an environment (like ``gymnasium.envs.registration``): spec files, registration, ``make``.

A spec is a TOML file (the repository's top-level ``envs/*.toml``, installed in the wheel as
``forecast_dojo/envs/``)::

    name = "Synthetic-v0"            # registered as gymnasium id "forecast_dojo/Synthetic-v0"
    [data]                           # either a synthetic world ...
    world = "synthetic"
    seed = 0
    embedder = "minilm"
    # train_events = 400             # extra training-only events (the held-out events stay identical)
    # events = "path/events.jsonl"   # ... or events + corpus on disk (relative to this file; $VARS and ~ expand)
    # corpus = "path/corpus_dir"
    # event_ids = ["id", ...]        # optional subset
    # split = "train"                # train | eval | all; default: train (forecast-dojo run: eval)
    [env]
    retriever = "dense"              # dense | bm25 | hybrid
    memory = "none"                  # none | notebook
    reward = "brier"                 # brier | log | spherical
    tools = ["search", "read", "python", "submit_forecast"]
    # show_episode_length = false    # ablation only: tell the agent how many steps the episode has
    prompt = "default"               # default | compact (small models: <= 400 SmolLM2 tokens before any tool result)
    [retriever]                      # options for make_retriever: index, nprobe, depth, rrf_k ...
    [budgets]
    max_tool_calls = 8
    max_turns = 10

Every key is declared once, with its type and allowed values, in :data:`SPEC_KEYS`; a spec file is
checked against it when it is read (unknown sections or keys, wrong types, unknown values and names
that cannot be a gymnasium id are a :class:`SpecError` naming the file and the key), and the same
checks run again on ``make``'s overrides. A spec in ``$FORECAST_DOJO_ENVS`` that fails them is
skipped at import with a warning naming the file.

``make(spec_or_name, **overrides)`` builds the env: a :class:`DojoSpec`, a path to a spec file, a
spec name (``"Synthetic-v0"``) or a gymnasium id (``"forecast_dojo/Synthetic-v0"``). The env holds
one split of the events (``split``: a ``make``/``gym.make`` keyword, else the spec's ``split``, else
``train``; :mod:`forecast_dojo.events.split` defines it), so ``reset(seed=...)`` never draws a
held-out event; events that carry no split (a plain events file) are used whole. Importing
``forecast_dojo`` registers every shipped spec and every ``*.toml`` in the folders listed in
``FORECAST_DOJO_ENVS`` (``os.pathsep``-separated) as ``forecast_dojo/<name>``, with :func:`make` as
the entry point, so ``gymnasium.make(id, **overrides)`` and ``make(id, **overrides)`` are the same.

Loaded corpora and embedders are cached per process, so many envs (e.g. a SyncVectorEnv) share one copy.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecast_dojo.budgets import Budgets
from forecast_dojo.errors import ConfigError, SpecError
from forecast_dojo.events.split import SPLITS
from forecast_dojo.prompts import PROMPT_PROFILES
from forecast_dojo.tools import TOOL_NAMES

if TYPE_CHECKING:
    from forecast_dojo.corpus.embedders import Embedder
    from forecast_dojo.corpus.retrieval import Retriever
    from forecast_dojo.corpus.store import Corpus
    from forecast_dojo.env import ForecastDojoEnv
    from forecast_dojo.schema import Event

ENV_NAMESPACE = "forecast_dojo"
SPECS_ENV = "FORECAST_DOJO_ENVS"
# A spec name becomes the gymnasium id ``forecast_dojo/<name>``: gymnasium's grammar, no '/' or spaces.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][\w.:-]*")
SECTIONS = ("data", "env", "retriever", "budgets")

_corpora: dict[str, Corpus] = {}
_embedders: dict[str, Embedder] = {}
# Parsed events files, one entry per path, reread when the file's identity (inode, size, mtime) changes:
# parsing and checking the synthetic world's 40 events took 150-250 ms of every make() (a server builds
# one env per session); Events are frozen, and every env takes its own list.
_events_files: dict[str, tuple[tuple[int, int, int], list[Event]]] = {}

__all__ = [
    "SPEC_KEYS",
    "DojoSpec",
    "SpecError",
    "SpecKey",
    "make",
    "register",
    "register_specs",
    "resolve_spec",
]


def _memory_modes() -> tuple[str, ...]:
    from forecast_dojo.env import MEMORY_MODES

    return MEMORY_MODES


def _scoring_rules() -> tuple[str, ...]:
    from forecast_dojo.scoring import SCORING_RULES

    return tuple(sorted(SCORING_RULES))


def _retriever_kinds() -> tuple[str, ...]:
    from forecast_dojo.corpus.retrieval import RETRIEVER_KINDS

    return RETRIEVER_KINDS


def _index_kinds() -> tuple[str, ...]:
    from forecast_dojo.corpus.index import DENSE_KINDS

    return ("auto", *DENSE_KINDS)


@dataclass(frozen=True)
class SpecKey:
    """One key a spec file may hold: where it lives, what it holds and what it sets.

    Attributes:
        section: ``""`` for the top level, else ``data``, ``env``, ``retriever`` or ``budgets``.
        key: The key's name in the file.
        kind: ``str``, ``int``, ``seconds`` (a positive int or float), ``bool``, ``path`` (a string; relative to the spec's folder, ``~`` and
            ``$VARS`` expand), ``str-list``, ``name`` (a gymnasium-id-safe string) or ``embedder``.
        field: What it sets: a :class:`DojoSpec` field (``data``/``env``/top level), a
            :class:`~forecast_dojo.prompts.Budgets` field (``budgets``), a ``make_retriever`` option
            (``retriever``), or None (documentation only: ``description``).
        choices: The allowed values (``str``) or list items (``str-list``), or a function returning them.
        minimum: The smallest allowed value (``int``).
        doc: What the key means.
    """

    section: str
    key: str
    kind: str
    field: str | None
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    minimum: int | None = None
    doc: str = ""

    @property
    def where(self) -> str:
        """How a message names the key: ``[env] memory`` or ``name``."""
        return f"[{self.section}] {self.key}" if self.section else self.key

    def allowed(self) -> tuple[str, ...] | None:
        """The allowed values, computed when they come from another module."""
        return self.choices() if callable(self.choices) else self.choices

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` for this key, or None when it is fine."""
        kind = self.kind
        if kind == "bool":
            return None if isinstance(value, bool) else f"must be true or false, not {value!r}"
        if kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                return f"must be an integer, not {value!r}"
            if self.minimum is not None and value < self.minimum:
                return f"must be at least {self.minimum}, not {value!r}"
            return None
        if kind == "seconds":
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
                return f"must be a positive number of seconds, not {value!r}"
            return None
        if kind == "path":
            return (
                None
                if isinstance(value, str | os.PathLike) and os.fspath(value)
                else f"must be a path, not {value!r}"
            )
        if kind == "str-list":
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
                return f"must be a list of non-empty strings, not {value!r}"
            allowed = self.allowed()
            unknown = [v for v in value if allowed is not None and v not in allowed]
            return f"unknown {unknown}; known: {list(allowed or ())}" if unknown else None
        if not isinstance(value, str) or not value:
            return f"must be a non-empty string, not {value!r}"
        if kind == "name" and not NAME_PATTERN.fullmatch(value):
            return (
                f"{value!r} cannot be a gymnasium id (letters, digits, '_', '-', '.', ':'; no '/' or spaces)"
            )
        if kind == "embedder":
            from forecast_dojo.corpus.embedders import check_embedder_name

            try:
                check_embedder_name(value)
            except ConfigError as err:
                return str(err)
        allowed = self.allowed()
        if allowed is not None and value not in allowed:
            return f"unknown {self.key} {value!r}; known: {list(allowed)}"
        return None


# Every key of a spec file, in one table: add a key here (and the DojoSpec field it sets).
SPEC_KEYS: tuple[SpecKey, ...] = (
    SpecKey("", "name", "name", "name", doc="the spec's name; gymnasium id forecast_dojo/<name>"),
    SpecKey("", "description", "str", None, doc="one line for people"),
    SpecKey("data", "world", "str", "world", ("synthetic",), doc="the embedded synthetic world"),
    SpecKey("data", "seed", "int", "seed", minimum=0, doc="the synthetic world's seed"),
    SpecKey(
        "data", "embedder", "embedder", "embedder", doc="embedder name (synthetic world, or the query side)"
    ),
    SpecKey(
        "data", "train_events", "int", "train_events", minimum=0, doc="synthetic: extra training-only events"
    ),
    SpecKey("data", "events", "path", "events", doc="events file (.jsonl or .parquet)"),
    SpecKey("data", "corpus", "path", "corpus", doc="corpus directory"),
    SpecKey("data", "event_ids", "str-list", "event_ids", doc="a subset of the events"),
    SpecKey("data", "split", "str", "split", SPLITS, doc="which part of the events the env holds"),
    SpecKey("env", "retriever", "str", "retriever", _retriever_kinds, doc="dense | bm25 | hybrid"),
    SpecKey("env", "memory", "str", "memory", _memory_modes, doc="none | notebook"),
    SpecKey("env", "reward", "str", "reward", _scoring_rules, doc="brier | log | spherical"),
    SpecKey("env", "tools", "str-list", "tools", TOOL_NAMES, doc="enabled tools (submit_forecast always)"),
    SpecKey(
        "env", "show_episode_length", "bool", "show_episode_length", doc="ablation: reveal the step count"
    ),
    SpecKey("env", "prompt", "str", "prompt", PROMPT_PROFILES, doc="prompt profile: default | compact"),
    SpecKey("retriever", "index", "str", "index", _index_kinds, doc="dense index kind"),
    SpecKey("retriever", "nprobe", "int", "nprobe", minimum=0, doc="IVF lists probed (0: calibrated)"),
    SpecKey(
        "retriever", "exact_below", "int", "exact_below", minimum=0, doc="exact scan under this many rows"
    ),
    SpecKey("retriever", "rerank", "int", "rerank", minimum=0, doc="candidates re-scored exactly"),
    SpecKey("retriever", "depth", "int", "depth", minimum=1, doc="hybrid: candidates per retriever"),
    SpecKey("retriever", "rrf_k", "int", "rrf_k", minimum=1, doc="hybrid: reciprocal-rank-fusion k"),
    SpecKey("retriever", "verify", "bool", "verify", doc="hash the index files when loading"),
    SpecKey("budgets", "max_tool_calls", "int", "max_tool_calls", minimum=0, doc="tool calls per step"),
    SpecKey("budgets", "max_turns", "int", "max_turns", minimum=1, doc="turns per step"),
    SpecKey(
        "budgets", "max_python_seconds", "seconds", "max_python_seconds", doc="python wall clock per step"
    ),
)
_KEYS = {(k.section, k.key): k for k in SPEC_KEYS}
# the DojoSpec fields the env takes as they are: the [env] section's (the retriever is built first) and the budgets
ENV_OPTIONS: tuple[str, ...] = (
    *(str(k.field) for k in SPEC_KEYS if k.section == "env" and k.key != "retriever"),
    "budgets",
)


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
        split: ``train``, ``eval`` or ``all``: the part of the events the env holds (None: ``make``'s default).
        retriever: ``dense``, ``bm25`` or ``hybrid``.
        retriever_options: Keyword options for ``make_retriever``.
        memory: ``none`` or ``notebook``.
        reward: ``brier``, ``log`` or ``spherical``.
        tools: The enabled tools (``submit_forecast`` always).
        budgets: Per-step budgets.
        show_episode_length: Ablation: show the number of steps to the agent.
        prompt: The prompt profile, ``default`` or ``compact`` (:data:`forecast_dojo.prompts.PROMPT_PROFILES`).
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
    split: str | None = None
    retriever: str = "dense"
    retriever_options: dict[str, Any] = field(default_factory=dict)
    memory: str = "none"
    reward: str = "brier"
    tools: tuple[str, ...] = TOOL_NAMES
    budgets: Budgets = field(default_factory=Budgets)
    show_episode_length: bool = False
    prompt: str = "default"
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
        except UnicodeDecodeError as err:
            raise SpecError(f"{path}: not UTF-8 text ({err})") from err
        tables: dict[str, dict[str, Any]] = {}
        values: dict[tuple[str, str], Any] = {}
        unknown_top = [k for k in raw if k not in SECTIONS and ("", k) not in _KEYS]
        if unknown_top:
            raise SpecError(f"{path}: unknown top-level keys {sorted(unknown_top)}; known: {_known('')}")
        for key, value in raw.items():
            if key in SECTIONS:
                if not isinstance(value, dict):
                    raise SpecError(f"{path}: {key} must be a table ([{key}]), not {value!r}")
                unknown = sorted(k for k in value if (key, k) not in _KEYS)
                if unknown:
                    raise SpecError(f"{path}: unknown keys in [{key}]: {unknown}; known: {_known(key)}")
                tables[key] = value
                values.update({(key, k): v for k, v in value.items()})
            else:
                values[("", key)] = value
        if ("", "name") not in values:
            raise SpecError(f"{path}: missing 'name'")
        for where, value in values.items():
            problem = _KEYS[where].problem(value)
            if problem is not None:
                raise SpecError(f"{path}: {_KEYS[where].where}: {problem}")

        def resolve(value: str) -> Path:
            expanded = Path(os.path.expanduser(os.path.expandvars(value)))
            return expanded if expanded.is_absolute() else (path.parent / expanded).resolve()

        fields_ = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {"source": path}
        for (section, _), value in values.items():
            spec_key = _KEYS[(section, _)]
            if section in ("retriever", "budgets") or spec_key.field is None:
                continue
            if spec_key.field not in fields_:
                raise SpecError(f"{path}: {spec_key.where} is not supported by this version of forecast_dojo")
            if spec_key.kind == "path":
                value = resolve(value)
            elif spec_key.kind == "str-list":
                value = tuple(value)
            kwargs[spec_key.field] = value
        kwargs["retriever_options"] = dict(tables.get("retriever", {}))
        try:
            kwargs["budgets"] = Budgets(
                **{str(_KEYS[("budgets", k)].field): v for k, v in tables.get("budgets", {}).items()}
            )
        except (TypeError, ValueError) as err:
            raise SpecError(f"{path}: [budgets]: {err}") from err
        spec = cls(**kwargs)
        spec.validate()
        return spec

    def validate(self) -> None:
        """Check every value against :data:`SPEC_KEYS` and that the data sources are consistent.

        Also run by :func:`make` after its overrides, so ``make(spec, memory="x")`` fails the same way.

        Raises:
            SpecError: A value of the wrong type or not allowed (naming the spec and the key), an
                unknown world, neither/both of a world and events + corpus, tools without
                ``submit_forecast``, dense-index options for the bm25 retriever.
        """
        where = str(self.source or self.name)
        own = {f.name for f in dataclasses.fields(self)}
        for spec_key in SPEC_KEYS:
            if spec_key.section in ("retriever", "budgets") or spec_key.field not in own:
                continue
            value = getattr(self, spec_key.field)
            if value is None or (spec_key.kind == "path" and isinstance(value, Path)):
                continue
            problem = spec_key.problem(value)
            if problem is not None:
                raise SpecError(f"{where}: {spec_key.where}: {problem}")
        if not isinstance(self.retriever_options, dict):
            raise SpecError(f"{where}: [retriever] must be a table, not {self.retriever_options!r}")
        for option, value in self.retriever_options.items():
            option_key = _KEYS.get(("retriever", option))
            if option_key is None:
                raise SpecError(
                    f"{where}: unknown keys in [retriever]: {[option]}; known: {_known('retriever')}"
                )
            problem = option_key.problem(value)
            if problem is not None:
                raise SpecError(f"{where}: {option_key.where}: {problem}")
        if self.retriever == "bm25" and set(self.retriever_options) - {"verify"}:
            options = sorted(set(self.retriever_options) - {"verify"})
            raise SpecError(
                f"{where}: [retriever] {options}: the bm25 retriever takes no dense-index options"
            )
        if not isinstance(self.budgets, Budgets):
            raise SpecError(f"{where}: budgets must be a Budgets, not {self.budgets!r}")
        for spec_key in SPEC_KEYS:
            if (
                spec_key.section == "budgets"
                and spec_key.field is not None
                and hasattr(self.budgets, spec_key.field)
            ):
                problem = spec_key.problem(getattr(self.budgets, spec_key.field))
                if problem is not None:
                    raise SpecError(f"{where}: {spec_key.where}: {problem}")
        if "submit_forecast" not in self.tools:
            raise SpecError(f"{where}: [env] tools: must include 'submit_forecast', got {list(self.tools)}")
        if self.world is None and (self.events is None or self.corpus is None):
            raise SpecError(f"{where}: give either world = 'synthetic' or both events and corpus")
        if self.world is not None and (self.events is not None or self.corpus is not None):
            raise SpecError(f"{where}: a synthetic world brings its own events and corpus")
        train = self.train_events
        if isinstance(train, bool) or not isinstance(train, int) or train < 0:
            raise SpecError(f"{where}: train_events must be a non-negative integer, got {train!r}")
        if train and self.world is None:
            raise SpecError(f"{where}: train_events needs world = 'synthetic'")


def _known(section: str) -> list[str]:
    keys = [k.key for k in SPEC_KEYS if k.section == section]
    return keys + list(SECTIONS) if section == "" else keys


def builtin_specs_folder() -> Path:
    """Where the shipped specs are.

    ``forecast_dojo/envs/`` in a wheel; ``envs/`` beside the package (the repository's top-level
    ``envs/``) in a source checkout or an editable install.
    """
    packaged = resources.files("forecast_dojo") / "envs"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "envs"


def builtin_spec_paths() -> list[Path]:
    """The shipped spec files (:func:`builtin_specs_folder`), sorted."""
    folder = builtin_specs_folder()
    return sorted(folder.glob("*.toml")) if folder.is_dir() else []


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


def _events(path: Path) -> list[Event]:
    """The events of an events file (:func:`forecast_dojo.schema.load_events`), parsed once per version of the file."""
    from forecast_dojo.schema import load_events

    key = str(Path(path).resolve())
    try:
        stat = os.stat(key)
    except OSError:
        return load_events(path)  # its own clear error
    identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    cached = _events_files.get(key)
    if cached is None or cached[0] != identity:
        cached = (identity, load_events(path))
        _events_files[key] = cached
    return list(cached[1])


def _data_paths(spec: DojoSpec) -> tuple[Path, Path]:
    """The events file and corpus directory of a spec; the synthetic world is built (or found cached) first.

    Raises:
        SpecError: The spec's events file or corpus does not exist; the message says which command builds it.
    """
    if spec.world == "synthetic":
        from forecast_dojo.synthetic import ensure_synthetic_world

        paths = ensure_synthetic_world(
            spec.seed, embedder=spec.embedder or "minilm", train_events=spec.train_events
        )
        return paths.events_path, paths.corpus_dir
    assert spec.events is not None and spec.corpus is not None
    where = str(spec.source or spec.name)
    # make(events=..., corpus=...) may pass plain strings.
    spec = dataclasses.replace(spec, events=Path(spec.events), corpus=Path(spec.corpus))
    assert spec.events is not None and spec.corpus is not None
    if not spec.corpus.is_dir():
        raise SpecError(
            f"{where}: corpus {spec.corpus} is not built; build it with "
            f"'forecast-dojo corpus build --source ... --input ... --out {spec.corpus}' (README, 'Real data')"
        )
    if not spec.events.is_file():
        raise SpecError(
            f"{where}: events file {spec.events} is not built; build it with "
            f"'forecast-dojo events build ... --corpus {spec.corpus} --out {spec.events.parent}' (README, 'Real data')"
        )
    return spec.events, spec.corpus


def spec_event_ids(spec: DojoSpec | str | os.PathLike[str], *, default_split: str = "train") -> list[str]:
    """The ids of the events a spec's env holds, read from its events file alone (no corpus, no embedder).

    Args:
        spec: A :class:`DojoSpec`, a spec file, a spec name or a gymnasium id.
        default_split: The split when the spec names none (as :func:`make`'s).

    Returns:
        The event ids of the spec's split in file order (the spec's ``event_ids`` subset when it has one).

    Raises:
        SpecError: The events or corpus are not built, or ``event_ids`` names events the split lacks.
        SplitError: ``train``/``eval`` of events that carry no split.
    """
    resolved = resolve_spec(spec)
    resolved.validate()
    events_path, _ = _data_paths(resolved)
    return [e.id for e in _split_events(resolved, events_path, default_split)[0]]


def _split_events(spec: DojoSpec, events_path: Path, default_split: str) -> tuple[list[Any], str]:
    """The events of the spec's split (then its ``event_ids`` subset), and the split's name."""
    from forecast_dojo.events.split import select_split

    events, split = select_split(
        _events(events_path),
        spec.split,
        synthetic=spec.world == "synthetic",
        events_path=events_path,
        default=default_split,
    )
    if spec.event_ids is None:
        return events, split
    wanted = set(spec.event_ids)
    missing = wanted - {e.id for e in events}
    if missing:
        raise SpecError(
            f"{spec.name}: event ids not in the {split} split of {events_path}: {sorted(missing)[:5]}"
        )
    return [e for e in events if e.id in wanted], split


def _spec_data(spec: DojoSpec, default_split: str) -> tuple[list[Event], Corpus, Retriever, dict[str, Any]]:
    """What an env built from a validated spec runs over: its split's events, the corpus, the retriever.

    Both :func:`make` and :func:`forecast_dojo.world.registration.make_world` build from here.

    Returns:
        The events, the corpus, the retriever and the run metadata's ``env_spec`` (name, world, seed,
        ``train_events`` when set, the data paths, the retriever and the split).
    """
    from forecast_dojo.corpus.retrieval import make_retriever

    events_path, corpus_path = _data_paths(spec)
    events, split = _split_events(spec, events_path, default_split)
    corpus = _corpus(corpus_path)
    embedder = _embedder(spec.embedder or corpus.embedder_name)
    retriever = make_retriever(spec.retriever, corpus, embedder, **spec.retriever_options)
    env_spec = {
        "name": spec.name,
        "world": spec.world,
        "seed": spec.seed,
        **({"train_events": spec.train_events} if spec.train_events else {}),
        "events": str(events_path),
        "corpus": str(corpus_path),
        "retriever": spec.retriever,
        "split": split,
    }
    return events, corpus, retriever, env_spec


def make(
    spec: DojoSpec | str | os.PathLike[str], *, default_split: str = "train", **overrides: Any
) -> ForecastDojoEnv:
    """Build the env a spec describes.

    Args:
        spec: A :class:`DojoSpec`, a spec file, a spec name (``"Synthetic-v0"``) or a gymnasium id.
        default_split: The split when neither ``split`` nor the spec names one (``forecast-dojo run``
            passes ``eval``).
        **overrides: Spec fields (``split``, ``memory``, ``reward``, ``retriever``, ``seed``,
            ``embedder``, ``budgets``, ``tools``, ``show_episode_length``, ``prompt``...), the budget fields
            ``max_tool_calls``, ``max_turns`` and ``max_python_seconds``, or env constructor arguments
            (``log_dir``, ``python_runner``, ``render_mode``, ``run_metadata``).

    Returns:
        The environment (unwrapped; ``gymnasium.make`` adds its usual wrappers) over the events of
        its split (:func:`forecast_dojo.events.split.select_split`).

    Raises:
        SpecError: A bad override, data that is not built, event ids the spec names that its split lacks.
        SplitError: ``train``/``eval`` of events that carry no split.
    """
    from forecast_dojo.env import ForecastDojoEnv

    resolved = resolve_spec(spec)
    spec_fields = {f.name for f in dataclasses.fields(DojoSpec)}
    budget_keys = ("max_tool_calls", "max_turns", "max_python_seconds")
    budget_overrides = {k: overrides.pop(k) for k in budget_keys if k in overrides}
    resolved = dataclasses.replace(
        resolved, **{k: overrides.pop(k) for k in list(overrides) if k in spec_fields}
    )
    if budget_overrides:
        resolved = dataclasses.replace(
            resolved, budgets=dataclasses.replace(resolved.budgets, **budget_overrides)
        )
    resolved.validate()
    events, corpus, retriever, env_spec = _spec_data(resolved, default_split)
    metadata = {"env_spec": env_spec, **overrides.pop("run_metadata", {})}
    options = {name: getattr(resolved, name) for name in ENV_OPTIONS} | overrides
    return ForecastDojoEnv(
        events, corpus, retriever, split=env_spec["split"], run_metadata=metadata, **options
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
        problem = _KEYS[("", "name")].problem(name)
        if problem is not None:
            raise SpecError(f"{path}: name: {problem}")
        env_id, target = f"{ENV_NAMESPACE}/{name}", str(path)
    if env_id in gym.registry and not force:
        return env_id
    if env_id in gym.registry:
        del gym.registry[env_id]
    gym.register(env_id, entry_point="forecast_dojo.registration:make", kwargs={"spec": target})
    return env_id


def register_specs() -> list[str]:
    """Register every shipped spec and every spec in ``$FORECAST_DOJO_ENVS`` (first name wins).

    A spec file that does not pass :meth:`DojoSpec.from_toml` is skipped with a warning naming it
    (so one bad file in ``$FORECAST_DOJO_ENVS`` cannot break ``import forecast_dojo``).

    Returns:
        The gymnasium ids, in registration order.
    """
    ids = []
    for path in _spec_paths():
        try:
            DojoSpec.from_toml(path)
            ids.append(register(path))
        except (SpecError, OSError) as err:
            warnings.warn(f"forecast_dojo: skipping spec file {path}: {err}", stacklevel=2)
    return ids
