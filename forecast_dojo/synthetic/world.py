"""A deterministic fictional world whose Bayes-optimal forecast is known exactly.

``generate_world(seed)`` writes events (binary and multi-outcome) about fictional countries, cities,
companies and people in 2031-2032, and a dated corpus of short news-like documents about them. The
same seed always gives identical events and documents: all randomness comes from
``numpy.random.SeedSequence(seed)`` (child streams for the entities, the binary/multi layout, each
event, each event's market and the background noise), never from Python's salted ``hash`` or the
wall clock.

This module is the generator; the pieces it assembles live beside it: ``model.py`` (tiers, their
likelihoods, ``Evidence`` and ``SyntheticWorld``), ``names.py`` (fictional names), ``kinds.py`` (the
ten event kinds), ``wording.py`` (document templates) and ``oracle.py`` (the exact posterior, which
the reference market below is built from).

Generative model (what an agent can know from reading)
------------------------------------------------------
* Prior: every event's outcome is drawn **uniformly** over its K outcomes; each event's background
  text says so ("all K outcomes are considered equally likely").
* Evidence documents: each carries a signal ``s`` (the outcome it favours) and a strength tier. Given
  the true outcome ``o``, ``P(s = o) = q`` and ``P(s = j) = (1 - q) / (K - 1)`` for each ``j != o``,
  independently across documents. A tier fixes the likelihood ratio ``LR = q / ((1 - q) / (K - 1))``,
  i.e. how much one report multiplies the odds of the outcome it favours against each other outcome,
  so ``q = LR / (LR + K - 1)``:

  ========  ====  =====  =====  =====  ==================================================================
  tier      LR    q K=2  q K=3  q K=4  wording (every template of the tier uses one of these cues)
  ========  ====  =====  =====  =====  ==================================================================
  weak      1.5   0.600  0.429  0.333  "Unconfirmed rumours suggest", "Anonymous posts circulating
                                       online speculate", "Unverified hearsay among insiders"
  moderate  3     0.750  0.600  0.500  "A report by <firm> indicates", "Analysts at <firm> expect",
                                       "A survey by <firm> points to the view"
  strong    9     0.900  0.818  0.750  "A leaked internal document seen by <outlet> confirms",
                                       "Officials with direct knowledge confirmed", "A leaked draft of
                                       the final decision, verified by <outlet>, shows"
  ========  ====  =====  =====  =====  ==================================================================

  The Bayes-optimal forecast at a cutoff is therefore the uniform prior times the product of the
  likelihoods of the evidence documents with ``available_at < cutoff`` (see ``oracle.py``). The number
  and timing of evidence documents do not depend on the outcome, so only their signals and tiers matter.
* Distractors (same or look-alike entities, no signal), background noise (weather, sport, culture)
  and other events' documents carry no information about an event.
* Resolution documents state the outcome plainly and are available only after the event resolves,
  hence after every cutoff of that event: they exist so leakage tests have something to catch.
* Cutoffs are at 00:00 UTC on days from the day after the open to two days before the close. About
  one evidence document in ten becomes available exactly AT a cutoff instant, so the strict
  ``available_at < cutoff`` rule is exercised (such a document counts only from the next step on).
* Market: each event carries a daily reference series (``Event.market``, never shown to the agent):
  the exact posterior's log-odds times 0.8 plus persistent AR(1) noise, renormalized. It is
  informative but under-confident and noisy, so it scores between the uniform forecast and the oracle.
* Documents are either day-precision (``available_at = end_of_day(day)``) or timed (a time of day,
  available up to 90 minutes after publication).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta

import numpy as np
from tqdm.auto import tqdm

from forecast_dojo.schema import Document, Event, MarketPoint
from forecast_dojo.synthetic.kinds import BINARY_KINDS, MULTI_KINDS, Geography
from forecast_dojo.synthetic.model import (
    TIERS,
    Evidence,
    SyntheticWorld,
    WorldConfigError,
    signal_accuracy,
    signal_likelihood,
    train_event_id,
)
from forecast_dojo.synthetic.names import Namer, pick, slug
from forecast_dojo.synthetic.oracle import log_posteriors_at
from forecast_dojo.synthetic.wording import (
    BACKGROUND_WORDING,
    DISTRACTOR_WORDING,
    EVIDENCE_WORDING,
    LOOKALIKE_WORDING,
    PROFESSIONS,
    SMALL_FIRMS,
    WEATHER,
    WEEKDAYS,
    capitalize_first,
    fill,
)
from forecast_dojo.timeutil import UTC, end_of_day, to_micros

GENERATOR_VERSION = 3  # bump on any change to what a seed generates: it names the cache
TIER_SHARES = (0.45, 0.35, 0.20)  # how often each tier is drawn for an evidence document
MULTI_OUTCOME_SHARE = 0.4
AT_CUTOFF_SHARE = 0.1  # evidence documents made available exactly at one of their event's cutoffs
MARKET_TEMPERATURE = 0.8  # the market's log-odds are the oracle's, shrunk by this factor, plus noise
MARKET_NOISE_SD = 0.15
MARKET_NOISE_PERSISTENCE = 0.8
DOCUMENT_ID_PREFIX = "syn"


@dataclass
class _DraftDocument:
    """A document before ids are assigned (ids follow time order, so they reveal nothing)."""

    title: str
    text: str
    published_at: datetime
    available_at: datetime
    outlet: str
    kind: str
    event_id: str | None = None
    signal: int | None = None
    tier: str | None = None
    n_outcomes: int | None = None  # of the event an evidence document is about


def _from_template(
    title: str,
    text: str,
    values: dict[str, str],
    published: datetime,
    available: datetime,
    kind: str,
    event_id: str,
    signal: int | None = None,
    tier: str | None = None,
    n_outcomes: int | None = None,
) -> _DraftDocument:
    """A draft from a wording template filled with ``values`` (whose ``outlet`` publishes it)."""
    return _DraftDocument(
        capitalize_first(fill(title, values)),
        fill(text, values),
        published,
        available,
        values["outlet"],
        kind,
        event_id,
        signal,
        tier,
        n_outcomes,
    )


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _draw_instants(
    rng: np.random.Generator, day: date, *, day_precision_share: float = 0.5
) -> tuple[datetime, datetime]:
    """A random (published_at, available_at) pair on ``day``.

    Either day-precision (available at the end of the day) or a time of day with a short
    publication-to-availability lag.
    """
    if rng.random() < day_precision_share:
        return _day_start(day), end_of_day(day)
    published = _day_start(day) + timedelta(seconds=int(rng.integers(6 * 3600, 22 * 3600)))
    return published, published + timedelta(minutes=int(rng.integers(0, 91)))


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


@dataclass(frozen=True)
class WorldConfig:
    """The generator's size and timing parameters (ranges inclusive); see :func:`generate_world`."""

    n_events: int
    n_background: int
    start: date
    horizon_days: int
    evidence_range: tuple[int, int]
    distractor_range: tuple[int, int]
    steps_range: tuple[int, int]
    duration_range: tuple[int, int]
    multi_outcome_share: float
    train_events: int = 0

    def check(self, seed: int) -> None:
        """Raise :class:`WorldConfigError` for parameters (or a seed) that cannot make a valid world."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise WorldConfigError(f"seed must be a non-negative integer, got {seed!r}")
        if self.n_events < 1:
            raise WorldConfigError(f"n_events must be >= 1, got {self.n_events}")
        if self.n_background < 0:
            raise WorldConfigError(f"n_background must be >= 0, got {self.n_background}")
        if self.horizon_days < 1:
            raise WorldConfigError(f"horizon_days must be >= 1, got {self.horizon_days}")
        for name, (low, high), minimum in (
            ("evidence_range", self.evidence_range, 0),
            ("distractor_range", self.distractor_range, 0),
            ("steps_range", self.steps_range, 1),
            ("duration_range", self.duration_range, 1),
        ):
            if not minimum <= low <= high:
                raise WorldConfigError(
                    f"{name} must be (low, high) with {minimum} <= low <= high, got {(low, high)}"
                )
        # Cutoffs fall on distinct days in (open, close - 2 days]: the shortest event must have room for them.
        if self.duration_range[0] - 2 < self.steps_range[1]:
            raise WorldConfigError(
                f"events of {self.duration_range[0]} days cannot hold {self.steps_range[1]} cutoffs on distinct days before close"
            )
        if not 0.0 <= self.multi_outcome_share <= 1.0:
            raise WorldConfigError(f"multi_outcome_share must be in [0, 1], got {self.multi_outcome_share}")
        if (
            isinstance(self.train_events, bool)
            or not isinstance(self.train_events, (int, np.integer))
            or self.train_events < 0
        ):
            raise WorldConfigError(f"train_events must be a non-negative integer, got {self.train_events!r}")

    def to_dict(self) -> dict[str, object]:
        """The parameters as recorded in ``SyntheticWorld.config`` (with the generator version)."""
        return {
            "generator_version": GENERATOR_VERSION,
            "n_events": self.n_events,
            "n_background": self.n_background,
            "start": self.start.isoformat(),
            "horizon_days": self.horizon_days,
            "evidence_range": list(self.evidence_range),
            "distractor_range": list(self.distractor_range),
            "steps_range": list(self.steps_range),
            "duration_range": list(self.duration_range),
            "multi_outcome_share": self.multi_outcome_share,
            "train_events": int(self.train_events),
        }


def generate_world(
    seed: int = 0,
    *,
    n_events: int = 40,
    n_background: int = 1200,
    start: date = date(2031, 1, 1),
    horizon_days: int = 300,
    evidence_range: tuple[int, int] = (8, 16),
    distractor_range: tuple[int, int] = (6, 12),
    steps_range: tuple[int, int] = (3, 8),
    duration_range: tuple[int, int] = (30, 120),
    multi_outcome_share: float = MULTI_OUTCOME_SHARE,
    train_events: int = 0,
    progress: bool = False,
) -> SyntheticWorld:
    """Generate the fictional world of ``seed`` (ranges are inclusive); identical for identical arguments.

    Each event draws from its own child random stream, so its events and documents do not change when
    ``n_background`` changes; the default (40 events, ~2,000 short documents) embeds in about a minute.

    ``train_events`` adds that many training-only events (ids ``syn-t00000``, ``syn-t00001``...) after
    the base world, without changing one byte of it (its events, document ids and texts, evidence,
    oracle and markets are those of ``train_events=0``). They come in blocks of ``n_events``, each
    generated exactly like the base world (same model and parameters, its own random stream, its own
    fictional countries, cities, outlets, firms, clubs and background noise) and each starting the day
    after the previous one ends, so every training document is available only after the last base
    event resolves: a base event's episode can never retrieve one. The other way round, every
    training event hides the base world's resolution reports (``Event.excluded_doc_ids``), so no
    training episode reads a held-out outcome. A last, partial block scales its
    background noise and time span with its number of events. Their documents have ids
    ``syn<seed>-t000000``... in time order. Block ``b`` draws from the stream ``(seed, 5, b)``, so the
    first ``k * n_events`` training events are the same for every ``train_events >= k * n_events``.
    ``progress`` shows a bar over the training blocks (400 events generate in ~10 s).
    """
    config = WorldConfig(
        n_events,
        n_background,
        start,
        horizon_days,
        evidence_range,
        distractor_range,
        steps_range,
        duration_range,
        multi_outcome_share,
        train_events,
    )
    config.check(seed)
    root = np.random.SeedSequence(seed)
    names = Namer(np.random.default_rng(0))  # reseeded per block: names are unique world-wide
    base = _generate_block(
        seed, config, names, tuple(root.spawn(5)), [f"syn-{i:04d}" for i in range(n_events)]
    )
    blocks = [base]
    train_root = np.random.SeedSequence(
        root.entropy, spawn_key=(5,)
    )  # root's next child, never spawned above
    block_start = base.end + timedelta(days=1)
    n_blocks = math.ceil(train_events / n_events)
    for number in tqdm(
        range(n_blocks), desc="training blocks", unit="block", disable=not progress or not n_blocks
    ):
        count = min(n_events, train_events - number * n_events)
        block_config = replace(
            config,
            n_events=count,
            n_background=round(n_background * count / n_events),
            start=block_start,
            horizon_days=max(1, round(horizon_days * count / n_events)),
        )
        ids = [train_event_id(number * n_events + i) for i in range(count)]
        block_seq = np.random.SeedSequence(root.entropy, spawn_key=(*train_root.spawn_key, number))
        block = _generate_block(seed, block_config, names, tuple(block_seq.spawn(5)), ids)
        blocks.append(block)
        block_start = block.end + timedelta(days=1)

    base_documents, base_ids = _finalize_documents(base.drafts, seed)
    train_drafts = [draft for block in blocks[1:] for draft in block.drafts]
    train_documents, train_ids = _finalize_documents(train_drafts, seed, tag="t", width=6)
    documents = base_documents + train_documents
    events = [event for block in blocks for event in block.events]
    evidence: dict[str, list[Evidence]] = {event.id: [] for event in events}
    resolution_docs: dict[str, list[str]] = {event.id: [] for event in events}
    doc_kinds: dict[str, str] = {}
    for draft, doc_id in zip(base.drafts + train_drafts, base_ids + train_ids, strict=True):
        doc_kinds[doc_id] = draft.kind
        if draft.event_id is None:
            continue
        if draft.kind == "evidence":
            assert draft.signal is not None and draft.tier is not None and draft.n_outcomes is not None
            likelihood = signal_likelihood(draft.tier, draft.n_outcomes, draft.signal)
            evidence[draft.event_id].append(
                Evidence(doc_id, draft.event_id, draft.available_at, draft.signal, draft.tier, likelihood)
            )
        elif draft.kind == "resolution":
            resolution_docs[draft.event_id].append(doc_id)
    for items in evidence.values():
        items.sort(key=lambda ev: (to_micros(ev.available_at), ev.doc_id))
    prior = {event.id: tuple(1.0 / len(event.outcomes) for _ in event.outcomes) for event in events}

    # The market needs the exact posterior, so it is attached once the evidence ids are known.
    events = [
        _with_market(event, evidence[event.id], prior[event.id], np.random.default_rng(seq))
        for block in blocks
        for event, seq in zip(block.events, block.market_seq.spawn(len(block.events)), strict=True)
    ]
    # Training episodes run after the base world has resolved, so its resolution reports are in their
    # search window: hide them, or SFT/GRPO on training episodes would teach held-out outcomes.
    base_reports = tuple(sorted(doc_id for event in base.events for doc_id in resolution_docs[event.id]))
    if base_reports:
        base_event_ids = {event.id for event in base.events}
        events = [
            event
            if event.id in base_event_ids
            else replace(
                event, excluded_doc_ids=tuple(sorted(set(event.excluded_doc_ids) | set(base_reports)))
            )
            for event in events
        ]
    return SyntheticWorld(
        seed, events, documents, evidence, prior, doc_kinds, resolution_docs, config.to_dict()
    )


@dataclass
class _Block:
    """One block of events drawn with the base world's model: events (no market yet) and drafts."""

    events: list[Event]
    drafts: list[_DraftDocument]
    end: date  # the last day of the block's background noise (14 days after its last resolution)
    market_seq: np.random.SeedSequence


def _generate_block(
    seed: int,
    config: WorldConfig,
    names: Namer,
    streams: tuple[np.random.SeedSequence, ...],
    event_ids: list[str],
) -> _Block:
    """The events, their documents and the background noise of one block, from its five streams."""
    names_seq, background_seq, events_seq, market_seq, layout_seq = streams
    n_events = config.n_events
    # Exactly round(n_events * share) multi-outcome events, at shuffled positions.
    n_multi = round(n_events * config.multi_outcome_share)
    is_multi = np.random.default_rng(layout_seq).permutation(np.arange(n_events) < n_multi)
    names.rng = np.random.default_rng(names_seq)
    n_countries = max(3, min(12, n_events // 4 + 2))
    countries = [names.country() for _ in range(n_countries)]
    world = Geography(
        countries=countries,
        cities={c: [names.city() for _ in range(3)] for c in countries},
        outlets=[
            f"The {names.city()} {pick(names.rng, ('Ledger', 'Herald', 'Courier', 'Gazette', 'Observer'))}"
            for _ in range(8)
        ],
        firms=[
            names.firm(pick(names.rng, ("Research", "Analytics", "Advisory", "Insight"))) for _ in range(8)
        ],
        clubs=[
            f"{names.city()} {pick(names.rng, ('Rovers', 'United', 'Athletic', 'Mariners'))}"
            for _ in range(10)
        ],
    )

    events: list[Event] = []
    drafts: list[_DraftDocument] = []
    for event_id, event_seq, multi in zip(event_ids, events_seq.spawn(n_events), is_multi, strict=True):
        rng = np.random.default_rng(event_seq)
        event, event_drafts = _generate_event(rng, names, world, seed, event_id, config, bool(multi))
        events.append(event)
        drafts.extend(event_drafts)

    world_end = max(
        (e.resolved_at.date() for e in events), default=config.start + timedelta(days=config.horizon_days)
    ) + timedelta(days=14)
    drafts.extend(
        _background_documents(
            np.random.default_rng(background_seq),
            world,
            config.n_background,
            config.start,
            world_end,
        )
    )
    return _Block(events, drafts, world_end, market_seq)


def _generate_event(
    rng: np.random.Generator,
    names: Namer,
    world: Geography,
    seed: int,
    event_id: str,
    config: WorldConfig,
    multi: bool,
) -> tuple[Event, list[_DraftDocument]]:
    """One event, its evidence, distractors and resolution reports, all from the event's own stream."""
    open_day = config.start + timedelta(days=int(rng.integers(0, config.horizon_days)))
    duration = int(rng.integers(config.duration_range[0], config.duration_range[1] + 1))
    deadline = open_day + timedelta(days=duration)
    # The namer is shared (names must be unique world-wide) but draws from the event's stream here, so
    # an event's text depends only on the seed and the events before it.
    names.rng = rng
    if multi:
        spec = pick(rng, MULTI_KINDS)(rng, names, world, deadline, int(rng.integers(3, 5)))
    else:
        spec = pick(rng, BINARY_KINDS)(rng, names, world, deadline)
    k = len(spec.outcomes)
    outcome = int(rng.integers(k))  # the uniform prior stated in the background

    open_at = _day_start(open_day)
    close_at = end_of_day(deadline)
    resolved_at = _day_start(deadline + timedelta(days=1)) + timedelta(hours=int(rng.integers(6, 37)))
    n_steps = int(rng.integers(config.steps_range[0], config.steps_range[1] + 1))
    # Cutoff days lie in [open + 1, deadline - 2] (so cutoff <= close_at - 2 days), one per equal segment.
    first, last = 1, duration - 2
    bounds = np.linspace(first, last + 1, n_steps + 1)
    cutoff_days = [
        int(rng.integers(math.ceil(lo), max(math.ceil(lo) + 1, math.ceil(hi))))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    cutoffs = tuple(_day_start(open_day + timedelta(days=d)) for d in cutoff_days)

    odds = "both outcomes are" if k == 2 else f"all {k} outcomes are"
    background = (
        f"{spec.context} With no other information, {odds} considered equally likely. "
        "News reports about the question differ in reliability, from unconfirmed rumours to leaked official documents."
    )
    event = Event(
        id=event_id,
        question=spec.question,
        outcomes=spec.outcomes,
        outcome=spec.outcomes[outcome],
        open_at=open_at,
        close_at=close_at,
        resolved_at=resolved_at,
        cutoffs=cutoffs,
        background=background,
        resolution_criteria=spec.criteria,
        source="synthetic",
        url=f"https://questions.synthetic.example/{event_id}",
        tags=("synthetic", "binary" if k == 2 else "multi", spec.kind, *spec.tags),
        extra={"kind": spec.kind, "generator_version": GENERATOR_VERSION, "world_seed": int(seed)},
    )

    drafts: list[_DraftDocument] = []
    place = spec.places[0]  # the country: never one of the outcome names
    for _ in range(int(rng.integers(config.evidence_range[0], config.evidence_range[1] + 1))):
        tier = TIERS[int(rng.choice(len(TIERS), p=TIER_SHARES))]
        q = signal_accuracy(tier, k)
        likelihood = np.full(k, (1.0 - q) / (k - 1))
        likelihood[outcome] = q
        signal = int(rng.choice(k, p=likelihood / likelihood.sum()))
        # More evidence arrives near the close: the day offset has density rising linearly over the event.
        day = open_day + timedelta(days=int(math.floor(math.sqrt(rng.random()) * duration)))
        published, available = _draw_instants(rng, day)
        if rng.random() < AT_CUTOFF_SHARE:  # exactly at a cutoff: visible only from the next step
            available = pick(rng, cutoffs)
            published = available - timedelta(minutes=int(rng.integers(0, 91)))
        title, text = EVIDENCE_WORDING[tier][int(rng.integers(3))]
        values = {
            "topic": spec.topic,
            "claim": spec.claims[signal],
            "firm": pick(rng, world.firms),
            "outlet": pick(rng, world.outlets),
            "place": place,
        }
        drafts.append(
            _from_template(title, text, values, published, available, "evidence", event_id, signal, tier, k)
        )

    entities = [*spec.people, *spec.companies]
    for _ in range(int(rng.integers(config.distractor_range[0], config.distractor_range[1] + 1))):
        day = max(config.start, open_day + timedelta(days=int(rng.integers(-10, duration + 10))))
        published, available = _draw_instants(rng, day)
        values = {
            "person": pick(rng, spec.people),
            "company": pick(rng, spec.companies) if spec.companies else pick(rng, spec.people),
            "place": pick(rng, spec.places),
            "topic": spec.topic,
            "outlet": pick(rng, world.outlets),
            "weekday": pick(rng, WEEKDAYS),
            "number": str(int(rng.integers(12, 240))),
            "profession": pick(rng, PROFESSIONS),
        }
        if rng.random() < 0.3:
            original = pick(rng, entities)
            values["lookalike"] = names.lookalike(original)
            if original in spec.companies:
                values["profession"] = pick(rng, SMALL_FIRMS)
            title, text = LOOKALIKE_WORDING[int(rng.integers(len(LOOKALIKE_WORDING)))]
        else:
            title, text = DISTRACTOR_WORDING[int(rng.integers(len(DISTRACTOR_WORDING)))]
            if "{company}" in text and not spec.companies:
                title, text = DISTRACTOR_WORDING[0]
        drafts.append(_from_template(title, text, values, published, available, "distractor", event_id))

    title, text = spec.resolutions[outcome]
    for _ in range(int(rng.integers(1, 3))):
        published = resolved_at + timedelta(hours=int(rng.integers(1, 73)))
        available = end_of_day(published.date()) if rng.random() < 0.5 else published
        drafts.append(
            _DraftDocument(
                title, text, published, available, pick(rng, world.outlets), "resolution", event_id
            )
        )
    return event, drafts


def _background_documents(
    rng: np.random.Generator,
    world: Geography,
    count: int,
    first_day: date,
    last_day: date,
) -> list[_DraftDocument]:
    """Pure noise about the fictional world (weather, sport, culture), spread over its whole span."""
    places = [city for cities in world.cities.values() for city in cities]
    span = (last_day - first_day).days + 1
    drafts = []
    for _ in range(count):
        day = first_day + timedelta(days=int(rng.integers(span)))
        published, available = _draw_instants(rng, day, day_precision_share=0.3)
        home, away = (world.clubs[i] for i in rng.choice(len(world.clubs), size=2, replace=False))
        values = {
            "place": pick(rng, places),
            "weekday": pick(rng, WEEKDAYS),
            "number": str(int(rng.integers(2, 40))),
            "weather": pick(rng, WEATHER),
            "club": home,
            "club2": away,
            "score": f"{int(rng.integers(1, 5))}-{int(rng.integers(0, 2))}",
        }
        title, text = BACKGROUND_WORDING[int(rng.integers(len(BACKGROUND_WORDING)))]
        drafts.append(
            _DraftDocument(
                fill(title, values),
                fill(text, values),
                published,
                available,
                pick(rng, world.outlets),
                "background",
            )
        )
    return drafts


def _finalize_documents(
    drafts: list[_DraftDocument], seed: int, *, tag: str = "", width: int = 5
) -> tuple[list[Document], list[str]]:
    """Documents with ids ``syn<seed>-<tag><number>`` numbered in time order.

    Ids carry no hint of a document's role; the tag ``t`` only marks the training blocks' documents,
    numbered on their own so that the base world's ids never change.
    """
    order = sorted(
        range(len(drafts)),
        key=lambda i: (
            to_micros(drafts[i].available_at),
            to_micros(drafts[i].published_at),
            drafts[i].title,
            drafts[i].text,
            i,
        ),
    )
    ids = [""] * len(drafts)
    documents = []
    for number, i in enumerate(order):
        draft = drafts[i]
        doc_id = f"{DOCUMENT_ID_PREFIX}{seed}-{tag}{number:0{width}d}"
        ids[i] = doc_id
        domain = re.sub(r"[^a-z]", "", draft.outlet.lower().removeprefix("the "))
        stamp = draft.published_at.date()
        documents.append(
            Document(
                id=doc_id,
                title=draft.title,
                text=draft.text,
                published_at=draft.published_at,
                available_at=draft.available_at,
                url=f"https://news.{domain}.example/{stamp.year}/{stamp.month:02d}/{stamp.day:02d}/{slug(draft.title)}-{tag}{number}",
                source=draft.outlet,
                date_source="synthetic",
            )
        )
    return documents, ids


def _with_market(
    event: Event, evidence: list[Evidence], prior: tuple[float, ...], rng: np.random.Generator
) -> Event:
    """Attach daily market points: tempered, persistently noisy log-odds of the exact posterior.

    Informative but not optimal: the shrunk log-odds are under-confident and the AR(1) noise wanders.
    """
    k = len(event.outcomes)
    days = [event.open_at + timedelta(days=d) for d in range((event.close_at - event.open_at).days + 1)]
    days = [day for day in days if day < event.close_at] + [event.close_at]
    n_days = len(days)
    log_posterior = log_posteriors_at(prior, evidence, [to_micros(day) for day in days])
    shocks = rng.normal(0.0, MARKET_NOISE_SD, size=(n_days, k))
    noise = np.zeros(k)
    points = []
    for day, row, shock in zip(days, log_posterior, shocks, strict=True):
        noise = MARKET_NOISE_PERSISTENCE * noise + shock
        market = _softmax(MARKET_TEMPERATURE * (row - row.max()) + noise)
        points.append(MarketPoint(day, tuple(float(p) for p in market)))
    return replace(event, market=tuple(points))
