"""GRPO: the TRL environment adapter over the env, the dataset of forecast steps, and 1 GRPO step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from forecast_dojo.prompts import Budgets
from forecast_dojo.scoring import brier_score
from forecast_dojo.training.grpo import (
    REFUSED,
    ForecastStepEnv,
    build_grpo_dataset,
    environment_factory,
    notebooks_from_logs,
)
from forecast_dojo.training.rewards import INVALID_PENALTY, MISSING_PENALTY

REPO = Path(__file__).resolve().parents[2]


def test_a_step_ends_cleanly_at_submit_forecast(make_tiny_env):
    env = make_tiny_env(memory="none")
    dataset = build_grpo_dataset(env, ["harbor"])
    row = dataset[1]
    assert (row["event_id"], row["step"], row["outcome_index"]) == ("harbor", 1, 0)
    step_env = ForecastStepEnv(make_tiny_env(memory="none"))
    assert step_env.reset(**row) is None
    hits = json.loads(step_env.search("Harbor Act"))
    assert hits and all(h["date"] < "2030-01-21" for h in hits)
    page = json.loads(step_env.read(hits[0]["id"]))
    assert page["id"] == hits[0]["id"]
    done = step_env.submit_forecast({"Yes": 0.7, "No": 0.3})
    assert done == "Forecast recorded. The step is over."
    # The env moved to step 3 of 3; nothing of that prompt reaches the rollout.
    assert "Forecast date" not in done and "step 3 of 3" not in done
    assert step_env.get_reward() == pytest.approx(brier_score([0.7, 0.3], 0))
    calls = step_env.calls
    assert step_env.search("more") == REFUSED and step_env.submit_forecast([1.0, 0.0]) == REFUSED
    assert step_env.calls == calls and step_env.env._step == 2  # refused calls never reach the env
    assert step_env.get_reward() == pytest.approx(
        brier_score([0.7, 0.3], 0)
    )  # the reward was fixed at submission


def test_last_step_submission_and_invalid_or_missing_forecasts(make_tiny_env):
    env = make_tiny_env(memory="none", budgets=Budgets(max_tool_calls=1, max_turns=3))
    rows = build_grpo_dataset(env, ["mayor"])
    step_env = ForecastStepEnv(make_tiny_env(memory="none", budgets=Budgets(max_tool_calls=1, max_turns=3)))

    step_env.reset(**rows[3])  # the last step: the episode terminates
    assert (
        step_env.submit_forecast([0.5, 0.5])
        == "Invalid forecast: the uniform distribution was recorded. The step is over."
    )
    assert step_env.get_reward() == pytest.approx(brier_score([1 / 3] * 3, 0) - INVALID_PENALTY)

    step_env.reset(**rows[0])
    assert step_env.get_reward() == pytest.approx(
        brier_score([1 / 3] * 3, 0) - MISSING_PENALTY
    )  # nothing yet
    assert "Budget spent" in step_env.search("poll")  # the env's budget notice reaches the model
    assert "without a forecast" in step_env.search("again")  # ignored: the env records no_submission
    assert step_env.ended and step_env.search("x") == REFUSED
    assert step_env.get_reward() == pytest.approx(brier_score([1 / 3] * 3, 0) - MISSING_PENALTY)


def test_rows_replay_the_identical_state_with_the_carried_notebook(make_tiny_env, teacher_log):
    log = teacher_log()
    notebooks = notebooks_from_logs([log])
    assert ("harbor", 1) in notebooks and ("harbor", 0) not in notebooks
    env = make_tiny_env(memory="notebook")
    dataset = build_grpo_dataset(env, ["harbor"], notebooks=notebooks)
    assert dataset[1]["notebook"] == notebooks[("harbor", 1)]
    assert notebooks[("harbor", 1)] in dataset[1]["prompt"][1]["content"]
    first, second = (ForecastStepEnv(make_tiny_env(memory="notebook")) for _ in range(2))
    first.reset(**dataset[2])
    second.reset(**dataset[2])
    assert first.env.conversation() == second.env.conversation()
    tampered = dict(dataset[2], prompt=[dataset[2]["prompt"][0], {"role": "user", "content": "other"}])
    with pytest.raises(ValueError, match="differs from the env's"):
        first.reset(**tampered)


def test_python_tool_only_where_the_sandbox_works(make_tiny_env):
    assert not hasattr(environment_factory(lambda: make_tiny_env(), python=False)(), "python")
    assert hasattr(environment_factory(lambda: make_tiny_env(), python=True)(), "python")


@pytest.mark.slow
def test_grpo_trainer_runs_with_the_env_as_reward(make_tiny_env, tiny_model_dir, tmp_path):
    from forecast_dojo.training.grpo import GRPOArguments, train_grpo

    args = GRPOArguments(
        model=str(tiny_model_dir),
        output_dir=str(tmp_path / "grpo"),
        events=["harbor"],
        max_steps=2,
        num_generations=2,
        per_device_train_batch_size=2,
        max_completion_length=16,
        max_tool_calling_iterations=2,
        python=False,
        use_cpu=True,
    )
    out = train_grpo(args, make_env=lambda: make_tiny_env(memory="none"))
    run = json.loads((out / "grpo_run.json").read_text())
    assert run["global_step"] == 2 and run["prompts"] == 3
    rewards = [e["reward"] for e in run["log_history"] if "reward" in e]
    # A random model submits nothing: every rollout earns uniform's Brier minus the missing penalty.
    assert rewards and all(r == pytest.approx(-0.5 - MISSING_PENALTY) for r in rewards)
    assert (out / "model.safetensors").exists()


@pytest.mark.slow
def test_grpo_script_smoke(synthetic_cache, tiny_model_dir, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["FORECAST_DOJO_CACHE"] = str(synthetic_cache)
    env["TRL_EXPERIMENTAL_SILENCE"] = "1"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "training" / "grpo.py"),
            "--model",
            str(tiny_model_dir),
            "--output_dir",
            str(tmp_path / "out"),
            "--embedder",
            "hashing",
            "--events",
            "syn-0000",
            "--max_steps",
            "1",
            "--num_generations",
            "2",
            "--per_device_train_batch_size",
            "2",
            "--max_completion_length",
            "8",
            "--max_tool_calling_iterations",
            "1",
            "--python",
            "false",
            "--use_cpu",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "checkpoint:" in result.stdout


def test_response_template_parses_what_the_chat_template_writes(tokenizer):
    """TRL reads tool calls out of generated ids with ``parse_response``: our wire format must parse."""
    from forecast_dojo.training.grpo import set_response_template

    tok = set_response_template(tokenizer)  # sets only response_template, which nothing else reads
    prompt = tok.apply_chat_template(
        [{"role": "user", "content": "q"}], add_generation_prompt=True, tokenize=True
    )
    prompt = prompt["input_ids"] if hasattr(prompt, "keys") else prompt
    reply = 'Two polls agree.\n<tool_call>{"name": "submit_forecast", "arguments": {"probabilities": {"Yes": 0.7, "No": 0.3}}}</tool_call><|im_end|>'
    parsed = tok.parse_response(tok.encode(reply), prefix=prompt)
    assert parsed["content"] == "Two polls agree."
    assert parsed["tool_calls"] == [
        {
            "type": "function",
            "function": {"name": "submit_forecast", "arguments": {"probabilities": {"Yes": 0.7, "No": 0.3}}},
        }
    ]


@pytest.mark.parametrize("memory", ["none", "notebook"])
@pytest.mark.parametrize("python", [False, True])
def test_grpo_tool_schemas_are_the_envs_in_every_memory_mode(make_tiny_env, memory, python):
    """GRPO's tool methods are generated from the env's tool functions: the schemas TRL renders are the env's."""
    from forecast_dojo.training.grpo import grpo_tool_schemas

    env = make_tiny_env(memory=memory)
    step_env = environment_factory(lambda: make_tiny_env(memory=memory), python=python)()
    expected = [s for s in env.tool_schemas() if python or s["function"]["name"] != "python"]
    assert grpo_tool_schemas(step_env) == expected
    submit = next(s for s in grpo_tool_schemas(step_env) if s["function"]["name"] == "submit_forecast")
    properties = submit["function"]["parameters"]["properties"]
    if memory == "none":
        assert "notebook" not in properties  # memory off: no notebook to write
    else:
        description = properties["notebook"]["description"]
        assert all(key in description for key in ('"assessment"', '"evidence"', '"open_questions"'))
    # A subset of tools (a no-tools mode) gives the env's subset.
    only_submit = make_tiny_env(memory=memory, tools=("submit_forecast",))
    assert grpo_tool_schemas(ForecastStepEnv(only_submit)) == only_submit.tool_schemas()


def test_trl_lists_the_generated_tools_as_the_envs(make_tiny_env):
    """What GRPOTrainer does with an environment instance: the public methods but reset/get_reward are the tools."""
    import inspect

    from transformers.utils import get_json_schema

    step_env = environment_factory(lambda: make_tiny_env(memory="notebook"), python=False)()
    names = sorted(
        n
        for n, _ in inspect.getmembers(type(step_env), predicate=inspect.isfunction)
        if n not in ("reset", "get_reward") and not n.startswith("_")
    )
    assert names == ["read", "search", "submit_forecast"]
    by_name = {s["function"]["name"]: s for s in step_env.env.tool_schemas()}
    assert all(get_json_schema(getattr(step_env, n)) == by_name[n] for n in names)
    # Keyword calls as TRL makes them reach the env; an unknown argument is the env's error, not an exception.
    step_env.reset(event_id="harbor", step=0)
    assert "unexpected argument" in step_env.search(query="Harbor Act", colour="red")


def test_notebook_logs_of_another_prompt_profile_are_refused(make_tiny_env, teacher_log):
    from forecast_dojo.errors import ConfigError

    log = teacher_log("compact-teacher", prompt="compact")
    assert notebooks_from_logs([log], "compact") == notebooks_from_logs([log])
    with pytest.raises(ConfigError, match="'compact' prompt profile, the env uses 'default'"):
        notebooks_from_logs([log], "default")
    env = make_tiny_env(memory="notebook", prompt="compact")
    dataset = build_grpo_dataset(env, ["harbor"], notebooks=notebooks_from_logs([log], env.prompt))
    assert dataset[0]["prompt"][0]["content"].startswith("Only news before")
