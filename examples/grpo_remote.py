"""GRPO with TRL whose rollouts run on forecast-dojo servers (one or several machines).

    # on each env machine (the same spec everywhere; 0.0.0.0 to accept the trainer's connections):
    forecast-dojo serve --spec Synthetic-v0 --host 0.0.0.0 --port 8000 --max-sessions 16
    # on the trainer:
    python examples/grpo_remote.py --servers http://envhost1:8000 http://envhost2:8000 --model smollm2

Read top to bottom: (1) the prompts are one row per (training event, forecast step), exactly as the
first server shows them; (2) ``remote_environment_factory`` gives TRL one environment per rollout,
each a WebSocket session on the next server in turn, with the env's tools as methods (search, read,
submit_forecast) and the step's proper score as the reward (minus the GRPO adapter's penalty for an
invalid or missing forecast); (3) TRL's ``GRPOTrainer`` trains; the checkpoint plays with
``forecast-dojo run --agents hf:<out>/model``. Each server needs ``--max-sessions`` of at least its
share of the rollouts generated at once (``per_device_train_batch_size`` / number of servers, rounded up).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    """Build the remote dataset, train with GRPO through the servers, save the checkpoint."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--servers", nargs="+", default=["http://127.0.0.1:8000"], help="forecast-dojo serve URLs"
    )
    parser.add_argument("--model", default="smollm2", help="smollm2, an HF model id or a checkpoint")
    parser.add_argument(
        "--out", type=Path, default=Path("runs/grpo-remote"), help="where the checkpoint goes"
    )
    parser.add_argument(
        "--events", nargs="*", default=[], help="training event ids (default: all the server's)"
    )
    parser.add_argument("--max-steps", type=int, default=10, help="optimizer steps")
    parser.add_argument("--num-generations", type=int, default=4, help="completions per prompt (the group)")
    parser.add_argument("--max-completion-length", type=int, default=512, help="tokens per rollout")
    parser.add_argument("--max-tool-calling-iterations", type=int, default=4, help="tool rounds per rollout")
    args = parser.parse_args(argv)

    from trl import GRPOTrainer

    from forecast_dojo.agents.llm import load_model, load_tokenizer, save_checkpoint
    from forecast_dojo.integrations.openenv import build_remote_dataset, remote_environment_factory
    from forecast_dojo.training.grpo import GRPOArguments, grpo_config, set_response_template

    # (1) the prompts, as the servers show them (every server serves the same spec: checked in (2))
    dataset = build_remote_dataset(args.servers[0], args.events or None)
    # (2) one session per rollout, round robin over the servers
    factory = remote_environment_factory(args.servers)
    # (3) TRL
    tokenizer = set_response_template(load_tokenizer(args.model))
    tokenizer.padding_side = "left"
    config = grpo_config(
        GRPOArguments(
            model=args.model,
            output_dir=str(args.out),
            max_steps=args.max_steps,
            num_generations=args.num_generations,
            per_device_train_batch_size=args.num_generations,
            max_completion_length=args.max_completion_length,
            max_tool_calling_iterations=args.max_tool_calling_iterations,
        )
    )
    trainer = GRPOTrainer(
        model=load_model(args.model),
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        environment_factory=factory,
    )
    trainer.train()
    checkpoint = save_checkpoint(trainer.model, tokenizer, args.out / "model")
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    mean = f"{statistics.fmean(rewards):+.4f}" if rewards else "n/a"
    print(
        f"GRPO: {trainer.state.global_step} optimizer steps on {len(dataset)} prompts through "
        f"{len(args.servers)} server(s); mean reward {mean}"
    )
    print(f"checkpoint: {checkpoint}")


if __name__ == "__main__":
    main()
