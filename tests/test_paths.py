"""The default real-data folder: ``$FORECAST_DOJO_DATA``, else ``../shared/data`` from the working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from forecast_dojo import paths
from forecast_dojo.cli import main


def test_the_variable_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "elsewhere"))
    assert paths.default_data_root() == tmp_path / "elsewhere"


def test_shared_data_beside_the_working_directory_is_found(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.DATA_ENV, raising=False)
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    assert paths.default_data_root() == tmp_path / "shared" / "data"


def test_a_wheel_install_never_looks_beside_site_packages(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.DATA_ENV, raising=False)
    monkeypatch.setattr(paths, "_source_checkout", lambda: None)  # what a wheel install sees
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert paths.data_root_candidates() == [tmp_path / "shared" / "data"]
    assert paths.default_data_root() == tmp_path / "shared" / "data"
    assert "site-packages" not in str(paths.default_data_root())
    message = paths.missing_data_message(tmp_path / "shared" / "data" / "forecastbench")
    assert paths.DATA_ENV in message and str(tmp_path / "shared" / "data") in message


def test_this_checkout_is_a_source_checkout():
    checkout = paths._source_checkout()
    assert checkout is not None and (checkout / "forecast_dojo" / "paths.py").is_file()
    assert checkout.parent / "shared" / "data" in paths.data_root_candidates()


@pytest.mark.parametrize("variable", [True, False])
def test_events_build_without_data_says_where_it_looked(tmp_path, monkeypatch, capsys, variable):
    monkeypatch.setattr(paths, "_source_checkout", lambda: None)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    if variable:
        monkeypatch.setenv(paths.DATA_ENV, str(tmp_path / "empty"))
    else:
        monkeypatch.delenv(paths.DATA_ENV, raising=False)
    argv = ["events", "build", "--out", str(tmp_path / "out")]
    argv += ["--train-window", "2024-01-01:2024-06-30", "--eval-window", "2024-07-01:2024-12-31"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "events build: error:" in err and paths.DATA_ENV in err
    assert str(Path(tmp_path / ("empty" if variable else "shared/data") / "forecastbench")) in err
    assert not (tmp_path / "out").exists()
