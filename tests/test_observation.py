"""Structured observations: what a policy legitimately knows, and never the episode's length."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from forecast_dojo.schema import SchemaError, load_events, save_events
from forecast_dojo.timeutil import iso
from tests.conftest import tiny_events


def call(name, **arguments):
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}],
    }


NOTEBOOK = {"assessment": {"Yes": 0.7, "No": 0.3}, "evidence": [], "open_questions": []}


def episode(env, event_id="harbor"):
    """Every observation of an episode that searches once per step and submits a notebook."""
    obs, info = env.reset(event_id)
    seen = [(obs, info)]
    terminated = False
    while not terminated:
        obs, _, _, _, info = env.step(call("search", query="Harbor Act"))
        seen.append((obs, info))
        arguments = {"probabilities": [0.7, 0.3]}
        if env.memory == "notebook":
            arguments["notebook"] = NOTEBOOK
        obs, _, terminated, _, info = env.step(call("submit_forecast", **arguments))
        seen.append((obs, info))
    return seen


def test_observation_carries_the_structured_facts(make_tiny_env):
    env = make_tiny_env(memory="notebook")
    obs, info = env.reset("mayor")
    event = tiny_events()[1]
    assert obs["question"] == event.question and obs["outcomes"] == list(event.outcomes)
    assert obs["forecast_date"] == "2030-01-16" and obs["memory"] == "notebook" and obs["notebook"] is None
    assert obs["budget_left"] == {"tool_calls": 8, "turns": 10}
    obs, *_ = env.step(call("search", query="poll"))
    assert obs["budget_left"] == {"tool_calls": 7, "turns": 9}
    notebook = {"assessment": {"Mira Tolvanen": 0.5, "Jonas Berg": 0.3, "Ada Quist": 0.2}}
    obs, *_ = env.step(call("submit_forecast", probabilities=[0.5, 0.3, 0.2], notebook=notebook))
    assert obs["step"] == 1 and json.loads(obs["notebook"])["assessment"] == notebook["assessment"]
    assert obs["budget_left"] == {"tool_calls": 8, "turns": 10} and obs in env.observation_space
    assert make_tiny_env().reset("harbor")[0]["notebook"] is None  # memory-free: nothing carried


def test_budget_left_says_when_to_submit(make_tiny_env):
    from forecast_dojo.prompts import Budgets

    env = make_tiny_env(budgets=Budgets(max_tool_calls=5, max_turns=2))
    env.reset("harbor")
    obs, _, _, _, info = env.step("thinking")
    assert obs["budget_left"] == {"tool_calls": 5, "turns": 1}
    obs, _, _, _, info = env.step("still thinking")
    assert info["budget_spent"] and obs["budget_left"] == {"tool_calls": 0, "turns": 0}


@pytest.mark.parametrize("prompt", ["default", "compact"])
@pytest.mark.parametrize("memory", ["none", "notebook"])
def test_nothing_agent_facing_reveals_the_number_of_steps(make_tiny_env, memory, prompt):
    """Two events with 3 and 4 steps: agent-facing text and values never state the count or the last step."""
    for event_id, n_steps in (("harbor", 3), ("mayor", 4)):
        env = make_tiny_env(memory=memory, prompt=prompt)
        seen = episode(env, event_id) if event_id == "harbor" else []
        if event_id == "mayor":
            obs, info = env.reset("mayor")
            seen = [(obs, info)]
            for _ in range(n_steps):
                seen.append(env.step(call("submit_forecast", probabilities=[0.4, 0.3, 0.3]))[::4])
        for obs, info in seen:
            assert info["n_steps"] == n_steps  # researcher-facing
            assert "n_steps" not in obs
            text = json.dumps(obs)
            assert not re.search(rf"\bof {n_steps}\b", text) and "last step" not in text.lower()
            assert not re.search(r"step \d+ of", text)
        # Observation keys and value shapes are the same at every step, the last one included.
        assert len({tuple(sorted(obs)) for obs, _ in seen}) == 1


@pytest.mark.parametrize("prompt", ["default", "compact"])
def test_nothing_agent_facing_reveals_the_outcome(make_tiny_env, prompt):
    """Prompt, tool results and notices of whole episodes never carry the outcome, its date or the market."""
    for event in tiny_events():
        env = make_tiny_env(memory="notebook", prompt=prompt)
        seen = episode(env, event.id) if event.id == "harbor" else [env.reset(event.id)]
        text = json.dumps([obs for obs, _ in seen])
        prompts = [
            m["content"] for obs, _ in seen for m in obs["messages"] if m["role"] in ("system", "user")
        ]
        public = " ".join((event.question, event.background, event.resolution_criteria))
        assert prompts and iso(event.resolved_at) not in text and iso(event.close_at) not in text
        for day in (event.resolved_at.date().isoformat(), event.close_at.date().isoformat()):
            assert day in public or day not in text  # a date only where the public question states it
        for point in event.market:
            assert not any(f"{p:.2f}" in " ".join(prompts) for p in point.probabilities)
        assert not any(
            re.search(rf"\b(outcome|answer) (is|was) {re.escape(event.outcome)}\b", t) for t in prompts
        )


@pytest.mark.parametrize("prompt", ["default", "compact"])
def test_show_episode_length_is_an_explicit_ablation(make_tiny_env, prompt):
    env = make_tiny_env(show_episode_length=True, prompt=prompt)
    obs, info = env.reset("harbor")
    assert obs["n_steps"] == 3 and "(step 1 of 3)" in obs["messages"][1]["content"]
    assert obs in env.observation_space and env.run_metadata["show_episode_length"] is True
    assert "show_episode_length" not in make_tiny_env().run_metadata  # the default keeps its run id


def test_scripted_agents_do_not_read_the_prompt(make_tiny_env):
    """The agents act on the structured fields: blanking the prompt text changes nothing they do."""
    from forecast_dojo.agents import EvidenceAgent

    def actions(blank: bool) -> list:
        env = make_tiny_env(memory="notebook")
        agent = EvidenceAgent()
        obs, _ = env.reset("mayor")
        out, terminated = [], False
        while not terminated:
            if blank:
                obs = {
                    **obs,
                    "messages": [
                        {**m, "content": ""} if m["role"] in ("system", "user") else m
                        for m in obs["messages"]
                    ],
                }
            action = agent.act(obs)
            out.append(action)
            obs, _, terminated, _, _ = env.step(action)
        return out

    assert actions(blank=True) == actions(blank=False)


def test_excluded_doc_ids_is_a_typed_event_field(make_tiny_env, tmp_path, tiny_corpus):
    from forecast_dojo.corpus import HashingEmbedder
    from forecast_dojo.corpus.retrieval import ExactDenseRetriever
    from forecast_dojo.env import ForecastDojoEnv

    harbor = dataclasses.replace(tiny_events()[0], excluded_doc_ids=("harbor-08",))
    legacy = dataclasses.replace(tiny_events()[0], extra={"excluded_doc_ids": {"0": ["harbor-08"]}})
    assert harbor == legacy and legacy.excluded_doc_ids == ("harbor-08",)  # the legacy form migrates
    save_events([harbor], tmp_path / "e.jsonl")
    assert load_events(tmp_path / "e.jsonl")[0].excluded_doc_ids == ("harbor-08",)
    env = ForecastDojoEnv(
        [harbor], tiny_corpus, ExactDenseRetriever(tiny_corpus, HashingEmbedder()), python_runner=None
    )
    env.reset("harbor")
    obs, *_ = env.step(call("search", query="Day 8: lawmakers in Valdoria debated the Harbor Act", top_k=20))
    assert "harbor-08" not in {hit["id"] for hit in json.loads(obs["messages"][0]["content"])}
    for bad in ("harbor-08", [1], {"0": "x"}):
        record = json.loads((tmp_path / "e.jsonl").read_text())
        record["excluded_doc_ids"] = bad
        (tmp_path / "bad.jsonl").write_text(json.dumps(record) + "\n")
        with pytest.raises(SchemaError, match="excluded_doc_ids"):
            load_events(tmp_path / "bad.jsonl")


def test_question_field_is_the_text_as_it_stood_at_the_cutoff(tiny_corpus):
    """The observation's question follows the event's snapshot versions exactly like the prompt."""
    from forecast_dojo.corpus.embedders import HashingEmbedder
    from forecast_dojo.corpus.retrieval import ExactDenseRetriever
    from forecast_dojo.env import ForecastDojoEnv
    from forecast_dojo.timeutil import iso

    event = tiny_events()[0]
    assert event.n_steps >= 2
    edited = f"{event.question} (edited)"
    versions = [
        {"from": iso(event.cutoffs[1]), "question": edited, "background": "", "resolution_criteria": ""}
    ]
    event = dataclasses.replace(event, extra={**event.extra, "text_versions": versions})
    env = ForecastDojoEnv(
        [event], tiny_corpus, ExactDenseRetriever(tiny_corpus, HashingEmbedder()), python_runner=None
    )
    seen = []
    observation, _ = env.reset(event.id)
    for _ in range(2):
        seen.append((observation["question"], observation["messages"][1]["content"]))
        observation, *_ = env.step(
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "submit_forecast", "arguments": {"probabilities": [1 / len(event.outcomes)] * len(event.outcomes)}}}]}
        )  # fmt: skip
    assert seen[0][0] == tiny_events()[0].question and "(edited)" not in seen[0][1]
    assert seen[1][0] == edited and f"Question: {edited}" in seen[1][1]


@pytest.mark.parametrize("memory", ["none", "notebook"])
def test_an_event_at_every_size_limit_stays_inside_the_observation_space(tiny_corpus, tmp_path, memory):
    """K = 64 labels (2,000 characters in all), a 512-character id, a 10,000-character question (and as
    much again in a text version), 100,000-character background and criteria: loaded from disk, every
    observation of an episode (search, notebook submission) lies in ``env.observation_space``."""
    from forecast_dojo.corpus.embedders import HashingEmbedder
    from forecast_dojo.corpus.retrieval import ExactDenseRetriever
    from forecast_dojo.env import ForecastDojoEnv
    from forecast_dojo.schema import (
        MAX_EVENT_ID_CHARS,
        MAX_LABELS_TOTAL_CHARS,
        MAX_OUTCOMES,
        MAX_QUESTION_CHARS,
        MAX_TEXT_CHARS,
    )
    from forecast_dojo.timeutil import iso

    base = tiny_events()[0]
    width = MAX_LABELS_TOTAL_CHARS // MAX_OUTCOMES
    labels = [f"{i:02d} ".ljust(width, "x") for i in range(MAX_OUTCOMES)]
    labels[0] = labels[0].ljust(width + MAX_LABELS_TOTAL_CHARS % MAX_OUTCOMES, "y")
    question = "Will " + "Q" * (MAX_QUESTION_CHARS - 6) + "?"
    version = {"from": iso(base.cutoffs[1]), "question": question[::-1], "background": "v" * MAX_TEXT_CHARS}
    event = dataclasses.replace(
        base,
        id="e" * MAX_EVENT_ID_CHARS,
        question=question,
        background="b" * MAX_TEXT_CHARS,
        resolution_criteria="r" * MAX_TEXT_CHARS,
        outcomes=tuple(labels),
        outcome=labels[-1],
        market=(),
        extra={"text_versions": [version]},
    )
    assert (
        sum(map(len, event.outcomes)) == MAX_LABELS_TOTAL_CHARS and len(event.question) == MAX_QUESTION_CHARS
    )
    (loaded,) = load_events(save_events([event], tmp_path / "limits.jsonl"))
    env = ForecastDojoEnv(
        [loaded],
        tiny_corpus,
        ExactDenseRetriever(tiny_corpus, HashingEmbedder()),
        memory=memory,
        python_runner=None,
    )
    obs, _ = env.reset(loaded.id)
    seen = [obs]
    terminated = False
    uniform = [1 / MAX_OUTCOMES] * MAX_OUTCOMES
    while not terminated:
        seen.append(env.step(call("search", query="Harbor Act"))[0])
        arguments: dict = {"probabilities": uniform}
        if memory == "notebook":
            arguments["notebook"] = {
                "assessment": dict(zip(labels, uniform, strict=True)),
                "evidence": [],
                "open_questions": [],
            }
        obs, _, terminated, _, info = env.step(call("submit_forecast", **arguments))
        record = info["record"]
        assert record.valid and record.forecast_error is None and record.forecast == pytest.approx(uniform)
        seen.append(obs)
    assert len(seen) == 1 + 2 * loaded.n_steps
    for obs in seen:
        assert env.observation_space.contains(obs), {
            k: env.observation_space[k].contains(v) for k, v in obs.items()
        }
    assert seen[0]["outcomes"] == labels and seen[-1]["question"] == question[::-1]
    if memory == "notebook":
        assert json.loads(seen[-1]["notebook"])["assessment"] == dict(zip(labels, uniform, strict=True))
