"""The console command's main job, end to end on a small slice of the synthetic world."""

from __future__ import annotations

from forecast_dojo.cli import build_parser


def test_help_lists_every_job():
    text = build_parser().format_help()
    for job in ("run", "world", "corpus", "events"):
        assert job in text


# The run job's end-to-end tests live in tests/evaluation/test_cli.py.
