"""The cross-question leak audit finds a planted sibling-title leak, and the build report carries it."""

from __future__ import annotations

import dataclasses

from forecast_dojo.events.sibling_leak import answer_terms, describe_sibling_leaks, sibling_leak_audit
from tests.conftest import tiny_events


def planted():
    base = tiny_events()[0]
    who = dataclasses.replace(
        base,
        id="who",
        question="Who will chair the Valdoria harbor commission?",
        outcomes=("Ana Brel", "Tomas Vik", "Ida Sorn"),
        outcome="Tomas Vik",
        market=(),
    )
    # The sibling's title names the answer of "who": FutureSim's issue #1.
    sibling = dataclasses.replace(
        base, id="sibling", question="Will commission chair Tomas Vik approve the harbor budget?", market=()
    )
    free = dataclasses.replace(
        base, id="free", question="Which port will host the 2031 regatta?", outcomes=(), outcome="Ostrava", market=(),
        aliases=("Port of Ostrava",),
    )  # fmt: skip
    mentions = dataclasses.replace(
        base,
        id="mentions",
        question="Will the regatta in the Port of Ostrava draw 10,000 visitors?",
        market=(),
    )
    return [who, sibling, free, mentions, *tiny_events()]


def test_a_planted_sibling_title_leak_is_found():
    audit = sibling_leak_audit(planted())
    assert audit["leaking_ids"] == ["free", "who"]
    leak = next(x for x in audit["leaks"] if x["question_id"] == "who")
    assert leak == {"question_id": "who", "term": "Tomas Vik", "sibling_id": "sibling", "field": "question"}
    assert next(x for x in audit["leaks"] if x["question_id"] == "free")["term"] == "Ostrava"
    # Yes/No answers are too generic to look for; the losing candidates are the control.
    assert [e.id for e in planted() if answer_terms(e)] == ["who", "free", "mayor"]
    assert audit["with_answer_terms"] == 3 and audit["leak_rate"] == 2 / 3 and audit["control_rate"] == 0.0
    assert answer_terms(tiny_events()[0]) == []  # "Yes" / "No"
    assert "2 of 3 questions" in describe_sibling_leaks(audit)


def test_questions_not_shown_together_do_not_leak_to_each_other():
    audit = sibling_leak_audit(planted(), together=lambda a, b: {a.id, b.id} != {"who", "sibling"})
    assert audit["leaking_ids"] == ["free"]


def test_the_events_build_report_has_the_audit(polymarket_export, tmp_path):
    from forecast_dojo.events.build import BuildConfig, build_events, render_markdown
    from forecast_dojo.events.polymarket import load_polymarket
    from forecast_dojo.events.selection import SelectionConfig
    from forecast_dojo.events.split import parse_window

    from .conftest import make_corpus
    from .test_build import world_docs

    config = BuildConfig(
        train_window=parse_window("2029-01-01:2029-12-31"),
        eval_window=parse_window("2030-01-01:2030-12-31"),
        selection=SelectionConfig(min_faithful_fraction=0.5, max_unfaithful_run_days=20),
    )
    output = build_events([load_polymarket(polymarket_export, progress=False)], config,
                          corpus=make_corpus(tmp_path, world_docs()), progress=False)  # fmt: skip
    audits = output.report["sibling_leaks"]
    assert set(audits) == {"train", "eval"}
    assert audits["train"]["questions"] == output.report["split"]["train"]["events"]
    assert "## Cross-question leaks" in render_markdown(output.report)
