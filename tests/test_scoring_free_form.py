"""FutureSim's free-form Brier score and top-1 accuracy: anchors, hand-computed samples, matching."""

from __future__ import annotations

import pytest

from forecast_dojo.scoring import (
    answer_matches,
    brier_loss,
    free_form_score,
    normalize_answer,
    top1_accuracy,
)


def test_the_three_anchors():
    assert free_form_score({"Paris": 1.0}, "Paris") == 1.0
    assert free_form_score({}, "Paris") == 0.0
    assert free_form_score({"Lyon": 1.0}, "Paris") == -1.0


def test_a_sample_whose_probabilities_do_not_sum_to_one():
    # 0.5 on the answer, 0.2 on a wrong outcome, 0.3 left unassigned: 1 - 0.5^2 - 0.2^2.
    assert free_form_score({"Paris": 0.5, "Lyon": 0.2}, "Paris") == pytest.approx(0.71)
    # The answer not proposed at all: 1 - 1 - 0.3^2 - 0.2^2.
    assert free_form_score({"Lyon": 0.3, "Nice": 0.2}, "Paris") == pytest.approx(-0.13)
    # Two wrong outcomes at certainty each: the rule is not bounded below by -1 when mass exceeds 1.
    assert free_form_score({"Lyon": 1.0, "Nice": 1.0}, "Paris") == pytest.approx(-2.0)


def test_on_a_full_distribution_it_is_one_minus_the_brier_loss():
    forecast = {"Yes": 0.7, "No": 0.3}
    assert free_form_score(forecast, "No") == pytest.approx(1 - brier_loss([0.7, 0.3], 1))
    three = {"A": 0.2, "B": 0.5, "C": 0.3}
    assert free_form_score(three, "A") == pytest.approx(1 - brier_loss([0.2, 0.5, 0.3], 0))


def test_matching_is_up_to_case_whitespace_punctuation_and_aliases():
    assert normalize_answer("  The Tide   of Gremsen! ") == "the tide of gremsen"
    assert normalize_answer("U.S.") == normalize_answer("u s")
    assert answer_matches("the tide of gremsen", "The Tide of Gremsen")
    assert not answer_matches("Tide of Gremsen", "The Tide of Gremsen")
    assert answer_matches("USA", "United States", aliases=("USA", "U.S.A."))
    assert not answer_matches("...", "...")  # punctuation only never matches anything
    # Outcomes that both name the answer pool their mass.
    assert free_form_score({"USA": 0.4, "United States": 0.6}, "United States", ["usa"]) == 1.0


def test_a_judge_is_asked_only_about_outcomes_that_do_not_match():
    asked = []

    def judge(outcome: str, answer: str) -> bool:
        asked.append(outcome)
        return outcome == "the Big Apple"

    assert free_form_score({"New York": 0.5, "the Big Apple": 0.5}, "New York", judge=judge) == 1.0
    assert asked == ["the Big Apple"]


def test_top1_accuracy():
    assert top1_accuracy({"Paris": 0.6, "Lyon": 0.3}, "paris") == 1.0
    assert top1_accuracy({"Paris": 0.3, "Lyon": 0.6}, "Paris") == 0.0
    assert top1_accuracy({"Paris": 0.4, "Lyon": 0.4}, "Paris") == 0.5
    assert top1_accuracy({}, "Paris") == 0.0
    assert top1_accuracy({"Paris": 0.0}, "Paris") == 0.0
