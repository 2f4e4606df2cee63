"""Agents: map observations to assistant turns. Scripted baselines live here; LLM agents plug in the same way."""

from forecast_dojo.agents.base import Agent, ConversationAgent, tool_call
from forecast_dojo.agents.scripted import EvidenceAgent, UniformAgent

AGENTS = {"uniform": UniformAgent, "evidence": EvidenceAgent}

__all__ = ["AGENTS", "Agent", "ConversationAgent", "EvidenceAgent", "UniformAgent", "tool_call"]
