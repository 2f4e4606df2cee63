"""TRL's environment_factory through forecast-dojo servers: the remote GRPO adapter, and GRPOTrainer steps."""

from __future__ import annotations

import pytest

pytest.importorskip("openenv")

from forecast_dojo.errors import ConfigError  # noqa: E402
from forecast_dojo.integrations.openenv import (  # noqa: E402
    BackgroundServer,
    build_remote_dataset,
    create_app,
    remote_environment_factory,
)
from forecast_dojo.prompts import Budgets  # noqa: E402
from forecast_dojo.scoring import brier_score  # noqa: E402
from forecast_dojo.training.grpo import REFUSED, ForecastStepEnv, build_grpo_dataset  # noqa: E402
from forecast_dojo.training.rewards import INVALID_PENALTY, MISSING_PENALTY  # noqa: E402
from tests.conftest import tiny_llama  # noqa: E402


@pytest.fixture
def tiny_server(make_tiny_env):
    budgets = Budgets(max_tool_calls=1, max_turns=3)
    with BackgroundServer(
        create_app(lambda: make_tiny_env(memory="none", budgets=budgets, split="train"), max_sessions=4)
    ) as running:
        yield running


def test_the_remote_adapter_rewards_as_the_in_process_one(tiny_server, make_tiny_env):
    local_env = make_tiny_env(memory="none", budgets=Budgets(max_tool_calls=1, max_turns=3))
    remote_rows = build_remote_dataset(tiny_server.url)
    local_rows = build_grpo_dataset(local_env, ["harbor", "mayor"])
    assert remote_rows["prompt"] == local_rows["prompt"] and "outcome_index" not in remote_rows.column_names
    factory = remote_environment_factory([tiny_server.url, tiny_server.url])
    remote, local = factory(), ForecastStepEnv(local_env)
    assert remote.tool_names == local.tool_names == ("search", "read", "submit_forecast")
    # valid, invalid and missing forecasts, and the budget notices: the same text back and the same reward
    plays = [
        (1, lambda e: e.submit_forecast({"Yes": 0.7, "No": 0.3})),
        (2, lambda e: e.submit_forecast([0.5, 0.6])),
        (3, lambda e: (e.search("poll"), e.search("again"), e.read("nope"))),
        (4, lambda e: None),
    ]
    for row, play in plays:
        (remote_text, remote_reward), (local_text, local_reward) = [
            (step_env.reset(**rows[row]), play(step_env), step_env.get_reward())[1:]
            for step_env, rows in ((remote, remote_rows), (local, local_rows))
        ]
        assert remote_text == local_text and remote_reward == pytest.approx(local_reward), row
    remote.reset(**remote_rows[1])
    assert remote.submit_forecast({"Yes": 0.7, "No": 0.3}) == "Forecast recorded. The step is over."
    assert remote.get_reward() == pytest.approx(brier_score([0.7, 0.3], 0))
    assert remote.search("more") == REFUSED
    remote.reset(**remote_rows[3])  # mayor step 0: three outcomes
    assert remote.get_reward() == pytest.approx(brier_score([1 / 3] * 3, 0) - MISSING_PENALTY)
    remote.submit_forecast([2.0])
    assert remote.get_reward() == pytest.approx(brier_score([1 / 3] * 3, 0) - INVALID_PENALTY)


def test_servers_of_different_envs_are_refused(tiny_server, make_tiny_env):
    other_app = create_app(lambda: make_tiny_env(memory="notebook", split="train"))
    with BackgroundServer(other_app) as other, pytest.raises(ConfigError, match="serves another env"):
        remote_environment_factory([tiny_server.url, other.url])
    eval_app = create_app(lambda: make_tiny_env(split="eval"))
    with BackgroundServer(eval_app) as held_out, pytest.raises(ConfigError, match="training split"):
        build_remote_dataset(held_out.url)


@pytest.mark.slow
def test_grpo_trainer_steps_through_the_server(tiny_server, tmp_path):
    """Two GRPO steps of the tiny random Llama whose rollouts run on the server (2 generations: 2 sessions)."""
    pytest.importorskip("trl")
    llm = pytest.importorskip("forecast_dojo.agents.llm")
    from trl import GRPOTrainer

    from forecast_dojo.training.grpo import GRPOArguments, grpo_config, set_response_template

    try:
        tokenizer = llm.load_tokenizer("smollm2")
    except FileNotFoundError as err:
        pytest.skip(str(err))
    set_response_template(tokenizer)
    tokenizer.padding_side = "left"
    dataset = build_remote_dataset(tiny_server.url, ["harbor"])
    config = grpo_config(
        GRPOArguments(
            output_dir=str(tmp_path),
            max_steps=2,
            num_generations=2,
            per_device_train_batch_size=2,
            max_completion_length=16,
            max_tool_calling_iterations=2,
            use_cpu=True,
        )
    )
    trainer = GRPOTrainer(
        model=tiny_llama(len(tokenizer)),
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=remote_environment_factory(tiny_server.url),
    )
    result = trainer.train()
    assert result.global_step == 2
    rewards = [e["reward"] for e in trainer.state.log_history if "reward" in e]
    # A random model submits nothing: every rollout earns uniform's Brier minus the missing penalty.
    assert rewards and all(r == pytest.approx(-0.5 - MISSING_PENALTY) for r in rewards)
    assert {type(e).__name__ for e in trainer._environment_pool[None]} == {
        "RemoteForecastStepEnv[none: search, read, submit_forecast]"
    }
