"""World mode: a scripted agent lives through the whole synthetic calendar; tools, budgets, rewards, logs."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from forecast_dojo.agents.world import WorldScriptedAgent
from forecast_dojo.trajectory import load_records
from forecast_dojo.world import WorldBudgets, oracle_scores, regret


def call(name: str, **arguments) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


def tool_texts(obs) -> list[str]:
    return [m["content"] for m in obs["messages"] if m["role"] == "tool"]


def unbatch(obs, i):
    """Sub-env ``i``'s observation out of a vector env's batched one (nested Dicts batch per key)."""
    return {
        k: unbatch(v, i)
        if isinstance(v, dict)
        else (int(v[i]) if k in ("step", "tool_calls", "turns") else v[i])
        for k, v in obs.items()
    }


def play(env, agent, *, seed=0):
    obs, info = env.reset(seed=seed)
    observations, rewards, done = [obs], [], False
    while not done:
        obs, reward, done, truncated, info = env.step(agent.act(obs))
        assert not truncated
        observations.append(obs)
        rewards.append(reward)
    return observations, rewards, info


def test_a_scripted_agent_plays_the_whole_calendar(make_world_env, tmp_path):
    env = make_world_env(log_dir=tmp_path / "log")
    observations, rewards, info = play(env, WorldScriptedAgent())
    env.close()
    days = env.calendar.days
    assert len(days) == info["n_days"] and {o["day"] for o in observations} == {d.isoformat() for d in days}
    assert set(info["scores"]) == {e.id for e in env.calendar.events} and len(info["scores"]) == 40
    for event in env.calendar.events:  # scored on every day it was open, and only then
        assert list(info["scores"][event.id]) == [d.isoformat() for d in env.calendar.open_days(event.id)]
    assert sum(rewards) == pytest.approx(sum(s for days_ in info["scores"].values() for s in days_.values()))
    # It submitted, then revised (a question's standing forecast changed while it stayed open), and advanced.
    changed = 0
    for before, after in zip(observations, observations[1:], strict=False):
        for qid, forecast in after["forecasts"].items():
            if qid in before["forecasts"] and before["forecasts"][qid] != forecast:
                changed += 1
    assert changed > 0
    records = load_records(tmp_path / "log")
    assert len(records) == sum(len(env.calendar.open_days(e.id)) for e in env.calendar.events)
    assert any("updated" in r.flags and r.messages for r in records)
    assert all(not r.messages for r in records if "updated" not in r.flags)
    # The agent beats no forecast (0) and uniform (0.5 binary) on average but not the oracle.
    mean = sum(r.reward for r in records) / len(records)
    assert 0.4 < mean < 1.0


def test_check_env_and_random_actions(make_world_env):
    env = make_world_env(end="2031-03-01", memory="files")
    check_env(env, skip_render_check=True)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=0)
    for _ in range(300):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs in env.observation_space
        if terminated:
            obs, _ = env.reset()


@pytest.mark.parametrize(
    "vector_cls, kwargs",
    [(gym.vector.SyncVectorEnv, {}), (gym.vector.AsyncVectorEnv, {"shared_memory": False})],
)
def test_vector_envs_play_calendars(make_world_env, vector_cls, kwargs):
    def factory():
        return make_world_env(end="2031-02-15")

    envs = vector_cls([factory, factory], **kwargs)
    agents = [WorldScriptedAgent(), WorldScriptedAgent()]
    obs, _ = envs.reset(seed=1)
    totals = [0.0, 0.0]
    finished = [False, False]
    for _ in range(400):
        actions = tuple(agents[i].act(unbatch(obs, i)) for i in range(2))
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        for i in range(2):
            if not finished[i]:
                totals[i] += float(rewards[i])
            finished[i] = finished[i] or bool(terminated[i])
        if all(finished):
            break
    envs.close()
    assert all(finished) and totals[0] == pytest.approx(totals[1]) and totals[0] > 0


def test_submit_forecasts_partial_updates_and_tool_errors(make_world_env):
    env = make_world_env(memory="none", budgets=WorldBudgets(max_turns=30))
    obs, _ = env.reset()
    qid = obs["open_questions"][0]["id"]
    obs, reward, *_ = env.step(call("submit_forecasts", forecasts={qid: {"Yes": 0.8, "No": 0.2}}))
    assert reward == 0.0 and obs["forecasts"] == {qid: {"Yes": 0.8, "No": 0.2}}
    bad = [
        {"nope": {"Yes": 1.0}},
        {qid: {"Yes": 0.8}},
        {qid: {"Yes": 0.8, "No": 0.8}},
        {qid: [0.5, 0.5]},
        {qid: {"Yes": float("nan"), "No": 0.5}},
        {},
        "not an object",
    ]
    for forecasts in bad:
        obs, *_ = env.step(call("submit_forecasts", forecasts=forecasts))
        assert tool_texts(obs)[0].startswith("Error:"), forecasts
        assert env._standing[qid] == {"Yes": 0.8, "No": 0.2}  # the standing forecast stays
    obs, *_ = env.step(call("submit_forecasts", forecasts={qid: {}}))
    assert obs["forecasts"] == {} and "withdrawn" in tool_texts(obs)[0]
    obs, *_ = env.step(call("read_question", question_id=qid))
    assert json.loads(tool_texts(obs)[0])["id"] == qid
    obs, *_ = env.step(call("write_memory", text="x"))
    assert "unknown tool" in tool_texts(obs)[0]  # memory tools exist only in memory mode


def test_free_form_forecasts_are_read_and_scored(make_world_env):
    env = make_world_env(free_form=True, budgets=WorldBudgets(max_turns=30))
    free = [e for e in env.calendar.events if e.free_form]
    assert free and all(e.id.endswith("-ff") and e.answer for e in free)
    assert all(len(e.extra["free_form_of"]) for e in free)
    target = free[0]
    obs, _ = env.reset()
    while target.id not in [q["id"] for q in obs["open_questions"]]:
        obs, *_ = env.step(call("next_day"))
    question = next(q for q in obs["open_questions"] if q["id"] == target.id)
    assert question["free_form"] and question["outcomes"] == []
    for forecasts in ({"A": 0.7, "B": 0.7}, {"A": 1.5}, {"A": 0.5, "a!": 0.1}, {"": 0.5}):
        obs, *_ = env.step(call("submit_forecasts", forecasts={target.id: forecasts}))
        assert tool_texts(obs)[0].startswith("Error:"), forecasts
    answer = target.answer.upper() + "!"  # matching ignores case and punctuation
    obs, *_ = env.step(call("submit_forecasts", forecasts={target.id: {answer: 0.6, "Someone Else": 0.2}}))
    obs, reward, *_, info = env.step(call("next_day"))
    assert info["day_scores"][target.id] == pytest.approx(1 - 0.4**2 - 0.2**2)


@pytest.mark.parametrize("mode", ["per-day", "time-weighted", "final"])
def test_reward_modes(make_world_env, mode):
    env = make_world_env(end="2031-04-01", reward=mode)
    _, rewards, info = play(env, WorldScriptedAgent())
    scores = info["scores"]
    if mode == "per-day":
        expected = sum(v for days in scores.values() for v in days.values())
        assert sum(1 for r in rewards if r != 0) > 1  # dense
    elif mode == "time-weighted":
        expected = sum(sum(days.values()) / len(days) for days in scores.values())
    else:
        expected = sum(list(days.values())[-1] for days in scores.values())
        assert all(r == 0 for r in rewards[:-1])
    assert sum(rewards) == pytest.approx(expected)


def test_memory_files_carry_only_what_the_agent_wrote(make_world_env):
    env = make_world_env(memory="files")
    obs, _ = env.reset()
    assert "Your memory files: (none yet)" in obs["messages"][1]["content"]
    first = obs["day"]
    obs, *_ = env.step(call("write_memory", text="harbor looks likely"))
    obs, *_ = env.step(call("next_day"))
    assert obs["memory_files"] == {first: "harbor looks likely"}
    assert f"memory/{first}.txt:\nharbor looks likely" in obs["messages"][1]["content"]
    assert len(obs["messages"]) == 2  # a fresh conversation: nothing else from yesterday
    obs, *_ = env.step(call("read_memory", day=first))
    assert tool_texts(obs) == ["harbor looks likely"]
    obs, *_ = env.step(call("write_memory", text="x" * 5000))
    assert tool_texts(obs)[0].startswith("Error:")


def test_day_budget_ends_the_day_and_episode_budget_ends_the_episode(make_world_env):
    env = make_world_env(budgets=WorldBudgets(max_tool_calls=1, max_turns=3))
    obs, _ = env.reset()
    day = obs["day"]
    obs, *_ = env.step(call("search", query="harbor"))
    assert obs["budget_left"]["tool_calls"] == 0 and "budget is spent" in obs["messages"][-1]["content"]
    obs, *_ = env.step(call("search", query="again"))  # refused, and the turn ends the day
    assert obs["day"] != day and "budget ran out" in obs["messages"][1]["content"]
    env = make_world_env(budgets=WorldBudgets(max_episode_turns=3))
    obs, _ = env.reset()
    qid = obs["open_questions"][0]["id"]
    env.step(call("submit_forecasts", forecasts={qid: {"Yes": 0.9, "No": 0.1}}))
    env.step(call("next_day"))
    obs, reward, terminated, truncated, info = env.step(call("next_day"))
    assert terminated and info["episode_budget_spent"]
    assert set(info["scores"]) == {e.id for e in env.calendar.events}
    assert list(info["scores"][qid]) == [d.isoformat() for d in env.calendar.open_days(qid)]


def test_oracle_regret_per_question_per_day(make_world_env, synthetic_world):
    from forecast_dojo.synthetic import oracle_forecast
    from forecast_dojo.world import day_instant

    env = make_world_env(end="2031-03-15", free_form=True)
    oracle = oracle_scores(synthetic_world, env.calendar)
    obs, _ = env.reset()
    done = False
    while not done:  # submit the oracle's posterior every day: zero regret
        day = obs["day"]
        forecasts = {}
        for q in obs["open_questions"]:
            event = env._by_id[q["id"]]
            base = synthetic_world.event(event.extra.get("free_form_of", event.id))
            posterior = oracle_forecast(synthetic_world, base.id, day_instant(env.day))
            forecasts[q["id"]] = dict(zip(base.outcomes, posterior, strict=True))
        if forecasts:
            env.step(call("submit_forecasts", forecasts=forecasts))
        obs, _, done, _, info = env.step(call("next_day"))
        assert day != obs["day"] or done
    gaps = regret(info["scores"], oracle)
    assert gaps and all(abs(v) < 1e-9 for days in gaps.values() for v in days.values())
    _, _, uniform_info = play(
        make_world_env(end="2031-03-15", free_form=True), WorldScriptedAgent(revise_every=10**6)
    )
    uniform_gap = regret(uniform_info["scores"], oracle)
    assert sum(v for days in uniform_gap.values() for v in days.values()) > 0


def test_gym_ids(synthetic_cache, monkeypatch):
    import forecast_dojo  # noqa: F401  (registers the ids)
    from forecast_dojo.errors import SpecError

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    env = gym.make("forecast_dojo/SyntheticSim-v0", embedder="hashing", python_runner=None, end="2031-02-01")
    obs, _ = env.reset(seed=0)
    assert obs["event_id"] == "Synthetic-v0" and obs["open_questions"]
    assert {e.id for e in env.unwrapped.calendar.events} <= {
        f"syn-{i:04d}" for i in range(0, 40, 2)
    }  # train split
    env.close()
    monkeypatch.setenv("HOME", "/nonexistent-home")  # the real events are not built there
    with pytest.raises(SpecError, match="events build|corpus build"):
        gym.make("forecast_dojo/ForecastBench-WCE-Sim-v0")


@pytest.mark.slow
def test_a_scripted_agent_plays_a_whole_calendar_under_check_env_and_in_a_vector_env(
    synthetic_cache, monkeypatch
):
    import forecast_dojo  # noqa: F401  (registers the ids)

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))

    def factory():  # gym.make: the PassiveEnvChecker and OrderEnforcing wrappers around the whole train calendar
        return gym.make("forecast_dojo/SyntheticSim-v0", embedder="hashing", python_runner=None)

    env = factory()
    check_env(env.unwrapped, skip_render_check=True)
    n_days = len(env.unwrapped.calendar.days)
    _, rewards, info = play(env, WorldScriptedAgent())
    env.close()
    expected = sum(v for days in info["scores"].values() for v in days.values())
    assert sum(rewards) == pytest.approx(expected) and info["day_index"] == n_days - 1

    envs = gym.vector.SyncVectorEnv([factory, factory])
    agents = [WorldScriptedAgent(), WorldScriptedAgent()]
    obs, _ = envs.reset(seed=0)
    totals, finished, steps = [0.0, 0.0], [False, False], 0
    while not all(finished):
        actions = tuple(agents[i].act(unbatch(obs, i)) for i in range(2))
        obs, step_rewards, terminated, truncated, _ = envs.step(actions)
        steps += 1
        for i in range(2):
            if not finished[i]:
                totals[i] += float(step_rewards[i])
            finished[i] = finished[i] or bool(terminated[i])
        assert steps < 20 * n_days
    envs.close()
    assert totals == pytest.approx([expected, expected])
