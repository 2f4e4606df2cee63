"""Leakage screen: strong matches near the close with resolution language are flagged and excluded."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from forecast_dojo.events.leakage import (
    LeakageConfig,
    apply_exclusions,
    resolution_terms,
    resolving_statements,
    screen_event,
)
from forecast_dojo.events.relevance import RelevanceIndex
from forecast_dojo.schema import load_events, save_events

from .conftest import day, make_corpus, make_doc, make_event


@pytest.fixture
def index(tmp_path: Path) -> RelevanceIndex:
    docs = [
        make_doc("old-committee", "Valdoria Harbor Act passes a committee vote.", -60),  # outside the window
        make_doc("debate", "Valdoria lawmakers debate the Harbor Act again.", 20.5),  # no resolution language
        make_doc("passed", "The Valdoria parliament passes the Harbor Act in a final vote.", 22.5),
        make_doc("football", "Ostrava wins its football match.", 23.5),  # resolution language, no match
        make_doc("after", "Valdoria Harbor Act signed into law.", 40),  # after the last cutoff
        make_doc("leader", "Mira Tolvanen leads the Ostrava mayoral race in a new poll.", 24.5),
        make_doc("mayor-won", "Mira Tolvanen wins the Ostrava mayoral race with 54 percent.", 25.5),
        make_doc("weather", "Mild weather in Ostrava.", 10),
    ]
    return RelevanceIndex(make_corpus(tmp_path, docs))


def harbor():
    event = make_event(
        "harbor", question="Will the Valdoria parliament pass the Harbor Act?", open_day=0, close_day=45
    )
    return replace(event, cutoffs=(day(10), day(21), day(23), day(30)))


def test_flags_strong_matches_with_resolution_language(index: RelevanceIndex) -> None:
    flags = screen_event(harbor(), index, LeakageConfig())
    assert [f.doc_id for f in flags] == ["passed"]
    flag = flags[0]
    assert flag.first_step == 2  # available Jan 23 12:00: visible from the Jan 24 00:00 cutoff (day 23)
    assert "realized: passes" in flag.resolution_terms
    assert set(flag.shared_terms) >= {"valdoria", "harbor", "act"}


def test_a_wider_window_reaches_older_documents(index: RelevanceIndex) -> None:
    legacy = LeakageConfig(window_days=200, mode="legacy")
    flags = screen_event(harbor(), index, legacy)
    # the committee doc is before the open, so never in the window
    assert [f.doc_id for f in flags] == ["passed"]
    event = replace(harbor(), open_at=day(-100))
    assert [f.doc_id for f in screen_event(event, index, legacy)] == ["old-committee", "passed"]
    # A committee vote is not the parliament passing the act: the outcome screen leaves it visible.
    assert [f.doc_id for f in screen_event(event, index, LeakageConfig(window_days=200))] == ["passed"]


def test_multi_outcome_events_also_flag_documents_naming_the_winner(index: RelevanceIndex) -> None:
    event = make_event(
        "mayor",
        question="Who will win the Ostrava mayoral race?",
        outcomes=("Mira Tolvanen", "Jonas Berg"),
        outcome="Mira Tolvanen",
        open_day=0,
        close_day=45,
    )
    event = replace(event, cutoffs=(day(10), day(30)))
    flags = screen_event(event, index, LeakageConfig())
    # Winning is a resolving construction; leading a poll only names the label (the legacy rule flagged both).
    assert [(f.doc_id, f.names_outcome) for f in flags] == [("mayor-won", True)]
    legacy = screen_event(event, index, LeakageConfig(mode="legacy", window_days=45, min_coverage=0.6))
    assert [(f.doc_id, f.names_outcome) for f in legacy] == [("leader", True), ("mayor-won", True)]


def test_exclusions_are_typed_keep_their_first_step_and_survive_an_events_file(
    index: RelevanceIndex, tmp_path: Path
) -> None:
    event = harbor()
    flags = screen_event(event, index, LeakageConfig())
    excluded = apply_exclusions(event, flags)
    assert excluded.excluded_doc_ids == ("passed",)
    assert [(f["doc_id"], f["first_step"]) for f in excluded.extra["leakage_flags"]] == [("passed", 2)]
    loaded = load_events(save_events([excluded], tmp_path / "e.jsonl"))[0]
    assert loaded.excluded_doc_ids == ("passed",) and loaded.extra["leakage_flags"][0]["first_step"] == 2
    assert apply_exclusions(event, []).excluded_doc_ids == ()


def test_resolution_terms() -> None:
    assert resolution_terms("Candidate X is elected president; Y concedes.") == ("is elected", "concedes")
    assert resolution_terms("Lawmakers debate the bill.") == ()


@pytest.mark.parametrize(
    ("question", "text", "kinds"),
    [
        # topic words alone are not statements of the outcome
        (
            "Will Israel and Hamas agree to a ceasefire by March 31?",
            "Ceasefire talks between Israel and Hamas resume in Cairo.",
            (),
        ),
        (
            "Will Israel and Hamas agree to a ceasefire by March 31?",
            "Israel and Hamas agree to a ceasefire brokered by Qatar.",
            ("realized",),
        ),
        (
            "Will Israel and Hamas agree to a ceasefire by March 31?",
            "Israel says it will agree to a ceasefire if hostages are freed.",
            (),
        ),
        (
            "Khamenei out as Supreme Leader of Iran by March 31?",
            "Twelve people are killed in Iran in floods.",
            (),
        ),
        (
            "Khamenei out as Supreme Leader of Iran by March 31?",
            "Iran confirms the death of supreme leader Ali Khamenei.",
            ("terminal",),
        ),
        (
            "Will Joe Biden win the 2024 Democratic nomination?",
            "Joe Biden ends his presidential campaign.",
            ("terminal",),
        ),
        (
            "Will Kamala Harris be the Democratic nominee?",
            "Joe Biden ends his campaign and endorses Kamala Harris.",
            (),
        ),
        (
            "Will the U.S. win the gold medal in Men's Basketball?",
            "South Korea wins the gold medal in archery.",
            (),
        ),
        (
            "Will the U.S. win the gold medal in Men's Basketball?",
            "The U.S. wins the gold medal in men's basketball, beating France.",
            ("realized",),
        ),
        (
            "Will Hamnet win Best Picture at the Academy Awards?",
            "One Battle After Another wins Best Film at the BAFTA Awards.",
            (),
        ),
        ("Will SpaceX launch Starship in March?", "SpaceX launches Starship from Boca Chica.", ("realized",)),
        ("Will SpaceX launch Starship in March?", "SpaceX plans to launch Starship next week.", ()),
    ],
)
def test_resolving_statements_need_the_question_entities_and_a_resolving_construction(
    question: str, text: str, kinds: tuple[str, ...]
) -> None:
    found = resolving_statements(question, ("Yes", "No"), "Yes", text)
    assert tuple(sorted({f.split(":")[0] for f in found})) == kinds, found


def test_named_outcomes_need_a_winning_construction() -> None:
    outcomes = ("Mira Tolvanen", "Jonas Berg")
    question = "Who will win the Ostrava mayoral race?"
    assert (
        resolving_statements(question, outcomes, "Mira Tolvanen", "Mira Tolvanen leads in a new poll.") == ()
    )
    found = resolving_statements(
        question, outcomes, "Mira Tolvanen", "Mira Tolvanen is elected mayor of Ostrava."
    )
    assert any(f.startswith("outcome:") for f in found)
