"""The build-once cache: contents, reuse, atomicity under failure, and one build across processes."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

import forecast_dojo.synthetic.cache as cache
from forecast_dojo.corpus.store import CORPUS_FORMAT_VERSION, Corpus
from forecast_dojo.schema import event_to_record, load_events
from forecast_dojo.synthetic import (
    GENERATOR_VERSION,
    SyntheticPaths,
    ensure_synthetic_world,
    generate_world,
    load_oracle,
    oracle_table,
)

EMBEDDER = "hashing"


def test_builds_events_corpus_and_oracle(tmp_path: Path) -> None:
    paths = ensure_synthetic_world(3, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    assert (
        paths.root == tmp_path / f"synthetic-v{GENERATOR_VERSION}-c{CORPUS_FORMAT_VERSION}-seed3-{EMBEDDER}"
    )
    assert paths.is_complete()
    world = generate_world(3)
    assert [event_to_record(e) for e in load_events(paths.events_path)] == [
        event_to_record(e) for e in world.events
    ]
    corpus = Corpus.load(paths.corpus_dir, expect_embedder="hashing-bow-256")
    assert len(corpus) == len(world.documents)
    assert set(corpus.table.column("id").to_pylist()) == {d.id for d in world.documents}
    assert load_oracle(paths.oracle_path) == {
        (r["event_id"], r["step"]): tuple(r["probabilities"]) for r in oracle_table(world)
    }
    meta = json.loads(paths.meta_path.read_text())
    assert meta["generator_version"] == GENERATOR_VERSION and meta["seed"] == 3
    assert meta["n_documents"] == len(world.documents) and meta["embedder"] == "hashing-bow-256"
    assert meta["resolution_docs"] == world.resolution_docs
    assert not [p for p in tmp_path.iterdir() if ".building-" in p.name]  # no staging left behind


def test_second_call_reuses_the_cache_without_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ensure_synthetic_world(0, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    stamp = first.events_path.stat().st_mtime_ns

    def must_not_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("rebuilt a cached world")

    monkeypatch.setattr(cache, "_build_world_dir", must_not_build)
    started = time.perf_counter()
    second = ensure_synthetic_world(0, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    assert time.perf_counter() - started < 0.5
    assert second == first and first.events_path.stat().st_mtime_ns == stamp


def test_cache_dir_comes_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV_VAR, str(tmp_path / "from-env"))
    assert cache.default_cache_dir() == tmp_path / "from-env"
    paths = ensure_synthetic_world(1, embedder=EMBEDDER, progress=False)
    assert paths.root.parent == tmp_path / "from-env"
    monkeypatch.delenv(cache.CACHE_ENV_VAR)
    assert cache.default_cache_dir() == Path.home() / ".cache" / "forecast_dojo"


def test_directory_names_separate_version_seed_and_embedder() -> None:
    names = {
        cache.world_dir_name(s, e) for s in (0, 1) for e in ("minilm", "hashing", "all-MiniLM-L6-v2@128")
    }
    assert len(names) == 6
    assert all(
        name.startswith(f"synthetic-v{GENERATOR_VERSION}-c{CORPUS_FORMAT_VERSION}-seed") for name in names
    )
    assert "/" not in cache.world_dir_name(0, "a/b")


def test_failed_build_leaves_nothing_half_built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_build = cache._build_world_dir

    def crash_after_writing(
        staging: Path, seed: int, embedder: str, progress: bool, train_events: int
    ) -> None:
        real_build(staging, seed, embedder, progress, train_events)
        raise RuntimeError("disk full")

    monkeypatch.setattr(cache, "_build_world_dir", crash_after_writing)
    with pytest.raises(RuntimeError, match="disk full"):
        ensure_synthetic_world(2, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    assert not [p for p in tmp_path.iterdir() if not p.name.endswith(".lock")]
    with pytest.raises(ValueError, match="unknown embedder"):
        ensure_synthetic_world(2, embedder="no-such-model", cache_dir=tmp_path, progress=False)
    assert not [p for p in tmp_path.iterdir() if not p.name.endswith(".lock")]


def test_incomplete_world_is_rebuilt_whole(tmp_path: Path) -> None:
    paths = ensure_synthetic_world(4, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    expected = paths.oracle_path.read_bytes()
    paths.oracle_path.unlink()
    (paths.root / "stray-file").write_text("left by hand")
    again = ensure_synthetic_world(4, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    assert again.oracle_path.read_bytes() == expected
    assert not (again.root / "stray-file").exists()


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="seed"):
        ensure_synthetic_world(-1, embedder=EMBEDDER, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="embedder"):
        ensure_synthetic_world(0, embedder=" ", cache_dir=tmp_path)


def _worker(cache_dir: str, log: str, out: str) -> None:
    """Child process: count real builds in ``log`` (slowed down so the workers overlap) and report."""
    real_build = cache._build_world_dir

    def counted(staging: Path, seed: int, embedder: str, progress: bool, train_events: int) -> None:
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        real_build(staging, seed, embedder, progress, train_events)

    cache._build_world_dir = counted
    paths = ensure_synthetic_world(6, embedder=EMBEDDER, cache_dir=Path(cache_dir), progress=False)
    Path(out).write_text(json.dumps([str(paths.root), paths.is_complete()]))


def test_parallel_processes_build_once_and_agree(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    log = tmp_path / "builds.log"
    workers = [
        context.Process(
            target=_worker, args=(str(tmp_path / "cache"), str(log), str(tmp_path / f"out-{i}.json"))
        )
        for i in range(3)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    assert len(log.read_text().splitlines()) == 1
    results = {tuple(json.loads((tmp_path / f"out-{i}.json").read_text())) for i in range(3)}
    expected = SyntheticPaths.at(tmp_path / "cache" / cache.world_dir_name(6, EMBEDDER))
    assert results == {(str(expected.root), True)}


def test_no_embedder_means_minilm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    requested: list[str] = []

    def record_and_fake(staging: Path, seed: int, embedder: str, progress: bool, train_events: int) -> None:
        requested.append(embedder)
        paths = SyntheticPaths.at(staging)
        for file in (
            paths.meta_path,
            paths.events_path,
            paths.oracle_path,
            paths.corpus_dir / "manifest.json",
        ):
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text("{}")

    monkeypatch.setattr(cache, "_build_world_dir", record_and_fake)
    paths = ensure_synthetic_world(0, embedder=None, cache_dir=tmp_path, progress=False)
    assert requested == ["minilm"] and paths.root.name == cache.world_dir_name(0, "minilm")


def test_interrupted_build_resumes_its_embeddings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from forecast_dojo.corpus.embedders import HashingEmbedder

    encoded: list[int] = []

    class Interrupted(HashingEmbedder):
        def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False):  # type: ignore[override]
            if len(encoded) == 3:
                raise KeyboardInterrupt
            encoded.append(len(texts))
            return super().encode(texts, batch_size=batch_size, progress=progress)

    monkeypatch.setattr(cache, "get_embedder", lambda name: Interrupted())
    with pytest.raises(KeyboardInterrupt):
        ensure_synthetic_world(7, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    staging = tmp_path / f".{cache.world_dir_name(7, EMBEDDER)}.building-partial"
    assert staging.is_dir() and sum(encoded) == 3 * 256  # three committed calls of 256 documents
    monkeypatch.setattr(cache, "get_embedder", lambda name: _Counting(encoded))
    encoded.clear()
    paths = ensure_synthetic_world(7, embedder=EMBEDDER, cache_dir=tmp_path, progress=False)
    world = generate_world(7)
    assert paths.is_complete() and not staging.exists()
    assert sum(encoded) == len(world.documents) - 3 * 256  # only the rest was embedded
    fresh = ensure_synthetic_world(7, embedder=EMBEDDER, cache_dir=tmp_path / "fresh", progress=False)
    resumed = Corpus.load(paths.corpus_dir)
    assert resumed.content_hash == Corpus.load(fresh.corpus_dir).content_hash


class _Counting:
    """The hashing embedder, counting the texts it embeds into ``counts``."""

    def __init__(self, counts: list[int]) -> None:
        from forecast_dojo.corpus.embedders import HashingEmbedder

        self.inner, self.counts = HashingEmbedder(), counts
        self.name, self.dim = self.inner.name, self.inner.dim

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False):  # type: ignore[no-untyped-def]
        self.counts.append(len(texts))
        return self.inner.encode(texts, batch_size=batch_size, progress=progress)
