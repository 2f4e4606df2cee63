"""Scripted agents: reproducible baselines that use the real tools, no language model needed.

* :class:`UniformAgent` submits the uniform distribution at once (the no-skill floor).
* :class:`EvidenceAgent` searches, reads the snippets, and weighs every sentence that states which
  outcome is coming by the strength of its sourcing cue ("unconfirmed rumours" < "a report by" <
  "officials confirmed"), adding log-likelihood ratios as a Bayesian reader would. In notebook mode it
  writes the evidence it weighed into the notebook and re-reads it at the next date, so it keeps
  evidence that a later search no longer returns.
"""

from __future__ import annotations

import json
import math
import re
from datetime import date
from typing import Any, TypedDict

from forecast_dojo.agents.base import ConversationAgent, tool_call
from forecast_dojo.notebook import notebook_value
from forecast_dojo.scoring import softmax
from forecast_dojo.spaces import Observation
from forecast_dojo.tools import SUBMIT_FORECAST, parse_search_results

# Sourcing cues and the likelihood ratio a reader gives a sentence that uses them.
CUE_WEIGHTS: tuple[tuple[re.Pattern[str], float, str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), ratio, tier)
    for pattern, ratio, tier in (
        (r"\b(leaked|officials (with direct knowledge )?confirmed|confirms|verified by)\b", 9.0, "strong"),
        (r"\b(a report by|analysts at|a survey by|indicates that|research note)\b", 3.0, "moderate"),
        (r"\b(unconfirmed|rumou?rs?|speculate|hearsay|anonymous posts)\b", 1.5, "weak"),
    )
)
NEGATIONS = re.compile(
    r"\b(not|no longer|stall|stalls|miss|misses|slip|slips|fail|fails|won't|will not|reject|rejects|hold|drag on|drags on)\b",
    re.I,
)
STOPWORDS = frozenset(
    [
        "the",
        "a",
        "an",
        "of",
        "to",
        "in",
        "on",
        "by",
        "for",
        "and",
        "or",
        "will",
        "be",
        "is",
        "are",
        "its",
        "it",
        "at",
        "as",
        "with",
        "from",
        "who",
        "which",
        "what",
        "than",
    ]
)
LONG_DATE = re.compile(
    r"\b(?:January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}, \d{4}\b"
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


class UniformAgent(ConversationAgent):
    """Submits the uniform distribution immediately: the floor every agent should beat."""

    name = "uniform"

    def respond(self, observation: Observation) -> dict[str, Any]:
        """Submit ``1/K`` for each of the K outcomes."""
        k = len(observation["outcomes"])
        return tool_call(SUBMIT_FORECAST, probabilities=[1.0 / k] * k)


def _key_terms(question: str) -> set[str]:
    """The names in a question: its capitalized words after the first (look-alike names must not match)."""
    words = re.findall(r"[A-Za-z][\w'\-]*", question)
    return {w for w in words[1:] if w[0].isupper() and w.lower() not in STOPWORDS}


def _topic_words(question: str) -> set[str]:
    """Longer lower-case words of a question (what it is about, beyond the names)."""
    return {w for w in re.findall(r"\b[a-z]{5,}\b", question) if w not in STOPWORDS}


def _long_dates(question: str) -> set[str]:
    """The question's ISO dates written the way news text writes them ("June 14, 2031")."""
    out = set()
    for iso_day in re.findall(r"\d{4}-\d{2}-\d{2}", question):
        try:
            day = date.fromisoformat(iso_day)
        except ValueError:
            continue
        out.add(f"{day:%B} {day.day}, {day.year}")
    return out


def favoured_outcome(text: str, question: str, outcomes: list[str]) -> int | None:
    """The outcome a sentence says is coming, if it is about this question (the readers' relevance filter).

    A sentence is about the question when it names the question's entities (and, with one or two
    names, one of its topic words) and no other deadline; on a Yes/No question a negation favours
    "No", on a multi-outcome question the one outcome label it names is favoured.

    Args:
        text: one sentence.
        question: the question text.
        outcomes: the outcome labels.

    Returns:
        The favoured outcome's index, or None when the sentence does not bear on the question.
    """
    dates = _long_dates(question)
    if dates and any(d not in dates for d in LONG_DATE.findall(text)):
        return None  # about another deadline or meeting of the same entities
    if outcomes == ["Yes", "No"]:
        terms = _key_terms(question)
        if not terms or not all(re.search(rf"\b{re.escape(t)}\b", text) for t in terms):
            return None
        topic = _topic_words(question)
        if len(terms) < 3 and topic and not any(re.search(rf"\b{w}", text) for w in topic):
            return None  # one or two names alone are easily shared by an unrelated story
        return 1 if NEGATIONS.search(text) else 0
    names = _key_terms(question) - set(" ".join(outcomes).split())
    if not all(re.search(rf"\b{re.escape(t)}\b", text) for t in names):
        return None
    named = [i for i, label in enumerate(outcomes) if re.search(rf"\b{re.escape(label)}\b", text)]
    return named[0] if len(named) == 1 else None


class StepFields(TypedDict):
    """What an evidence agent reads from a step's observation: question, outcome labels, carried notebook."""

    question: str
    outcomes: list[str]
    notebook: dict[str, Any] | None


class EvidenceAgent(ConversationAgent):
    """Cue-weighted evidence reader (see module docstring). Deterministic given the observations."""

    name = "evidence"

    def __init__(
        self, top_k: int = 20, max_searches: int = 5, temperature: float = 1.0, name: str = "evidence"
    ) -> None:
        super().__init__()
        self.name = name
        self.top_k = top_k
        self.max_searches = max_searches
        self.temperature = temperature

    def on_new_step(self, observation: Observation) -> None:
        """Plan the step's searches from the question and outcomes; read the carried notebook."""
        self.fields: StepFields = {
            "question": observation["question"],
            "outcomes": list(observation["outcomes"]),
            "notebook": json.loads(observation["notebook"]) if observation["notebook"] else None,
        }
        self.memory = observation["memory"]
        self.queries = [self.fields["question"]]
        if len(self.fields["outcomes"]) > 2:
            topic = " ".join(sorted(_key_terms(self.fields["question"]), key=str.lower))
            self.queries += [f"{label} {topic}" for label in self.fields["outcomes"]]
        self.queries = self.queries[: self.max_searches]
        self.searches_done = 0
        self.seen: dict[str, dict[str, Any]] = {}

    def respond(self, observation: Observation) -> dict[str, Any]:
        """Run the next planned search while the budget allows, then submit."""
        for message in observation["messages"]:
            if message["role"] == "tool" and message.get("name") == "search":
                for result in parse_search_results(message["content"]) or []:
                    self.seen.setdefault(result["id"], result)
        if self.searches_done < len(self.queries) and observation["budget_left"]["tool_calls"] > 0:
            query = self.queries[self.searches_done]
            self.searches_done += 1
            return tool_call("search", query=query, top_k=self.top_k)
        return self._submit()

    # ------------------------------------------------------------------ reading

    def weigh(self, text: str) -> tuple[int, float, str] | None:
        """(favoured outcome index, log-likelihood ratio, tier) of one sentence, or None if it says nothing."""
        cue = next(((ratio, tier) for pattern, ratio, tier in CUE_WEIGHTS if pattern.search(text)), None)
        if cue is None:
            return None
        favoured = favoured_outcome(text, self.fields["question"], self.fields["outcomes"])
        if favoured is None:
            return None
        ratio, tier = cue
        return favoured, math.log(ratio), tier

    def _submit(self) -> dict[str, Any]:
        outcomes = self.fields["outcomes"]
        ledger: dict[str, tuple[int, float, str, str]] = {}
        previous = self.fields.get("notebook") or {}
        for entry in previous.get("evidence", []):
            match = re.match(r"favours (\d+) \((\w+), llr ([\d.]+)\)", entry.get("claim", ""))
            if match and entry.get("doc_ids"):
                ledger[entry["doc_ids"][0]] = (int(match[1]), float(match[3]), match[2], entry["date"])
        for doc_id, result in sorted(self.seen.items()):
            for sentence in _SENTENCE.split(f"{result['snippet']}"):
                weighed = self.weigh(sentence)
                if weighed is not None:
                    ledger[doc_id] = (*weighed, result["date"])
                    break
        logits = [0.0] * len(outcomes)
        for favoured, llr, _, _ in ledger.values():
            logits[favoured] += llr / self.temperature
        probabilities = softmax(logits)
        arguments: dict[str, Any] = {"probabilities": dict(zip(outcomes, probabilities, strict=True))}
        if self.memory == "notebook":
            strongest = sorted(ledger.items(), key=lambda item: (-item[1][1], item[1][3], item[0]))[:40]
            arguments["notebook"] = notebook_value(
                arguments["probabilities"],
                [
                    {"claim": f"favours {fav} ({tier}, llr {llr:.4f})", "date": day, "doc_ids": [doc_id]}
                    for doc_id, (fav, llr, tier, day) in sorted(strongest)
                ],
            )
        arguments["rationale"] = f"{len(ledger)} evidence sentences weighed"
        return tool_call(SUBMIT_FORECAST, **arguments)
