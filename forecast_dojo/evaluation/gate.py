"""How likely a student is to open its final turn with "No report bears on the question.", teacher-forced.

The compact teacher ends a step with one verdict line per report that bears on the question, or with
the one line :data:`~forecast_dojo.agents.honest.NO_BEARING` when none does. For a small student that
line is one decision that throws away a whole step's evidence: the twentieth learning run's student
(docs/training.md) wrote it in 58 % of its held-out steps where its teacher wrote it in 16 %, and
:func:`~forecast_dojo.evaluation.verdicts.compare_verdicts` counts such steps. Sampling says *that* the
student chose it; this says *how close* the choice was, without generating: on each of the
teacher's steps, the student's probability of that line given the teacher's own transcript up to its
final turn (the same rendering as the SFT export). Probabilities near 1 where the teacher weighed
reports mean a gate learnt wrong; near 0.5, a coin flip that greedy decoding turns into a habit.

    from forecast_dojo.agents.llm import load_model, load_tokenizer
    from forecast_dojo.evaluation.gate import probe_no_bearing, summarize_probes
    probes = probe_no_bearing(load_model(path), load_tokenizer(path), "runs/teacher-eval/honest-none")
    print(summarize_probes(probes))

Researcher-facing only; needs ``torch`` and ``transformers``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from forecast_dojo.agents.honest import NO_BEARING
from forecast_dojo.chat_template import TOOL_CHAT_TEMPLATE
from forecast_dojo.errors import DataError, UsageError
from forecast_dojo.evaluation.verdicts import final_turn_index, step_verdicts
from forecast_dojo.records import StepRecord
from forecast_dojo.trajectory import load_records


@dataclass(frozen=True)
class GateProbe:
    """One teacher step, probed.

    Attributes:
        event_id: the event.
        step: the step within its episode.
        rollout: the rollout index.
        memory: the step's memory mode.
        teacher_weighed: whether the teacher's final turn weighed at least one report.
        teacher_no_bearing: whether the teacher's final turn was the no-bearing line itself.
        p_no_bearing: the student's probability of writing exactly that line as its final turn's
            opening, given the teacher's transcript before the turn.
    """

    event_id: str
    step: int
    rollout: int
    memory: str
    teacher_weighed: bool
    teacher_no_bearing: bool
    p_no_bearing: float


def continuation_logprob(
    model: Any, tokenizer: Any, messages: Sequence[dict[str, Any]], continuation: str
) -> float:
    """The model's log-probability (nats) of ``continuation`` as the opening of the next assistant turn.

    Args:
        model: a causal LM (``transformers``), in eval mode or not (no gradient is taken).
        tokenizer: its tokenizer; the transcript is rendered with
            :data:`~forecast_dojo.chat_template.TOOL_CHAT_TEMPLATE`, as the agent and the export render it.
        messages: the transcript before the turn (tool calls as in a step record or an export row).
        continuation: the text the turn would open with.

    Returns:
        The summed log-probability of the continuation's tokens.

    Raises:
        UsageError: when ``continuation`` is empty.
        DataError: when the rendered prompt is not a token prefix of the prompt followed by the
            continuation (a tokenizer that merges tokens across the boundary).
    """
    import torch

    from forecast_dojo.training.export import encode_messages

    if not continuation:
        raise UsageError("continuation must not be empty")
    prompt = tokenizer.apply_chat_template(
        encode_messages([dict(m) for m in messages]),
        chat_template=TOOL_CHAT_TEMPLATE,
        add_generation_prompt=True,
        tokenize=False,
    )
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    full_ids = tokenizer(prompt + continuation, add_special_tokens=False)["input_ids"]
    if full_ids[: len(prompt_ids)] != prompt_ids or len(full_ids) == len(prompt_ids):
        raise DataError("the continuation's tokens do not start where the prompt's end")
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(torch.tensor([full_ids], device=device)).logits[0].float()
    logprobs = torch.log_softmax(logits[len(prompt_ids) - 1 : -1], dim=-1)
    targets = torch.tensor(full_ids[len(prompt_ids) :], device=device)
    return float(logprobs.gather(1, targets[:, None]).sum())


def probe_no_bearing(
    model: Any,
    tokenizer: Any,
    teacher: str | Path | Sequence[StepRecord],
    *,
    limit: int | None = None,
    progress: bool = True,
) -> list[GateProbe]:
    """The student's probability of the no-bearing line at the final turn of each of the teacher's steps.

    Args:
        model: the student (a causal LM).
        tokenizer: its tokenizer.
        teacher: the compact teacher's log (a run directory, its ``steps.jsonl``, or records).
        limit: probe at most this many steps (the first, in the log's order); None for all.
        progress: show a progress bar.

    Returns:
        One :class:`GateProbe` per probed step (a step without an assistant turn has no final turn:
        it is left out).

    Raises:
        DataError: when no step of the log has an assistant turn.
    """
    from tqdm.auto import tqdm

    records = load_records(teacher) if isinstance(teacher, (str, Path)) else list(teacher)
    finals = [(r, i) for r in records if (i := final_turn_index(r)) is not None]
    if not finals:
        raise DataError(f"no step of the teacher's log has an assistant turn to probe ({len(records)} steps)")
    probes = []
    for record, index in tqdm(finals[:limit], desc="gate probe", unit="step", disable=not progress):
        verdicts = step_verdicts(record)
        logprob = continuation_logprob(model, tokenizer, record.messages[:index], NO_BEARING)
        probes.append(
            GateProbe(
                record.event_id,
                int(record.step),
                int(record.rollout),
                record.memory,
                any(v.weighed for v in verdicts.verdicts),
                verdicts.no_bearing,
                math.exp(logprob),
            )
        )
    return probes


def summarize_probes(probes: Sequence[GateProbe]) -> dict[str, Any]:
    """Mean probability and the count above one half, for the steps the teacher weighed and the rest.

    Returns:
        ``{"weighed": {...}, "not_weighed": {...}}``, each with ``steps``, ``mean_p_no_bearing`` (None
        without steps) and ``above_half``; and ``probes``, every probe as a dict.
    """

    def part(group: list[GateProbe]) -> dict[str, Any]:
        mean = sum(p.p_no_bearing for p in group) / len(group) if group else None
        return {
            "steps": len(group),
            "mean_p_no_bearing": mean,
            "above_half": sum(p.p_no_bearing > 0.5 for p in group),
        }

    return {
        "weighed": part([p for p in probes if p.teacher_weighed]),
        "not_weighed": part([p for p in probes if not p.teacher_weighed]),
        "probes": [asdict(p) for p in probes],
    }
