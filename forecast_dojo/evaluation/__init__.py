"""Evaluation: run agents over events (resumable studies), score them in the field's conventions, report."""

from forecast_dojo.evaluation.metrics import paired_difference, summarize
from forecast_dojo.evaluation.runner import baseline_rows, run_episode, run_episodes

__all__ = ["baseline_rows", "paired_difference", "run_episode", "run_episodes", "summarize"]
