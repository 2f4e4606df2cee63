"""Atomic writes: a failed write leaves the old file and no temporary behind."""

from __future__ import annotations

import json
import os

import pytest

from forecast_dojo.atomic import write_json_atomic, write_text_atomic


def test_a_write_replaces_the_whole_file_and_makes_its_folder(tmp_path):
    path = tmp_path / "new" / "folder" / "out.json"
    write_json_atomic(path, {"b": 1, "a": [1, 2]}, sort_keys=True)
    assert path.read_text().startswith('{\n  "a"') and path.read_text().endswith("}\n")
    write_text_atomic(path, "second")
    assert path.read_text() == "second"
    assert sorted(p.name for p in path.parent.iterdir()) == ["out.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "learning.json"
    write_json_atomic(path, {"old": True})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"not json": object()})  # fails before anything is renamed

    def no_rename(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(OSError, match="disk full"):
        write_json_atomic(path, {"new": True})
    assert json.loads(path.read_text()) == {"old": True}
    assert [p.name for p in tmp_path.iterdir()] == ["learning.json"]


def test_default_turns_what_json_cannot_hold_into_text(tmp_path):
    write_json_atomic(tmp_path / "a.json", {"where": tmp_path}, default=str)
    assert json.loads((tmp_path / "a.json").read_text()) == {"where": str(tmp_path)}


def test_the_file_gets_the_mode_a_plain_write_gives_not_mkstemps_0600(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text("{}")
    write_text_atomic(tmp_path / "atomic.json", "{}")
    assert (tmp_path / "atomic.json").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777
