"""The console command: its jobs, and how it reports a bad input (one line on stderr, exit status 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_dojo import registration
from forecast_dojo.arguments import dataclass_from_arguments
from forecast_dojo.cli import build_parser, main, parsers, plain_text

REPO = Path(__file__).resolve().parents[1]
FAST = ["--embedder", "hashing", "--no-python"]


def test_help_lists_every_job():
    text = build_parser().format_help()
    for job in ("run", "world", "corpus", "events", "export", "sft", "grpo"):
        assert job in text


RST_MARKUP = re.compile(r"``|:[a-z]+(:[a-z]+)?:`")


def test_no_help_text_shows_restructuredtext_markup():
    seen = []
    for parser in parsers(build_parser()):
        seen.append(parser.prog)
        text = parser.format_help()  # also proves every help string formats (no stray %)
        marked = [line for line in text.splitlines() if RST_MARKUP.search(line)]
        assert not marked, (parser.prog, marked)
    for command in (
        "run",
        "report",
        "world",
        "corpus build",
        "events build",
        "export sft",
        "sft",
        "grpo",
        "serve",
    ):
        assert f"forecast-dojo {command}" in seen, seen


def test_plain_text_removes_literals_and_roles():
    assert plain_text("The ``forecast-dojo`` command") == "The forecast-dojo command"
    assert plain_text("a :class:`~forecast_dojo.errors.ForecastDojoError`") == "a ForecastDojoError"
    assert (
        plain_text(":func:`forecast_dojo.make` and :ref:`the guide <guide>`")
        == "forecast_dojo.make and the guide"
    )
    assert plain_text(":py:meth:`~a.B.c`, 10 %% and `x`") == "c, 10 %% and `x`"


# The run job's end-to-end tests live in tests/evaluation/test_cli.py.


def one_error_line(capsys: pytest.CaptureFixture[str], command: str) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith(f"forecast-dojo {command}: error: ") and "Traceback" not in captured.err
    return lines[0]


@pytest.fixture
def no_heavy_loading(monkeypatch: pytest.MonkeyPatch, synthetic_cache: Path) -> None:
    """Fail the test if the command loads a corpus or an embedder (what the env and MiniLM cost)."""
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("loaded the corpus or the embedder before checking the arguments")

    monkeypatch.setattr(registration, "_corpus", refuse)
    monkeypatch.setattr(registration, "_embedder", refuse)


def test_unknown_spec_lists_the_known_ones(capsys):
    assert main(["run", "--spec", "Synthetic-v9"]) == 2
    line = one_error_line(capsys, "run")
    assert (
        "unknown environment 'Synthetic-v9'" in line
        and "Synthetic-v0" in line
        and "ForecastBench-WCE-v0" in line
    )


def write_spec(folder: Path, events: Path, corpus: Path) -> Path:
    spec = folder / "real.toml"
    spec.write_text(f'name = "Real-v0"\n[data]\nevents = "{events}"\ncorpus = "{corpus}"\n')
    return spec


def test_a_spec_whose_data_is_not_built_says_which_command_builds_it(tmp_path, capsys):
    events, corpus = tmp_path / "events" / "eval.jsonl", tmp_path / "corpus"
    spec = write_spec(tmp_path, events, corpus)
    assert main(["run", "--spec", str(spec)]) == 2
    line = one_error_line(capsys, "run")
    assert (
        str(spec) in line and f"corpus {corpus} is not built" in line and "forecast-dojo corpus build" in line
    )
    corpus.mkdir()
    assert main(["run", "--spec", str(spec)]) == 2
    line = one_error_line(capsys, "run")
    assert f"events file {events} is not built" in line
    assert f"forecast-dojo events build ... --corpus {corpus} --out {events.parent}" in line


def test_report_on_a_missing_or_foreign_folder(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert f"study folder not found: {tmp_path / 'nope'}" in one_error_line(capsys, "report")
    assert main(["report", str(tmp_path)]) == 2
    assert "is not a study folder (no study.json" in one_error_line(capsys, "report")
    assert not (tmp_path / "report.md").exists()


def test_missing_notebook_file(no_heavy_loading, tmp_path, capsys):
    argv = ["run", *FAST, "--agents", "uniform", "--modes", "notebook", "--step", "1"]
    assert main([*argv, "--notebook", str(tmp_path / "nb.json")]) == 2
    assert f"--notebook: file not found: {tmp_path / 'nb.json'}" in one_error_line(capsys, "run")
    (tmp_path / "nb.json").write_text("{}")
    assert main(["run", *FAST, "--notebook", str(tmp_path / "nb.json")]) == 2
    assert "add --step" in one_error_line(capsys, "run")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--agents", "honset"], "unknown agent 'honset'; known: ["),
        (["--agents", "openai"], "agent 'openai' needs --base-url and --model"),
        (["--modes", "notebok"], "unknown mode(s) ['notebok']"),
        (
            ["--modes", "notebook-stale", "--step", "0"],
            "--step works with the modes none, notebook, no-tools",
        ),
        (["--event-ids", "syn-0001", "syn-99999"], "--event-ids: unknown event id(s) ['syn-99999']"),
        (["--spec", "Synthetic-v0", "--event-ids", "nope"], "unknown event id(s) ['nope']"),
        (["--embedder", "minilmm"], "[data] embedder: unknown embedder 'minilmm'"),
    ],
)
def test_bad_arguments_are_reported_before_the_env_loads(no_heavy_loading, capsys, argv, message):
    assert main(["run", *FAST, *argv, "--out", "/nonexistent/never-written"]) == 2
    assert message in one_error_line(capsys, "run")


@pytest.mark.parametrize(
    ("flag", "value"),
    [("--max-events", "-2"), ("--max-events", "0"), ("--rollouts", "0"), ("--sample", "0"), ("--step", "-1"),
     ("--concurrency", "0"), ("--max-turns", "0"), ("--max-tool-calls", "-1"), ("--rollouts", "two"),
     ("--knowledge-cutoff", "2024/05/01"), ("--knowledge-cutoff", "20240501"), ("--knowledge-cutoff", "May 2024")],
)  # fmt: skip
def test_out_of_range_counts_are_usage_errors(capsys, flag, value):
    with pytest.raises(SystemExit) as exited:
        main(["run", flag, value])
    assert exited.value.code == 2
    assert f"argument {flag}: " in capsys.readouterr().err


def test_export_errors_are_one_line(tmp_path, capsys):
    assert main(["export", "sft", str(tmp_path / "no-such-log"), "--out", str(tmp_path / "out")]) == 2
    assert "no-such-log" in one_error_line(capsys, "export sft")


def test_the_console_command_prints_no_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "forecast_dojo.cli", "run", "--spec", "Nope-v0"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "forecast-dojo run: error: unknown environment 'Nope-v0'; known: ["
    )
    assert "'Synthetic-v0'" in lines[0]


def test_serve_help_names_its_options_without_loading_anything(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--spec", "--host", "--port", "--max-sessions", "--idle-timeout", "--split", "--no-python"):
        assert flag in text
    assert "``" not in text


@pytest.mark.parametrize("command", ["sft", "grpo", "serve"])
def test_training_and_serving_help_is_clean(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    captured = capsys.readouterr()
    assert captured.out.startswith(f"usage: forecast-dojo {command}") and not captured.err
    assert not RST_MARKUP.search(captured.out) and "%(" not in captured.out


def test_serve_defaults_to_the_training_split_and_takes_the_others():
    from forecast_dojo.integrations.cli import SERVE_FLAGS, ServeArguments

    parser = build_parser()
    serve = lambda *argv: dataclass_from_arguments(  # noqa: E731
        ServeArguments, parser.parse_args(["serve", *argv]), flags=SERVE_FLAGS
    )
    assert serve().split == "train" and ServeArguments().split == "train"
    assert serve("--split", "eval").split == "eval" and serve("--split", "all").split == "all"
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--split", "test"])


def test_import_and_the_parser_never_import_the_serving_frameworks():
    code = (
        "import sys, forecast_dojo; from forecast_dojo.cli import build_parser; build_parser(); "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'openenv', 'fastapi', 'uvicorn', 'verifiers'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_serve_refuses_bad_counts_in_one_line(no_heavy_loading, capsys):
    assert main(["serve", "--max-sessions", "0"]) == 2
    assert "--max-sessions must be >= 1" in one_error_line(capsys, "serve")
