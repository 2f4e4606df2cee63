"""The env as a gymnasium citizen: standard wrappers and both vector envs with autoreset."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from forecast_dojo.env import ForecastDojoEnv
from tests.conftest import tiny_events


def submit(k: int = 2) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "submit_forecast", "arguments": {"probabilities": [1 / k] * k}},
            }
        ],
    }


def test_the_env_never_writes_episode_statistics(make_tiny_env):
    env = make_tiny_env()
    env.reset("harbor")
    infos = [env.step(submit())[-1] for _ in range(3)]
    assert all("episode" not in info for info in infos)


def test_record_episode_statistics(make_tiny_env):
    env = gym.wrappers.RecordEpisodeStatistics(make_tiny_env())
    for _ in range(2):  # two episodes: statistics reset between them
        env.reset(options={"event_id": "harbor"})
        env.step("thinking")  # a research turn: reward 0, counted as a step of the episode
        for _ in range(3):
            _, _, terminated, truncated, info = env.step(submit())
        assert terminated and not truncated
        assert info["episode"]["r"] == pytest.approx(-1.5) and info["episode"]["l"] == 4
    assert len(env.return_queue) == 2


def test_time_limit_truncates(make_tiny_env):
    env = gym.wrappers.TimeLimit(make_tiny_env(), max_episode_steps=2)
    env.reset(options={"event_id": "harbor"})
    _, _, terminated, truncated, _ = env.step(submit())
    assert not terminated and not truncated
    _, _, terminated, truncated, info = env.step("thinking")
    assert truncated and not terminated and not info["step_ended"]
    env.reset(options={"event_id": "harbor"})  # a truncated episode can be reset


def test_order_enforcing_and_passive_checker(make_tiny_env):
    env = gym.wrappers.OrderEnforcing(gym.wrappers.PassiveEnvChecker(make_tiny_env()))
    with pytest.raises(gym.error.ResetNeeded):
        env.step(submit())
    obs, info = env.reset(seed=0)
    assert obs in env.observation_space
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(submit(len(env.unwrapped.event.outcomes)))
        assert obs in env.observation_space
        if terminated:
            break


def test_check_env_under_wrappers(make_tiny_env):
    env = gym.wrappers.RecordEpisodeStatistics(gym.wrappers.TimeLimit(make_tiny_env(), max_episode_steps=50))
    check_env(env.unwrapped, skip_render_check=True)


def factory(corpus_dir):
    def make():
        from forecast_dojo.corpus import Corpus, HashingEmbedder
        from forecast_dojo.corpus.retrieval import ExactDenseRetriever

        corpus = Corpus.load(corpus_dir)
        events = [e for e in tiny_events() if e.id == "harbor"]
        env = ForecastDojoEnv(
            events, corpus, ExactDenseRetriever(corpus, HashingEmbedder()), python_runner=None
        )
        return gym.wrappers.RecordEpisodeStatistics(env)

    return make


@pytest.mark.parametrize(
    "vector_cls, kwargs",
    [(gym.vector.SyncVectorEnv, {}), (gym.vector.AsyncVectorEnv, {"shared_memory": False})],
    ids=["sync", "async"],
)
def test_vector_envs_autoreset(tiny_corpus_dir, vector_cls, kwargs):
    envs = vector_cls([factory(tiny_corpus_dir)] * 2, **kwargs)
    assert envs.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    obs, _ = envs.reset(seed=1)
    actions = (submit(), submit())
    returns = []
    for turn in range(4):
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        if turn < 2:
            assert list(obs["step"]) == [turn + 1] * 2
        if turn == 2:  # the third submission ends the episode
            assert terminated.all() and rewards.tolist() == pytest.approx([-0.5, -0.5])
            assert infos["_episode"].all() and np.allclose(infos["episode"]["r"], -1.5)
            assert [r.step for r in infos["record"]] == [2, 2]
            returns.append(infos["episode"]["r"])
        if turn == 3:  # next-step autoreset: this call reset both envs (the action was ignored)
            assert not terminated.any() and rewards.tolist() == [0.0, 0.0]
            assert list(obs["step"]) == [0, 0]
            assert [m["role"] for m in obs["messages"][0]] == ["system", "user"]
    obs, rewards, terminated, truncated, infos = envs.step(actions)
    assert list(obs["step"]) == [1, 1] and infos["_record"].all()
    envs.close()
    assert returns
