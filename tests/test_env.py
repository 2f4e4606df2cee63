"""The environment contract: reset/step, tools, budgets, memory, determinism, gymnasium compatibility."""

from __future__ import annotations

import json
from datetime import datetime

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from forecast_dojo.env import ForecastDojoEnv


def call(name: str, **arguments) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def tool_contents(obs: dict) -> list[str]:
    return [m["content"] for m in obs["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("prompt", ["default", "compact"])
def test_reset_shows_question_and_never_the_outcome(make_tiny_env, prompt):
    env = make_tiny_env(prompt=prompt)
    obs, info = env.reset("harbor")
    assert obs["event_id"] == "harbor" and obs["step"] == 0 and info["n_steps"] == 3
    assert "n_steps" not in obs  # the episode length is researcher-facing only
    assert obs["forecast_date"] == "2030-01-11"
    assert [m["role"] for m in obs["messages"]] == ["system", "user"]
    prompt = obs["messages"][1]["content"]
    assert "Harbor Act" in prompt and '"Yes"' in prompt
    assert "2030-02-15" in prompt  # from the question/criteria, which are public
    for secret in ("2030-02-14", "2030-02-15T", "outcome is", "0.51"):  # resolution instant, market values
        assert secret not in prompt
    assert info["step_ended"] is False


def test_search_returns_only_visible_documents_and_read_needs_a_search(make_tiny_env):
    env = make_tiny_env()
    env.reset("harbor")
    obs, reward, terminated, truncated, info = env.step(
        call("search", query="Harbor Act passed parliament", top_k=20)
    )
    results = json.loads(tool_contents(obs)[0])
    assert reward == 0.0 and not terminated and not truncated
    assert 0 < len(results) <= 20
    assert all(r["date"] < "2030-01-11" for r in results)
    ids = {r["id"] for r in results}
    assert "leak-harbor" not in ids and "boundary-harbor" not in ids
    assert all(len(r["snippet"]) <= 500 for r in results)

    obs, *_ = env.step(call("read", doc_id=results[0]["id"]))
    page = json.loads(tool_contents(obs)[0])
    assert page["id"] == results[0]["id"] and page["next_offset"] is None and page["text"]

    # Unknown, future and unsurfaced ids get one identical error.
    errors = set()
    for doc_id in ("no-such-doc", "leak-harbor", "noise-59", "boundary-harbor"):
        obs, *_ = env.step(call("read", doc_id=doc_id))
        errors.add(tool_contents(obs)[0])
    assert len(errors) == 1 and next(iter(errors)).startswith("Error:")


def test_read_pages_with_offsets(make_tiny_env):
    env = make_tiny_env()
    env.reset("harbor")
    obs, *_ = env.step(call("search", query="Harbor Act lawmakers", top_k=1))
    doc_id = json.loads(tool_contents(obs)[0])[0]["id"]
    obs, *_ = env.step(call("read", doc_id=doc_id, offset=0, limit=10))
    first = json.loads(tool_contents(obs)[0])
    assert len(first["text"]) == 10 and first["next_offset"] == 10
    obs, *_ = env.step(call("read", doc_id=doc_id, offset=first["next_offset"], limit=20000))
    rest = json.loads(tool_contents(obs)[0])
    assert rest["next_offset"] is None and len(first["text"] + rest["text"]) > 10


def test_submit_scores_and_advances_then_terminates(make_tiny_env):
    env = gym.wrappers.RecordEpisodeStatistics(make_tiny_env())  # episode statistics are the wrapper's job
    obs, _ = env.reset(options={"event_id": "harbor"})
    rewards = []
    for step in range(3):
        obs, reward, terminated, truncated, info = env.step(
            call("submit_forecast", probabilities={"Yes": 0.8, "No": 0.2})
        )
        rewards.append(reward)
        assert info["step_ended"] and info["valid"] and info["flags"] == []
        assert info["scores"]["brier"] == pytest.approx(-(0.2**2 + 0.2**2))
        assert info["scores"]["log"] == pytest.approx(np.log(0.8))
        assert info["scores"]["spherical"] == pytest.approx(0.8 / np.hypot(0.8, 0.2))
        assert terminated == (step == 2) and truncated is False
        if not terminated:
            assert obs["step"] == step + 1 and [m["role"] for m in obs["messages"]] == ["system", "user"]
    assert rewards == pytest.approx([-0.08] * 3)
    assert info["episode"]["r"] == pytest.approx(-0.24) and info["episode"]["l"] == 3
    with pytest.raises(RuntimeError):
        env.step(call("submit_forecast", probabilities=[0.5, 0.5]))


@pytest.mark.parametrize(
    "probabilities",
    [[-0.2, 1.2], {"Yes": 0.5, "Maybe": 0.5}, [0.3, 0.3], [1.0], "Yes", {"Yes": 0.7}],
)
def test_invalid_forecast_is_replaced_by_uniform_and_flagged(make_tiny_env, probabilities):
    env = make_tiny_env()
    env.reset("harbor")
    obs, reward, _, _, info = env.step(call("submit_forecast", probabilities=probabilities))
    assert info["step_ended"] and not info["valid"] and "invalid_forecast" in info["flags"]
    assert info["forecast"] == [0.5, 0.5] and reward == pytest.approx(-0.5)


def test_tiny_rounding_is_normalized(make_tiny_env):
    env = make_tiny_env()
    env.reset("mayor")
    _, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.3334, 0.3333, 0.3334]))
    assert info["valid"] and sum(info["forecast"]) == pytest.approx(1.0, abs=1e-12)


def test_budget_forces_submission_then_falls_back(make_tiny_env):
    from forecast_dojo.prompts import Budgets

    env = make_tiny_env(budgets=Budgets(max_tool_calls=2, max_turns=5))
    env.reset("harbor")
    env.step(call("search", query="harbor"))
    obs, _, _, _, info = env.step(call("search", query="harbor vote"))
    assert info["budget_spent"] and "submit_forecast now" in obs["messages"][-1]["content"]
    obs, reward, _, _, info = env.step(call("search", query="again"))
    assert env.conversation()[1]["content"] == obs["messages"][1]["content"]  # a fresh step began
    assert info["step_ended"] and "no_submission" in info["flags"] and info["forecast"] == [0.5, 0.5]
    assert obs["step"] == 1


def test_turn_budget_counts_turns_without_tools(make_tiny_env):
    from forecast_dojo.prompts import Budgets

    env = make_tiny_env(budgets=Budgets(max_tool_calls=8, max_turns=2))
    env.reset("harbor")
    obs, *_ = env.step("I am thinking.")
    assert "No tool call found" in obs["messages"][-1]["content"]
    _, _, _, _, info = env.step("Still thinking.")
    assert info["budget_spent"] and not info["step_ended"]
    _, _, _, _, info = env.step(
        '<tool_call>{"name": "submit_forecast", "arguments": {"probabilities": [0.9, 0.1]}}</tool_call>'
    )
    assert info["step_ended"] and info["valid"] and info["forecast"] == [0.9, 0.1]


def test_text_action_with_several_calls_runs_them_in_order(make_tiny_env):
    env = make_tiny_env()
    env.reset("harbor")
    text = (
        "Let me look.\n"
        '<tool_call>{"name": "search", "arguments": {"query": "Harbor Act", "top_k": 2}}</tool_call>\n'
        '<tool_call>{"name": "search", "arguments": {"query": "weather", "top_k": 1}}</tool_call>'
    )
    obs, _, _, _, info = env.step(text)
    contents = tool_contents(obs)
    assert len(contents) == 2 and len(json.loads(contents[0])) == 2 and len(json.loads(contents[1])) == 1
    assert info["tool_calls_used"] == 2


def test_calls_after_submission_in_the_same_turn_do_not_run(make_tiny_env):
    env = make_tiny_env()
    env.reset("harbor")
    action = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "a",
                "type": "function",
                "function": {"name": "submit_forecast", "arguments": '{"probabilities": [0.6, 0.4]}'},
            },
            {"id": "b", "type": "function", "function": {"name": "search", "arguments": '{"query": "x"}'}},
        ],
    }
    obs, _, _, _, info = env.step(action)
    assert info["step_ended"] and info["forecast"] == [0.6, 0.4]
    assert obs["step"] == 1


@pytest.mark.parametrize(
    "action",
    [
        42,
        None,
        {"content": 5},
        {"content": "", "tool_calls": "search"},
        {"content": "", "tool_calls": [{"function": {"name": "search", "arguments": "{not json"}}]},
        {"content": "", "tool_calls": [{"function": {"name": "search", "arguments": "[1, 2]"}}]},
        {"content": "", "tool_calls": [{"function": {"name": "launch_missiles", "arguments": {}}}]},
        {
            "content": "",
            "tool_calls": [{"function": {"name": "search", "arguments": {"query": "x", "evil": 1}}}],
        },
        {"content": "", "tool_calls": [{"function": {"name": "search", "arguments": {}}}]},
        {
            "content": "",
            "tool_calls": [{"function": {"name": "search", "arguments": {"query": "x", "top_k": 10**9}}}],
        },
        {
            "content": "",
            "tool_calls": [{"function": {"name": "read", "arguments": {"doc_id": 3, "offset": -1}}}],
        },
        "<tool_call>not json</tool_call>",
        "<tool_call>[1]</tool_call>",
    ],
)
def test_malformed_actions_become_messages_not_exceptions(make_tiny_env, action):
    env = make_tiny_env()
    env.reset("harbor")
    obs, reward, terminated, truncated, info = env.step(action)
    assert reward == 0.0 and not terminated and not truncated and not info["step_ended"]
    assert any(m["content"].startswith(("Error", "No tool call")) for m in obs["messages"])
    assert obs in env.observation_space


def test_python_tool_disabled_reports_error(make_tiny_env):
    env = make_tiny_env()
    env.reset("harbor")
    obs, *_ = env.step(call("python", code="print(1)"))
    assert tool_contents(obs)[0].startswith("Error:")


def test_python_tool_uses_the_runner(make_tiny_env):
    seen = []

    def runner(code: str, now: datetime) -> tuple[str, str | None]:
        seen.append((code, now))
        return "42\n", None

    env = make_tiny_env(python_runner=runner)
    env.reset("harbor")
    obs, *_ = env.step(call("python", code="print(6*7)"))
    assert tool_contents(obs) == ["42\n"] and seen == [("print(6*7)", env._event.cutoffs[0])]


def notebook_for(yes: float, claim: str = "Support is growing", date: str = "2030-01-10") -> dict:
    return {
        "assessment": {"Yes": yes, "No": 1 - yes},
        "evidence": [{"claim": claim, "date": date, "doc_ids": ["harbor-08"]}],
        "open_questions": ["When is the vote?"],
    }


def test_notebook_mode_carries_only_the_notebook(make_tiny_env):
    env = make_tiny_env(memory="notebook")
    obs, _ = env.reset("harbor")
    assert "notebook from the previous forecast date: (none)" in obs["messages"][1]["content"]
    env.step(call("search", query="SECRET-QUERY-TOKEN harbor"))
    obs, _, _, _, info = env.step(
        call("submit_forecast", probabilities=[0.7, 0.3], notebook=notebook_for(0.7, "UNIQUE-CLAIM-XYZ"))
    )
    assert info["step_ended"] and info["flags"] == []
    prompt = "\n".join(m["content"] for m in obs["messages"])
    assert "UNIQUE-CLAIM-XYZ" in prompt
    assert "SECRET-QUERY-TOKEN" not in prompt and "lawmakers" not in prompt  # no transcript, no tool output

    # Without a notebook nothing is carried and the flag says so.
    obs, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.7, 0.3]))
    assert "no_notebook" in info["flags"]
    assert "UNIQUE-CLAIM-XYZ" not in "\n".join(m["content"] for m in obs["messages"])


def test_memory_none_carries_nothing(make_tiny_env):
    env = make_tiny_env(memory="none")
    env.reset("harbor")
    obs, _, _, _, info = env.step(
        call("submit_forecast", probabilities=[0.7, 0.3], notebook=notebook_for(0.7, "UNIQUE-CLAIM-XYZ"))
    )
    assert "UNIQUE-CLAIM-XYZ" not in json.dumps(obs)
    assert "notebook" not in json.dumps(env.tool_schemas())


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"assessment": {"Yes": 0.5}}, "every outcome label"),
        ({"assessment": {"Yes": 0.9, "No": 0.9}}, "sum"),
        (
            {"assessment": {"Yes": 0.5, "No": 0.5}, "evidence": [{"claim": "x", "date": "2031-01-01"}]},
            "after the forecast date",
        ),
        (
            {"assessment": {"Yes": 0.5, "No": 0.5}, "evidence": [{"claim": "x" * 600, "date": "2030-01-01"}]},
            "longer than",
        ),
        ({"assessment": {"Yes": 0.5, "No": 0.5}, "diary": "..."}, "unknown keys"),
        ("not json", "not valid JSON"),
    ],
)
def test_malformed_notebook_is_rejected_with_a_clear_error(make_tiny_env, bad, message):
    env = make_tiny_env(memory="notebook")
    env.reset("harbor")
    obs, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.5, 0.5], notebook=bad))
    assert not info["step_ended"]
    assert "notebook rejected" in tool_contents(obs)[0] and message in tool_contents(obs)[0]


def test_a_notebook_without_an_assessment_carries_the_forecast_recorded(make_tiny_env):
    env = make_tiny_env(memory="notebook")
    env.reset("harbor")
    claims = {"evidence": [{"claim": "CARRIED-CLAIM", "date": "2030-01-10", "doc_ids": ["harbor-08"]}]}
    obs, _, _, _, info = env.step(call("submit_forecast", log_odds=[1.0, 0.0], notebook=claims))
    assert info["step_ended"] and info["flags"] == []
    carried = json.loads(info["record"].notebook_out)
    assert carried["assessment"] == {"Yes": 0.73, "No": 0.27}  # softmax(1, 0), rounded as recorded
    assert "CARRIED-CLAIM" in obs["messages"][1]["content"]
    # an invalid forecast records the uniform one, and so does the notebook that leaves its assessment out
    obs, _, _, _, info = env.step(call("submit_forecast", probabilities=[0.9, 0.9], notebook=claims))
    assert info["step_ended"] and json.loads(info["record"].notebook_out)["assessment"] == {
        "Yes": 0.5,
        "No": 0.5,
    }


def test_replay_from_step_k_with_a_notebook(make_tiny_env):
    env = make_tiny_env(memory="notebook")
    obs, _ = env.reset(
        "harbor", options={"step": 2, "notebook": notebook_for(0.6, "REPLAYED-CLAIM", "2030-01-20")}
    )
    assert obs["step"] == 2 and "REPLAYED-CLAIM" in obs["messages"][1]["content"]
    with pytest.raises(ValueError, match="step"):
        env.reset("harbor", options={"step": 3})
    with pytest.raises(ValueError, match="notebook"):
        env.reset("harbor", options={"step": 0, "notebook": {"assessment": {}}})
    with pytest.raises(KeyError, match="unknown event"):
        env.reset("nope")
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset("harbor", options={"evnt_id": "harbor"})


def test_reset_without_id_is_deterministic_given_seed(make_tiny_env):
    env = make_tiny_env()
    picks = [env.reset(seed=s)[0]["event_id"] for s in range(20)]
    again = [env.reset(seed=s)[0]["event_id"] for s in range(20)]
    assert picks == again and set(picks) == {"harbor", "mayor"}


def test_same_seed_and_actions_give_identical_trajectories(make_tiny_env):
    actions = [
        call("search", query="poll Ostrava mayor"),
        "thinking",
        call("submit_forecast", probabilities=[0.5, 0.3, 0.2]),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "search", "arguments": "{bad"}}],
        },
        call("submit_forecast", probabilities={"Mira Tolvanen": 0.6, "Jonas Berg": 0.2, "Ada Quist": 0.2}),
    ]

    def run() -> list:
        env = make_tiny_env()
        out = [env.reset(seed=3, options={"event_id": "mayor"})]
        out += [env.step(a) for a in actions]
        return out

    # info["record"] is the one non-JSON value; its wall-clock field is the only non-deterministic one.
    def dump(value: object) -> str:
        return json.dumps(value, sort_keys=True, default=lambda record: record.deterministic_dict())

    assert dump(run()) == dump(run())


def test_check_env_passes(make_tiny_env):
    check_env(make_tiny_env(), skip_render_check=True)
    check_env(make_tiny_env(memory="notebook"), skip_render_check=True)


def test_random_actions_never_raise(make_tiny_env):
    env = make_tiny_env()
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(200):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs in env.observation_space
        if terminated:
            env.reset()


def test_render_ansi(make_tiny_env):
    env = make_tiny_env(render_mode="ansi")
    env.reset("harbor")
    assert "[system]" in env.render() and "Harbor Act" in env.render()


def test_constructor_validates_configuration(make_tiny_env):
    with pytest.raises(ValueError, match="memory"):
        make_tiny_env(memory="diary")
    with pytest.raises(ValueError, match="reward"):
        make_tiny_env(reward="accuracy")
    with pytest.raises(ValueError, match="submit_forecast"):
        make_tiny_env(tools=("search",))


def test_reward_choice(make_tiny_env):
    env = make_tiny_env(reward="log")
    env.reset("harbor")
    _, reward, _, _, _ = env.step(call("submit_forecast", probabilities=[0.0, 1.0]))
    assert reward == pytest.approx(np.log(1e-3))


def test_vector_envs(make_tiny_env, tiny_corpus_dir):
    from forecast_dojo.corpus import Corpus, HashingEmbedder
    from forecast_dojo.corpus.retrieval import ExactDenseRetriever
    from tests.conftest import tiny_events

    def factory():
        corpus = Corpus.load(tiny_corpus_dir)
        return ForecastDojoEnv(
            tiny_events(), corpus, ExactDenseRetriever(corpus, HashingEmbedder()), python_runner=None
        )

    submit = call("submit_forecast", probabilities=[0.5, 0.5])
    for vector_cls, kwargs in (
        (gym.vector.SyncVectorEnv, {}),
        (gym.vector.AsyncVectorEnv, {"shared_memory": False}),
    ):
        envs = vector_cls([factory, factory], **kwargs)
        obs, infos = envs.reset(seed=1, options={"event_id": "harbor"})
        assert list(obs["event_id"]) == ["harbor", "harbor"]
        obs, rewards, terminated, truncated, infos = envs.step((submit, submit))
        assert rewards.tolist() == pytest.approx([-0.5, -0.5]) and list(obs["step"]) == [1, 1]
        envs.close()


def test_python_tool_through_the_real_sandbox(make_tiny_env):
    from forecast_dojo.env import sandbox_python_runner
    from forecast_dojo.sandbox import sandbox_available

    available, reason = sandbox_available()
    if not available:
        pytest.skip(f"no sandbox here: {reason}")
    env = make_tiny_env(python_runner=sandbox_python_runner)
    env.reset("harbor")
    obs, *_ = env.step(call("python", code="import math\nprint(round(math.log(9), 4))"))
    assert tool_contents(obs) == ["<python_stdout>\n2.1972\n</python_stdout>"]
    obs, *_ = env.step(call("python", code="print(open('/etc/passwd').read())"))
    assert tool_contents(obs)[0].startswith("Error:") and "FileNotFoundError" in tool_contents(obs)[0]
    obs, *_ = env.step(call("python", code="import datetime\nprint(datetime.date.today())"))
    assert tool_contents(obs) == [f"<python_stdout>\n{env._event.cutoffs[0].date()}\n</python_stdout>"]


def test_the_compact_profile_is_recorded_and_plays_like_the_default(make_synthetic_env, tmp_path):
    """Same facts, fewer words: a scripted agent forecasts identically; run.json and records name the profile."""
    from forecast_dojo.agents import EvidenceAgent
    from forecast_dojo.trajectory import RUN_FILE, STEPS_FILE

    forecasts = {}
    for prompt in ("default", "compact"):
        env = make_synthetic_env(memory="notebook", prompt=prompt, log_dir=tmp_path / prompt)
        agent = EvidenceAgent(top_k=5)
        obs, _ = env.reset("syn-0002")
        done, records = False, []
        while not done:
            obs, _, done, _, info = env.step(agent.act(obs))
            if info["step_ended"]:
                records.append(info["record"])
        env.close()
        assert {r.prompt for r in records} == {prompt}
        assert json.loads((tmp_path / prompt / RUN_FILE).read_text()).get("prompt", "default") == prompt
        logged = [json.loads(line) for line in (tmp_path / prompt / STEPS_FILE).read_text().splitlines()]
        assert [r["prompt"] for r in logged] == [prompt] * len(records)
        forecasts[prompt] = [r.forecast for r in records]
    assert forecasts["default"] == forecasts["compact"]
