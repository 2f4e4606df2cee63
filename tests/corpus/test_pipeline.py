"""Build pipeline and ``corpus build`` CLI: recipes, reports, and a real Wikipedia slice end to end."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from datetime import date, datetime
from pathlib import Path

import pytest
import yaml

from forecast_dojo.corpus import cli as corpus_cli
from forecast_dojo.corpus.embedders import HashingEmbedder
from forecast_dojo.corpus.importers.wikipedia import classify_item
from forecast_dojo.corpus.pipeline import (
    REPORT_FILE,
    BuildRecipe,
    RecipeError,
    StrictBuildError,
    build_from_source,
    default_recipe,
    format_report,
)
from forecast_dojo.corpus.retrieval import ExactDenseRetriever
from forecast_dojo.corpus.store import Corpus, CorpusError
from forecast_dojo.gateway import TemporalGateway
from forecast_dojo.timeutil import UTC, end_of_day, to_micros

REPO = Path(__file__).resolve().parents[2]
RECIPES = {"wikipedia": "wikipedia-current-events.toml", "warc": "cc-news.toml", "generic": "generic.toml"}
ARTICLE = (
    "The regional parliament approved the new water management law on Tuesday after a long debate, and the "
    "ministry said that the detailed rules would be published in the autumn with the help of farmers and towns."
)


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="forecast-dojo")
    corpus_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize("source", sorted(RECIPES))
def test_shipped_recipes_spell_out_the_defaults(source: str) -> None:
    assert BuildRecipe.from_toml(REPO / "corpus" / RECIPES[source]) == default_recipe(source)


def test_recipe_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    for text, message in [
        ('source = "wikipedia"\nfoo = 1\n', "unknown recipe key"),
        ('source = "warc"\n[import]\nmin_yr = 3\n', "unknown \\[import\\] option"),
        ('source = "warc"\n[embedding]\nmodel = "x"\n', "unknown \\[embedding\\] option"),
        ('source = "warc"\n[cleaning.quality]\nmin_words = "x"\n', "number or false"),
        ('name = "x"\n', "names no source"),
        ('source = "web"\n', "unknown source"),
        ("source = [", "not valid TOML"),
    ]:
        bad.write_text(text)
        with pytest.raises(RecipeError, match=message):
            BuildRecipe.from_toml(bad)
    bad.write_text('source = "warc"\n')
    with pytest.raises(RecipeError, match="--source is 'generic'"):
        BuildRecipe.from_toml(bad, source="generic")
    with pytest.raises(FileNotFoundError):
        BuildRecipe.from_toml(tmp_path / "missing.toml")


def test_generic_build_report_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [
        {"id": "orig", "text": ARTICLE, "published_at": "2024-03-01T08:00:00Z", "url": "https://a.com/x"},
        {"id": "copy", "text": ARTICLE, "published_at": "2024-03-02T08:00:00Z", "url": "https://b.com/y"},
        {
            "id": "odds",
            "text": ARTICLE + " Odds moved.",
            "published_at": "2024-03-01",
            "url": "https://kalshi.com/m",
        },
        {
            "id": "later",
            "text": ARTICLE.replace("water", "forest").replace("Tuesday", "Friday") + " New.",
            "published_at": "2024-03-03",
        },
    ]
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = replace(default_recipe("generic"), embedder="hashing")
    result = build_from_source("generic", source, tmp_path / "c1", recipe=recipe, progress=False)
    assert result.corpus.table.column("id").to_pylist() == ["orig", "later"]
    stages = {s["stage"]: s for s in result.report["cleaning"]}
    assert stages["market_sites"]["removed"] == 1 and stages["dedup_minhash"]["removed"] == 1
    on_disk = json.loads((tmp_path / "c1" / REPORT_FILE).read_text())
    assert on_disk["content_hash"] == result.corpus.content_hash
    assert result.corpus.manifest["build"]["cleaning"] == on_disk["cleaning"]
    assert "market_sites" in format_report(on_disk)

    out = tmp_path / "c2"
    build = ["corpus", "build", "--source", "generic", "--out", str(out)]
    hashing = ["--embedder", "hashing", "--no-progress"]
    assert run_cli([*build, "--input", str(source), *hashing]) == 0
    printed = capsys.readouterr().out
    assert "dedup_minhash" in printed and "documents: 2" in printed
    assert "indexes: dense=exact, bm25" in printed
    built = Corpus.load(out)
    assert built.content_hash == result.corpus.content_hash and "bm25" in built.indexes()
    # Building into an existing corpus needs --overwrite; errors are printed, not raised.
    assert run_cli([*build, "--input", str(source), *hashing]) == 2
    assert "already holds a corpus" in capsys.readouterr().err
    assert run_cli([*build, "--input", str(tmp_path / "nope.jsonl")]) == 2
    with pytest.raises(SystemExit):
        run_cli([*build, "--input", str(source), "--start", "March"])
    # Ray's sizing flags are refused without the Ray runner, and with a cluster address for --ray-cpus.
    assert run_cli([*build, "--input", str(source), *hashing, "--embed-actors", "2"]) == 2
    assert "need --runner ray" in capsys.readouterr().err
    ray_flags = ["--runner", "ray", "--ray-address", "auto", "--ray-cpus", "2"]
    assert run_cli([*build, "--input", str(source), *hashing, *ray_flags]) == 2
    assert "a cluster (--ray-address) has its own" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_cli([*build, "--input", str(source), "--runner", "ray", "--ray-cpus", "0"])


def test_everything_removed_is_a_clear_error(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"text": "Too short.", "published_at": "2024-03-01"}) + "\n")
    with pytest.raises(CorpusError, match="no documents left"):
        build_from_source("generic", source, tmp_path / "c", embedder=HashingEmbedder(), progress=False)


@pytest.mark.shared_data
def test_wikipedia_slice_builds_a_searchable_corpus_matching_the_raw_yaml(
    data_root: Path, tmp_path: Path
) -> None:
    root = data_root / "wikipedia-current-events"
    start, end = date(2025, 11, 3), date(2025, 11, 5)
    result = build_from_source(
        "wikipedia", root, tmp_path / "wce", embedder=HashingEmbedder(), start=start, end=end, progress=False
    )
    corpus = Corpus.load(tmp_path / "wce")
    assert corpus.manifest["build"]["import"]["files_imported"] == 3
    assert result.report["documents"] == len(corpus)

    # Every summary in the raw YAML of those days is in the corpus, with its day's dates and its outlet.
    raw_summaries = 0
    texts = corpus.table.column("text").to_pylist()
    for day in (start, date(2025, 11, 4), end):
        raw = yaml.safe_load((root / f"{day:%Y/%m/%Y-%m-%d}.yaml").read_text())
        for items in raw["Intelligence_Payload"].values():
            for item in items:
                parsed = classify_item(item)
                if parsed.kind == "summary":
                    raw_summaries += 1
                    row = texts.index(parsed.body)
                    assert corpus.field("source", row) == ("; ".join(parsed.outlets) or None)
                    assert corpus.available_at(row) == end_of_day(day)
                    assert corpus.document(row).published_at == datetime(
                        day.year, day.month, day.day, tzinfo=UTC
                    )
    assert raw_summaries == len(corpus)

    # Searching finds the Synelnykove strike under its topic header, and only once its day has ended.
    retriever = ExactDenseRetriever(corpus, HashingEmbedder())
    query = "Russo-Ukrainian war Russian strike on Synelnykove Dnipropetrovsk Oblast"
    hits = retriever.search(query, len(corpus), 3)
    top = hits[0][0]
    assert corpus.field("source", top) == "RBC-Ukraine"
    assert corpus.field("title", top).startswith("Russo-Ukrainian war")
    assert "Synelnykove" in corpus.text(top)
    gateway = TemporalGateway(corpus, retriever)
    same_day = gateway.at(datetime(2025, 11, 4, 23, 59, tzinfo=UTC))
    assert corpus.field("id", top) not in {corpus.field("id", r) for r, _ in same_day.search(query, 50)}
    next_day = gateway.at(datetime(2025, 11, 5, 0, 0, 1, tzinfo=UTC))
    assert corpus.field("id", top) in {corpus.field("id", r) for r, _ in next_day.search(query, 50)}
    # Day D's page is visible to a cutoff at 00:00 UTC of D+1, and to no cutoff during day D.
    first_day = sum(1 for i in range(len(corpus)) if corpus.document(i).published_at.day == 3)
    assert first_day > 0
    midnight = to_micros(datetime(2025, 11, 4, tzinfo=UTC))
    assert corpus.n_visible(midnight - 1) == 0 and corpus.n_visible(midnight) == first_day


HEADLINES = [
    "Nigeria: Buhari signs budget into law",  # py3langid: Nigerian Pidgin, p = 0.84
    "Ghana beat Nigeria 2-1 in friendly",  # py3langid: Nigerian Pidgin, p = 0.88
    "Oil prices fall as demand worries weigh",
    "Senate Passes Bill On Police Reform",
    "Court adjourns fraud case till next month",
    "Spain closes 19 airports",
    "Teachers vow to continue strike over pay",
    "Floods displace thousands in northern province",
    "Central bank raises interest rate by half a point",
    "Parliament rejects plan to delay the election",
    "Storm knocks out power to 200,000 homes",
    "Tech giant unveils cheaper phone...",
    "Rebels agree to talks in neutral capital",
    "Drought pushes wheat prices to record high",
    "Striker signs three-year deal with champions",
    "Minister resigns after expenses scandal",
    "Volcano erupts near tourist village, flights halted",
    "Pharmacy chain to close 300 stores",
    "UN warns of famine in coastal region",
    "Police arrest 12 after stadium clashes",
]


def _headline_input(path: Path, *, articles: int) -> Path:
    """Headlines (and a few full articles) as generic JSONL: one distinct headline a day."""
    rows = [
        {"id": f"h{i}", "text": text, "published_at": f"2024-03-{i + 1:02d}T09:00:00Z"}
        for i, text in enumerate(HEADLINES)
    ]
    for i in range(articles):
        rows.append(
            {
                "id": f"a{i}",
                "text": ARTICLE.replace("water", ["forest", "fishing", "railway", "housing"][i % 4])
                + f" Part {i}.",
                "published_at": f"2024-04-{i + 1:02d}",
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_headline_corpus_warns_under_the_generic_recipe_and_builds_under_the_headlines_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _headline_input(tmp_path / "headlines.jsonl", articles=3)
    base = [
        "corpus",
        "build",
        "--source",
        "generic",
        "--input",
        str(source),
        "--embedder",
        "hashing",
        "--no-progress",
    ]

    # The generic recipe keeps the 3 articles only: exit 0, and a warning naming stage, reason and option.
    assert run_cli([*base, "--out", str(tmp_path / "generic")]) == 0
    captured = capsys.readouterr()
    assert "documents: 3" in captured.out
    assert "WARNING: cleaning stage 'quality' removed 20 of 23 documents (87%)" in captured.out
    warning = next(line for line in captured.err.splitlines() if line.startswith("warning: cleaning stage"))
    assert "'quality'" in warning and "too few words (20)" in warning
    assert "[cleaning.quality] min_words" in warning
    assert "corpus/headlines.toml" in captured.err
    report = json.loads((tmp_path / "generic" / REPORT_FILE).read_text())
    assert len(report["warnings"]) == 2

    # --strict: the same build fails before embedding, with the reason, and writes no corpus.
    assert run_cli([*base, "--out", str(tmp_path / "strict"), "--strict"]) == 3
    err = capsys.readouterr().err
    assert "error: --strict: a cleaning stage removed more than half of its input" in err
    assert "[cleaning.quality] min_words" in err
    assert not (tmp_path / "strict" / "manifest.json").exists()

    # The headlines recipe keeps every headline (English ones called Pidgin included) and the articles.
    recipe = REPO / "corpus" / "headlines.toml"
    assert run_cli([*base, "--out", str(tmp_path / "headlines"), "--config", str(recipe), "--strict"]) == 0
    captured = capsys.readouterr()
    assert "documents: 23" in captured.out and "warning" not in captured.err.lower()
    ids = Corpus.load(tmp_path / "headlines").table.column("id").to_pylist()
    assert {"h0", "h1"} <= set(ids)


def test_headlines_recipe_is_a_generic_recipe_for_short_texts() -> None:
    recipe = BuildRecipe.from_toml(REPO / "corpus" / "headlines.toml")
    assert recipe.source == "generic" and recipe.name == "headlines"
    assert recipe.cleaning.quality.min_words == 3 and recipe.cleaning.quality.min_stop_words is None
    # Language identification judges only texts long enough to judge, in every recipe.
    for source in RECIPES:
        assert default_recipe(source).cleaning.language.min_chars >= 80
    assert recipe.cleaning.language.min_chars >= 80


def test_strict_build_fails_in_both_library_entry_points(tmp_path: Path) -> None:
    source = _headline_input(tmp_path / "headlines.jsonl", articles=2)
    with pytest.raises(StrictBuildError, match="'quality' removed 20 of 22"):
        build_from_source(
            "generic", source, tmp_path / "c", embedder=HashingEmbedder(), progress=False, strict=True
        )
    result = build_from_source("generic", source, tmp_path / "c", embedder=HashingEmbedder(), progress=False)
    assert result.report["documents"] == 2 and result.report["warnings"]
