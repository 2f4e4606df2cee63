"""The forecast-date schedule: candidate days, buffer, step count clamp, bins, preferences, ties."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path

import pytest

from forecast_dojo.events.schedule import (
    ScheduleConfig,
    bins,
    candidate_days,
    choose_days,
    day_scores,
    midnight,
    schedule_event,
    steps_for,
)

from .conftest import make_corpus, make_doc, make_event

CONFIG = ScheduleConfig()


def test_candidates_start_at_the_first_midnight_and_stop_two_days_before_close() -> None:
    event = make_event(open_day=0.5, close_day=20.25)  # open Jan 1 12:00, close Jan 21 06:00
    days = candidate_days(event, CONFIG)
    assert days[0] == date(2030, 1, 2)
    assert days[-1] == date(2030, 1, 19)  # Jan 19 00:00 <= Jan 21 06:00 - 2 days
    assert len(days) == 18
    assert candidate_days(make_event(open_day=0, close_day=20), CONFIG)[0] == date(2030, 1, 1)
    assert candidate_days(make_event(open_day=0, close_day=20), ScheduleConfig(buffer_days=5))[-1] == date(
        2030, 1, 16
    )


@pytest.mark.parametrize(
    ("n", "steps"),
    [(0, 0), (1, 1), (2, 2), (3, 3), (8, 3), (12, 3), (13, 4), (20, 4), (21, 5), (100, 10), (400, 10)],
)
def test_step_count_is_clamped_rounded_sqrt(n: int, steps: int) -> None:
    assert steps_for(n, CONFIG) == steps


def test_bins_are_contiguous_and_near_equal() -> None:
    spans = bins(10, 3)
    assert [list(s) for s in spans] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    for n in range(1, 60):
        for t in range(1, min(n, 10) + 1):
            spans = bins(n, t)
            assert [i for s in spans for i in s] == list(range(n))
            assert max(map(len, spans)) - min(map(len, spans)) <= 1


def test_one_date_per_bin_preferring_market_movement() -> None:
    # 16 candidate days -> 4 bins of 4; the market jumps during the days before Jan 3, 7, 12 and 15.
    jumps = {2: 0.2, 6: 0.5, 11: 0.3, 14: 0.8}
    market, level = [], 0.1
    for d in range(0, 18):
        level = jumps.get(d, level)
        market.append((d + 0.5, (level, 1 - level)))
    event = make_event(open_day=0, close_day=18, market=market)
    days = choose_days(event, CONFIG)
    assert days == [date(2030, 1, 4), date(2030, 1, 8), date(2030, 1, 13), date(2030, 1, 16)]


def test_new_documents_break_a_flat_market(tmp_path: Path) -> None:
    docs = [
        make_doc(f"d{d}-{i}", f"news {d} {i}", d + 0.5) for d in range(20) for i in range(1 if d != 9 else 5)
    ]
    corpus = make_corpus(tmp_path, docs)
    event = make_event(open_day=1, close_day=20)  # 18 candidates -> 4 bins
    scores = day_scores(event, candidate_days(event, CONFIG, corpus), CONFIG, corpus)
    assert max(scores) == 1.0
    chosen = choose_days(event, CONFIG, corpus)
    assert date(2030, 1, 11) in chosen  # the docs of Jan 10 (available 12:00) are new at Jan 11 00:00


def test_ties_are_broken_by_the_seed_deterministically() -> None:
    event = make_event("tie", open_day=0, close_day=102)  # 101 candidates, no market, no corpus: all tied
    first = choose_days(event, ScheduleConfig(seed=1))
    assert first == choose_days(event, ScheduleConfig(seed=1))
    assert len(first) == 10 and first == sorted(first)
    by_seed = {tuple(choose_days(event, ScheduleConfig(seed=s))) for s in range(6)}
    assert len(by_seed) > 1
    spans = bins(101, 10)
    candidates = candidate_days(event, CONFIG)
    for chosen, span in zip(first, spans, strict=True):
        assert chosen in [candidates[i] for i in span]


def test_schedule_event_records_cutoffs_and_market_at_cutoffs() -> None:
    event = make_event(open_day=0, close_day=30, market=[(3.5, (0.2, 0.8)), (12.25, (0.6, 0.4))])
    scheduled = schedule_event(event, CONFIG)
    assert scheduled is not None
    assert scheduled.n_steps == 5  # 29 candidates -> round(5.39) = 5
    assert all(c == midnight(c.date()) for c in scheduled.cutoffs)
    assert scheduled.cutoffs[-1] <= event.close_at - timedelta(days=2)
    market_at = scheduled.extra["market_at_cutoffs"]
    assert len(market_at) == scheduled.n_steps
    for cutoff, belief in zip(scheduled.cutoffs, market_at, strict=True):
        assert belief == (None if event.market_at(cutoff) is None else list(event.market_at(cutoff)))
    assert market_at[0] is None and market_at[-1] == [0.6, 0.4]
    assert scheduled.extra["schedule"]["candidate_days"] == 29


def test_events_too_short_for_any_date_get_none_and_short_ones_fewer_steps() -> None:
    assert schedule_event(make_event(open_day=0, close_day=1.5), CONFIG) is None
    short = schedule_event(make_event(open_day=0, close_day=3), CONFIG)
    assert short is not None and short.n_steps == 2


def test_the_corpus_limits_dates_to_its_coverage(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path, [make_doc(f"d{d}", f"news {d}", d + 0.5) for d in range(5, 15)])
    event = make_event(open_day=0, close_day=40)
    days = candidate_days(event, CONFIG, corpus)
    assert days[0] == date(2030, 1, 7)  # first doc available Jan 6 12:00 -> visible from Jan 7 00:00
    assert days[-1] == date(2030, 1, 16)  # last doc available Jan 15 12:00: first midnight after it
    midnight_corpus = make_corpus(tmp_path, [make_doc("m", "news", 14)], name="midnight")
    # available exactly at Jan 15 00:00, so visible (strictly before the cutoff) from Jan 16 on
    assert candidate_days(event, CONFIG, midnight_corpus) == [date(2030, 1, 16)]


def test_trim_before_keeps_later_steps_and_their_market_beliefs() -> None:
    from forecast_dojo.events.schedule import trim_before

    from .conftest import day as day_at

    event = make_event(close_day=60, market=[(1, (0.3, 0.7)), (20, (0.6, 0.4))])
    scheduled = schedule_event(event, ScheduleConfig())
    assert scheduled is not None and scheduled.n_steps >= 4
    start = scheduled.cutoffs[2]
    cut = trim_before(scheduled, start)
    assert cut.cutoffs == scheduled.cutoffs[2:]
    assert cut.extra["market_at_cutoffs"] == scheduled.extra["market_at_cutoffs"][2:]
    assert cut.extra["schedule"]["steps"] == cut.n_steps
    assert trim_before(scheduled, day_at(61)) is None


def test_truncate_at_keeps_the_first_steps_and_their_market_beliefs() -> None:
    from forecast_dojo.events.schedule import truncate_at

    event = make_event(close_day=60, market=[(1, (0.3, 0.7)), (20, (0.6, 0.4))])
    scheduled = schedule_event(event, ScheduleConfig())
    assert scheduled is not None and scheduled.n_steps >= 4
    cut = truncate_at(scheduled, 3)
    assert cut.cutoffs == scheduled.cutoffs[:3]
    assert cut.extra["market_at_cutoffs"] == scheduled.extra["market_at_cutoffs"][:3]
    assert cut.extra["schedule"]["steps"] == 3
    assert cut.extra["schedule"]["truncated_steps"] == scheduled.n_steps - 3
    assert truncate_at(scheduled, scheduled.n_steps).cutoffs == scheduled.cutoffs
    for bad in (0, scheduled.n_steps + 1):
        with pytest.raises(ValueError, match="n_keep"):
            truncate_at(scheduled, bad)
