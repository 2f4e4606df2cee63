"""The training world: extra training-only events leave the base world (and its held-out half) byte-identical."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forecast_dojo.corpus.store import Corpus
from forecast_dojo.schema import event_to_record
from forecast_dojo.synthetic import (
    TRAIN_EVENT_PREFIX,
    SyntheticWorld,
    WorldConfigError,
    ensure_synthetic_world,
    generate_world,
    oracle_table,
    train_event_id,
)
from forecast_dojo.synthetic.split import split_event_ids, synthetic_split

N_TRAIN = 45  # one full block of 40 and a partial block of 5


def _is_train_only(event_id: str) -> bool:
    return event_id.startswith(TRAIN_EVENT_PREFIX)


@pytest.fixture(scope="module")
def base() -> SyntheticWorld:
    return generate_world(0)


@pytest.fixture(scope="module")
def extended() -> SyntheticWorld:
    return generate_world(0, train_events=N_TRAIN)


def test_base_world_is_unchanged_by_training_events(base: SyntheticWorld, extended: SyntheticWorld) -> None:
    n_base = len(base.events)
    assert [event_to_record(e) for e in extended.events[:n_base]] == [event_to_record(e) for e in base.events]
    assert extended.documents[: len(base.documents)] == base.documents  # ids, texts, dates, urls
    for event in base.events:  # the hidden facts behind the oracle, and the markets
        assert extended.evidence[event.id] == base.evidence[event.id]
        assert extended.prior[event.id] == base.prior[event.id]
        assert extended.resolution_docs[event.id] == base.resolution_docs[event.id]
        assert extended.event(event.id).market == event.market
    assert {k: v for k, v in extended.doc_kinds.items() if k in base.doc_kinds} == base.doc_kinds
    base_rows = oracle_table(base)
    assert [r for r in oracle_table(extended) if not _is_train_only(r["event_id"])] == base_rows
    assert json.dumps(base_rows)  # the oracle of every base step is there, identical
    assert base.config["train_events"] == 0 and extended.config["train_events"] == N_TRAIN


def test_training_events_ids_sizes_and_determinism(base: SyntheticWorld, extended: SyntheticWorld) -> None:
    extra = extended.events[len(base.events) :]
    assert [e.id for e in extra] == [train_event_id(i) for i in range(N_TRAIN)]
    assert train_event_id(7) == "syn-t00007"
    extra_docs = extended.documents[len(base.documents) :]
    assert all(d.id.startswith("syn0-t") for d in extra_docs)
    assert len({d.id for d in extended.documents}) == len(extended.documents)
    assert len({d.url for d in extended.documents}) == len(extended.documents)
    # about 50 documents per event, like the base world (evidence, distractors, resolutions, noise)
    assert 40 * N_TRAIN <= len(extra_docs) <= 65 * N_TRAIN
    kinds = {extended.doc_kinds[d.id] for d in extra_docs}
    assert kinds == {"evidence", "distractor", "background", "resolution"}
    again = generate_world(0, train_events=N_TRAIN)
    assert [event_to_record(e) for e in again.events] == [event_to_record(e) for e in extended.events]
    assert again.documents == extended.documents and again.evidence == extended.evidence
    # full blocks do not depend on how many training events follow them
    shorter = generate_world(0, train_events=40)
    assert [event_to_record(e) for e in shorter.events] == [event_to_record(e) for e in extended.events[:80]]


def test_training_events_follow_the_same_model(base: SyntheticWorld, extended: SyntheticWorld) -> None:
    extra = extended.events[len(base.events) :]
    for event in extra:
        evidence = extended.evidence[event.id]
        assert 8 <= len(evidence) <= 16
        assert extended.prior[event.id] == tuple(1 / len(event.outcomes) for _ in event.outcomes)
        assert event.outcome in event.outcomes and 3 <= len(event.cutoffs) <= 8
        assert extended.resolution_docs[event.id]
        assert all(ev.available_at < event.resolved_at for ev in evidence)
    n_multi = sum(len(e.outcomes) > 2 for e in extra[:40])
    assert n_multi == 16  # the base share (0.4) of a full block
    assert {k for e in extra for k in (e.extra["kind"],)} <= {e.extra["kind"] for e in extended.events}


def test_training_documents_are_invisible_to_every_base_episode(
    base: SyntheticWorld, extended: SyntheticWorld
) -> None:
    last_base_instant = max(
        [c for e in base.events for c in e.cutoffs] + [d.available_at for d in base.documents]
    )
    extra_docs = extended.documents[len(base.documents) :]
    assert min(d.available_at for d in extra_docs) > last_base_instant
    # own geography and outlets: training blocks talk about their own fictional places and sources
    base_outlets = {d.source for d in base.documents}
    assert not base_outlets & {d.source for d in extra_docs}


def test_split_puts_every_training_event_in_train(base: SyntheticWorld, extended: SyntheticWorld) -> None:
    plain = split_event_ids(e.id for e in base.events)
    split = split_event_ids(e.id for e in extended.events)
    assert split.held_out == plain.held_out and len(split.held_out) == 20
    assert set(split.train) == set(plain.train) | {train_event_id(i) for i in range(N_TRAIN)}
    assert synthetic_split(0, train_events=N_TRAIN) == split
    assert synthetic_split(0) == plain


def test_bad_train_events_are_refused() -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(WorldConfigError, match="train_events"):
            generate_world(0, train_events=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="train_events"):
        ensure_synthetic_world(0, embedder="hashing", train_events=-3, progress=False)


@pytest.fixture(scope="module")
def caches(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cache = tmp_path_factory.mktemp("train-world-cache")
    plain = ensure_synthetic_world(0, embedder="hashing", cache_dir=cache, progress=False)
    extended = ensure_synthetic_world(0, embedder="hashing", cache_dir=cache, progress=False, train_events=5)
    return plain.root, extended.root


def test_cached_training_world_keeps_base_files_byte_identical(caches: tuple[Path, Path]) -> None:
    plain, extended = caches
    assert extended.name.endswith("-seed0-train5-hashing") and plain.name.endswith("-seed0-hashing")
    for name, key in (("events.jsonl", "id"), ("oracle.jsonl", "event_id")):
        old = (plain / name).read_bytes().splitlines()
        new = (extended / name).read_bytes().splitlines()
        assert [line for line in new if not _is_train_only(json.loads(line)[key])] == old
        assert len(new) > len(old)
    old_corpus, new_corpus = Corpus.load(plain / "corpus"), Corpus.load(extended / "corpus")
    columns = ("id", "title", "text", "available_at")
    old_rows = old_corpus.table.select(list(columns)).to_pylist()
    assert new_corpus.table.select(list(columns)).to_pylist()[: len(old_rows)] == old_rows
    meta = json.loads((extended / "world.json").read_text())
    assert meta["train_events"] == 5 and meta["n_events"] == 45


@pytest.mark.parametrize("retriever", ["dense", "bm25"])
def test_held_out_episodes_are_identical_in_the_training_world(
    caches: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, retriever: str
) -> None:
    """Every held-out step: the same prompt and the same search results, document for document."""
    from forecast_dojo.registration import make

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(caches[0].parent))
    envs = [
        make(
            "Synthetic-v0",
            embedder="hashing",
            retriever=retriever,
            python_runner=None,
            train_events=n,
            split="all",
        )
        for n in (0, 5)
    ]
    assert len(envs[1].events) == len(envs[0].events) + 5
    held_out = synthetic_split(0).held_out
    for event_id in held_out:
        observations: list[list[str]] = []
        for env in envs:
            seen = []
            obs, info = env.reset(event_id)
            for _ in range(info["n_steps"]):
                seen += [m["content"] for m in obs["messages"]]
                event = env.event
                assert event is not None
                query = f"{event.question} {' '.join(event.outcomes)}"
                obs, *_ = env.step(_call("search", query=query, top_k=10))
                seen.append(obs["messages"][-1]["content"])
                uniform = [1 / len(event.outcomes)] * len(event.outcomes)
                obs, _, terminated, _, _ = env.step(_call("submit_forecast", probabilities=uniform))
                if terminated:
                    break
            observations.append(seen)
        assert observations[0] == observations[1], event_id


def _call(name: str, **arguments: object) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def test_world_command_builds_the_training_world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from forecast_dojo.cli import main

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(tmp_path))
    assert main(["world", "--embedder", "hashing", "--train-events", "2"]) == 0
    paths = json.loads(capsys.readouterr().out)
    assert Path(paths["root"]).name.endswith("-seed0-train2-hashing")
    lines = Path(paths["events_path"]).read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines[-2:]] == ["syn-t00000", "syn-t00001"]
    with pytest.raises(SystemExit):
        main(["world", "--embedder", "hashing", "--train-events", "-1"])
    assert "--train-events" in capsys.readouterr().err


def test_export_finds_the_oracle_of_training_events(extended: SyntheticWorld) -> None:
    from forecast_dojo.training.export import oracle_forecasts

    oracle = oracle_forecasts({"env_spec": {"world": "synthetic", "seed": 0, "train_events": N_TRAIN}})
    assert oracle is not None
    expected = {(r["event_id"], r["step"]): tuple(r["probabilities"]) for r in oracle_table(extended)}
    assert oracle == expected and (train_event_id(N_TRAIN - 1), 0) in oracle
    plain = oracle_forecasts({"env_spec": {"world": "synthetic", "seed": 0}})
    assert plain is not None and {k: oracle[k] for k in plain} == plain


def test_training_episodes_never_read_a_base_resolution_report(
    extended: SyntheticWorld, caches: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Training events run after the base world resolved: its outcome reports are hidden from them."""
    from forecast_dojo.registration import make

    base_ids = [e.id for e in extended.events if not _is_train_only(e.id)]
    reports = {doc for event_id in base_ids for doc in extended.resolution_docs[event_id]}
    assert len(reports) >= len(base_ids)
    for event in extended.events:
        assert (reports <= set(event.excluded_doc_ids)) is _is_train_only(event.id)
    # adversarially: a training episode searches for the reports by their own titles and reads their ids
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(caches[0].parent))
    env = make(
        "Synthetic-v0", embedder="hashing", retriever="bm25", python_runner=None, train_events=5, split="all"
    )
    titles = {d.id: d.title for d in extended.documents if d.id in reports}
    env.reset(train_event_id(0))
    seen = []
    for doc_id, title in sorted(titles.items())[:12]:
        obs, *_ = env.step(_call("search", query=title, top_k=10))
        seen.append(obs["messages"][-1]["content"])
        obs, *_ = env.step(_call("read", doc_id=doc_id))
        seen.append(obs["messages"][-1]["content"])
    text = "\n".join(seen)
    assert not any(title in text for title in titles.values())
    assert not any(doc_id in text for doc_id in titles)
