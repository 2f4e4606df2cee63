"""Build the synthetic world once per (generator version, seed, embedder) and reuse it from disk.

Layout of one cached world::

    <cache>/synthetic-v<GENERATOR_VERSION>-c<CORPUS_FORMAT_VERSION>-seed<seed>[-train<N>]-<embedder>/
      events.jsonl      the events (``schema.save_events``), markets included
      oracle.jsonl      the Bayes-optimal forecast per (event, step) (``oracle.save_oracle``)
      corpus/           the embedded corpus (``corpus.build_corpus``)
      world.json        what was built: seed, versions, counts, resolution document ids

``-train<N>`` names a world with ``N`` extra training events (``generate_world(train_events=N)``);
the default world (``N = 0``) keeps its name. Embedding dominates a build: MiniLM embeds about 16-50
short documents per second on 2 cores and a training block of 40 events has ~2,100 documents, so
``N = 400`` (~23,000 documents) takes minutes, once; tests use the instant ``hashing`` embedder.

A world is built in a hidden staging directory and renamed into place in one step, under an
exclusive ``fcntl.flock``, so parallel workers (AsyncVectorEnv, pytest-xdist) neither see half a
world nor build it twice. The generator version is part of the directory name: a changed generator
never reuses a stale cache,
and neither does a changed corpus format (an older format would load whole into memory).

An interrupted build resumes: the staging directory ``.<name>.building-partial`` survives a kill or
Ctrl-C, and the next build of the same world keeps the embeddings already committed (every 256
documents, ``corpus.build_corpus``) and embeds only the rest. A build that fails with an error
removes its staging directory.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tqdm.auto import tqdm

from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.corpus.embedders import get_embedder
from forecast_dojo.corpus.store import CORPUS_FORMAT_VERSION, build_corpus
from forecast_dojo.errors import ConfigError
from forecast_dojo.schema import save_events
from forecast_dojo.synthetic.oracle import oracle_table, save_oracle
from forecast_dojo.synthetic.world import GENERATOR_VERSION, generate_world

CACHE_ENV_VAR = "FORECAST_DOJO_CACHE"
WORLD_META = "world.json"


def default_cache_dir() -> Path:
    """``$FORECAST_DOJO_CACHE`` if set, else ``~/.cache/forecast_dojo``."""
    configured = os.environ.get(CACHE_ENV_VAR)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "forecast_dojo"


def world_dir_name(seed: int, embedder: str, train_events: int = 0) -> str:
    """The cache subdirectory of one world: versions, seed, number of extra training events, (safe) embedder."""
    safe = re.sub(r"[^A-Za-z0-9_.@-]+", "_", embedder)
    train = f"-train{train_events}" if train_events else ""
    return f"synthetic-v{GENERATOR_VERSION}-c{CORPUS_FORMAT_VERSION}-seed{seed}{train}-{safe}"


@dataclass(frozen=True)
class SyntheticPaths:
    """Where the files of one cached synthetic world live."""

    root: Path
    events_path: Path
    corpus_dir: Path
    oracle_path: Path

    @classmethod
    def at(cls, root: Path) -> SyntheticPaths:
        """The standard file layout of a world cached in the folder ``root``."""
        return cls(
            root=root,
            events_path=root / "events.jsonl",
            corpus_dir=root / "corpus",
            oracle_path=root / "oracle.jsonl",
        )

    @property
    def meta_path(self) -> Path:
        """``world.json``: generator version, seed, embedder, counts, content hash and config of the world."""
        return self.root / WORLD_META

    def is_complete(self) -> bool:
        """Every file a finished build leaves behind is present (the corpus seals itself with a manifest)."""
        return all(
            p.is_file()
            for p in (self.meta_path, self.events_path, self.oracle_path, self.corpus_dir / "manifest.json")
        )


@contextmanager
def _exclusive_lock(lock_path: Path, *, announce: bool) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``lock_path`` (released when the process dies, too)."""
    with lock_path.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if announce:
                print(
                    f"waiting for another process to finish building {lock_path.stem.lstrip('.')} ...",
                    file=sys.stderr,
                )
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _build_world_dir(staging: Path, seed: int, embedder: str, progress: bool, train_events: int) -> None:
    """Generate, score and embed the world of ``seed`` into ``staging`` (not yet visible to anyone)."""
    label = f"seed={seed}" + (f" train_events={train_events}" if train_events else "")
    stages = tqdm(total=4, desc=f"synthetic world {label}", unit="stage", disable=not progress)
    stages.set_postfix_str("generating")
    world = generate_world(seed, train_events=train_events, progress=progress)
    stages.update()
    stages.set_postfix_str("events")
    paths = SyntheticPaths.at(staging)
    save_events(world.events, paths.events_path)
    stages.update()
    stages.set_postfix_str("oracle")
    save_oracle(oracle_table(world), paths.oracle_path)
    stages.update()
    stages.set_postfix_str("embedding")
    model = get_embedder(embedder)
    corpus = build_corpus(
        world.documents,
        paths.corpus_dir,
        model,
        overwrite=True,  # a corpus sealed by a build killed just before world.json: sealed again
        build_config={
            "synthetic": {"seed": seed, "generator_version": GENERATOR_VERSION}
            | ({"train_events": train_events} if train_events else {})
        },
        progress=progress,
    )
    stages.update()
    stages.close()
    meta = {
        "generator_version": GENERATOR_VERSION,
        "seed": seed,
        "train_events": train_events,
        "embedder_requested": embedder,
        "embedder": corpus.embedder_name,
        "n_events": len(world.events),
        "n_documents": len(world.documents),
        "n_evidence": sum(len(items) for items in world.evidence.values()),
        "content_hash": corpus.content_hash,
        "config": world.config,
        "resolution_docs": world.resolution_docs,
    }
    write_json_atomic(paths.meta_path, meta, sort_keys=True)


def ensure_synthetic_world(
    seed: int = 0,
    *,
    embedder: str | None = "minilm",
    cache_dir: Path | None = None,
    progress: bool = True,
    train_events: int = 0,
) -> SyntheticPaths:
    """The cached world of ``seed`` embedded with ``embedder``, built first if it is not on disk yet.

    A finished world is returned at once (no lock, no loading). ``embedder`` is any name
    ``get_embedder`` accepts (None means ``"minilm"``); it names the cache directory as given, so
    aliases get separate caches. ``train_events`` adds that many training-only events to the world
    (see :func:`generate_world`; the base world's events, documents and oracle stay byte-identical).
    """
    embedder = "minilm" if embedder is None else embedder
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if isinstance(train_events, bool) or not isinstance(train_events, int) or train_events < 0:
        raise ConfigError(f"train_events must be a non-negative integer, got {train_events!r}")
    if not isinstance(embedder, str) or not embedder.strip():
        raise ConfigError(f"embedder must be a non-empty embedder name, got {embedder!r}")
    base = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    name = world_dir_name(seed, embedder, train_events)
    paths = SyntheticPaths.at(base / name)
    if paths.is_complete():
        return paths
    base.mkdir(parents=True, exist_ok=True)
    with _exclusive_lock(base / f".{name}.lock", announce=progress):
        if paths.is_complete():  # another process built it while we waited
            return paths
        staging = base / f".{name}.building-partial"
        for leftover in base.glob(f".{name}.building-*"):  # from a failed build; we hold the lock
            if leftover != staging:
                shutil.rmtree(leftover, ignore_errors=True)
        if staging.is_dir() and progress:
            print(f"resuming the interrupted build of {name} ...", file=sys.stderr)
        staging.mkdir(exist_ok=True)
        try:
            _build_world_dir(staging, seed, embedder, progress, train_events)
            if paths.root.exists():  # an incomplete world (files removed by hand): replace it whole
                stale = base / f".{name}.building-stale"
                paths.root.rename(stale)
                shutil.rmtree(stale)
            staging.rename(paths.root)
        except KeyboardInterrupt:  # keep what is embedded: the next build resumes it
            raise
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
    return paths
