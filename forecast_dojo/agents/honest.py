"""An honest scripted forecaster: cue weights estimated from training events, not copied from the generator.

:class:`HonestEvidenceAgent` searches like the oracle-informed ``EvidenceAgent`` and reads every
sentence that names the question's entities and states which outcome is coming. Unlike it, it does
not know how much a sourcing cue ("officials confirmed", "a report by", "unconfirmed rumours") is
worth: each sentence is described by its *cue signature*, the set of generic sourcing expressions of
:data:`SOURCING_CUES` it contains (a reader's vocabulary, not the generator's tiers), and a
:class:`CueModel` fitted on **training events** gives each signature a likelihood ratio.

Fitting (:func:`fit_cue_model`) is the maximum-likelihood estimate under the symmetric reading model
"a report favours the realized outcome with probability ``q = LR / (LR + K - 1)``", from how often
the sentences with that signature favoured the realized outcome in what the agent read on the
training events (each document counted once per event), with one pseudo-observation at ``LR = 1``
per outcome count K and signatures seen fewer than ``min_count`` times ignored. The prior is the
training split's outcome frequency among events with the same outcome labels (two pseudo-counts per
outcome; uniform for label sets seen in no training event).

The agent also writes what it does: its final turn states the evidence weighed, the update and its
arithmetic in a few sentences, and it submits rounded probabilities, so its trajectories read like a
forecaster's notebook (used as an SFT teacher).
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_dojo.agents.base import tool_call
from forecast_dojo.agents.scripted import _SENTENCE, EvidenceAgent, _key_terms, _topic_words, favoured_outcome
from forecast_dojo.notebook import notebook_value
from forecast_dojo.scoring import round_distribution, softmax
from forecast_dojo.spaces import Observation
from forecast_dojo.tools import read_evidence

# Generic sourcing expressions a news reader notices (a fixed vocabulary; their weights are learned).
SOURCING_CUES: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern, re.IGNORECASE)
    for name, pattern in {
        "confirm": r"\bconfirm(s|ed)?\b",
        "leak": r"\bleak(s|ed)?\b",
        "verified": r"\bverified\b",
        "officials": r"\bofficials?\b",
        "document": r"\bdocuments?\b|\bdraft\b",
        "report": r"\breports?\b|\breported\b",
        "analysts": r"\banalysts?\b|\bresearch note\b",
        "survey": r"\bsurvey\b|\bpoll\b",
        "indicates": r"\bindicates?\b|\bpoints? to\b",
        "expect": r"\bexpects?\b|\bexpected\b",
        "rumour": r"\brumou?rs?\b",
        "unconfirmed": r"\bunconfirmed\b|\bunverified\b",
        "anonymous": r"\banonymous\b",
        "speculate": r"\bspeculat\w*\b",
        "hearsay": r"\bhearsay\b",
        "sources": r"\bsources?\b|\binsiders?\b",
        "according": r"\baccording to\b",
        "said": r"\bsaid\b|\bsays\b|\bstated\b",
    }.items()
}
NO_CUE = "(no cue)"
COMPACT_TOP_K = 3  # the compact teacher's hits per search
COMPACT_MAX_SEARCHES = 1  # and searches per forecast date
COMPACT_NOTEBOOK_EVIDENCE = 2  # claims kept in its notebook
#: The compact teacher's final turn when its searches found reports and none bears on the question.
NO_BEARING = "No report bears on the question."
# A compact notebook claim: "<outcome label> favoured: <cue signature>", read back at the next date.
_COMPACT_CLAIM = re.compile(r"^(?P<label>.+) favoured: (?P<signature>[^:]+)$")
MIN_COUNT = 5
PRIOR_PSEUDOCOUNT = 2.0  # per outcome: a few training events must not make a confident prior


def labels_key(outcomes: Sequence[str]) -> str:
    """The key of an outcome label set in :attr:`CueModel.prior` (its labels as a JSON list)."""
    return json.dumps(list(outcomes), ensure_ascii=False)


def cue_signature(text: str) -> str:
    """The sorted, '+'-joined names of the sourcing cues in ``text`` (``(no cue)`` when none)."""
    names = [name for name, pattern in SOURCING_CUES.items() if pattern.search(text)]
    return "+".join(sorted(names)) or NO_CUE


def _q(llr: float, k: int) -> float:
    ratio = math.exp(llr)
    return ratio / (ratio + k - 1)


def _fit_llr(counts: dict[int, tuple[int, int]]) -> float:
    """MLE of the log likelihood ratio from ``{K: (favoured the realized outcome, total)}`` (golden section)."""

    def loglik(llr: float) -> float:
        total = 0.0
        for k, (hits, n) in counts.items():
            # one pseudo-observation at LR = 1 (q = 1/K) per K keeps rare signatures near "uninformative"
            hits_s, n_s = hits + 1.0 / k, n + 1.0
            q = min(max(_q(llr, k), 1e-12), 1 - 1e-12)
            total += hits_s * math.log(q) + (n_s - hits_s) * math.log(1 - q)
        return total

    lo, hi = -6.0, 6.0
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        if loglik(a) < loglik(b):
            lo = a
        else:
            hi = b
    return (lo + hi) / 2


@dataclass
class CueModel:
    """Learned log likelihood ratios per cue signature, and the training prior per outcome label set.

    Attributes:
        llr: signature -> log likelihood ratio of "the outcome a sentence favours".
        counts: signature -> {K: [favoured the realized outcome, total]} (what the fit saw).
        prior: :func:`labels_key` of an outcome label set -> frequencies of its outcomes among the training
            events with exactly those labels (e.g. ``["Yes", "No"]``); named outcomes rarely repeat, so they
            usually get the uniform prior.
        n_events: number of training events fitted on.
    """

    llr: dict[str, float] = field(default_factory=dict)
    counts: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    prior: dict[str, list[float]] = field(default_factory=dict)
    n_events: int = 0

    def prior_for(self, outcomes: Sequence[str]) -> list[float]:
        """The training prior for these outcome labels (uniform if no training event had them)."""
        k = len(outcomes)
        return list(self.prior.get(labels_key(outcomes)) or [1.0 / k] * k)

    def to_json(self) -> str:
        """The model as JSON text (keys of ``counts`` / ``prior`` as strings)."""
        return json.dumps(
            {"llr": self.llr, "counts": self.counts, "prior": self.prior, "n_events": self.n_events},
            indent=2,
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> CueModel:
        """Read :meth:`to_json` output."""
        raw = json.loads(text)
        return cls(
            llr={str(k): float(v) for k, v in raw["llr"].items()},
            counts={s: {int(k): list(v) for k, v in c.items()} for s, c in raw["counts"].items()},
            prior={str(k): [float(p) for p in v] for k, v in raw["prior"].items()},
            n_events=int(raw["n_events"]),
        )

    def save(self, path: str | Path) -> Path:
        """Write the model to ``path`` (JSON)."""
        path = Path(path)
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> CueModel:
        """Read a model written by :meth:`save`."""
        return cls.from_json(Path(path).read_text())


@dataclass(frozen=True)
class Reading:
    """One document's reading on a training event: which outcome it favoured, with which cue signature."""

    event_id: str
    doc_id: str
    favoured: int
    signature: str
    k: int


def fit_from_readings(
    readings: Iterable[Reading],
    outcome_index: dict[str, int],
    outcome_counts: dict[str, list[int]],
    *,
    min_count: int = MIN_COUNT,
) -> CueModel:
    """Fit a :class:`CueModel` from readings and the training outcomes (pure; see module docstring).

    Args:
        readings: what the agent read on training events (duplicates of (event, doc) are counted once).
        outcome_index: realized outcome index of each training event.
        outcome_counts: :func:`labels_key` -> how often each outcome was realized in the training split.
        min_count: signatures seen fewer times get no weight (LR 1).

    Returns:
        The fitted model.
    """
    seen: set[tuple[str, str]] = set()
    counts: dict[str, dict[int, list[int]]] = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for r in readings:
        if (r.event_id, r.doc_id) in seen or r.event_id not in outcome_index:
            continue
        seen.add((r.event_id, r.doc_id))
        cell = counts[r.signature][r.k]
        cell[0] += int(r.favoured == outcome_index[r.event_id])
        cell[1] += 1
    llr = {}
    for signature, by_k in counts.items():
        if sum(n for _, n in by_k.values()) >= min_count:
            llr[signature] = _fit_llr({k: (h, n) for k, (h, n) in by_k.items()})
    prior = {
        key: [(c + PRIOR_PSEUDOCOUNT) / (sum(cs) + PRIOR_PSEUDOCOUNT * len(cs)) for c in cs]
        for key, cs in outcome_counts.items()
    }
    return CueModel(
        llr=llr,
        counts={s: {k: list(v) for k, v in by_k.items()} for s, by_k in counts.items()},
        prior=prior,
        n_events=len(outcome_index),
    )


class HonestEvidenceAgent(EvidenceAgent):
    """Evidence reader whose cue weights come from a :class:`CueModel` fitted on training events.

    With ``model=None`` it weighs nothing (submits its prior) and only records what it read in
    :attr:`readings`: that is how :func:`fit_cue_model` collects its training data.

    Args:
        model: the fitted cue model (None: collect readings only).
        top_k: hits per search.
        max_searches: searches per forecast date.
        notebook_evidence: the most informative reports kept in the notebook (memory-on mode).
        name: the agent's name in logs and tables.
        compact: play the compact prompt profile as a teacher for small models: fewer hits
            (:data:`COMPACT_TOP_K` per search, at most :data:`COMPACT_MAX_SEARCHES` searches, unless
            given), a final turn with one verdict per search hit that bears on the question (the
            outcome it favours, its cue and points; a hit of no bearing gets no line), a call that
            copies the weighed verdicts as ``submit_forecast(evidence=...)`` for the env to sum
            (:func:`compact_evidence`; the forecast is :func:`tally_forecast`, in place of exact odds
            from the training prior), and a notebook of at most :data:`COMPACT_NOTEBOOK_EVIDENCE`
            claims written as a reader would.
        no_bearing_lines: the compact teacher writes ``doc: no bearing.`` for each hit that does not
            bear on the question (the form before 2026-12-07) instead of passing it over, so its final
            turn never opens with the one-line :data:`NO_BEARING` (:func:`explain_compact`).
    """

    def __init__(
        self,
        model: CueModel | None = None,
        top_k: int | None = None,
        max_searches: int | None = None,
        notebook_evidence: int | None = None,
        name: str = "honest",
        *,
        compact: bool = False,
        no_bearing_lines: bool = False,
    ) -> None:
        super().__init__(
            top_k=top_k or (COMPACT_TOP_K if compact else 10),
            max_searches=max_searches or (COMPACT_MAX_SEARCHES if compact else 5),
            name=name,
        )
        self.model = model
        self.compact = compact
        self.no_bearing_lines = no_bearing_lines
        self.notebook_evidence = notebook_evidence or (COMPACT_NOTEBOOK_EVIDENCE if compact else 8)
        self.readings: list[Reading] = []

    def on_new_step(self, observation: Observation) -> None:
        """Plan the step's searches; the compact teacher searches the question's names and topic words."""
        super().on_new_step(observation)
        if self.compact:
            question = self.fields["question"]
            words = re.findall(r"[\w'\-]+", question)
            keep = _key_terms(question) | _topic_words(question)
            short = " ".join(w for w in words if w in keep)
            self.queries[0] = short or question

    def read(self, text: str) -> tuple[int, str] | None:
        """(favoured outcome index, cue signature) of a sentence that bears on the question, else None."""
        favoured = favoured_outcome(text, self.fields["question"], self.fields["outcomes"])
        return None if favoured is None else (favoured, cue_signature(text))

    def _submit(self) -> dict[str, Any]:
        outcomes = self.fields["outcomes"]
        k = len(outcomes)
        ledger: dict[str, tuple[int, str, str]] = {}  # doc id -> (favoured, signature, date)
        previous = self.fields.get("notebook") or {}
        for entry in previous.get("evidence", []):
            claim, doc_ids = entry.get("claim", ""), entry.get("doc_ids")
            match = re.match(r"favours (\d+) \[([^\]]+)\]", claim)
            if match and doc_ids:
                ledger[doc_ids[0]] = (int(match[1]), match[2], entry["date"])
            match = _COMPACT_CLAIM.match(claim)
            if match and doc_ids and match["label"] in outcomes:
                ledger[doc_ids[0]] = (outcomes.index(match["label"]), match["signature"], entry["date"])
        for doc_id, result in sorted(self.seen.items()):
            for sentence in _SENTENCE.split(result["snippet"]):
                reading = self.read(sentence)
                if reading is not None:
                    ledger[doc_id] = (*reading, result["date"])
                    self.readings.append(Reading("", doc_id, reading[0], reading[1], k))
                    break
        model = self.model or CueModel()
        prior = model.prior_for(outcomes)
        logits = [math.log(p) for p in prior]
        weighed: dict[tuple[int, str], int] = defaultdict(int)
        for favoured, signature, _ in ledger.values():
            llr = model.llr.get(signature)
            if llr is None:
                continue
            weighed[(favoured, signature)] += 1
            logits[favoured] += llr
        exact = softmax(logits)
        hits = list(self.seen)
        evidence = compact_evidence(outcomes, ledger, model, hits) if self.compact else []
        if self.compact:  # what the env records of submit_forecast(evidence=...), read by the env's reader
            sums, _ = read_evidence(evidence, outcomes)
            probabilities = round_distribution(tally_forecast(sums or [0.0] * k))
        else:
            probabilities = round_distribution(exact)
        arguments: dict[str, Any] = {"probabilities": dict(zip(outcomes, probabilities, strict=True))}
        if self.memory == "notebook":
            kept = sorted(ledger.items(), key=lambda item: (-abs(model.llr.get(item[1][1], 0.0)), item[0]))[
                : self.notebook_evidence
            ]
            if self.compact:  # only what carries weight, newest first, in words
                kept = [item for item in kept if item[1][1] in model.llr]
                claims = [
                    {"claim": f"{outcomes[fav]} favoured: {sig}", "date": day, "doc_ids": [doc_id]}
                    for doc_id, (fav, sig, day) in sorted(
                        kept, key=lambda item: (item[1][2], item[0]), reverse=True
                    )
                ]
            else:
                claims = [
                    {"claim": f"favours {fav} [{sig}]", "date": day, "doc_ids": [doc_id]}
                    for doc_id, (fav, sig, day) in sorted(kept)
                ]
            # the compact teacher leaves the assessment to the env (the forecast its evidence comes to)
            arguments["notebook"] = notebook_value(
                None if self.compact else arguments["probabilities"], claims
            )
        if self.compact:  # the verdicts that carry weight, copied as evidence: the env sums them
            rest = {key: value for key, value in arguments.items() if key != "probabilities"}
            action = tool_call("submit_forecast", evidence=evidence, **rest)
            action["content"] = explain_compact(
                outcomes, ledger, model, hits, no_bearing_lines=self.no_bearing_lines
            )
            return action
        text = self.explain(outcomes, prior, weighed, ledger, probabilities, model)
        arguments["rationale"] = (
            f"prior times the likelihood ratios of {sum(weighed.values())} weighed reports"
        )
        action = tool_call("submit_forecast", **arguments)
        action["content"] = text
        return action

    @staticmethod
    def explain(
        outcomes: Sequence[str],
        prior: Sequence[float],
        weighed: dict[tuple[int, str], int],
        ledger: dict[str, tuple[int, str, str]],
        probabilities: Sequence[float],
        model: CueModel,
    ) -> str:
        """A few sentences: what was read, what was weighed, the update and its arithmetic."""
        prior_text = ", ".join(f"{label} {p:.2f}" for label, p in zip(outcomes, prior, strict=True))
        lines = [f"Prior (training events): {prior_text}."]
        if not ledger:
            lines.append("No report says which outcome is coming; I keep the prior.")
        else:
            ignored = len(ledger) - sum(weighed.values())
            parts = []
            for (favoured, signature), n in sorted(weighed.items(), key=lambda kv: -abs(model.llr[kv[0][1]])):
                count = f"{n} x " if n > 1 else ""
                parts.append(
                    f"{count}{outcomes[favoured]} '{signature}' LR {math.exp(model.llr[signature]):.1f}"
                )
            if parts:
                lines.append(f"Weighed {sum(weighed.values())} reports: " + "; ".join(parts) + ".")
            if ignored:
                lines.append(f"{ignored} with cues of no learned weight ignored.")
            odds = [math.log(p) for p in prior]
            for (favoured, signature), n in weighed.items():
                odds[favoured] += n * model.llr[signature]
            base = odds[0]
            ratios = ", ".join(
                f"{label} {math.exp(o - base):.3g}" for label, o in zip(outcomes, odds, strict=True)
            )
            lines.append(f"Odds (prior x LRs): {ratios}.")
        final = ", ".join(f"{label} {p:.2f}" for label, p in zip(outcomes, probabilities, strict=True))
        lines.append(f"Forecast: {final}.")
        return " ".join(lines)


def points(llr: float) -> float:
    """A log likelihood ratio as the compact teacher writes it: nats, to the nearest half (LR 7.5 -> 2, 3 -> 1, 1.5 -> 0.5)."""
    return round(2 * llr) / 2


def number(x: float) -> str:
    """A points value as written: ``2``, ``0.5``, ``-1.5`` (no trailing ``.0``)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def verdict_order(
    ledger: dict[str, tuple[int, str, str]], model: CueModel, hits: Sequence[str] = ()
) -> tuple[list[str], list[str]]:
    """The compact teacher's verdict order: the search hits as returned, then notebook reports that carry weight.

    Args:
        ledger: doc id -> (favoured outcome, cue signature, date) of every report read.
        model: the cue model (which signatures carry weight).
        hits: the document ids the searches returned, in their order (empty: the ledger's order).

    Returns:
        ``(hits, notes)``: one verdict line each, in this order.
    """
    order = list(dict.fromkeys(hits)) or sorted(ledger)
    notes = [d for d in sorted(ledger) if d not in order and ledger[d][1] in model.llr]
    return order, notes


def compact_evidence(
    outcomes: Sequence[str],
    ledger: dict[str, tuple[int, str, str]],
    model: CueModel,
    hits: Sequence[str] = (),
) -> list[list[str | float]]:
    """The ``evidence`` the compact teacher submits: ``[label, points]`` per weighed verdict, in verdict order.

    Each pair copies one verdict line of :func:`explain_compact` (its outcome and :func:`points`), so
    the call is a transcription of the turn's text and the env does the sum.
    """
    order, notes = verdict_order(ledger, model, hits)
    evidence: list[list[str | float]] = []
    for doc_id in [*order, *notes]:
        if doc_id in ledger and ledger[doc_id][1] in model.llr:
            favoured, signature, _ = ledger[doc_id]
            value = points(model.llr[signature])
            evidence.append([outcomes[favoured], int(value) if float(value).is_integer() else value])
    return evidence


def tally_forecast(tally: Sequence[float]) -> list[float]:
    """The forecast of a points tally: its softmax, which is what ``submit_forecast(evidence=...)`` records.

    Points are log likelihood ratios in nats summed from a uniform prior, so the softmax is the
    posterior; the compact teacher submits its verdicts as ``evidence`` and lets the env sum and
    normalize. The history: the fourth learning run's student named the right evidence and still wrote
    the prior; the fifth's copied a probability table wrong (22 binary "leads by 1 -> 0.95"); the
    sixth's, given ``log_odds``, wrote a Tally consistent with its own verdicts in 48 of 93 steps
    (dropped and misassigned terms). The arithmetic a small student gets wrong is the env's job; the
    evidence and its weights stay the student's.
    """
    return softmax(tally)


def explain_compact(
    outcomes: Sequence[str],
    ledger: dict[str, tuple[int, str, str]],
    model: CueModel,
    hits: Sequence[str] = (),
    *,
    no_bearing_lines: bool = False,
) -> str:
    """The compact teacher's final turn: one verdict per search hit that bears on the question (then notes).

    Each such hit gets its own line, in the order the search returned it, so that a small student
    decides one document at a time next to where it read it: the outcome the report favours with its
    cue and points (:func:`points`: log likelihood ratio in nats), or "no weight" for a cue the training
    events never showed to be informative. A hit that is not about this question (another entity,
    deadline or meeting; no view) gets no line: a hit passed over is of no bearing (since 2026-12-07;
    before, each had a ``doc: no bearing.`` line, 10 tokens of every such hit in every record, and
    :func:`parse_verdicts` still reads them). Reports the notebook carries from earlier dates and that
    carry weight follow under "Notes". The turn's ``submit_forecast(evidence=...)`` copies the verdicts
    that carry weight (:func:`compact_evidence`); the env sums them.

    Args:
        outcomes: the outcome labels.
        ledger: doc id -> (favoured outcome, cue signature, date) of every report read.
        model: the cue model (which signatures carry weight, and how much).
        hits: the document ids the searches returned, in their order (empty: the ledger's own order).
        no_bearing_lines: write ``doc: no bearing.`` for each hit that does not bear on the question
            (the form before 2026-12-07), so that every verdict is decided next to its document's id;
            by default such a hit gets no line, and a turn in which no hit bears is the one line
            :data:`NO_BEARING`, one decision for all of them (the twentieth learning run's student wrote
            it in 58 % of its held-out steps where the teacher wrote it in 16 %: docs/training.md).

    Returns:
        One short line per verdict (:data:`NO_BEARING` when no hit bears on the question and
        ``no_bearing_lines`` is off, ``No reports found.`` when the searches returned nothing).
    """

    def verdict(doc_id: str) -> str:
        if doc_id not in ledger:
            return f"{doc_id}: no bearing."
        favoured, signature, _ = ledger[doc_id]
        if signature not in model.llr:
            return f"{doc_id}: {outcomes[favoured]}, no weight."
        value = points(model.llr[signature])
        return f"{doc_id}: {outcomes[favoured]} ('{signature}', {'+' if value >= 0 else '-'}{number(abs(value))})."

    order, notes = verdict_order(ledger, model, hits)
    lines = [verdict(doc_id) for doc_id in order if no_bearing_lines or doc_id in ledger]
    if notes:
        lines.append("Notes: " + " ".join(verdict(doc_id) for doc_id in notes))
    if lines:
        return "\n".join(lines)
    return NO_BEARING if order else "No reports found."


@dataclass(frozen=True)
class Verdict:
    """One verdict line of the compact teacher's final turn (:func:`explain_compact`), as read back.

    Attributes:
        doc_id: the document judged.
        outcome: the outcome the report favours; None for "no bearing".
        signature: the cue signature named; None for "no weight" and "no bearing".
        points: the points given; None for "no weight" and "no bearing".
    """

    doc_id: str
    outcome: str | None = None
    signature: str | None = None
    points: float | None = None

    @property
    def weighed(self) -> bool:
        """Whether the verdict carries points (what ``submit_forecast(evidence=...)`` should copy)."""
        return self.points is not None


_VERDICT = re.compile(
    r"(?P<doc>\S+?): (?:(?P<none>no bearing)"
    r"|(?P<label>.+?) \('(?P<signature>[^']*)', (?P<points>[+-]\d+(?:\.\d+)?)\)"
    r"|(?P<unweighed>.+?), no weight)\."
)
# where one verdict of a ``Notes:`` line ends and the next begins
_NEXT_VERDICT = re.compile(r"(?<=\)\.) |(?<=no bearing\.) |(?<=no weight\.) ")


def parse_verdicts(text: str) -> list[Verdict]:
    """Read the verdicts of a compact final turn written by the teacher or a student that imitates it.

    The inverse of :func:`explain_compact` for its verdict lines (one per hit that bears on the
    question, then those joined on the ``Notes:`` line), in the order written; an explicit
    ``doc: no bearing.``, the teacher's form before 2026-12-07, reads as ``Verdict(doc)``. A line that
    is not a verdict is skipped, so a student's malformed line reads as no verdict for its document
    (:meth:`forecast_dojo.evaluation.verdicts.StepVerdicts.judged` reads a hit without a verdict as of
    no bearing); a document judged twice keeps its first verdict.
    """
    verdicts: dict[str, Verdict] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        segments = _NEXT_VERDICT.split(line[len("Notes: ") :]) if line.startswith("Notes: ") else [line]
        for segment in segments:
            match = _VERDICT.fullmatch(segment)
            if match is None:
                continue
            doc_id = match["doc"]
            if match["none"]:
                verdict = Verdict(doc_id)
            elif match["label"] is not None:
                verdict = Verdict(doc_id, match["label"], match["signature"], float(match["points"]))
            else:
                verdict = Verdict(doc_id, match["unweighed"])
            verdicts.setdefault(doc_id, verdict)
    return list(verdicts.values())


def fit_cue_model(
    env: Any,
    event_ids: Sequence[str],
    *,
    min_count: int = MIN_COUNT,
    progress: bool = False,
    **agent_options: Any,
) -> CueModel:
    """Fit a :class:`CueModel` on training events by playing them with a collecting agent.

    The realized outcomes of the training events are used here (that is what training data is for);
    they never reach the agent during evaluation.

    Args:
        env: a ``ForecastDojoEnv`` whose events include ``event_ids`` (memory-free is enough).
        event_ids: the training events.
        min_count: signatures seen fewer times get no weight.
        progress: show a progress bar.
        **agent_options: ``top_k`` / ``max_searches`` of the collecting agent (use the evaluated agent's).

    Returns:
        The fitted model.
    """
    from tqdm.auto import tqdm

    readings: list[Reading] = []
    outcome_index: dict[str, int] = {}
    outcome_counts: dict[str, list[int]] = {}
    for event_id in tqdm(list(event_ids), desc="fitting cue weights", unit="event", disable=not progress):
        agent = HonestEvidenceAgent(None, **agent_options)
        observation, _ = env.reset(event_id, seed=0)
        event = env.event
        done = False
        while not done:
            observation, _, terminated, truncated, _ = env.step(agent.act(observation))
            done = terminated or truncated
        outcome_index[event.id] = event.outcome_index
        k = len(event.outcomes)
        outcome_counts.setdefault(labels_key(event.outcomes), [0] * k)[event.outcome_index] += 1
        readings += [Reading(event.id, r.doc_id, r.favoured, r.signature, r.k) for r in agent.readings]
    return fit_from_readings(readings, outcome_index, outcome_counts, min_count=min_count)
