"""The synthetic world's one train / held-out split."""

from __future__ import annotations

import pytest

from forecast_dojo.synthetic.split import split_event_ids, synthetic_split


def test_even_positions_train_odd_positions_are_held_out():
    split = split_event_ids(["c", "a", "b", "d", "a"])
    assert split.train == ("a", "c") and split.held_out == ("b", "d")
    assert split.part("b") == "held_out" and split.part("a") == "train" and split.part("z") is None
    assert split.select("all") == ["a", "b", "c", "d"] and split.select("eval") == ["b", "d"]
    with pytest.raises(ValueError):
        split.select("test")


def test_the_synthetic_world_splits_in_halves_and_the_run_command_agrees():
    from forecast_dojo.evaluation.cli import synthetic_split as cli_split

    split = synthetic_split(0)
    assert len(split.train) == len(split.held_out) == 20 and not set(split.train) & set(split.held_out)
    ids = list(split.train + split.held_out)
    assert cli_split(ids, "eval") == list(split.held_out) and cli_split(ids, "train") == list(split.train)
