"""The whole pipeline and the ``forecast-dojo events build`` command, on fixtures and on real data."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pytest

from forecast_dojo.corpus.store import Corpus
from forecast_dojo.events import cli
from forecast_dojo.events.build import (
    BuildConfig,
    BuildConfigError,
    build_events,
    override,
    render_summary,
    write_outputs,
)
from forecast_dojo.events.leakage import LeakageConfig
from forecast_dojo.events.polymarket import load_polymarket
from forecast_dojo.events.schedule import ScheduleConfig
from forecast_dojo.events.selection import SelectionConfig
from forecast_dojo.events.split import parse_window
from forecast_dojo.gateway import TemporalGateway
from forecast_dojo.schema import load_events
from forecast_dojo.timeutil import parse_instant, to_micros

from .conftest import make_corpus, make_doc, make_event

LOOSE = SelectionConfig(min_faithful_fraction=0.5, max_unfaithful_run_days=20)


def world_docs():
    docs = []
    for d in range(0, 50):
        docs.append(
            make_doc(f"harbor-{d}", f"Valdorian parliament debates the Harbor Act, day {d}.", d + 0.5)
        )
        docs.append(
            make_doc(f"mayor-{d}", f"Ostrava mayoral election poll, day {d}: Mira Tolvanen gains.", d + 0.6)
        )
    docs.append(make_doc("harbor-passes", "The Valdorian parliament passes the Harbor Act.", 30.5))
    return docs


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="forecast-dojo")
    cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_pipeline_accounts_for_every_event(polymarket_export: Path, tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path, world_docs())
    imported = load_polymarket(polymarket_export, progress=False)
    config = BuildConfig(
        train_window=parse_window("2029-01-01:2029-12-31"),
        eval_window=parse_window("2030-01-01:2030-12-31"),
        selection=LOOSE,
    )
    output = build_events([imported], config, corpus=corpus, progress=False)
    report = output.report
    removed = sum(report["selection"]["removed"].values())
    assert report["imported"]["events"] == len(imported.events) == removed + report["selection"]["kept"]
    assert (
        report["selection"]["kept"]
        == report["schedule"]["scheduled"] + report["schedule"]["dropped_no_forecast_dates"]
    )
    neither = sum(report["split"]["neither"].values())
    assert (
        report["schedule"]["scheduled"] == len(output.train) + len(output.eval) + neither == len(output.all)
    )
    assert {e.id for e in output.eval} == {"polymarket:501", "polymarket:event:9001"}
    assert report["selection"]["removed_examples"] == {
        "evidence": ["polymarket:801"],  # nothing about the Valdoria Cup final in the corpus
        "faithfulness": ["polymarket:502"],  # a price only every fourth day
    }
    harbor = next(e for e in output.eval if e.id == "polymarket:501")
    assert harbor.n_steps >= 3 and len(harbor.extra["market_at_cutoffs"]) == harbor.n_steps
    flagged = {f["doc_id"] for f in report["leakage"]["flags"] if f["event_id"] == "polymarket:501"}
    assert flagged == {"harbor-passes"}
    # The act's passage is public from day 30.5: the schedule ends before the first date that shows it.
    passed_at = corpus.available_at(corpus.row_of("harbor-passes"))
    assert harbor.cutoffs[-1] <= passed_at and harbor.excluded_doc_ids == ()
    assert harbor.extra["outcome_public"]["doc_ids"] == ["harbor-passes"]
    assert harbor.extra["outcome_public"]["steps_removed"] >= 1
    # Without the truncation the flagged document is hidden from the steps that would show it.
    untruncated = build_events(
        [imported],
        replace(config, leakage=LeakageConfig(truncate_public=False)),
        corpus=corpus,
        progress=False,
    )
    harbor = next(e for e in untruncated.eval if e.id == "polymarket:501")
    assert harbor.excluded_doc_ids == ("harbor-passes",) and "outcome_public" not in harbor.extra
    for flag in harbor.extra["leakage_flags"]:
        assert harbor.cutoffs[flag["first_step"]] > corpus.available_at(corpus.row_of(flag["doc_id"]))

    paths = write_outputs(output, tmp_path / "out")
    assert [e.id for e in load_events(paths["eval"])] == [e.id for e in output.eval]
    assert load_events(paths["train"]) == []
    saved = json.loads(paths["report_json"].read_text())
    assert saved["files"]["eval"].endswith("eval.jsonl")
    markdown = paths["report_md"].read_text()
    assert "## Leakage screen" in markdown and "harbor-passes" in markdown
    # Every imported event has one decision record; dropped ones are listed by question text.
    decisions = [json.loads(line) for line in paths["decisions"].read_text().splitlines()]
    assert len(decisions) == report["imported"]["events"]
    by_id = {d["event_id"]: d for d in decisions}
    assert by_id["polymarket:501"]["outcome"] == "eval"
    dropped = by_id["polymarket:801"]
    assert dropped["outcome"] == "dropped" and dropped["rule"] == "evidence"
    assert dropped["numbers"]["evidence_documents"] < 2 and dropped["question"]
    assert dropped["question"] in markdown and "## Dropped questions" in markdown
    assert "## Schedule leak" in markdown
    with pytest.raises(FileExistsError, match="overwrite"):
        write_outputs(output, tmp_path / "out")


def test_cli_build_writes_files_and_reports(
    polymarket_export: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    make_corpus(tmp_path, world_docs())
    config_file = tmp_path / "config.toml"
    config_file.write_text("[selection]\nmin_faithful_fraction = 0.5\nmax_unfaithful_run_days = 20\n")
    argv = ["events", "build", "--polymarket", str(polymarket_export), "--corpus", str(tmp_path / "corpus")]
    argv += [
        "--out",
        str(tmp_path / "out"),
        "--train-window",
        "2029-01-01:2029-12-31",
        "--eval-window",
        "2030-01-01:2030-12-31",
    ]
    argv += ["--config", str(config_file), "--no-progress", "--seed", "3"]
    assert run_cli(argv) == 0
    printed = capsys.readouterr().out
    assert "import polymarket: 4 events" in printed and "eval: 2 events" in printed
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "all.jsonl",
        "decisions.jsonl",
        "eval.jsonl",
        "report.json",
        "report.md",
        "train.jsonl",
    ]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["config"]["schedule"]["seed"] == 3
    assert run_cli(argv) == 2  # refuses to overwrite
    assert "already holds" in capsys.readouterr().err
    config_file.write_text("[selection]\nmin_horizon = 3\n")
    assert run_cli([*argv, "--overwrite"]) == 2
    assert "unknown option 'min_horizon'" in capsys.readouterr().err


def test_override_checks_names_and_types() -> None:
    assert override(SelectionConfig(), {"near_certain": 1}, "selection").near_certain == 1.0
    with pytest.raises(BuildConfigError, match="selection.min_horizon_days: expected int"):
        override(SelectionConfig(), {"min_horizon_days": 2.5}, "selection")
    with pytest.raises(BuildConfigError, match="expected bool"):
        override(SelectionConfig(), {"require_english": 1}, "selection")
    with pytest.raises(BuildConfigError, match="buffer_days"):
        BuildConfig(
            parse_window("2029-01-01:2029-12-31"),
            parse_window("2030-01-01:2030-12-31"),
            schedule=ScheduleConfig(buffer_days=3),
        )


@pytest.mark.shared_data
@pytest.mark.slow
def test_real_forecastbench_with_a_wikipedia_slice(
    data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The documented real command on a small corpus slice: train and eval come out and replay safely."""
    from datetime import date

    wikipedia = pytest.importorskip("forecast_dojo.corpus.importers.wikipedia")
    from forecast_dojo.corpus import HashingEmbedder, build_corpus

    documents, _ = wikipedia.load_wikipedia_current_events(
        data_root / "wikipedia-current-events", start=date(2025, 6, 1), end=date(2026, 3, 31), progress=False
    )
    corpus = build_corpus(documents, tmp_path / "wiki", HashingEmbedder(), progress=False)
    argv = [
        "events",
        "build",
        "--forecastbench",
        str(data_root / "forecastbench"),
        "--corpus",
        str(tmp_path / "wiki"),
    ]
    argv += [
        "--out",
        str(tmp_path / "out"),
        "--train-window",
        "2025-06-01:2025-12-15",
        "--eval-window",
        "2025-12-16:2026-03-28",
    ]
    assert run_cli([*argv, "--no-progress"]) == 0
    train, evaluation = (
        load_events(tmp_path / "out" / "train.jsonl"),
        load_events(tmp_path / "out" / "eval.jsonl"),
    )
    assert train and evaluation
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["imports"][0]["skipped"]["combination"] > 0
    assert (
        report["selection"]["removed"]["language"] > 0
        and report["selection"]["removed"]["non_triviality"] > 0
    )
    gateway = TemporalGateway(Corpus.load(tmp_path / "wiki"), None)
    first_visible = int(corpus.available_us[0])
    for event in train + evaluation:
        assert event.cutoffs[-1] <= event.close_at
        assert to_micros(event.cutoffs[0]) > first_visible
        assert set(event.excluded_doc_ids) == {f["doc_id"] for f in event.extra["leakage_flags"]}
        for flag in event.extra[
            "leakage_flags"
        ]:  # exclusions name documents visible at their first flagged step
            assert gateway.at(event.cutoffs[flag["first_step"]]).get(flag["doc_id"]) is not None
    assert all(e.n_steps >= 3 for e in evaluation)
    # A whole real episode end to end: the env replays an eval event on this corpus with a scripted agent.
    from forecast_dojo.agents import EvidenceAgent
    from forecast_dojo.corpus.retrieval import make_retriever
    from forecast_dojo.env import ForecastDojoEnv
    from forecast_dojo.evaluation.runner import run_episode

    loaded = Corpus.load(tmp_path / "wiki")
    env = ForecastDojoEnv(
        evaluation,
        loaded,
        make_retriever("dense", loaded, HashingEmbedder()),
        memory="notebook",
        python_runner=None,
        log_dir=tmp_path / "log",
    )
    event = evaluation[0]
    rows = run_episode(env, EvidenceAgent(), event.id)
    env.close()
    assert [r["step"] for r in rows] == list(range(event.n_steps)) and all(r["valid"] for r in rows)
    records = [json.loads(line) for line in (tmp_path / "log" / "steps.jsonl").read_text().splitlines()]
    for record in records:
        cutoff_us = to_micros(parse_instant(record["cutoff"]))
        for call in record["tool_calls"]:
            for doc_id in call["doc_ids"]:
                assert int(loaded.available_us[loaded.row_of(doc_id)]) < cutoff_us


def test_attrition_warning_names_the_rule_reasons_and_option() -> None:
    from forecast_dojo.events.build import attrition_warnings

    dropped = [
        {"outcome": "dropped", "rule": "evidence", "reason": f"{n} relevant documents < 2"} for n in (0, 0, 1)
    ]
    dropped.append({"outcome": "dropped", "rule": "language", "reason": "not English"})
    assert attrition_warnings(40, 4, dropped) == []  # 10 % is enough
    (warning,) = attrition_warnings(40, 3, dropped)
    assert "keeps 3 of 40" in warning and "evidence removed 3" in warning
    assert "N relevant documents < N x3" in warning and "selection.evidence_min_documents" in warning


def test_cli_strict_refuses_a_build_that_keeps_almost_nothing(
    polymarket_export: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    make_corpus(tmp_path, world_docs())
    config_file = tmp_path / "config.toml"
    config_file.write_text("[selection]\nevidence_min_documents = 1000\n")
    argv = ["events", "build", "--polymarket", str(polymarket_export), "--corpus", str(tmp_path / "corpus")]
    argv += ["--train-window", "2029-01-01:2029-12-31", "--eval-window", "2030-01-01:2030-12-31"]
    argv += ["--config", str(config_file), "--no-progress"]
    assert run_cli([*argv, "--out", str(tmp_path / "strict"), "--strict"]) == 3
    assert "warning: events build keeps 0 of 4" in capsys.readouterr().err
    assert not (tmp_path / "strict").exists()
    assert run_cli([*argv, "--out", str(tmp_path / "lenient")]) == 0
    captured = capsys.readouterr()
    assert "faithfulness removed 3" in captured.err and "selection.min_faithful_fraction" in captured.err
    assert "warning: events build keeps 0 of 4" in captured.out  # also in the printed summary


def test_config_file_is_toml_and_other_formats_get_a_clear_error(tmp_path: Path) -> None:
    from forecast_dojo.errors import BuildConfigError, InputNotFoundError
    from forecast_dojo.events.build import load_config_file

    expected = {"selection": {"min_faithful_fraction": 0.5}, "schedule": {"horizon": "close"}}
    (tmp_path / "c.toml").write_text(
        '[selection]\nmin_faithful_fraction = 0.5\n[schedule]\nhorizon = "close"\n'
    )
    assert load_config_file(tmp_path / "c.toml") == expected
    (tmp_path / "c.json").write_text(json.dumps(expected))
    (tmp_path / "c.yaml").write_text(
        "selection:\n  min_faithful_fraction: 0.5\nschedule:\n  horizon: close\n"
    )
    for name, kind in (("c.json", "JSON"), ("c.yaml", "YAML")):
        with pytest.raises(
            BuildConfigError, match=f"c.{kind.lower()}: events build configs are TOML .*not {kind}"
        ):
            load_config_file(tmp_path / name)
    for name, text, message in (
        ("bad.toml", "[selection\n", "not valid TOML"),
        ("list.toml", "selection = 3\n", "must be a mapping"),
    ):
        (tmp_path / name).write_text(text)
        with pytest.raises(BuildConfigError, match=message):
            load_config_file(tmp_path / name)
    (tmp_path / "latin.toml").write_bytes("[selection]\n# caf\xe9\n".encode("latin-1"))
    with pytest.raises(BuildConfigError, match="not UTF-8"):
        load_config_file(tmp_path / "latin.toml")
    with pytest.raises(InputNotFoundError, match="config file not found"):
        load_config_file(tmp_path / "missing.toml")


def public_world() -> tuple[list, list]:
    """Three events over days 0-100 and a corpus where two outcomes become public before the close."""
    events = [
        make_event("test:harbor", close_day=100),
        make_event(
            "test:mayor", question="Will Mira Tolvanen win the Ostrava mayoral election?", close_day=100
        ),
        make_event("test:bridge", question="Will the Kestrel bridge reopen?", outcome="No", close_day=100),
    ]
    docs = []
    for d in range(0, 101):
        docs.append(
            make_doc(f"harbor-{d}", f"Valdorian parliament debates the Harbor Act, day {d}.", d + 0.5)
        )
        docs.append(
            make_doc(f"mayor-{d}", f"Ostrava mayoral election poll, day {d}: Mira Tolvanen gains.", d + 0.6)
        )
        docs.append(make_doc(f"bridge-{d}", f"Kestrel bridge repairs continue, day {d}.", d + 0.7))
    # Public 70 days before the close (outside the 60-day window the exclusion screen reads) ...
    docs.append(make_doc("harbor-passes", "The Valdorian parliament passes the Harbor Act.", 30.5))
    # ... and so early that fewer than three dates come before it.
    docs.append(make_doc("mayor-wins", "Mira Tolvanen wins the Ostrava mayoral election.", 2.5))
    return events, docs


def test_outcome_public_truncates_the_schedule_and_drops_short_events(tmp_path: Path) -> None:
    from forecast_dojo.events.result import ImportResult

    events, docs = public_world()
    corpus = make_corpus(tmp_path, docs)
    imported = ImportResult(source="test", events=events)
    config = BuildConfig(
        train_window=parse_window("2029-01-01:2029-12-31"), eval_window=parse_window("2030-01-01:2030-12-31")
    )
    output = build_events([imported], config, corpus=corpus, progress=False)
    plain = build_events(
        [imported],
        replace(config, leakage=LeakageConfig(truncate_public=False)),
        corpus=corpus,
        progress=False,
    )
    before = {e.id: e for e in plain.all}
    after = {e.id: e for e in output.all}
    assert set(before) == {"test:harbor", "test:mayor", "test:bridge"}
    # The harbor schedule ends before the first date that shows the passage; the first steps are unchanged.
    harbor, passed_at = after["test:harbor"], corpus.available_at(corpus.row_of("harbor-passes"))
    assert before["test:harbor"].cutoffs[-1] > passed_at >= harbor.cutoffs[-1]
    assert harbor.cutoffs == before["test:harbor"].cutoffs[: harbor.n_steps] and harbor.n_steps == 3
    assert len(harbor.extra["market_at_cutoffs"]) == 3 and harbor.extra["schedule"]["steps"] == 3
    removed = before["test:harbor"].n_steps - 3
    assert harbor.extra["outcome_public"] == {
        "first_public_date": before["test:harbor"].cutoffs[3].date().isoformat(),
        "public_since": "2030-01-31T12:00:00Z",
        "doc_ids": ["harbor-passes"],
        "steps_removed": removed,
        "steps_kept": 3,
    }
    assert "test:harbor" in {e.id for e in output.eval}
    # The mayoral result is public before the third date: the event leaves the build.
    assert "test:mayor" not in after and "test:mayor" not in {e.id for e in output.train}
    # The bridge question's corpus never states an outcome: nothing changes.
    assert after["test:bridge"] == before["test:bridge"]
    public = output.report["leakage"]["outcome_public"]
    assert public["truncated_events"] == 1 and public["events_left"] == 1
    assert public["steps_removed"] == removed
    assert [p["event_id"] for p in public["events"]] == ["test:harbor", "test:mayor"]

    paths = write_outputs(output, tmp_path / "out")
    decisions = {d["event_id"]: d for d in map(json.loads, paths["decisions"].read_text().splitlines())}
    assert decisions["test:harbor"]["outcome"] == "eval"
    assert decisions["test:harbor"]["outcome_public"]["doc_ids"] == ["harbor-passes"]
    mayor = decisions["test:mayor"]
    assert (mayor["outcome"], mayor["stage"], mayor["rule"]) == ("dropped", "leakage", "outcome_public")
    assert mayor["outcome_public"]["doc_ids"] == ["mayor-wins"] and mayor["outcome_public"]["steps_kept"] < 3
    assert "outcome_public" not in decisions["test:bridge"]
    markdown = paths["report_md"].read_text()
    assert "Outcome public before the last forecast date" in markdown and "harbor-passes" in markdown
    assert "1 events truncated (7 steps removed), 1 left" in render_summary(output.report)

    # The minimum is configurable: asking for four steps, the harbor event (three before the passage) leaves too.
    strict = build_events(
        [imported], replace(config, leakage=LeakageConfig(public_min_steps=4)), corpus=corpus, progress=False
    )
    assert {e.id for e in strict.all} == {"test:bridge"}
    assert strict.report["leakage"]["outcome_public"]["events_left"] == 2


def test_outcome_rate_per_split_and_a_note_when_they_differ(tmp_path: Path) -> None:
    from forecast_dojo.events.build import outcome_rates, render_markdown

    def events(yes: int, no: int, prefix: str) -> list:
        return [make_event(f"{prefix}{i}", outcome="Yes" if i < yes else "No") for i in range(yes + no)]

    rates = outcome_rates({"train": events(18, 82, "t"), "eval": events(38, 62, "e")}, gap=0.10)
    assert (rates["train"]["rate"], rates["eval"]["rate"], rates["gap"]) == (0.18, 0.38, 0.2)
    assert rates["train"]["by_label"] == {"No": 0.82, "Yes": 0.18}
    lo, hi = rates["eval"]["interval95"]
    assert lo < 0.38 < hi and round(lo, 2) == 0.29  # Wilson interval of 38/100
    assert "18.0% first label (Yes) in train vs 38.0% in eval" in rates["note"]
    assert "miscalibrated for eval" in rates["note"]
    assert (
        outcome_rates({"train": events(18, 82, "t"), "eval": events(38, 62, "e")}, gap=0.25)["note"] is None
    )
    close = outcome_rates({"train": events(20, 80, "t"), "eval": events(25, 75, "e")}, gap=0.10)
    assert close["gap"] == 0.05 and close["note"] is None
    empty = outcome_rates({"train": events(1, 1, "t"), "eval": []}, gap=0.10)
    assert empty["eval"]["rate"] is None and empty["gap"] is None and empty["note"] is None

    # In a build: the report carries the rates, the summary prints them, report.md says so.
    events_, docs = public_world()
    corpus = make_corpus(tmp_path, docs)
    from forecast_dojo.events.result import ImportResult

    config = BuildConfig(
        train_window=parse_window("2029-01-01:2029-12-31"), eval_window=parse_window("2030-01-01:2030-12-31")
    )
    output = build_events(
        [ImportResult(source="test", events=events_)], config, corpus=corpus, progress=False
    )
    report = output.report
    in_eval = report["outcome_rates"]["eval"]  # the harbor (Yes) and bridge (No) events
    assert (in_eval["events"], in_eval["first_label"], in_eval["rate"]) == (2, 1, 0.5)
    assert in_eval["by_label"] == {"Yes": 0.5, "No": 0.5} and in_eval["interval95"][0] < 0.5
    assert report["outcome_rates"]["train"]["rate"] is None and report["outcome_rates"]["note"] is None
    assert "outcome rate (first label, Yes for binary): train n/a (0 events), eval 50.0%" in render_summary(
        report
    )
    report["outcome_rates"] = outcome_rates(
        {"train": events(18, 82, "t"), "eval": events(38, 62, "e")}, gap=0.1
    )
    assert "note: outcome rates differ between the splits" in render_summary(report)
    assert "**Note:** outcome rates differ between the splits" in render_markdown(report)
