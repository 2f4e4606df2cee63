"""An optional LLM judge for the leakage screen, through any OpenAI-compatible chat-completions endpoint.

The judge reads one (question, document) pair the screen considers and answers whether the document,
as of its date, states the question's answer or a fact that settles it. What it is shown is never more
than the lexical screen reads: the question, its possible answers, the document's availability date
and its text. It is not told the realized outcome, the close, the schedule or any other document,
and it only ever sees documents the screen itself reads (visible at a step of the event).

Two scopes (``JudgeConfig.scope``):

* ``flags`` (default): the judge confirms the lexical screen's flags; a flag it answers NO to is
  dropped (precision), one it cannot answer stands.
* ``matches``: the judge reads every document that matches the question (recall as well; one
  request per matching document, so many more requests).

Prompts and replies are cached on disk (``cache_dir``, one JSON file per request keyed by the
SHA-256 of the model and the messages), so a rebuild with the same judge costs nothing and the
verdicts can be audited. Transient server failures are retried with exponential backoff; a pair the
judge still cannot answer keeps the lexical decision and is counted in :attr:`LeakageJudge.failures`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from forecast_dojo.atomic import write_text_atomic
from forecast_dojo.errors import ConfigError

JUDGE_SCOPES = ("flags", "matches")

SYSTEM_PROMPT = (
    "You check news documents for a forecasting benchmark. Given a forecasting question and one dated "
    "document, answer YES if the document itself states the question's answer or a fact that settles it "
    "(the event happened, the person died or left office, the winner was announced, another candidate won). "
    "Answer NO if it only makes one answer more likely (polls, plans, threats, nominations, other awards, "
    "a related but different event) or is about something else. Reply with one word: YES or NO."
)
_ANSWER = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


@dataclass(frozen=True)
class JudgeConfig:
    """How to reach the judge and what it reads.

    Attributes:
        base_url: the server's ``/v1`` URL, e.g. ``http://127.0.0.1:8000/v1``.
        model: the model name the server expects.
        cache_dir: folder of cached prompts and replies (created on first use).
        scope: ``flags`` (confirm the lexical flags) or ``matches`` (judge every matching document).
        api_key: the key; ``None`` reads ``OPENAI_API_KEY`` (servers on 127.0.0.1 usually accept any).
        timeout_s: seconds per request.
        max_retries: retries of a transient failure before the pair keeps the lexical decision.
        backoff_s: first backoff, doubled on each retry.
        max_tokens: completion tokens per reply.
    """

    base_url: str
    model: str
    cache_dir: Path
    scope: str = "flags"
    api_key: str | None = None
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 1.0
    max_tokens: int = 8

    def __post_init__(self) -> None:
        if self.scope not in JUDGE_SCOPES:
            raise ConfigError(f"judge scope must be one of {JUDGE_SCOPES}, not {self.scope!r}")
        if not self.base_url or not self.model:
            raise ConfigError("the leakage judge needs both --judge-base-url and --judge-model")
        if self.max_retries < 0 or self.max_tokens < 1 or self.timeout_s <= 0:
            raise ConfigError("judge max_retries must be >= 0, max_tokens >= 1 and timeout_s > 0")


@dataclass(frozen=True)
class Verdict:
    """The judge's answer for one pair: ``leak`` is None when it gave no usable answer."""

    leak: bool | None
    reply: str
    cached: bool


def judge_messages(
    question: str, outcomes: Sequence[str], available_at: str, text: str
) -> list[dict[str, str]]:
    """The chat messages sent for one pair (nothing else about the event is included)."""
    user = (
        f"Question: {question}\n"
        f"Possible answers: {'; '.join(outcomes)}\n"
        f"Document (available {available_at}):\n{text}\n\n"
        "Does this document state the answer or a fact that settles it? YES or NO."
    )
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]


def parse_verdict(reply: str) -> bool | None:
    """YES -> True, NO -> False, from the first yes/no word of the reply; anything else -> None."""
    found = _ANSWER.search(reply or "")
    return None if found is None else found.group(1).lower() == "yes"


class LeakageJudge:
    """Asks an OpenAI-compatible server about (question, document) pairs, with an on-disk cache.

    Args:
        config: server, model, cache folder and scope.
        client: an ``openai.OpenAI``-like client (default: one built from ``config``).
    """

    def __init__(self, config: JudgeConfig, client: Any = None) -> None:
        self.config = config
        self.requests = 0
        self.cache_hits = 0
        self.failures: list[str] = []
        self._client = client

    @property
    def client(self) -> Any:
        """The chat client, created on first use (a fully cached run needs no server)."""
        if self._client is None:
            import openai

            self._client = openai.OpenAI(
                base_url=self.config.base_url,
                api_key=self.config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                timeout=self.config.timeout_s,
                max_retries=0,  # retried here
            )
        return self._client

    def _cache_path(self, messages: list[dict[str, str]]) -> Path:
        key = hashlib.sha256(
            json.dumps({"model": self.config.model, "messages": messages}, sort_keys=True).encode()
        ).hexdigest()
        return Path(self.config.cache_dir) / f"{key}.json"

    def _complete(self, messages: list[dict[str, str]]) -> str | None:
        delay = self.config.backoff_s
        last = "no attempt"
        for attempt in range(self.config.max_retries + 1):
            if attempt:
                time.sleep(min(delay, 30.0))
                delay *= 2
            self.requests += 1
            try:
                response = self.client.chat.completions.create(
                    model=self.config.model,
                    messages=messages,
                    temperature=0.0,
                    max_tokens=self.config.max_tokens,
                )
            except Exception as err:  # noqa: BLE001 - a server failure keeps the lexical decision
                last = f"{type(err).__name__}: {err}"[:300]
                status = getattr(err, "status_code", None)
                if isinstance(status, int) and status < 500 and status not in (408, 409, 429):
                    break
                continue
            choices = getattr(response, "choices", None) or []
            message = getattr(choices[0], "message", None) if choices else None
            if message is None:
                last = "the server returned no choices"
                continue
            return str(getattr(message, "content", None) or "")
        self.failures.append(last)
        return None

    def judge(self, question: str, outcomes: Sequence[str], available_at: str, text: str) -> Verdict:
        """The verdict on one pair, from the cache when this model already answered these messages."""
        return self.ask(judge_messages(question, outcomes, available_at, text))

    def ask(self, messages: list[dict[str, str]]) -> Verdict:
        """The YES/NO verdict on any messages, from the cache when this model already answered them.

        Args:
            messages: The chat messages (the cache key, with the model).

        Returns:
            The verdict (``leak`` None when the server gave no usable answer).
        """
        path = self._cache_path(messages)
        if path.is_file():
            try:
                stored = json.loads(path.read_text(encoding="utf-8"))
                reply = str(stored["reply"])
            except (ValueError, KeyError, TypeError):
                reply = None  # a damaged cache entry is asked again and rewritten
            if reply is not None:
                self.cache_hits += 1
                return Verdict(parse_verdict(reply), reply, cached=True)
        reply = self._complete(messages)
        if reply is None:
            return Verdict(None, "", cached=False)
        record = {"model": self.config.model, "messages": messages, "reply": reply}
        write_text_atomic(path, json.dumps(record, ensure_ascii=False, indent=1))
        return Verdict(parse_verdict(reply), reply, cached=False)

    def summary(self) -> dict[str, Any]:
        """What the judge did in this process (for the build report)."""
        return {
            "base_url": self.config.base_url,
            "model": self.config.model,
            "scope": self.config.scope,
            "cache_dir": str(self.config.cache_dir),
            "requests": self.requests,
            "cache_hits": self.cache_hits,
            "failures": len(self.failures),
            "failure_examples": self.failures[:3],
        }
