"""JSONL lines as every reader numbers them."""

from __future__ import annotations

from pathlib import Path

from forecast_dojo.jsonl import nonblank_lines


def test_nonblank_lines_number_from_one_counting_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"b": 2}\n{"c": 3}', encoding="utf-8")
    assert list(nonblank_lines(path)) == [(1, '{"a": 1}\n'), (4, '{"b": 2}\n'), (5, '{"c": 3}')]
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    assert list(nonblank_lines(tmp_path / "empty.jsonl")) == []
