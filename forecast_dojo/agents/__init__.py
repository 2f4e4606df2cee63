"""Agents: map observations to assistant turns. Scripted baselines live here; LLM agents plug in the same way."""

from collections.abc import Callable

from forecast_dojo.agents.base import Agent, ConversationAgent, tool_call
from forecast_dojo.agents.scripted import EvidenceAgent, UniformAgent

# Name -> factory of a fresh agent. "evidence-oracle-lite" researches little per date (one search, 3 hits),
# which is where carrying a notebook between dates pays off.
AGENTS: dict[str, Callable[[], Agent]] = {
    "uniform": UniformAgent,
    # Oracle-informed: its cue weights are the synthetic generator's likelihood table (an upper reference).
    "evidence-oracle": lambda: EvidenceAgent(name="evidence-oracle"),
    "evidence-oracle-lite": lambda: EvidenceAgent(top_k=3, max_searches=1, name="evidence-oracle-lite"),
    "smollm2": lambda: __import__("forecast_dojo.agents.llm", fromlist=["smollm2_agent"]).smollm2_agent(),
}


def agent_factory(name: str) -> Callable[[], Agent]:
    """The factory of a named agent: a key of ``AGENTS``, or ``hf:<checkpoint dir or HF model id>``."""
    if name.startswith("hf:"):
        from forecast_dojo.agents.llm import pretrained_agent

        return lambda: pretrained_agent(name.removeprefix("hf:"))
    return AGENTS[name]


__all__ = [
    "AGENTS",
    "agent_factory",
    "Agent",
    "ConversationAgent",
    "EvidenceAgent",
    "UniformAgent",
    "tool_call",
]
