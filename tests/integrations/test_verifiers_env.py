"""``forecast_dojo.integrations.verifiers.load_environment``: its rows, and episodes whose player is a scripted
OpenAI-compatible server on 127.0.0.1.

verifiers 0.4 runs a seat's model through a harness program it installs with ``uv`` (PEP 723
dependencies) and an interception proxy; here the seat is a stand-in that sends the conversation to
the scripted server and hands back its reply, so what is tested is this package's side: the rows,
``ForecastDojoVerifiersEnv.run`` (env.step per reply, the env's answers as user turns) and the reward.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.request

import pytest

vf = pytest.importorskip("verifiers.v1")

from forecast_dojo.integrations.verifiers import TASKSET_ID, load_environment  # noqa: E402
from forecast_dojo.prompts import Budgets  # noqa: E402
from forecast_dojo.scoring import brier_score  # noqa: E402
from forecast_dojo.training.grpo import build_grpo_dataset  # noqa: E402
from forecast_dojo.training.rewards import INVALID_PENALTY, MISSING_PENALTY  # noqa: E402
from tests.agents.test_openai_agent import ScriptedServer, completion  # noqa: E402

BUDGETS = Budgets(max_tool_calls=2, max_turns=3)


def text(content: str) -> tuple[int, dict]:
    return 200, completion({"role": "assistant", "content": content})


def tool_call(name: str, arguments: object) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class Recorder:
    """The part of a verifiers trace the env writes: its rewards."""

    def __init__(self) -> None:
        self.rewards: dict[str, float] = {}

    def record_reward(self, name: str, value: float, weight: float = 1.0) -> None:
        self.rewards[name] = value


class ChatSeat:
    """A player seat whose model is an OpenAI-compatible server: each turn posts the conversation so far."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.trace = Recorder()
        self.messages: list[dict] = []

    @contextlib.asynccontextmanager
    async def interaction(self, task):
        data = task.data
        self.messages = [{"role": "system", "content": data.system_prompt}]
        self.pending = data.prompt
        yield self

    async def turn(self, message: str | None = None):
        self.messages.append({"role": "user", "content": message if message is not None else self.pending})
        body = json.dumps({"model": "scripted", "messages": self.messages}).encode()
        request = urllib.request.Request(
            f"{self.url}/chat/completions", body, {"Content-Type": "application/json"}
        )
        reply = await asyncio.to_thread(
            lambda: json.loads(urllib.request.urlopen(request, timeout=10).read())
        )
        content = reply["choices"][0]["message"]["content"]
        self.messages.append({"role": "assistant", "content": content})
        return vf.Segment(messages=[vf.AssistantMessage(content=content)])


class Seats:
    def __init__(self, seat: ChatSeat) -> None:
        self.player = seat


@pytest.fixture
def environment(make_tiny_env):
    return load_environment(make_env=lambda: make_tiny_env(memory="none", budgets=BUDGETS, split="train"))


def test_rows_are_the_training_steps_with_the_envs_prompts(environment, make_tiny_env):
    assert isinstance(environment, vf.Env) and environment.config.taskset.id == TASKSET_ID
    tasks = list(environment.taskset)
    rows = build_grpo_dataset(
        make_tiny_env(memory="none", budgets=BUDGETS, split="train"), ["harbor", "mayor"]
    )
    assert [(t.data.event_id, t.data.step) for t in tasks] == list(
        zip(rows["event_id"], rows["step"], strict=True)
    )
    for task, prompt in zip(tasks, rows["prompt"], strict=True):
        assert [task.data.system_prompt, task.data.prompt] == [m["content"] for m in prompt]
    assert all("outcome_index" not in t.data.model_dump() for t in tasks)
    assert tasks[0].data.outcomes == ["Yes", "No"] and len({t.data.name for t in tasks}) == len(tasks)
    with pytest.raises(Exception, match="training split"):
        list(load_environment(make_env=lambda: make_tiny_env(split="eval")).taskset)


@pytest.mark.parametrize(
    ("script", "reward"),
    [
        # search, a reply without a tool call (a notice), then a valid forecast: its Brier score (harbor: Yes)
        (
            [
                text(tool_call("search", {"query": "Harbor Act"})),
                text("I think yes."),
                text(tool_call("submit_forecast", {"probabilities": {"Yes": 0.6, "No": 0.4}})),
            ],
            brier_score([0.6, 0.4], 0),
        ),
        (
            [text(tool_call("submit_forecast", {"probabilities": [2.0]}))],
            brier_score([0.5, 0.5], 0) - INVALID_PENALTY,
        ),
        (
            [text("no idea")] * 3,
            brier_score([0.5, 0.5], 0) - MISSING_PENALTY,
        ),  # the turn budget ends the step
    ],
)
def test_an_episode_against_a_scripted_server_earns_the_adapters_reward(environment, script, reward):
    task = next(iter(environment.taskset))  # harbor, step 0
    with ScriptedServer(script, default=text("nothing more")[1]) as server:
        seat = ChatSeat(server.url)
        asyncio.run(environment.run(task, Seats(seat)))
    assert seat.trace.rewards == {"proper_score": pytest.approx(reward)}
    # the missing case: max_turns replies, the budget notice, one last forced turn, then the uniform fallback
    assert len(server.requests) == (BUDGETS.max_turns + 1 if reward < -0.9 else len(script))
    if reward > -0.5:  # the env's answers came back as user turns: the search hits, then the notice
        assert json.loads(seat.messages[3]["content"]) and "No tool call found" in seat.messages[5]["content"]


def test_native_tool_calls_reach_the_env_as_an_openai_message():
    from forecast_dojo.integrations.verifiers import assistant_turn

    call = vf.ToolCall(id="c1", name="submit_forecast", arguments='{"probabilities": [0.5, 0.5]}')
    turn = assistant_turn(vf.Segment(messages=[vf.AssistantMessage(content=None, tool_calls=[call])]))
    assert turn == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "submit_forecast", "arguments": call.arguments},
            }
        ],
    }
    assert assistant_turn(vf.Segment(messages=[vf.AssistantMessage(content=" yes ")])) == "yes"
