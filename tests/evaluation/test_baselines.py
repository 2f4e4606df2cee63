"""Reference forecasters: base rate per (source, K) from the training split, and the reference records."""

from __future__ import annotations

import dataclasses

import pytest

from forecast_dojo.evaluation.baselines import BaseRate, reference_records
from tests.conftest import tiny_events


def test_base_rate_counts_training_outcomes_per_source_and_labels():
    harbor, mayor = tiny_events()[:2]
    train = [
        dataclasses.replace(harbor, id=f"h{i}", outcome=harbor.outcomes[0 if i < 3 else 1]) for i in range(4)
    ]
    rate = BaseRate(train)
    # 3 of 4 resolved to the first outcome; add-one smoothing: (3 + 1) / (4 + 2)
    assert rate.forecast(harbor) == pytest.approx((4 / 6, 2 / 6))
    other_source = dataclasses.replace(harbor, source="elsewhere")
    assert rate.forecast(other_source) == pytest.approx((4 / 6, 2 / 6))  # backs off to K alone
    three = (
        dataclasses.replace(mayor, outcomes=("A", "B", "C"), outcome="A")
        if len(mayor.outcomes) != 3
        else mayor
    )
    assert rate.forecast(three) == pytest.approx((1 / 3,) * 3)  # no training event with this K: uniform


def test_reference_records_cover_every_step_and_skip_missing_markets():
    events = tiny_events()
    records = reference_records(events, base_rate=BaseRate(events))
    names = {r.agent for r in records}
    assert {"uniform", "base-rate", "market"} <= names and "oracle" not in names
    for name in ("uniform", "base-rate"):
        assert len([r for r in records if r.agent == name]) == sum(e.n_steps for e in events)
    assert all(r.market is not None for r in records if r.agent == "market")
