"""forecast-dojo: replayable RL environments for LLM forecasting agents."""

__version__ = "0.1.0"
