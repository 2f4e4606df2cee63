"""An OpenAI-compatible chat server as the policy: the env's transcript in, the assistant message out.

    python examples/openai_client_loop.py --base-url http://127.0.0.1:8000/v1 --model my-model

Any server that speaks the OpenAI chat-completions API with tools works (vLLM, llama.cpp, SGLang...).
Each forecast step is a fresh conversation: send ``env.conversation()`` with ``tools=env.tool_schemas()``
and pass the returned assistant message to ``env.step`` as it is.
"""

from __future__ import annotations

import argparse
from typing import Any

from openai import OpenAI

import forecast_dojo


def as_request_message(message: dict[str, Any]) -> dict[str, Any]:
    """A transcript message in the form chat servers accept (keys whose value is None left out)."""
    return {key: value for key, value in message.items() if value is not None}


def main(argv: list[str] | None = None) -> None:
    """Play one event with the model behind ``--base-url`` and print each step's score."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://127.0.0.1:8000/v1")
    parser.add_argument("--model", default="default")
    parser.add_argument("--api-key", default="not-needed")
    parser.add_argument("--env", default="Synthetic-v0", help="a spec name, gym id or spec file")
    parser.add_argument("--embedder", default=None, help="synthetic world embedder (default: the spec's)")
    parser.add_argument("--event-id", default=None)
    args = parser.parse_args(argv)

    client = OpenAI(base_url=args.base_url, api_key=args.api_key)
    overrides = {"embedder": args.embedder} if args.embedder else {}
    env = forecast_dojo.make(args.env, python_runner=None, **overrides)
    obs, info = env.reset(args.event_id, seed=0)
    done = False
    while not done:
        response = client.chat.completions.create(
            model=args.model,
            messages=[as_request_message(m) for m in env.conversation()],
            tools=env.tool_schemas(),
        )
        choice = response.choices[0]
        action = choice.message.model_dump(
            exclude_none=True
        )  # {"role": "assistant", "content", "tool_calls"}
        if response.usage is not None:
            action["usage"] = {
                "prompt_tokens": response.usage.prompt_tokens,
                "completion_tokens": response.usage.completion_tokens,
            }
        obs, reward, terminated, truncated, info = env.step(action)
        if info["step_ended"]:
            record = info["record"]
            print(
                f"{record.event_id} step {record.step}: forecast {record.forecast} brier {record.scores['brier']:.3f}"
            )
        done = terminated or truncated
    env.close()


if __name__ == "__main__":
    main()
