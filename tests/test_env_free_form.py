"""Fixed-date episodes of free-form questions: the agent proposes outcomes, the free-form score is the step's score."""

from __future__ import annotations

import dataclasses
import json

import pytest
from gymnasium.utils.env_checker import check_env

from forecast_dojo.corpus import HashingEmbedder
from forecast_dojo.corpus.retrieval import ExactDenseRetriever
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.evaluation import metrics
from forecast_dojo.evaluation.runner import record_row
from forecast_dojo.scoring import brier_loss
from forecast_dojo.trajectory import load_records
from tests.conftest import tiny_events


def free_form_mayor():
    """The tiny world's mayoral race as a free-form question: no listed candidates, an answer and an alias."""
    mayor = tiny_events()[1]
    return dataclasses.replace(mayor, id="mayor-ff", outcomes=(), aliases=("M. Tolvanen",), market=())


def make_env(tiny_corpus, **kwargs):
    kwargs.setdefault("python_runner", None)
    events = [*tiny_events(), free_form_mayor()]
    return ForecastDojoEnv(events, tiny_corpus, ExactDenseRetriever(tiny_corpus, HashingEmbedder()), **kwargs)


def submit(probabilities, **extra) -> dict:
    arguments = {"probabilities": probabilities, **extra}
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": "submit_forecast", "arguments": arguments}}],
    }


def tool_texts(obs) -> list[str]:
    return [m["content"] for m in obs["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("prompt", ["default", "compact"])
def test_the_prompt_asks_for_proposed_outcomes_and_never_shows_the_answer(tiny_corpus, prompt):
    env = make_env(tiny_corpus, prompt=prompt)
    obs, info = env.reset("mayor-ff")
    assert obs["outcomes"] == [] and obs["event_id"] == "mayor-ff"
    text = obs["messages"][1]["content"]
    assert "free-form" in text.lower() and "Who will win" in text
    for secret in ("Mira Tolvanen", "Tolvanen", "Jonas Berg", "Ada Quist"):  # the answer and the candidates
        assert secret not in json.dumps(obs)


def test_the_free_form_score_is_the_steps_reward_and_the_record_reads_as_a_distribution(
    tiny_corpus, tmp_path
):
    env = make_env(tiny_corpus, reward="log", log_dir=tmp_path / "log")
    env.reset("mayor-ff")
    # matching ignores case and punctuation; the alias counts as the answer too (mass pooled)
    obs, reward, terminated, _, info = env.step(
        submit({"mira tolvanen!": 0.4, "M. Tolvanen": 0.2, "Jonas Berg": 0.2})
    )
    assert not terminated and info["valid"] and tool_texts(obs) == []  # the next step's fresh prompt
    assert reward == pytest.approx(1 - 0.4**2 - 0.2**2)  # the free-form score, not the log rule
    assert info["scores"]["free_form"] == pytest.approx(reward) and info["scores"]["top1_accuracy"] == 1.0
    assert info["proposed"] == {"mira tolvanen!": 0.4, "M. Tolvanen": 0.2, "Jonas Berg": 0.2}
    record = info["record"]
    assert record.outcomes == ["Mira Tolvanen", "Jonas Berg"] and record.forecast == pytest.approx([0.6, 0.2])
    assert record.outcome == "Mira Tolvanen" and record.outcome_index == 0
    assert brier_loss(record.forecast, 0) == pytest.approx(1 - reward)  # the K-outcome metrics agree
    # wrong names only: the answer is proposed with 0
    obs, reward, *_, info = env.step(submit({"Ada Quist": 1.0}))
    assert reward == pytest.approx(-1.0) and info["record"].forecast == [0.0, 1.0]
    assert info["scores"]["top1_accuracy"] == 0.0
    # probabilities that do not sum to 1 (FutureSim's rule): 1 - (1 - 0.5)^2 - 0.3^2
    obs, reward, *_ = env.step(submit({"MIRA TOLVANEN": 0.5, "Berg": 0.3}))
    assert reward == pytest.approx(0.66)
    obs, reward, terminated, _, info = env.step(submit({"Quist": 0.1}))
    assert terminated and reward == pytest.approx(1 - 1 - 0.01)
    env.close()
    records = load_records(tmp_path / "log")
    assert [r.step for r in records] == [0, 1, 2, 3]
    rows = [record_row(r, "scripted") for r in records]
    (line,) = metrics.summarize(rows)
    scores = [r.scores["free_form"] for r in records]
    assert line["brier"] == pytest.approx(1 - sum(scores) / len(scores))


@pytest.mark.parametrize(
    "probabilities, why",
    [
        ({"Mira Tolvanen": 0.7, "Jonas Berg": 0.7}, "sum to"),
        ([0.5, 0.5], "object"),
        ({}, "at least one"),
        ({"Mira Tolvanen": 1.5}, "in [0, 1]"),
        ({"Tolvanen": 0.3, "tolvanen": 0.3}, "same thing"),
        ({"...": 0.3}, "no letters"),
    ],
)
def test_an_invalid_free_form_forecast_scores_as_no_forecast(tiny_corpus, probabilities, why):
    env = make_env(tiny_corpus)
    env.reset("mayor-ff")
    obs, reward, *_, info = env.step(submit(probabilities))
    assert reward == 0.0 and not info["valid"] and "invalid_forecast" in info["flags"]
    assert info["record"].forecast == [0.0] and info["record"].outcomes == ["Mira Tolvanen"]
    assert why in info["record"].forecast_error


def test_a_spent_budget_scores_no_forecast(tiny_corpus):
    from forecast_dojo.budgets import Budgets

    env = make_env(tiny_corpus, budgets=Budgets(max_tool_calls=1, max_turns=1))
    env.reset("mayor-ff")
    obs, reward, *_, info = env.step("I think it is Tolvanen.")  # no tool call: the budget is spent
    assert not info["step_ended"]
    obs, reward, *_, info = env.step("Still Tolvanen.")  # told to submit, and did not
    assert info["step_ended"] and reward == 0.0 and "no_submission" in info["flags"]
    assert info["record"].forecast == [0.0] and not info["record"].valid


def test_fixed_outcome_events_beside_it_keep_their_rule(tiny_corpus):
    env = make_env(tiny_corpus, reward="brier")
    env.reset("harbor")
    _, reward, *_, info = env.step(submit({"Yes": 0.7, "No": 0.3}))
    assert reward == pytest.approx(-brier_loss([0.7, 0.3], 0)) and "free_form" not in info["scores"]


def test_notebook_mode_carries_a_free_form_assessment(tiny_corpus):
    env = make_env(tiny_corpus, memory="notebook")
    env.reset("mayor-ff")
    notebook = {"assessment": {"Mira Tolvanen": 0.5, "Jonas Berg": 0.2}, "evidence": [], "open_questions": []}
    obs, reward, *_, info = env.step(submit({"Mira Tolvanen": 0.5}, notebook=notebook))
    assert "no_notebook" not in info["flags"] and '"Jonas Berg": 0.2' in obs["messages"][1]["content"]
    assert json.loads(obs["notebook"])["assessment"] == {"Mira Tolvanen": 0.5, "Jonas Berg": 0.2}
    bad = {"assessment": {"Mira Tolvanen": 0.9, "Jonas Berg": 0.9}}
    obs, *_ = env.step(submit({"Mira Tolvanen": 0.5}, notebook=bad))
    assert tool_texts(obs)[0].startswith("Error: notebook rejected")
    env.reset("mayor-ff", options={"step": 1, "notebook": notebook})  # a replay from a free-form notebook


def test_check_env_on_a_free_form_question(tiny_corpus):
    env = make_env(tiny_corpus)
    check_env(env, skip_render_check=True)
    env.action_space.seed(0)
    env.reset("mayor-ff")
    for _ in range(60):
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert obs in env.observation_space
        if terminated:
            env.reset("mayor-ff")


def test_log_odds_on_a_free_form_question_are_refused_as_an_invalid_forecast(tiny_corpus):
    env = make_env(tiny_corpus)
    env.reset("mayor-ff")
    action = {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": "submit_forecast", "arguments": {"log_odds": [1, 0]}}}]}  # fmt: skip
    obs, reward, *_, info = env.step(action)
    assert reward == 0.0 and not info["valid"] and "invalid_forecast" in info["flags"]
    assert "needs listed outcomes" in info["record"].forecast_error


def test_evidence_on_a_free_form_question_is_refused_as_an_invalid_forecast(tiny_corpus):
    env = make_env(tiny_corpus)
    env.reset("mayor-ff")
    action = {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": "submit_forecast", "arguments": {"evidence": [["Ada", 1]]}}}]}  # fmt: skip
    obs, reward, *_, info = env.step(action)
    assert reward == 0.0 and not info["valid"] and "invalid_forecast" in info["flags"]
    assert "needs listed outcomes" in info["record"].forecast_error
