"""Cleaning stages: normalization, market sites, language, quality rules, the three dedup filters, config."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import pytest

from forecast_dojo.corpus.cleaning import (
    CleaningConfig,
    CleaningConfigError,
    LanguageConfig,
    MarketSitesConfig,
    MinHashConfig,
    NormalizeConfig,
    QualityConfig,
    canonical_url,
    clean_document,
    clean_documents,
    duplicate_minhash,
    duplicate_titles,
    duplicate_urls,
    identify_language,
    language_reason,
    market_site_reason,
    minhash_signatures,
    normalize_document,
    normalize_text,
    quality_reason,
    removal_warnings,
    shingles,
)
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import UTC

T0 = datetime(2024, 3, 1, tzinfo=UTC)
ARTICLE = (
    "The regional parliament approved the new water management law on Tuesday after a long debate. "
    "Supporters said that the law would protect rivers and lakes from pollution, and that farmers would "
    "receive help with the cost of new equipment. Opponents argued that the rules were too strict for small "
    "villages and that the budget had not been agreed with the national government.\n"
    "The law will take effect next year, and the ministry said it expects to publish the detailed rules "
    "in the autumn, with a public consultation before the final text is adopted by the cabinet."
)
OTHER_ARTICLE = (
    "The football club announced on Friday that it will build a new stadium on the edge of the city, and that "
    "the project will be paid for with private money. The chairman said that the old ground was too small for "
    "the growing number of supporters and that the new stadium would hold forty thousand people. Local residents "
    "have asked the council to study the traffic and the noise before any building work starts next spring."
)
NO_STOP_WORDS = " ".join(
    ["Parliament approves water law; farmers receive subsidies; villages oppose strict rules."] * 8
)


def doc(doc_id: str, text: str = ARTICLE, *, hours: float = 0, **fields: object) -> Document:
    at = T0 + timedelta(hours=hours)
    return Document(
        id=doc_id, title=str(fields.pop("title", "")), text=text, published_at=at, available_at=at, **fields
    )


def test_normalize_text_and_document() -> None:
    decomposed = "Cafe\u0301  in\tthe \u200bcity\u00a0centre\r\n\r\n\r\n\r\nSecond   line  "
    assert normalize_text(decomposed) == "Café in the city centre\n\nSecond line"
    original = doc("a", " Text \x07with control ", title="  A\n title ")
    cleaned = normalize_document(original, NormalizeConfig())
    assert (cleaned.text, cleaned.title) == ("Text with control", "A title")
    assert normalize_document(doc("b", "\u200b\u200b x"), NormalizeConfig()).text == "x"
    same = doc("c", "Already clean.")
    assert normalize_document(same, NormalizeConfig()) is same
    assert normalize_document(doc("d", "\u200b \ufeff"), NormalizeConfig()) is None


@pytest.mark.parametrize(
    ("url", "source", "expected"),
    [
        ("https://polymarket.com/event/x", None, "domain polymarket.com"),
        ("https://www.metaculus.com/questions/1/", None, "domain metaculus.com"),
        ("https://news.kalshi.com/p/a", None, "domain kalshi.com"),
        ("https://www.gjopen.com/questions/1", None, "domain gjopen.com"),
        (None, "Manifold Markets", "source manifold markets"),
        ("https://en.wikipedia.org/wiki/X", "PredictIt", "source predictit"),
        (None, "Reuters; Polymarket", "source polymarket"),
        (None, "Good Judgment Open", "source good judgment open"),
        (None, "INFER", "source infer"),
        ("https://reuters.com/world/polymarket-odds", "Reuters", None),
        ("https://notpolymarket.com/x", "The Guardian", None),
        (None, "Inferno Weekly", None),
    ],
)
def test_market_sites(url: str | None, source: str | None, expected: str | None) -> None:
    assert market_site_reason(doc("m", url=url, source=source), MarketSitesConfig()) == expected


def test_language_identification_ships_its_model() -> None:
    assert identify_language(ARTICLE)[0] == "en"
    french = doc(
        "fr",
        "Le parlement régional a approuvé mardi la nouvelle loi sur la gestion de l'eau après un long débat.",
    )
    assert language_reason(french, LanguageConfig()) == "language fr"
    assert language_reason(doc("en", ARTICLE), LanguageConfig()) is None
    assert language_reason(french, LanguageConfig(min_chars=500)) is None  # too short to judge
    assert language_reason(french, LanguageConfig(languages=("en", "fr"))) is None
    assert language_reason(french, LanguageConfig(min_confidence=1.01)) is None


@pytest.mark.parametrize(
    ("text", "config", "reason"),
    [
        (ARTICLE, QualityConfig(), None),
        ("Too short to keep.", QualityConfig(), "too few words"),
        (ARTICLE, QualityConfig(max_words=20), "too many words"),
        (
            " ".join(["a b c"] * 30),
            QualityConfig(min_words=10, min_stop_words=None),
            "mean word length too short",
        ),
        (
            " ".join(["incomprehensibilities"] * 60),
            QualityConfig(min_stop_words=None),
            "mean word length too long",
        ),
        (ARTICLE + " #tag" * 20, QualityConfig(), "symbol to word ratio"),
        (ARTICLE + " 123" * 40, QualityConfig(), "too few alphabetic words"),
        (NO_STOP_WORDS, QualityConfig(max_duplicate_line_ratio=None), "too few stop words"),
        (
            "\n".join(["- the item and that one with"] * 12),
            QualityConfig(min_words=5, max_duplicate_line_ratio=None),
            "bullet lines",
        ),
        (
            "\n".join([f"the story {i} and that one with more..." for i in range(12)]),
            QualityConfig(min_words=5, max_symbol_word_ratio=None),
            "lines ending in ellipsis",
        ),
        (
            "\n".join([f"the menu {i} and that link with home" for i in range(12)]),
            QualityConfig(min_words=5),
            "too few lines ending in punctuation",
        ),
        (
            "\n".join(["The same line with the words and that."] * 12),
            QualityConfig(min_words=5),
            "duplicate lines",
        ),
        (ARTICLE + " Lorem ipsum dolor sit amet.", QualityConfig(), "contains 'lorem ipsum'"),
    ],
)
def test_quality_rules(text: str, config: QualityConfig, reason: str | None) -> None:
    assert quality_reason(doc("q", text), config) == reason


def test_wikipedia_style_summary_survives_relaxed_quality() -> None:
    summary = doc("w", "Three civilians killed in an Israeli airstrike on Hula.")
    assert quality_reason(summary, QualityConfig()) == "too few words"
    relaxed = QualityConfig(min_words=4, min_stop_words=None, min_punctuated_line_ratio=None)
    assert quality_reason(summary, relaxed) is None


def test_canonical_url() -> None:
    assert (
        canonical_url("https://www.Example.com/a/b/?utm_source=x&id=3&fbclid=y#frag")
        == "example.com/a/b?id=3"
    )
    assert canonical_url("http://m.example.com/a/b") == "example.com/a/b"
    assert canonical_url("https://example.com/a/index.html") == canonical_url("https://example.com/a")
    assert canonical_url("https://example.com/a?b=2&a=1") == canonical_url("https://example.com/a?a=1&b=2")
    assert canonical_url("https://example.com/a?id=1") != canonical_url("https://example.com/a?id=2")
    assert canonical_url(None) is None and canonical_url("  ") is None


def test_duplicate_urls_and_titles_keep_the_earliest() -> None:
    docs = [
        doc("a", url="https://www.x.com/story?utm_medium=1", title="Flood warning", hours=0),
        doc("b", url="https://x.com/story/", title="Flood  WARNING", hours=5),
        doc("c", url=None, title="Flood warning", hours=24 * 8),
        doc("d", url=None, title="", hours=1),
        doc("e", url=None, title="", hours=2),
    ]
    assert duplicate_urls(docs) == [False, True, False, False, False]
    assert duplicate_titles(docs, 7.0) == [False, True, False, False, False]  # 8 days later is news again
    assert duplicate_titles(docs, 10.0) == [False, True, True, False, False]


def test_minhash_near_duplicates_grouped_earliest_kept() -> None:
    config = MinHashConfig()
    variant = ARTICLE.replace("on Tuesday", "on Wednesday")
    other = "A completely different story about football results in the northern league this weekend."
    texts = [ARTICLE, variant, other, "", ARTICLE.upper()]
    signatures = minhash_signatures(texts, config)
    assert signatures.shape == (5, 128) and signatures.dtype == np.uint32
    assert np.array_equal(signatures[0], minhash_signatures([ARTICLE], config)[0])  # deterministic
    assert duplicate_minhash(signatures, config) == [False, True, False, False, True]
    # Exact agreement fraction estimates Jaccard: the one-word variant is close, the other story is not.
    assert (signatures[0] == signatures[1]).mean() > 0.8 and (signatures[0] == signatures[2]).mean() < 0.1
    assert shingles("One two three", 5) == ["one two three"]
    with pytest.raises(CleaningConfigError, match="bands x rows"):
        duplicate_minhash(signatures, MinHashConfig(bands=4))


def test_minhash_groups_are_transitive() -> None:
    config = MinHashConfig(num_perm=4, bands=4, rows=1)
    sig = np.array([[1, 2, 3, 4], [1, 9, 9, 9], [8, 9, 9, 9], [7, 7, 7, 7]], dtype=np.uint32)
    # 0~1 share band 0, 1~2 share bands 1-3: one group {0, 1, 2}, earliest (0) kept.
    assert duplicate_minhash(sig, config) == [False, True, True, False]


def test_clean_documents_counts_every_stage_and_orders_by_availability() -> None:
    docs = [
        doc("late", ARTICLE, hours=10, url="https://a.com/1"),
        doc("early-copy", ARTICLE.replace("Tuesday", "Monday"), hours=1, url="https://b.com/2"),
        doc("market", ARTICLE, hours=2, url="https://polymarket.com/event/x"),
        doc(
            "french",
            "Le parlement régional a approuvé mardi la nouvelle loi sur l'eau après un long débat " * 6,
            hours=3,
        ),
        doc("short", "Too short.", hours=4),
        doc("blank", "\u200b", hours=5),
        doc("url-dupe", ARTICLE.replace("law", "bill"), hours=6, url="https://www.b.com/2/"),
        doc("title-dupe", OTHER_ARTICLE.replace("stadium", "arena"), hours=7, title="Same"),
        doc("title-first", OTHER_ARTICLE, hours=0.5, title="Same"),
    ]
    config = CleaningConfig.from_dict(
        {"quality": {"min_stop_words": False, "min_alpha_word_ratio": False, "max_mean_word_length": False}}
    )
    kept, reports = clean_documents(docs, config, progress=False)
    removed = {r.stage: r.removed for r in reports}
    assert removed == {
        "normalize": 1,
        "market_sites": 1,
        "language": 1,
        "quality": 1,
        "dedup_url": 1,
        "dedup_title": 1,
        "dedup_minhash": 1,
    }
    assert [d.id for d in kept] == ["title-first", "early-copy"]
    assert [r.documents_in for r in reports] == [9, 8, 7, 6, 5, 4, 3]
    assert reports[1].reasons == {"domain polymarket.com": 1}
    assert reports[-1].to_dict()["out"] == 2


def test_disabled_stages_and_config_errors() -> None:
    config = CleaningConfig.from_dict({name: {"enabled": False} for name in CleaningConfig().to_dict()})
    docs = [doc("a", "x"), doc("b", "x", hours=1)]
    kept, reports = clean_documents(docs, config, progress=False)
    assert [d.id for d in kept] == ["a", "b"] and all(not r.enabled and r.removed == 0 for r in reports)
    assert CleaningConfig.from_dict({"quality": {"min_words": False}}).quality.min_words is None
    assert CleaningConfig.from_dict({"market_sites": {"domains": ["x.com"]}}).market_sites.domains == (
        "x.com",
    )
    for bad, message in [
        ({"sharpen": {}}, "unknown cleaning stage"),
        ({"quality": {"min_wordz": 3}}, "unknown option cleaning.quality.min_wordz"),
        ({"quality": {"enabled": "yes"}}, "true or false"),
        ({"quality": {"min_words": "ten"}}, "number or false"),
        ({"dedup_minhash": {"num_perm": False}}, "cannot be switched off"),
        ({"market_sites": {"domains": "x.com"}}, "must be a list"),
        ({"quality": 3}, "table of options"),
    ]:
        with pytest.raises(CleaningConfigError, match=message):
            CleaningConfig.from_dict(bad)
    assert (
        replace(CleaningConfig(), quality=QualityConfig(min_words=1)).to_dict()["quality"]["min_words"] == 1
    )


def test_short_texts_are_not_judged_by_language_identification() -> None:
    # py3langid calls these English headlines Nigerian Pidgin with p > 0.8: too short to judge.
    for headline in ("Nigeria: Buhari signs budget into law", "Ghana beat Nigeria 2-1 in friendly"):
        language, probability = identify_language(headline)
        assert language == "pcm" and probability > 0.8
        assert language_reason(doc("h", headline), LanguageConfig()) is None
        assert language_reason(doc("h", headline), LanguageConfig(min_chars=0)) == "language pcm"


def test_clean_document_stops_at_the_first_removing_stage() -> None:
    config = CleaningConfig()
    kept = clean_document(doc("a", "  " + ARTICLE), config)
    assert not kept.removed_by and kept.modified and kept.document.text == ARTICLE
    removed = clean_document(doc("m", "  " + ARTICLE, url="https://polymarket.com/x"), config)
    assert (removed.removed_by, removed.reason, removed.modified) == (
        "market_sites",
        "domain polymarket.com",
        True,
    )
    short = clean_document(doc("s", "Too short."), config)
    assert (short.removed_by, short.reason) == ("quality", "too few words")


def test_removal_warnings_name_stage_reasons_and_option() -> None:
    docs = [doc(f"h{i}", f"Headline number {i} about the budget", hours=i) for i in range(6)]
    docs += [doc("a", ARTICLE, hours=7), doc("b", OTHER_ARTICLE, hours=8)]
    _, reports = clean_documents(docs, CleaningConfig(), progress=False)
    (warning,) = removal_warnings(reports)
    assert warning.startswith("cleaning stage 'quality' removed 6 of 8 documents (75%)")
    assert "too few words (6)" in warning and "[cleaning.quality] min_words" in warning
    # Exactly half is not "more than half"; a disabled stage never warns.
    _, reports = clean_documents(docs[4:], CleaningConfig(), progress=False)
    assert removal_warnings(reports) == []
    off = CleaningConfig.from_dict({"quality": {"enabled": False}})
    assert removal_warnings(clean_documents(docs, off, progress=False)[1]) == []
