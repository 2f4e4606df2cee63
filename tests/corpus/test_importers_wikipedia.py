"""Wikipedia Current Events importer: item classification, header attribution, exclusions, real pages."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from forecast_dojo.corpus.importers.wikipedia import (
    DATE_SOURCE,
    HEADER_NOTE,
    classify_item,
    list_day_files,
    load_wikipedia_current_events,
    neutralize_header,
    parse_day_file,
)
from forecast_dojo.timeutil import UTC, end_of_day

LLM_DAYS = ["2026-01-07"] + [f"2026-03-{d:02d}" for d in range(6, 18)]


def write_day(root: Path, day: str, text: str) -> Path:
    path = root / day[:4] / day[5:7] / f"{day}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


NORMAL_DAY = """Date: '2025-06-01'
Source_URI: Portal:Current events/2025 June 1
Intelligence_Payload:
  Armed conflicts and attacks:
  - Russo-Ukrainian war
  - Eastern front of the Russo-Ukrainian war
  - One person is killed in a Russian strike on Kherson, Ukraine. (RBC-Ukraine)
  - Ukrainian drones strike an oil depot in Russia's Bryansk Oblast. (Reuters) (AP)
  - A lighthouse keeper in Norway retires after fifty years. (NRK)
  Sports:
  - War in Afghanistan (2001–2021)
  - Spain beats Italy 3–1 in the final. (BBC Sport), (ESPN)
  Uncategorized:
  - The Tesla share price falls by ten percent in one day. (Bloomberg)
"""


def test_classify_headers_and_summaries() -> None:
    assert classify_item("Russo-Ukrainian war").kind == "header"
    assert classify_item("2024 Iran–Israel conflict, Israel–Hezbollah conflict").kind == "header"
    assert classify_item("War in Afghanistan (2001–2021)").kind == "header"
    assert classify_item("COVID-19 pandemic in Washington, D.C.").kind == "header"
    assert classify_item("Murder of James Byrd Jr.").kind == "header"
    item = classify_item("Spain beats Italy. (BBC Sport), (ESPN)")
    assert (item.kind, item.body, item.outlets) == ("summary", "Spain beats Italy.", ("BBC Sport", "ESPN"))
    # Lower-case and numeric outlet names after a sentence are citations, not title disambiguators.
    assert classify_item("Vietnam approves a vaccine. (dpa International)").outlets == ("dpa International",)
    assert classify_item("Melbourne reopens. (9 News)").outlets == ("9 News",)
    # Notes are stripped but are not outlets; nested parentheses are handled.
    item = classify_item(
        "A ship evades pirates. (Yahoo! News) (Link dead as of 21:17, 14 January 2007 (UTC))"
    )
    assert item.outlets == ("Yahoo! News",)
    assert classify_item("Le Monde reports a strike. (Le Monde) (in French)").outlets == ("Le Monde",)
    # Citation URLs glued to the end are stripped; their site (unwrapping archive.org) is the source.
    item = classify_item("Comoros president is stabbed.https://apnews.com/article/x")
    assert (item.body, item.outlets) == ("Comoros president is stabbed.", ("apnews.com",))
    archived = classify_item(
        "Nepal bans smoking. [https://web.archive.org/web/2011/http://www.straitstimes.com/a]"
    )
    assert (archived.body, archived.outlets) == ("Nepal bans smoking.", ("straitstimes.com",))
    # Old summaries without outlet or final period are told apart by length.
    long_item = "SCO claims in a press release to be sending DMCA notification letters alleging copyright infringement"
    assert classify_item(long_item).kind == "summary"
    assert classify_item("A lighthouse keeper retires after fifty years.").kind == "summary"


def test_day_page_documents_titles_sources_dates(tmp_path: Path) -> None:
    path = write_day(tmp_path, "2025-06-01", NORMAL_DAY)
    docs, report = parse_day_file(path)
    assert [d.id for d in docs] == [f"wce-2025-06-01-{i:04d}" for i in range(1, 6)]
    first, second, unrelated, sport, uncategorized = docs
    assert (
        first.title
        == "Armed conflicts and attacks > Russo-Ukrainian war > Eastern front of the Russo-Ukrainian war"
    )
    assert first.text == "One person is killed in a Russian strike on Kherson, Ukraine."
    assert first.source == "RBC-Ukraine"
    # A later summary keeps the headers while it shares a content word with them ...
    assert second.title == first.title and second.source == "Reuters; AP"
    # ... and the first one that does not is a sibling outside the topic.
    assert unrelated.title == "Armed conflicts and attacks"
    assert sport.title == "Sports > War in Afghanistan (2001–2021)" and sport.source == "BBC Sport; ESPN"
    assert uncategorized.title == "" and uncategorized.source == "Bloomberg"
    for doc in docs:
        assert doc.published_at == datetime(2025, 6, 1, tzinfo=UTC)
        assert doc.available_at == end_of_day(date(2025, 6, 1))  # end of the day, never its start
        assert doc.date_source == DATE_SOURCE
    assert report.records_seen == 8 and report.documents == 5 and report.files_imported == 1


def test_other_schema_unparseable_and_mismatched_files_are_excluded_whole(tmp_path: Path) -> None:
    write_day(tmp_path, "2025-06-01", NORMAL_DAY)
    write_day(
        tmp_path, "2025-06-02", "date: '2025-06-02'\ndataset:\n  schema_version: '2.1'\nevents:\n- id: x\n"
    )
    write_day(tmp_path, "2025-06-03", 'date: "2025-06-03"\n* id: "evt"\n  summary: >\n  *bad alias\n')
    write_day(tmp_path, "2025-06-04", NORMAL_DAY)  # states 2025-06-01 inside
    write_day(tmp_path, "2025-06-05", "Date: '2025-06-05'\nIntelligence_Payload:\n  Sports: just text\n")
    docs, report = load_wikipedia_current_events(tmp_path, progress=False)
    assert {d.id[:14] for d in docs} == {"wce-2025-06-01"}
    reasons = {Path(e["path"]).name: e["reason"] for e in report.excluded_files}
    assert set(reasons) == {"2025-06-02.yaml", "2025-06-03.yaml", "2025-06-04.yaml", "2025-06-05.yaml"}
    assert "LLM-written schema" in reasons["2025-06-02.yaml"]
    assert "unparseable YAML" in reasons["2025-06-03.yaml"]
    assert "does not match" in reasons["2025-06-04.yaml"]
    assert "not a list" in reasons["2025-06-05.yaml"]
    assert report.files_seen == 5 and report.files_imported == 1


def test_date_range_selects_files_by_day(tmp_path: Path) -> None:
    for day in ("2025-05-31", "2025-06-01", "2025-06-02"):
        write_day(tmp_path, day, NORMAL_DAY.replace("2025-06-01", day).replace("June 1", "x"))
    days = [d for d, _ in list_day_files(tmp_path, start=date(2025, 6, 1), end=date(2025, 6, 1))]
    assert days == [date(2025, 6, 1)]
    with pytest.raises(FileNotFoundError, match="not found"):
        list_day_files(tmp_path / "missing")


@pytest.mark.shared_data
def test_real_pages_items_titles_sources_dates(data_root: Path) -> None:
    root = data_root / "wikipedia-current-events"
    docs, report = load_wikipedia_current_events(
        root, start=date(2025, 11, 4), end=date(2025, 11, 4), progress=False
    )
    killed = [d for d in docs if d.text.startswith("One person is killed and eight others are injured")]
    assert len(killed) == 1
    doc = killed[0]
    assert doc.text == (
        "One person is killed and eight others are injured in a Russian strike on Synelnykove, "
        "Dnipropetrovsk Oblast, Ukraine."
    )
    assert doc.title == "Russo-Ukrainian war > Eastern front of the Russo-Ukrainian war"
    assert doc.source == "RBC-Ukraine"
    assert doc.published_at == datetime(2025, 11, 4, tzinfo=UTC)
    assert doc.available_at == end_of_day(date(2025, 11, 4))
    assert report.excluded_files == []

    docs, _ = load_wikipedia_current_events(
        root, start=date(2024, 3, 5), end=date(2024, 3, 5), progress=False
    )
    by_id = {d.id: d for d in docs}
    icc = by_id["wce-2024-03-05-0007"]
    assert icc.title == "Russian invasion of Ukraine > International Criminal Court investigation in Ukraine"
    assert icc.text.startswith("The International Criminal Court issues arrest warrants for Sergey Kobylash")
    assert icc.source == "Reuters"
    assert by_id["wce-2024-03-05-0012"].text.startswith("Meta Platforms experiences a large-scale outage")
    assert by_id["wce-2024-03-05-0012"].title == ""  # a top-level item after the Super Tuesday group

    docs, _ = load_wikipedia_current_events(
        root, start=date(2015, 6, 10), end=date(2015, 6, 10), progress=False
    )
    mers = [d for d in docs if "MERS" in d.text]
    assert [d.title for d in mers] == ["2015 South Korean MERS outbreak"] and mers[0].source == "Reuters"
    karnak = [d for d in docs if "Karnak" in d.text][0]
    assert karnak.title == "Armed conflicts and attacks" and karnak.source == "ITV News; BBC; Fox News; AP"

    docs, _ = load_wikipedia_current_events(
        root, start=date(2002, 7, 1), end=date(2002, 7, 1), progress=False
    )
    assert len(docs) == 1 and docs[0].source is None and docs[0].text.startswith("A Russian Tupolev Tu-154")


@pytest.mark.shared_data
def test_real_2026_llm_days_and_unparseable_day_are_reported(data_root: Path) -> None:
    root = data_root / "wikipedia-current-events"
    docs, report = load_wikipedia_current_events(
        root, start=date(2026, 1, 1), end=date(2026, 3, 28), progress=False
    )
    reasons = {Path(e["path"]).stem: e["reason"] for e in report.excluded_files}
    assert sorted(reasons) == sorted([*LLM_DAYS, "2026-03-18"])
    for day in LLM_DAYS:
        assert "LLM-written schema" in reasons[day]
    assert reasons["2026-03-18"].startswith("unparseable YAML")
    days = {d.id[4:14] for d in docs}
    assert not days & set(reasons)
    assert "2026-03-28" in days and "2026-01-06" in days and "2026-03-05" in days
    assert report.files_imported == report.files_seen - 14


@pytest.mark.parametrize(
    ("header", "day", "expected"),
    [
        ("War in Afghanistan (2001–2021)", "2010-07-30", ("War in Afghanistan", True)),
        ("Iraqi Civil War (2014-2017)", "2015-08-15", ("Iraqi Civil War", True)),
        ("2014 FIFA World Cup", "2013-12-06", ("FIFA World Cup", True)),
        ("2015–16 Premier League", "2015-11-28", ("Premier League", True)),
        ("Financial crisis of 2007–2010", "2008-09-19", ("Financial crisis", True)),
        (
            "Battle of Aleppo (2012–2016), Iranian involvement",
            "2015-10-17",
            ("Battle of Aleppo, Iranian involvement", True),
        ),
        ("2025", "2024-03-01", ("", True)),
        # Years up to the page's own year, "present", and numbers that are not years stay.
        ("War in Afghanistan (2001–2021)", "2021-08-30", ("War in Afghanistan (2001–2021)", False)),
        ("Gaza war (2023–present)", "2024-01-01", ("Gaza war (2023–present)", False)),
        ("2024 Iran–Israel conflict", "2024-04-13", ("2024 Iran–Israel conflict", False)),
        ("COVID-19 pandemic", "2020-03-01", ("COVID-19 pandemic", False)),
        ("Flight 20345 crash", "2001-01-01", ("Flight 20345 crash", False)),
    ],
)
def test_neutralize_header_removes_years_after_the_page(
    header: str, day: str, expected: tuple[str, bool]
) -> None:
    assert neutralize_header(header, date.fromisoformat(day)) == expected


LATER_NAMES_DAY = """Date: '2013-04-05'
Source_URI: Portal:Current events/2013 April 5
Intelligence_Payload:
  2014 FIFA World Cup qualification:
  - Brazil is drawn into the final group stage. (Reuters)
  Armed conflicts and attacks:
  - War in Afghanistan (2001–2021)
  - Taliban fighters attack a checkpoint in Kandahar Province. (AP)
  - '2016'
  - A storm hits the coast. (BBC)
"""


def test_day_page_titles_never_name_a_later_year(tmp_path: Path) -> None:
    docs, report = parse_day_file(write_day(tmp_path, "2013-04-05", LATER_NAMES_DAY))
    assert [d.title for d in docs] == [
        "FIFA World Cup qualification",
        "Armed conflicts and attacks > War in Afghanistan",
        "Armed conflicts and attacks",
    ]
    assert report.notes[HEADER_NOTE] == 3
    assert report.to_dict()["notes"][HEADER_NOTE] == 3


@pytest.mark.shared_data
@pytest.mark.slow
def test_real_titles_name_no_year_after_their_page(data_root: Path) -> None:
    import re

    root = data_root / "wikipedia-current-events"
    docs, report = load_wikipedia_current_events(
        root, start=date(2015, 8, 1), end=date(2015, 12, 31), progress=False
    )
    assert report.notes[HEADER_NOTE] > 0
    for doc in docs:
        for year in re.findall(r"(?<!\d)(?:1[89]|20)\d\d(?!\d)", doc.title):
            assert int(year) <= doc.published_at.year, (doc.id, doc.title)
