"""Question-to-document matching used by the evidence filter and the leakage screen."""

from __future__ import annotations

from pathlib import Path

from forecast_dojo.corpus import HashingEmbedder
from forecast_dojo.events.leakage import LeakageConfig
from forecast_dojo.events.relevance import MatchRule, RelevanceIndex, name_terms, salient_terms, terms
from forecast_dojo.events.selection import SelectionConfig

from .conftest import day, make_corpus, make_doc


def test_salient_terms_drop_question_frame_words_and_numbers() -> None:
    assert salient_terms("Will Russia capture Rodynske by December 31, 2025?") == {
        "russia",
        "capture",
        "rodynske",
    }
    assert salient_terms("Will the US impose additional sanctions?") == {"impose", "additional", "sanction"}
    assert name_terms("Will Victor Ponta be the next Mayor of Bucharest?") == {
        "victor",
        "ponta",
        "mayor",
        "bucharest",
    }
    assert name_terms("Will hurricanes strike?") == frozenset()
    assert "election" in terms("The elections were held.")


def test_matches_need_coverage_a_name_and_the_time_window(tmp_path: Path) -> None:
    docs = [
        make_doc("full", "Russia captures Rodynske after weeks of fighting.", 1),
        make_doc("partial", "Russia shells Kharkiv.", 2),
        make_doc("no-name", "Forces capture a village.", 3),
        make_doc("later", "Russia captures Rodynske, officials confirm.", 10),
    ]
    corpus = make_corpus(tmp_path, docs)
    index = RelevanceIndex(corpus)
    question = "Will Russia capture Rodynske?"
    lo, hi = index.rows_between(day(0), day(5))
    assert (lo, hi) == (0, 3)
    matches = index.matches(question, lo, hi, min_coverage=0.6)
    assert [m.row for m in matches] == [0]
    assert matches[0].coverage == 1.0 and matches[0].shared == ("capture", "rodynske", "russia")
    loose = index.matches(question, lo, hi, min_coverage=0.0, min_shared=1)
    # "no-name" lacks both names (Russia, Rodynske)
    assert [corpus.field("id", m.row) for m in loose] == ["full", "partial"]
    unnamed = index.matches(question, lo, hi, min_coverage=0.0, min_shared=1, require_name=False)
    assert [corpus.field("id", m.row) for m in unnamed] == ["full", "partial", "no-name"]
    assert index.matches(question, *index.rows_between(None, day(20)), min_coverage=1.0, top_k=1)[0].row == 0


def test_similarity_threshold_uses_the_corpus_embedder(tmp_path: Path) -> None:
    corpus = make_corpus(
        tmp_path,
        [make_doc("a", "Russia captures Rodynske.", 1), make_doc("b", "Russia and Rodynske weather.", 2)],
    )
    index = RelevanceIndex(corpus, HashingEmbedder())
    all_rows = index.matches("Russia captures Rodynske", 0, 2, min_coverage=0.5)
    strict = index.matches("Russia captures Rodynske", 0, 2, min_coverage=0.5, min_similarity=0.99)
    assert len(all_rows) == 2 and [m.row for m in strict] == [0]
    assert strict[0].similarity > 0.99


def test_a_match_rule_is_the_thresholds_the_configs_hold(tmp_path: Path) -> None:
    docs = [
        make_doc("full", "Russia captures Rodynske after weeks of fighting.", 1),
        make_doc("partial", "Russia shells Kharkiv.", 2),
        make_doc("no-name", "Forces capture a village.", 3),
    ]
    index = RelevanceIndex(make_corpus(tmp_path, docs))
    question = "Will Russia capture Rodynske?"
    for rule in (MatchRule(0.6), MatchRule(0.0, 1), MatchRule(0.0, 1, require_name=False)):
        keywords = {"min_coverage": rule.min_coverage, "min_shared": rule.min_shared}
        keywords["require_name"] = rule.require_name
        assert index.find(question, 0, 3, rule) == index.matches(question, 0, 3, **keywords)
    assert [m.row for m in index.find(question, 0, 3, MatchRule(0.0, 1), top_k=1)] == [0]
    # max(min_shared, ceil(coverage * n)), at most n
    assert (MatchRule(0.5).needed(3), MatchRule(0.5, 4).needed(3), MatchRule(0.4, 1).needed(5)) == (2, 3, 2)
    leakage = LeakageConfig(min_coverage=0.7, min_shared_terms=3, min_similarity=0.2)
    assert leakage.rule == MatchRule(0.7, 3, 0.2)
    selection = SelectionConfig(evidence_min_coverage=0.3, evidence_min_shared_terms=1)
    assert selection.evidence_rule == MatchRule(0.3, 1, 0.0)
