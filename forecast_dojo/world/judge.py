"""An optional paraphrase judge for free-form answers, through any OpenAI-compatible endpoint, with a cache.

:func:`forecast_dojo.scoring.free_form_score` matches a proposed outcome to the answer up to case,
whitespace, punctuation and aliases; an :class:`AnswerJudge` passed as ``judge`` (or to
:class:`~forecast_dojo.world.WorldEnv`) is asked about the outcomes that do not match that way
("NYC" for "New York City"). It is a grader, never shown to the agent: it reads the answer and one
proposed outcome, nothing else. Replies are cached on disk by the leakage judge's mechanism
(:class:`forecast_dojo.events.judge.LeakageJudge`: one JSON file per request keyed by model and
messages) and in memory, so a standing forecast re-scored every day costs one request. An outcome
the judge cannot answer (server down, an unclear reply) gets no credit and is counted in ``failures``.
"""

from __future__ import annotations

from forecast_dojo.events.judge import JudgeConfig, LeakageJudge

ANSWER_SYSTEM_PROMPT = (
    "You grade a forecasting benchmark. Given the correct answer to a question and one proposed answer, "
    "reply YES if the proposed answer names the same person, place, organization, work or value "
    "(another spelling, a short form, a translation), and NO otherwise. Reply with one word: YES or NO."
)


def answer_messages(outcome: str, answer: str) -> list[dict[str, str]]:
    """The chat messages sent for one (proposed outcome, answer) pair."""
    user = f"Correct answer: {answer}\nProposed answer: {outcome}\nSame thing? YES or NO."
    return [{"role": "system", "content": ANSWER_SYSTEM_PROMPT}, {"role": "user", "content": user}]


class AnswerJudge(LeakageJudge):
    """``judge(outcome, answer) -> bool``: whether an LLM says a proposed outcome names the answer.

    Args:
        config: Server, model and cache folder (``scope`` is not used).
        client: An ``openai.OpenAI``-like client (default: one built from ``config``).
    """

    def __init__(self, config: JudgeConfig, client: object = None) -> None:
        super().__init__(config, client)
        self._memo: dict[tuple[str, str], bool] = {}

    def __call__(self, outcome: str, answer: str) -> bool:
        """True when the judge answers YES; NO, no answer and failures give no credit."""
        key = (outcome, answer)
        if key in self._memo:
            return self._memo[key]
        verdict = self.ask(answer_messages(outcome, answer))
        if verdict.leak is not None:  # an unanswered pair is asked again next time
            self._memo[key] = verdict.leak
        return verdict.leak is True
