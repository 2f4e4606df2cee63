"""The synthetic world's Bayes-optimal oracle in world mode: its score per question per day, and regret.

On every day a question is open, the oracle's forecast is the exact posterior given the evidence
available before the day begins (:func:`forecast_dojo.synthetic.oracle_forecast` at the day's
instant), scored with the same rule as the agent (:func:`forecast_dojo.scoring.free_form_score`).
A free-form variant of a multi-outcome event (:func:`free_form_variant`) keeps its base event's
posterior over the candidates: the oracle proposes the K names with their posterior probabilities.
Evaluation only: nothing here reaches the agent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from forecast_dojo.schema import Event
from forecast_dojo.scoring import free_form_score
from forecast_dojo.synthetic.model import SyntheticWorld
from forecast_dojo.synthetic.oracle import oracle_forecast
from forecast_dojo.world.calendar import Calendar, day_instant

FREE_FORM_SUFFIX = "-ff"
FREE_FORM_OF = "free_form_of"  # the Event.extra key naming a free-form variant's base event


def free_form_variant(event: Event) -> Event:
    """The free-form version of a fixed-outcome event: the same question, no listed outcomes, its outcome the answer.

    On the synthetic world's multi-outcome events the answer is an entity (a person, a film, a
    company); the agent must find the candidates in the news. The id gains :data:`FREE_FORM_SUFFIX`.

    Args:
        event: A fixed-outcome event.

    Returns:
        The free-form event (``extra[FREE_FORM_OF]`` names the base event, for the oracle).
    """
    return dataclasses.replace(
        event,
        id=event.id + FREE_FORM_SUFFIX,
        outcomes=(),
        outcome=event.outcome,
        market=(),
        extra={**event.extra, FREE_FORM_OF: event.id},
    )


def oracle_scores(world: SyntheticWorld, calendar: Calendar) -> dict[str, dict[str, float]]:
    """The oracle's score for every question on every day it is open: ``{question_id: {day: score}}``."""
    out: dict[str, dict[str, float]] = {}
    for event in calendar.events:
        base = world.event(str(event.extra.get(FREE_FORM_OF, event.id)))
        out[event.id] = {}
        for day in calendar.open_days(event.id):
            posterior = oracle_forecast(world, base.id, day_instant(day))
            forecast = dict(zip(base.outcomes, posterior, strict=True))
            out[event.id][day.isoformat()] = free_form_score(forecast, event.answer, event.aliases)
    return out


def regret(
    scores: Mapping[str, Mapping[str, float]], oracle: Mapping[str, Mapping[str, float]]
) -> dict[str, dict[str, float]]:
    """Per question per day, the oracle's score minus the agent's (>= 0 in expectation; 0 is optimal).

    Args:
        scores: The agent's ``info["scores"]``.
        oracle: :func:`oracle_scores` of the same calendar.

    Returns:
        ``{question_id: {day: regret}}`` over the days both hold.
    """
    return {
        qid: {day: oracle[qid][day] - value for day, value in days.items() if day in oracle.get(qid, {})}
        for qid, days in scores.items()
    }
