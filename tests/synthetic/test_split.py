"""The synthetic world's one train / held-out split, and the split an env is built on."""

from __future__ import annotations

import gymnasium as gym
import pytest

from forecast_dojo.errors import ForecastDojoError
from forecast_dojo.events.split import select_split
from forecast_dojo.synthetic.split import split_event_ids, synthetic_split


def test_even_positions_train_odd_positions_are_held_out():
    split = split_event_ids(["c", "a", "b", "d", "a"])
    assert split.train == ("a", "c") and split.held_out == ("b", "d")
    assert split.part("b") == "held_out" and split.part("a") == "train" and split.part("z") is None
    assert split.select("all") == ["a", "b", "c", "d"] and split.select("eval") == ["b", "d"]
    with pytest.raises(ValueError):
        split.select("test")


def test_the_synthetic_world_splits_in_halves():
    split = synthetic_split(0)
    assert len(split.train) == len(split.held_out) == 20 and not set(split.train) & set(split.held_out)


def test_gym_ids_and_make_hold_the_training_events_by_default(synthetic_cache, monkeypatch):
    from forecast_dojo.errors import UnknownEventError
    from forecast_dojo.registration import make

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    split = synthetic_split(0)
    env = gym.make("forecast_dojo/Synthetic-v0", embedder="hashing", python_runner=None)
    assert env.unwrapped.split == "train"
    assert sorted(e.id for e in env.unwrapped.events) == list(split.train)
    drawn = {env.reset(seed=seed)[0]["event_id"] for seed in range(60)}
    assert drawn <= set(split.train) and len(drawn) > 10  # reset(seed=...) never draws a held-out event
    held_out = split.held_out[0]
    with pytest.raises(UnknownEventError, match="train split") as err:
        env.reset(options={"event_id": held_out})
    assert isinstance(err.value, KeyError) and isinstance(err.value, ForecastDojoError)
    assert held_out in str(err.value) and "split='all'" in str(err.value)
    env.close()

    same = make("Synthetic-v0", embedder="hashing", python_runner=None)
    assert same.split == "train" and [e.id for e in same.events] == [e.id for e in env.unwrapped.events]
    evaluation = make("SyntheticNotebook-v0", embedder="hashing", python_runner=None, split="eval")
    assert sorted(e.id for e in evaluation.events) == list(split.held_out)
    assert evaluation.reset(held_out)[0]["event_id"] == held_out
    everything = gym.make("forecast_dojo/Synthetic-v0", embedder="hashing", python_runner=None, split="all")
    assert len(everything.unwrapped.events) == 40
    assert (
        len({same.run_id, evaluation.run_id, everything.unwrapped.run_id}) == 3
    )  # the split is in the run id
    with pytest.raises(ForecastDojoError, match="unknown split .test."):
        make("Synthetic-v0", embedder="hashing", python_runner=None, split="test")


def test_a_split_of_the_synthetic_world_is_computed_on_the_whole_world():
    from tests.conftest import tiny_events

    events = tiny_events()
    ids = sorted(e.id for e in events)
    train, name = select_split(events, None, synthetic=True, events_path=None)
    assert name == "train" and [e.id for e in train] == [i for i in ids if i in ids[0::2]]
    held_out, name = select_split(events, None, synthetic=True, events_path=None, default="eval")
    assert name == "eval" and {e.id for e in held_out} == set(ids[1::2])
