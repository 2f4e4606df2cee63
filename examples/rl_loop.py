"""The gymnasium loop with a hand-written policy: search once, read the top hit, submit.

    python examples/rl_loop.py                      # the embedded synthetic world (built and cached on first use)
    python examples/rl_loop.py --embedder hashing   # the same world with an instant embedder

The policy reads the structured observation (``question``, ``outcomes``, ``budget_left``); the
prompt in ``obs["messages"]`` is the same facts rendered for a language model.
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym

import forecast_dojo  # noqa: F401  (registers the environment ids)


def policy(obs: dict, state: dict) -> dict | str:
    """A three-turn policy written against the observation contract only (no prompt parsing)."""
    messages = obs["messages"]
    if state.get("step") != (obs["event_id"], obs["step"]):  # a new forecast step: fresh context
        state.clear()
        state["step"] = (obs["event_id"], obs["step"])
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "function": {"name": "search", "arguments": {"query": obs["question"], "top_k": 5}},
                }
            ],
        }
    if "read" not in state and obs["budget_left"]["tool_calls"] > 0:
        state["read"] = True
        hits = json.loads(messages[0]["content"]) if messages[0]["content"].startswith("[") else []
        if hits:
            return f'<tool_call>{{"name": "read", "arguments": {{"doc_id": "{hits[0]["id"]}"}}}}</tool_call>'
    k = len(obs["outcomes"])
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


def main(argv: list[str] | None = None) -> None:
    """Play one event of the synthetic world and print each step's score."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm", help="synthetic world embedder (minilm or hashing)")
    args = parser.parse_args(argv)
    env = gym.make("forecast_dojo/Synthetic-v0", memory="none", embedder=args.embedder, python_runner=None)
    obs, info = env.reset(seed=0)
    state: dict = {}
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy(obs, state))
        total += reward
        if info["step_ended"]:
            record = info["record"]  # the step's StepRecord (researcher-facing: never show it to the policy)
            print(f"step {record.step}: forecast {record.forecast}  brier {record.scores['brier']:.3f}")
        done = terminated or truncated
    print(f"episode {info['event_id']}: return {total:.3f}")
    env.close()


if __name__ == "__main__":
    main()
