"""Reference forecasters that need no agent: uniform, base rate, market, oracle.

* **uniform**: 1/K on every outcome (the no-skill floor).
* **base rate**: the outcome frequencies of the *training* split among events with the same outcome
  labels, per source, backing off to all sources and then to uniform; add-one smoothed. On Yes/No
  questions this is "how often did questions like this resolve Yes"; named outcomes (candidates,
  teams) rarely repeat, so those questions get the uniform forecast rather than frequencies by position.
* **market**: the market's probabilities at or before the cutoff, where a market exists
  (evaluation only; never shown to the agent). Its coverage is reported and agents are compared
  with it only on the steps where it exists.
* **oracle**: the synthetic world's exact posterior (regret is measured against it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forecast_dojo.records import StepRecord
from forecast_dojo.schema import Event
from forecast_dojo.scoring import uniform


class BaseRate:
    """Training-split outcome frequencies per (source, outcome labels) with a back-off to the labels alone.

    Args:
        train_events: the training split (their outcomes are what is counted).
        pseudocount: smoothing added to every outcome's count.
    """

    def __init__(self, train_events: Sequence[Event], pseudocount: float = 1.0) -> None:
        self.pseudocount = pseudocount
        self.by_source: dict[tuple[str, tuple[str, ...]], list[int]] = {}
        self.by_labels: dict[tuple[str, ...], list[int]] = {}
        for event in train_events:
            if event.free_form:  # no fixed labels to count
                continue
            k = len(event.outcomes)
            labels = tuple(event.outcomes)
            self.by_source.setdefault((event.source, labels), [0] * k)[event.outcome_index] += 1
            self.by_labels.setdefault(labels, [0] * k)[event.outcome_index] += 1
        self.n_train = len(train_events)

    def forecast(self, event: Event) -> tuple[float, ...]:
        """The base-rate forecast for an event (uniform when no training event has its outcome labels)."""
        k = len(event.outcomes)
        labels = tuple(event.outcomes)
        counts = self.by_source.get((event.source, labels)) or self.by_labels.get(labels)
        if not counts:
            return uniform(k)
        total = sum(counts) + self.pseudocount * k
        return tuple((c + self.pseudocount) / total for c in counts)


def reference_records(
    events: Sequence[Event],
    *,
    base_rate: BaseRate | None = None,
    oracle: Mapping[tuple[str, int], Sequence[float]] | None = None,
) -> list[StepRecord]:
    """Records of uniform, base rate (if given), market (where known) and oracle (where known) at every step.

    Args:
        events: the evaluated events.
        base_rate: the fitted base rate, or None to leave it out.
        oracle: the synthetic world's oracle by (event, step), or None.

    Returns:
        One :meth:`StepRecord.reference` per forecaster and step (none for free-form questions).
    """
    records = []
    for event in events:
        if event.free_form:  # no fixed outcomes: no reference distribution (no forecast would score 0)
            continue
        prior = base_rate.forecast(event) if base_rate is not None else None
        for step, cutoff in enumerate(event.cutoffs):
            references: dict[str, Sequence[float] | None] = {
                "uniform": uniform(len(event.outcomes)),
                "base-rate": prior,
                "market": event.market_at(cutoff),
                "oracle": oracle.get((event.id, step)) if oracle is not None else None,
            }
            for name, forecast in references.items():
                if forecast is not None:
                    records.append(StepRecord.reference(event, step, forecast, agent=name))
    return records
