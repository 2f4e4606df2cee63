"""Adversarial: nothing agent-facing in world mode reveals an answer, a resolution report or the calendar's length."""

from __future__ import annotations

import json

from forecast_dojo.agents.world import WorldScriptedAgent
from forecast_dojo.scoring import normalize_answer
from forecast_dojo.tools import parse_search_results
from forecast_dojo.world import WorldBudgets

OBSERVATION_KEYS = {
    "messages", "event_id", "step", "day", "open_questions", "forecasts", "memory", "memory_files", "budget_left",
}  # fmt: skip


class GreedyReader(WorldScriptedAgent):
    """Searches every open question's text with many hits and reads every hit: the most any agent could see."""

    def respond(self, observation):
        tool_texts = [m["content"] for m in observation["messages"] if m["role"] == "tool"]
        hits = parse_search_results(tool_texts[-1]) if tool_texts else None
        if hits and observation["budget_left"]["tool_calls"] > 0:
            from forecast_dojo.agents.world import _message

            return _message([("read", {"doc_id": h["id"]}) for h in hits[:3]] + [("next_day", {})])
        return super().respond(observation)


def test_no_answer_resolution_report_or_calendar_length_reaches_the_agent(make_world_env, synthetic_world):
    env = make_world_env(
        free_form=True, memory="files", budgets=WorldBudgets(max_tool_calls=20, max_turns=20)
    )
    agent = GreedyReader(revise_every=3, top_k=20)
    obs, info = env.reset()
    end = env.calendar.days[-1].isoformat()
    n_days = str(len(env.calendar.days))
    by_id = {e.id: e for e in env.calendar.events}
    done, seen_docs = False, 0
    while not done:
        assert set(obs) == OBSERVATION_KEYS
        today = obs["day"]
        # Every question still unresolved today: its resolution reports never appear in a tool result.
        unresolved = [e for e in env.calendar.events if env.calendar.span(e.id)[1].isoformat() >= today]
        hidden = {
            d for e in unresolved for d in synthetic_world.resolution_docs[e.extra.get("free_form_of", e.id)]
        }
        for message in obs["messages"]:
            if message["role"] == "tool":
                ids = {h["id"] for h in parse_search_results(message["content"]) or []}
                if message["content"].startswith("{"):
                    ids.add(json.loads(message["content"]).get("id"))
                seen_docs += len(ids)
                assert not ids & hidden, (today, ids & hidden)
            else:  # prompts and notices: no free-form answer of an open question, no end date, no length
                text = normalize_answer(message["content"])
                for q in obs["open_questions"]:
                    event = by_id[q["id"]]
                    if event.free_form:
                        assert f" {normalize_answer(event.answer)} " not in f" {text} ", (today, event.id)
                if message["role"] == "user":
                    assert end not in message["content"] or today == end
                    assert f"of {n_days}" not in message["content"]
        for q in obs["open_questions"]:  # the structured view holds no answer either
            event = by_id[q["id"]]
            assert set(q) == {"id", "question", "outcomes", "free_form", "days_open"}
            if event.free_form:
                assert q["outcomes"] == [] and normalize_answer(event.answer) not in normalize_answer(
                    q["question"]
                )
            first, last = env.calendar.span(q["id"])
            assert first.isoformat() <= today <= last.isoformat()  # resolved questions leave the open set
        obs, _, done, _, info = env.step(agent.act(obs))
    assert seen_docs > 100  # the agent did read the news


def test_search_results_never_come_from_after_the_day(make_world_env):
    from forecast_dojo.agents.world import WorldScriptedAgent

    env = make_world_env(end="2031-05-01")
    obs, _ = env.reset()
    agent = WorldScriptedAgent(revise_every=1)
    done = False
    while not done:
        for message in obs["messages"]:
            if message["role"] == "tool":
                for hit in parse_search_results(message["content"]) or []:
                    assert hit["date"] < obs["day"]
        obs, _, done, _, _ = env.step(agent.act(obs))
