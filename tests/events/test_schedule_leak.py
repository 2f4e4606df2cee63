"""The schedule-leak measure: near 0.5 on the synthetic world, high on a schedule that tracks the outcome."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from forecast_dojo.events.schedule import ScheduleConfig, schedule_event
from forecast_dojo.events.schedule_leak import auc, describe, measure, schedule_leak_report
from forecast_dojo.schema import Event
from forecast_dojo.synthetic.world import generate_world


@pytest.fixture(scope="module")
def synthetic_events() -> list[Event]:
    return [event for seed in range(3) for event in generate_world(seed).events]


def test_auc_by_ranks() -> None:
    assert auc(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0, 0, 1, 1])) == 1.0
    assert auc(np.array([0.4, 0.3, 0.2, 0.1]), np.array([0, 0, 1, 1])) == 0.0
    assert auc(np.array([0.5, 0.5, 0.5, 0.5]), np.array([0, 1, 0, 1])) == 0.5


@pytest.mark.slow
def test_schedule_says_nothing_about_the_outcome_on_the_synthetic_world(
    synthetic_events: list[Event],
) -> None:
    scheduled = [s for e in synthetic_events if (s := schedule_event(e, ScheduleConfig())) is not None]
    assert len(scheduled) == len(synthetic_events)
    for events in (synthetic_events, scheduled):
        for level in ("episode", "step"):
            result = measure(events, level=level)
            assert result["auc"] is not None, describe(result)
            lo, hi = result["ci95"]
            assert abs(result["auc"] - 0.5) < 0.15 and lo < 0.5 < hi, (level, describe(result))


@pytest.mark.slow
def test_a_schedule_that_ends_at_resolution_is_caught(synthetic_events: list[Event]) -> None:
    # The old failure: events whose outcome is the first label stop 40 days early.
    leaky = []
    for event in synthetic_events:
        if event.outcome_index == 0:
            end = event.cutoffs[0] + (event.cutoffs[-1] - event.cutoffs[0]) * 0.3
            cutoffs = tuple(c for c in event.cutoffs if c <= end) or event.cutoffs[:1]
            event = replace(event, cutoffs=cutoffs)
        leaky.append(event)
    result = measure(leaky)
    assert result["auc"] > 0.8 and result["ci95"][0] > 0.6, describe(result)


def test_too_few_events_give_a_reason(synthetic_events: list[Event]) -> None:
    result = measure(synthetic_events[:5])
    assert result["auc"] is None and "needs" in result["reason"]
    report = schedule_leak_report(synthetic_events, {"train": synthetic_events[:60], "eval": []})
    assert set(report) == {"all", "train", "eval"}
    assert report["eval"]["episode"]["auc"] is None and report["all"]["step"]["rows"] > len(synthetic_events)


def test_deadline_horizon_truncates_instead_of_squeezing() -> None:
    from tests.events.conftest import make_event

    base = make_event(close_day=100)
    early = replace(
        base, close_at=base.open_at + timedelta(days=40), extra={"deadline_at": "2030-04-11T00:00:00Z"}
    )
    late = replace(base, extra={"deadline_at": "2030-04-11T00:00:00Z"})
    config = ScheduleConfig()
    full = schedule_event(late, config).cutoffs
    cut = schedule_event(early, config).cutoffs
    assert cut == tuple(c for c in full if c <= early.close_at - timedelta(days=2))  # a prefix
    squeezed = schedule_event(early, replace(config, horizon="close")).cutoffs
    assert len(squeezed) > len(cut) and squeezed != cut
