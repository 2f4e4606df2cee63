"""The synthetic world generator: determinism, structure, timing rules and the signal model."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from collections import Counter
from datetime import timedelta

import numpy as np
import pytest

from forecast_dojo.schema import event_to_record, save_events
from forecast_dojo.synthetic import (
    TIER_LIKELIHOOD_RATIO,
    TIERS,
    SyntheticWorld,
    WorldConfigError,
    generate_world,
    signal_accuracy,
    signal_likelihood,
)
from forecast_dojo.timeutil import end_of_day, to_micros

# The cues the module docstring promises for each tier (an agent designer relies on them).
TIER_CUES = {
    "weak": (
        "unconfirmed rumours suggest",
        "anonymous posts circulating online speculate",
        "unverified hearsay",
    ),
    "moderate": ("a report by", "analysts at", "a survey by"),
    "strong": (
        "a leaked internal document",
        "officials with direct knowledge confirmed",
        "a leaked draft of the final decision",
    ),
}


@pytest.fixture(scope="module")
def default_world() -> SyntheticWorld:
    return generate_world(0)


@pytest.fixture(scope="module")
def big_world() -> SyntheticWorld:
    return generate_world(11, n_events=300, n_background=0)


def _snapshot(world: SyntheticWorld) -> tuple[object, ...]:
    return (
        [event_to_record(e) for e in world.events],
        world.documents,
        world.evidence,
        world.prior,
        world.doc_kinds,
        world.resolution_docs,
    )


def test_same_seed_gives_identical_world_and_bytes(tmp_path) -> None:
    first = generate_world(5, n_events=6, n_background=40)
    second = generate_world(5, n_events=6, n_background=40)
    assert _snapshot(first) == _snapshot(second)
    a = save_events(first.events, tmp_path / "a.jsonl").read_bytes()
    b = save_events(second.events, tmp_path / "b.jsonl").read_bytes()
    assert a == b


def test_different_seeds_give_different_worlds() -> None:
    first = generate_world(1, n_events=4, n_background=10)
    second = generate_world(2, n_events=4, n_background=10)
    assert [e.question for e in first.events] != [e.question for e in second.events]
    assert {d.text for d in first.documents} != {d.text for d in second.documents}
    # Event ids are positions within a world ("syn-0000", ...); document ids carry the seed.
    assert [e.id for e in first.events] == [f"syn-{i:04d}" for i in range(4)] == [e.id for e in second.events]
    assert not {d.id for d in first.documents} & {d.id for d in second.documents}


def test_events_do_not_depend_on_background_size() -> None:
    lean = generate_world(9, n_events=5, n_background=0)
    noisy = generate_world(9, n_events=5, n_background=30)
    assert [event_to_record(e) for e in lean.events] == [event_to_record(e) for e in noisy.events]
    assert Counter(noisy.doc_kinds.values())["background"] == 30
    assert "background" not in lean.doc_kinds.values()


def test_default_world_size_and_mix(default_world: SyntheticWorld) -> None:
    assert len(default_world.events) == 40
    assert 2000 <= len(default_world.documents) <= 3000
    ks = Counter(len(e.outcomes) for e in default_world.events)
    assert ks[2] > 0 and ks[3] + ks[4] > 0 and set(ks) <= {2, 3, 4}
    kinds = Counter(default_world.doc_kinds.values())
    assert set(kinds) == {"evidence", "distractor", "background", "resolution"}
    assert kinds["evidence"] == sum(len(v) for v in default_world.evidence.values())


def test_event_structure(default_world: SyntheticWorld) -> None:
    for event in default_world.events:
        k = len(event.outcomes)
        assert event.source == "synthetic"
        assert event.open_at.year >= 2031
        assert 30 <= (event.close_at - event.open_at).days <= 121
        assert event.close_at < event.resolved_at <= event.close_at + timedelta(days=2)
        assert 3 <= event.n_steps <= 8
        assert event.open_at < event.cutoffs[0]
        assert event.cutoffs[-1] <= event.close_at - timedelta(days=2)
        assert default_world.prior[event.id] == tuple([1.0 / k] * k)
        assert "equally likely" in event.background  # the uniform prior is stated to the agent
        assert event.outcome not in ("",) and event.resolution_criteria
        assert ("binary" if k == 2 else "multi") in event.tags
        if k == 2:
            assert event.outcomes == ("Yes", "No")
        # The market is a daily series from open to close, a distribution at every point.
        assert event.market[0].at == event.open_at and event.market[-1].at == event.close_at
        gaps = {b.at - a.at for a, b in zip(event.market[:-2], event.market[1:-1], strict=True)}
        assert gaps == {timedelta(days=1)} and event.close_at - event.market[-2].at < timedelta(days=1)
        assert all(abs(sum(p.probabilities) - 1.0) < 1e-9 for p in event.market)


def test_outcome_names_are_unique_across_the_world(big_world: SyntheticWorld) -> None:
    names = [name for e in big_world.events if len(e.outcomes) > 2 for name in e.outcomes]
    assert len(names) == len(set(names))
    questions = [e.question for e in big_world.events]
    assert len(questions) == len(set(questions))


def test_documents_are_well_formed(default_world: SyntheticWorld) -> None:
    ids = [d.id for d in default_world.documents]
    assert len(ids) == len(set(ids)) == len(default_world.doc_kinds)
    # Ids follow time order, so an id says nothing about what kind of document it is.
    order = sorted(
        default_world.documents, key=lambda d: (to_micros(d.available_at), to_micros(d.published_at))
    )
    assert [d.id for d in order] == ids
    url = re.compile(r"^https://news\.[a-z]+\.example/\d{4}/\d{2}/\d{2}/[a-z0-9-]+$")
    for doc in default_world.documents:
        assert doc.published_at <= doc.available_at
        assert doc.date_source == "synthetic" and doc.source
        assert url.match(doc.url), doc.url
        assert 1 <= len(re.findall(r"[.!?](\s|$)", doc.text)) <= 3, doc.text
        assert doc.published_at.year in (2031, 2032)
    precisions = Counter(d.available_at == end_of_day(d.available_at.date()) for d in default_world.documents)
    assert precisions[True] > 100 and precisions[False] > 100  # both day-precision and timed documents


def test_resolution_documents_come_after_every_cutoff(default_world: SyntheticWorld) -> None:
    docs = {d.id: d for d in default_world.documents}
    for event in default_world.events:
        reports = default_world.resolution_docs[event.id]
        assert 1 <= len(reports) <= 2
        for doc_id in reports:
            doc = docs[doc_id]
            assert default_world.doc_kinds[doc_id] == "resolution"
            assert doc.available_at > event.resolved_at > event.cutoffs[-1]
            if len(event.outcomes) > 2:
                assert event.outcome in doc.text
                assert not any(other in doc.text for other in event.outcomes if other != event.outcome)


def test_evidence_text_conveys_signal_and_tier(default_world: SyntheticWorld) -> None:
    docs = {d.id: d for d in default_world.documents}
    for event in default_world.events:
        for item in default_world.evidence[event.id]:
            text = docs[item.doc_id].text
            assert any(cue in text.lower() for cue in TIER_CUES[item.tier]), text
            for other_tier, cues in TIER_CUES.items():
                if other_tier != item.tier:
                    assert not any(cue in text.lower() for cue in cues), text
            assert item.likelihood == signal_likelihood(item.tier, len(event.outcomes), item.signal)
            assert event.open_at <= item.available_at < event.close_at
            if len(event.outcomes) > 2:
                favoured = event.outcomes[item.signal]
                assert favoured in text and not any(o in text for o in event.outcomes if o != favoured)


def test_binary_evidence_wording_differs_by_signal(default_world: SyntheticWorld) -> None:
    docs = {d.id: d for d in default_world.documents}
    for event in default_world.events:
        if len(event.outcomes) != 2:
            continue
        clauses: dict[int, set[str]] = {0: set(), 1: set()}
        for item in default_world.evidence[event.id]:
            clauses[item.signal].add(docs[item.doc_id].text.split(" that ", 1)[1].split(",")[0].rstrip("."))
        assert not clauses[0] & clauses[1]  # a Yes-signal and a No-signal document never make the same claim


def test_some_evidence_arrives_exactly_at_a_cutoff(default_world: SyntheticWorld) -> None:
    """The strict visibility rule needs documents ON the boundary to be tested at all."""
    at_cutoff = [
        item
        for event in default_world.events
        for item in default_world.evidence[event.id]
        if item.available_at in event.cutoffs
    ]
    assert 15 <= len(at_cutoff) <= 100


def test_tier_accuracy_table() -> None:
    assert [signal_accuracy(t, 2) for t in TIERS] == pytest.approx([0.6, 0.75, 0.9])
    for tier in TIERS:
        for k in (2, 3, 4):
            q = signal_accuracy(tier, k)
            likelihood = signal_likelihood(tier, k, 1)
            assert sum(likelihood) == pytest.approx(1.0)
            assert likelihood[1] == q and likelihood[1] / likelihood[0] == pytest.approx(
                TIER_LIKELIHOOD_RATIO[tier]
            )
    with pytest.raises(ValueError, match="unknown tier"):
        signal_accuracy("certain", 2)
    with pytest.raises(ValueError, match="not an outcome index"):
        signal_likelihood("weak", 3, 3)


def test_signals_are_sampled_from_the_stated_likelihood(big_world: SyntheticWorld) -> None:
    hits: Counter[tuple[str, int]] = Counter()
    totals: Counter[tuple[str, int]] = Counter()
    for event in big_world.events:
        k = len(event.outcomes)
        for item in big_world.evidence[event.id]:
            totals[item.tier, k] += 1
            hits[item.tier, k] += item.signal == event.outcome_index
    for (tier, k), n in totals.items():
        q = signal_accuracy(tier, k)
        if n >= 50:
            assert abs(hits[tier, k] / n - q) <= 4 * math.sqrt(q * (1 - q) / n), (tier, k, n)
    assert all(totals[t, 2] >= 200 for t in TIERS)


def test_more_evidence_near_close(big_world: SyntheticWorld) -> None:
    fractions = [
        (item.available_at - e.open_at) / (e.close_at - e.open_at)
        for e in big_world.events
        for item in big_world.evidence[e.id]
    ]
    assert np.mean(np.array(fractions) > 0.5) > 0.65


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(WorldConfigError, match="seed"):
        generate_world(-1)
    with pytest.raises(WorldConfigError, match="n_events"):
        generate_world(0, n_events=0)
    with pytest.raises(WorldConfigError, match="evidence_range"):
        generate_world(0, evidence_range=(5, 2))
    with pytest.raises(WorldConfigError, match="cutoffs"):
        generate_world(0, duration_range=(5, 10), steps_range=(3, 8))
    with pytest.raises(WorldConfigError, match="multi_outcome_share"):
        generate_world(0, multi_outcome_share=1.5)
    with pytest.raises(KeyError, match="not in synthetic world"):
        generate_world(0, n_events=1, n_background=0).event("nope")


def test_world_is_identical_across_processes_with_different_hash_seeds() -> None:
    """Nothing depends on Python's salted ``hash`` (set iteration order, dict of sets...)."""
    script = (
        "import hashlib, json\n"
        "from forecast_dojo.schema import event_to_record\n"
        "from forecast_dojo.synthetic import generate_world\n"
        "w = generate_world(8, n_events=6, n_background=30)\n"
        "docs = [[d.id, d.title, d.text, d.url, d.source, d.available_at.isoformat()] for d in w.documents]\n"
        "payload = json.dumps([[event_to_record(e) for e in w.events], docs], sort_keys=True)\n"
        "print(hashlib.sha256(payload.encode()).hexdigest())\n"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            env={**os.environ, "PYTHONHASHSEED": salt},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for salt in ("1", "2")
    }
    assert len(digests) == 1 and len(next(iter(digests))) == 64
