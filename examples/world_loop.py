"""World mode (FutureSim's setting): live through the synthetic calendar and compare forecasters.

    python examples/world_loop.py --embedder hashing              # the 20 held-out questions' calendar
    python examples/world_loop.py --embedder hashing --free-form  # multi-outcome questions become free-form
    python examples/world_loop.py --end 2031-04-01 --out world.json --figure world.png
    python examples/world_loop.py --end 2031-04-01 --log-dir runs/world --memory none files  # then:
    forecast-dojo report runs/world --out runs/world-report   # per-day curves, memory files vs memory-free

Plays the scripted world agent (researches each new question, revises weekly), the uniform and the
idle (no forecast) floors, and scores the Bayes-optimal oracle on the same question-days; prints the
time-averaged free-form Brier score ("skill", 1 = certain and right, 0 = no forecast), top-1
accuracy, coverage and regret against the oracle, with question-bootstrap 95 % intervals.
"""

from __future__ import annotations

import argparse
import json

import gymnasium as gym

import forecast_dojo  # noqa: F401  (registers forecast_dojo/SyntheticSim-v0)
from forecast_dojo.agents.world import WorldIdleAgent, WorldScriptedAgent, WorldUniformAgent
from forecast_dojo.evaluation.world import (
    play_world,
    plot_world_curves,
    render_world_table,
    summarize_world,
    tables_from_records,
)
from forecast_dojo.synthetic import generate_world
from forecast_dojo.world import oracle_scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", default="minilm", help="minilm (default) or hashing (instant)")
    parser.add_argument("--split", default="eval", choices=["train", "eval", "all"])
    parser.add_argument("--end", default=None, help="last day, YYYY-MM-DD (default: the calendar's end)")
    parser.add_argument("--free-form", action="store_true", help="multi-outcome questions as free-form")
    parser.add_argument(
        "--out", default=None, help="write the summaries (with the per-day curves) as JSON here"
    )
    parser.add_argument("--figure", default=None, help="write the per-day curves as a PNG here")
    parser.add_argument(
        "--log-dir",
        default=None,
        help="log each forecaster's episode to LOG_DIR/<agent>-<memory>/ (for a report)",
    )
    parser.add_argument(
        "--memory",
        nargs="+",
        default=["none"],
        choices=["none", "files"],
        help="memory modes to play (default none)",
    )
    args = parser.parse_args()

    options = {"embedder": args.embedder, "split": args.split, "end": args.end, "free_form": args.free_form}
    rows = {}
    oracle = None
    for memory in args.memory:
        for agent in (WorldScriptedAgent(), WorldUniformAgent(), WorldIdleAgent()):
            logging = {}
            if args.log_dir:
                logging = {
                    "log_dir": f"{args.log_dir}/{agent.name}-{memory}",
                    "run_metadata": {"agent": agent.name},
                }
            env = gym.make(
                "forecast_dojo/SyntheticSim-v0", python_runner=None, memory=memory, **options, **logging
            )
            records, _ = play_world(env, agent)
            if oracle is None:
                oracle = oracle_scores(generate_world(0), env.unwrapped.calendar)
            env.close()
            name = agent.name if args.memory == ["none"] else f"{agent.name}/{memory}"
            rows[name] = summarize_world(**tables_from_records(records), oracle=oracle)
    assert oracle is not None
    rows["oracle"] = summarize_world(oracle, oracle=oracle)
    print(render_world_table(rows))
    if args.figure:
        plot_world_curves(rows, args.figure)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
