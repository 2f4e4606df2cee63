"""A deterministic fictional world whose Bayes-optimal forecast is known exactly.

``generate_world(seed)`` writes events (binary and multi-outcome) about fictional countries, cities,
companies and people in 2031-2032, and a dated corpus of short news-like documents about them. The
same seed always gives identical events and documents: all randomness comes from
``numpy.random.SeedSequence(seed)`` (child streams for the entities, the binary/multi layout, each
event, each event's market and the background noise), never from Python's salted ``hash`` or the
wall clock.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from typing import Any, TypeVar

import numpy as np

from forecast_dojo.errors import ForecastDojoError
from forecast_dojo.schema import Document, Event, MarketPoint
from forecast_dojo.timeutil import UTC, end_of_day, to_micros

GENERATOR_VERSION = 3  # bump on any change to what a seed generates: it names the cache
TIERS = ("weak", "moderate", "strong")
TIER_LIKELIHOOD_RATIO = {"weak": 1.5, "moderate": 3.0, "strong": 9.0}
TIER_SHARES = (0.45, 0.35, 0.20)  # how often each tier is drawn for an evidence document
MULTI_OUTCOME_SHARE = 0.4
AT_CUTOFF_SHARE = 0.1  # evidence documents made available exactly at one of their event's cutoffs
MARKET_TEMPERATURE = 0.8  # the market's log-odds are the oracle's, shrunk by this factor, plus noise
MARKET_NOISE_SD = 0.15
MARKET_NOISE_PERSISTENCE = 0.8
DOCUMENT_ID_PREFIX = "syn"


class WorldConfigError(ForecastDojoError, ValueError):
    """Generator parameters that cannot produce a valid world."""


def signal_accuracy(tier: str, k: int) -> float:
    """``q = P(signal = true outcome)`` for an evidence document of ``tier`` in a K-outcome event."""
    if tier not in TIER_LIKELIHOOD_RATIO:
        raise ValueError(f"unknown tier {tier!r}; tiers are {TIERS}")
    if k < 2:
        raise ValueError(f"an event needs K >= 2 outcomes, got {k}")
    ratio = TIER_LIKELIHOOD_RATIO[tier]
    return ratio / (ratio + k - 1)


def signal_likelihood(tier: str, k: int, signal: int) -> tuple[float, ...]:
    """``P(signal | outcome = o)`` for every outcome ``o``: the factor the oracle multiplies in."""
    if not 0 <= signal < k:
        raise ValueError(f"signal {signal} is not an outcome index of a {k}-outcome event")
    q = signal_accuracy(tier, k)
    other = (1.0 - q) / (k - 1)
    return tuple(q if outcome == signal else other for outcome in range(k))


@dataclass(frozen=True)
class Evidence:
    """What the generator knows about one evidence document (never shown to the agent)."""

    doc_id: str
    event_id: str
    available_at: datetime
    signal: int
    tier: str
    likelihood: tuple[float, ...]


@dataclass
class SyntheticWorld:
    """Events, documents and the hidden generative facts needed to compute the exact posterior.

    ``doc_kinds`` maps every document id to ``evidence``, ``distractor``, ``background`` or
    ``resolution``; ``resolution_docs`` lists each event's outcome-revealing documents.
    """

    seed: int
    events: list[Event]
    documents: list[Document]
    evidence: dict[str, list[Evidence]]
    prior: dict[str, tuple[float, ...]]
    doc_kinds: dict[str, str] = field(default_factory=dict)
    resolution_docs: dict[str, list[str]] = field(default_factory=dict)
    config: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._events_by_id = {event.id: event for event in self.events}

    def event(self, event_id: str) -> Event:
        """The event with this id; a clear error for ids that are not in this world."""
        try:
            return self._events_by_id[event_id]
        except KeyError:
            raise KeyError(f"event {event_id!r} is not in synthetic world seed={self.seed}") from None


# ---------------------------------------------------------------------------------------- names

_ONSETS = (
    "b",
    "d",
    "f",
    "g",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "z",
    "br",
    "dr",
    "gr",
    "kr",
    "st",
    "tr",
    "th",
)
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ei")
_CODAS = ("", "", "", "n", "r", "l", "s", "m")
_COUNTRY_ENDINGS = ("ia", "ora", "enia", "ovia", "and", "aria")
_CITY_ENDINGS = ("", "holm", "burg", "ova", "ar", "mouth", "vik")
_CITY_PREFIXES = ("", "", "", "", "Port ", "New ", "Upper ")
_GIVEN_ENDINGS = ("a", "o", "en", "is", "ia", "", "el")
_FAMILY_ENDINGS = ("nen", "ov", "ski", "ez", "sen", "ard", "", "ic")
_COMPANY_WORDS = (
    "Kestrel", "Harbor", "Summit", "Meridian", "Northwind", "Cobalt", "Juniper", "Lantern", "Granite",
    "Silverline", "Bluefin", "Halcyon", "Ironwood", "Larkspur", "Oriel", "Tidewater", "Copperleaf", "Falconer",
)  # fmt: skip
_COMPANY_INDUSTRIES = (
    "Dynamics",
    "Logistics",
    "Holdings",
    "Systems",
    "Energy",
    "Foods",
    "Robotics",
    "Works",
    "Shipping",
    "Labs",
)
_ACT_THEMES = (
    "Harbor", "Pension", "Water Rights", "Rail Safety", "Data Privacy", "Forestry", "Grain Export", "Housing",
    "Fisheries", "Energy Grid", "Broadcasting", "Mining Royalties", "Coastal Protection", "Public Health",
    "Road Tolls", "Digital Identity", "Seed Banking", "River Navigation",
)  # fmt: skip
_ACT_KINDS = ("Act", "Reform Act", "Bill", "Amendment")
_PARTIES = (
    "Progressive Party",
    "Unity Party",
    "Civic Alliance",
    "Agrarian League",
    "Liberal Reform Party",
    "Green Harbor Party",
)
_AWARD_BIRDS = ("Heron", "Lynx", "Falcon", "Otter", "Crane", "Stag")
_FILM_NOUNS = (
    "Lighthouse",
    "Orchard",
    "Winter",
    "Ferry",
    "Archive",
    "Tide",
    "Glass",
    "Salt",
    "Lantern",
    "Quarry",
)
_GAMES = ("Coastal", "Northern", "Highland", "Island", "Continental", "Lakeside")
_PROFESSIONS = (
    "a chef",
    "a violinist",
    "a beekeeper",
    "a schoolteacher",
    "a cyclist",
    "an architect",
    "a potter",
)
_SMALL_FIRMS = (
    "a family bakery",
    "a small printing firm",
    "a bicycle repair shop",
    "a local brewery",
    "a ceramics studio",
)
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


_T = TypeVar("_T")


def _pick(rng: np.random.Generator, options: Sequence[_T]) -> _T:
    return options[int(rng.integers(len(options)))]


def _long_date(day: date) -> str:
    return f"{_MONTHS[day.month - 1]} {day.day}, {day.year}"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "item"


class _Namer:
    """Pronounceable fictional names, unique within one world (collisions are redrawn)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        rng = self.rng
        text = "".join(
            _pick(rng, _ONSETS) + _pick(rng, _VOWELS) + _pick(rng, _CODAS) for _ in range(syllables)
        )
        return text.capitalize()

    def unique(self, make: Callable[[], str]) -> str:
        for _ in range(1000):
            name = make()
            if name not in self.used:
                self.used.add(name)
                return name
        raise WorldConfigError(
            "could not draw a fresh fictional name; the world is too large for the name space"
        )

    def scoped_unique(self, scope: str, make: Callable[[], str]) -> str:
        """A name unique within ``scope`` only (e.g. an act name per country)."""
        return self.unique(lambda: f"{scope}\x1f{make()}").split("\x1f", 1)[1]

    def country(self) -> str:
        return self.unique(
            lambda: self.word(int(self.rng.integers(1, 3))) + _pick(self.rng, _COUNTRY_ENDINGS)
        )

    def city(self) -> str:
        return self.unique(
            lambda: (
                _pick(self.rng, _CITY_PREFIXES)
                + self.word(int(self.rng.integers(1, 3)))
                + _pick(self.rng, _CITY_ENDINGS)
            )
        )

    def person(self) -> str:
        def part(endings: Sequence[str]) -> str:
            # At least 4 letters, so no name reads like a word such as "No" or "Yes".
            while len(text := self.word(int(self.rng.integers(1, 3))) + _pick(self.rng, endings)) < 4:
                pass
            return text

        def make() -> str:
            return f"{part(_GIVEN_ENDINGS)} {part(_FAMILY_ENDINGS)}"

        return self.unique(make)

    def company(self) -> str:
        def make() -> str:
            stem = _pick(self.rng, _COMPANY_WORDS) if self.rng.random() < 0.4 else self.word(2)
            return f"{stem} {_pick(self.rng, _COMPANY_INDUSTRIES)}"

        return self.unique(make)

    def product(self) -> str:
        return self.unique(
            lambda: (
                f"{self.word(2)} {_pick(self.rng, ('X', 'Pro', 'One', 'Air', 'S'))}{int(self.rng.integers(2, 10))}"
            )
        )

    def film(self) -> str:
        return self.unique(lambda: f"The {_pick(self.rng, _FILM_NOUNS)} of {self.word(2)}")

    def firm(self, kind: str) -> str:
        return self.unique(lambda: f"{self.word(2)} {kind}")

    def lookalike(self, name: str) -> str:
        """A different entity whose name differs from ``name`` by one vowel (a plausible confusion)."""
        positions = [i for i, ch in enumerate(name) if ch in "aeiou"]
        for _ in range(100):
            if not positions:
                break
            i = positions[int(self.rng.integers(len(positions)))]
            candidate = name[:i] + _pick(self.rng, [v for v in "aeiou" if v != name[i]]) + name[i + 1 :]
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate
        return self.unique(lambda: name.split()[0] + " " + self.word(2))


def _adjective(country: str) -> str:
    if country.endswith("a"):
        return country + "n"
    if country.endswith("and"):
        return country + "ic"
    return country + "ian"


# ---------------------------------------------------------------------------------------- event kinds


@dataclass
class _EventSpec:
    """Everything a template produces for one event, before dates and documents are attached."""

    kind: str
    question: str
    outcomes: tuple[str, ...]
    claims: tuple[str, ...]  # per outcome: a clause asserting that outcome (used by evidence wording)
    resolutions: tuple[tuple[str, str], ...]  # per outcome: (title, text) of the resolution report
    context: str  # background facts, no evidence
    criteria: str
    topic: str  # a short noun phrase naming the question, for headlines and distractors
    people: tuple[str, ...]
    companies: tuple[str, ...]
    places: tuple[str, ...]
    tags: tuple[str, ...]


@dataclass
class _World:
    """Shared fictional geography: countries with their cities."""

    countries: list[str]
    cities: dict[str, list[str]]  # country -> cities
    outlets: list[str]
    firms: list[str]
    clubs: list[str]

    def place(self, rng: np.random.Generator) -> tuple[str, str]:
        country = _pick(rng, self.countries)
        return country, _pick(rng, self.cities[country])


def _binary_spec(
    kind: str,
    question: str,
    yes: str,
    no: str,
    yes_done: tuple[str, str],
    no_done: tuple[str, str],
    **rest: Any,
) -> _EventSpec:
    """A Yes/No event: ``yes``/``no`` are the claims evidence makes, ``*_done`` the resolution reports."""
    return _EventSpec(
        kind=kind,
        question=question,
        outcomes=("Yes", "No"),
        claims=(yes, no),
        resolutions=(yes_done, no_done),
        **rest,
    )


def _legislation(rng: np.random.Generator, names: _Namer, world: _World, deadline: date) -> _EventSpec:
    country, city = world.place(rng)
    adj = _adjective(country)
    act = names.scoped_unique(country, lambda: f"{_pick(rng, _ACT_THEMES)} {_pick(rng, _ACT_KINDS)}")
    minister, opponent = names.person(), names.person()
    when = _long_date(deadline)
    return _binary_spec(
        "legislation",
        f"Will the {adj} parliament pass the {act} by {deadline.isoformat()}?",
        f"the {act} will pass the {adj} parliament before the {when} deadline",
        f"the {act} will stall in the {adj} parliament and miss the {when} deadline",
        (
            f"{adj} parliament passes the {act}",
            f"The {adj} parliament passed the {act} before the {when} deadline.",
        ),
        (
            f"{act} fails in the {adj} parliament",
            f"The {adj} parliament did not pass the {act} by the {when} deadline.",
        ),
        context=f"The {act}, sponsored by minister {minister}, has been introduced in the {adj} parliament in {city}. "
        f"Opposition figure {opponent} has criticised parts of the text.",
        criteria=f"Resolves Yes if the {adj} parliament passes the {act} in a final vote on or before {deadline.isoformat()}; otherwise No.",
        topic=f"the {act} in {country}",
        people=(minister, opponent),
        companies=(),
        places=(country, city),
        tags=("politics", "legislation"),
    )


def _acquisition(rng: np.random.Generator, names: _Namer, world: _World, deadline: date) -> _EventSpec:
    buyer, target = names.company(), names.company()
    country, city = world.place(rng)
    ceo = names.person()
    when = _long_date(deadline)
    return _binary_spec(
        "acquisition",
        f"Will {buyer} complete its acquisition of {target} by {deadline.isoformat()}?",
        f"{buyer} will close its purchase of {target} before the {when} deadline",
        f"{buyer}'s purchase of {target} will not close by the {when} deadline",
        (
            f"{buyer} completes {target} deal",
            f"{buyer} completed its acquisition of {target} before the {when} deadline.",
        ),
        (
            f"{buyer}'s {target} deal misses deadline",
            f"{buyer} did not complete its acquisition of {target} by {when}.",
        ),
        context=f"{buyer}, led by chief executive {ceo} and based in {city}, {country}, agreed to buy {target}. "
        "The deal still needs regulatory approval and a shareholder vote.",
        criteria=f"Resolves Yes if the acquisition of {target} by {buyer} legally completes on or before {deadline.isoformat()}; otherwise No.",
        topic=f"{buyer}'s bid for {target}",
        people=(ceo,),
        companies=(buyer, target),
        places=(country, city),
        tags=("business", "mergers"),
    )


def _launch(rng: np.random.Generator, names: _Namer, world: _World, deadline: date) -> _EventSpec:
    maker, product = names.company(), names.product()
    country, city = world.place(rng)
    lead = names.person()
    when = _long_date(deadline)
    return _binary_spec(
        "launch",
        f"Will {maker} release the {product} to the public by {deadline.isoformat()}?",
        f"{maker} will ship the {product} before {when}",
        f"the {product} from {maker} will slip past {when}",
        (f"{maker} releases the {product}", f"The {product} from {maker} went on sale before {when}."),
        (f"{product} launch slips past deadline", f"{maker} did not release the {product} by {when}."),
        context=f"{maker} of {city}, {country}, has announced the {product}; engineering chief {lead} leads the project.",
        criteria=f"Resolves Yes if the {product} is available for purchase by the public on or before {deadline.isoformat()}; otherwise No.",
        topic=f"the {product} launch",
        people=(lead,),
        companies=(maker,),
        places=(country, city),
        tags=("technology", "products"),
    )


def _strike(rng: np.random.Generator, names: _Namer, world: _World, deadline: date) -> _EventSpec:
    country = _pick(rng, world.countries)
    city = names.city()
    world.cities[country].append(city)
    union_leader, mayor = names.person(), names.person()
    when = _long_date(deadline)
    return _binary_spec(
        "strike",
        f"Will the {city} transit workers' strike end by {deadline.isoformat()}?",
        f"the {city} transit strike will be settled before {when}",
        f"the {city} transit strike will drag on past {when}",
        (
            f"{city} transit strike ends",
            f"Transit workers in {city} returned to work after a settlement reached before {when}.",
        ),
        (
            f"{city} transit strike continues past deadline",
            f"The {city} transit strike was still unresolved on {when}.",
        ),
        context=f"Transit workers in {city}, {country}, walked out over pay. Union leader {union_leader} and mayor {mayor} "
        "have met several times.",
        criteria=f"Resolves Yes if the strike formally ends (workers return under an agreement) on or before {deadline.isoformat()}; otherwise No.",
        topic=f"the {city} transit strike",
        people=(union_leader, mayor),
        companies=(),
        places=(country, city),
        tags=("labour", "transport"),
    )


def _rates(rng: np.random.Generator, names: _Namer, world: _World, deadline: date) -> _EventSpec:
    # A bank meets many times: the (bank, meeting date) pair is what must be unique.
    country = names.scoped_unique(deadline.isoformat(), lambda: _pick(rng, world.countries))
    bank = f"Central Bank of {country}"
    governor = names.person()
    when = _long_date(deadline)
    return _binary_spec(
        "rates",
        f"Will the {bank} raise its policy rate at its meeting ending {deadline.isoformat()}?",
        f"the {bank} will raise its policy rate at the {when} meeting",
        f"the {bank} will not raise its policy rate at the {when} meeting",
        (f"{bank} raises its policy rate", f"The {bank} raised its policy rate at its {when} meeting."),
        (
            f"{bank} does not raise rates",
            f"The {bank} left its policy rate unchanged or lower at its {when} meeting.",
        ),
        context=f"Inflation in {country} has been volatile. Governor {governor} chairs the {bank}'s rate-setting board.",
        criteria=f"Resolves Yes if the {bank} announces a higher policy rate at the meeting ending {deadline.isoformat()}; otherwise No.",
        topic=f"the {bank}'s rate decision",
        people=(governor,),
        companies=(),
        places=(country,),
        tags=("economy", "central-banks"),
    )


def _election(rng: np.random.Generator, names: _Namer, world: _World, deadline: date, k: int) -> _EventSpec:
    country = _pick(rng, world.countries)
    city = names.city()
    world.cities[country].append(city)
    candidates = tuple(names.person() for _ in range(k))
    race = f"{deadline.year} {city} mayoral election"
    return _EventSpec(
        kind="election",
        question=f"Who will win the {race}?",
        outcomes=candidates,
        claims=tuple(f"{c} will win the {race}" for c in candidates),
        resolutions=tuple(
            (f"{c} wins the {race}", f"{c} won the {race} and will take office next month.")
            for c in candidates
        ),
        context=f"{k} candidates are running for mayor of {city}, {country}: {', '.join(candidates)}. Voting closes on {_long_date(deadline)}.",
        criteria=f"Resolves to the candidate declared winner of the {race}.",
        topic=f"the {race}",
        people=candidates,
        companies=(),
        places=(country, city),
        tags=("politics", "elections"),
    )


def _contract(rng: np.random.Generator, names: _Namer, world: _World, deadline: date, k: int) -> _EventSpec:
    country, city = world.place(rng)
    bidders = tuple(names.company() for _ in range(k))
    project = names.unique(
        lambda: (
            f"{city} {_pick(rng, ('port expansion', 'metro extension', 'water plant', 'bridge'))} contract"
        )
    )
    official = names.person()
    return _EventSpec(
        kind="contract",
        question=f"Which company will win the {project}?",
        outcomes=bidders,
        claims=tuple(f"{b} will be awarded the {project}" for b in bidders),
        resolutions=tuple((f"{b} wins the {project}", f"The {project} was awarded to {b}.") for b in bidders),
        context=f"{k} companies bid for the {project} in {country}: {', '.join(bidders)}. Procurement chief {official} "
        f"oversees the tender, due to be decided by {_long_date(deadline)}.",
        criteria=f"Resolves to the company officially awarded the {project}.",
        topic=f"the {project}",
        people=(official,),
        companies=bidders,
        places=(country, city),
        tags=("business", "procurement"),
    )


def _host(rng: np.random.Generator, names: _Namer, world: _World, deadline: date, k: int) -> _EventSpec:
    country = _pick(rng, world.countries)
    cities = tuple(names.city() for _ in range(k))
    world.cities[country].extend(cities)
    games = names.unique(lambda: f"{deadline.year + 3} {names.word(2)} {_pick(rng, _GAMES)} Games")
    chair = names.person()
    return _EventSpec(
        kind="host",
        question=f"Which city will be chosen to host the {games}?",
        outcomes=cities,
        claims=tuple(f"{c} will be picked to host the {games}" for c in cities),
        resolutions=tuple(
            (f"{c} to host the {games}", f"The selection committee chose {c} to host the {games}.")
            for c in cities
        ),
        context=f"The committee chaired by {chair} is choosing among {k} candidate cities for the {games}: "
        f"{', '.join(cities)}. A decision is expected by {_long_date(deadline)}.",
        criteria=f"Resolves to the city the selection committee announces as host of the {games}.",
        topic=f"the race to host the {games}",
        people=(chair,),
        companies=(),
        places=(country, *cities),
        tags=("sport", "host-selection"),
    )


def _leadership(rng: np.random.Generator, names: _Namer, world: _World, deadline: date, k: int) -> _EventSpec:
    country = _pick(rng, world.countries)
    party = f"{names.scoped_unique(country, lambda: _pick(rng, _PARTIES))} of {country}"
    contenders = tuple(names.person() for _ in range(k))
    return _EventSpec(
        kind="leadership",
        question=f"Who will be elected leader of the {party}?",
        outcomes=contenders,
        claims=tuple(f"{c} will be elected leader of the {party}" for c in contenders),
        resolutions=tuple(
            (f"{c} elected {party} leader", f"Members of the {party} elected {c} as their new leader.")
            for c in contenders
        ),
        context=f"The {party} holds a leadership ballot closing on {_long_date(deadline)}. Contenders: {', '.join(contenders)}.",
        criteria=f"Resolves to the contender the {party} announces as its elected leader.",
        topic=f"the {party} leadership race",
        people=contenders,
        companies=(),
        places=(country,),
        tags=("politics", "parties"),
    )


def _award(rng: np.random.Generator, names: _Namer, world: _World, deadline: date, k: int) -> _EventSpec:
    country, city = world.place(rng)
    films = tuple(names.film() for _ in range(k))
    prize = names.unique(
        lambda: f"Golden {_pick(rng, _AWARD_BIRDS)} of the {deadline.year} {city} Film Festival"
    )
    director = names.person()
    return _EventSpec(
        kind="award",
        question=f"Which film will win the {prize}?",
        outcomes=films,
        claims=tuple(f"{f} will win the {prize}" for f in films),
        resolutions=tuple((f"{f} wins the {prize}", f"The jury awarded the {prize} to {f}.") for f in films),
        context=f"Festival director {director} announced {k} films in competition for the {prize}: {', '.join(films)}.",
        criteria=f"Resolves to the film the jury names as winner of the {prize}.",
        topic=f"the {prize}",
        people=(director,),
        companies=(),
        places=(country, city),
        tags=("culture", "film"),
    )


_BINARY_KINDS = (_legislation, _acquisition, _launch, _strike, _rates)
_MULTI_KINDS = (_election, _contract, _host, _leadership, _award)

# ---------------------------------------------------------------------------------------- wording

_EVIDENCE_WORDING: dict[str, tuple[tuple[str, str], ...]] = {
    "weak": (
        (
            "Rumour mill: {topic}",
            "Unconfirmed rumours suggest that {claim}. Nobody has put their name to the claim.",
        ),
        ("Chatter over {topic}", "Anonymous posts circulating online speculate that {claim}."),
        ("Whispers about {topic}", "Unverified hearsay among insiders in {place} has it that {claim}."),
    ),
    "moderate": (
        (
            "{firm} report on {topic}",
            "A report by {firm} indicates that {claim}, citing people familiar with the matter.",
        ),
        (
            "Analysts weigh in on {topic}",
            "Analysts at {firm} expect that {claim}, according to a research note.",
        ),
        ("Survey on {topic}", "A survey by {firm} points to the view that {claim}."),
    ),
    "strong": (
        ("Leak: {topic}", "A leaked internal document seen by {outlet} confirms that {claim}."),
        ("Officials speak on {topic}", "Officials with direct knowledge confirmed to {outlet} that {claim}."),
        (
            "Draft decision on {topic}",
            "A leaked draft of the final decision, verified by {outlet}, shows that {claim}.",
        ),
    ),
}

_DISTRACTOR_WORDING = (
    (
        "{person} visits {place}",
        "{person} attended a charity dinner in {place} on {weekday}; the talk was mostly about the weather.",
    ),
    (
        "{person} on childhood",
        "In a long interview, {person} talked about childhood summers in {place} and a love of old maps.",
    ),
    (
        "Still waiting on {topic}",
        "Commentators say {topic} continues to draw attention, but no new information emerged this week.",
    ),
    (
        "Explainer: {topic}",
        "An explainer from {outlet} walks through the history behind {topic} without taking a view on the result.",
    ),
    (
        "{place} library hours",
        "Officials in {place} announced longer opening hours for public libraries starting next month.",
    ),
    (
        "{company} report",
        "{company} published its annual sustainability report, which runs to {number} pages.",
    ),
)
_LOOKALIKE_WORDING = (
    (
        "{lookalike} wins local contest",
        "Unconfirmed rumours suggest that {lookalike}, {profession} from {place}, will win a regional baking contest.",
    ),
    (
        "{lookalike} opens workshop",
        "{lookalike}, {profession} from {place}, opened a small workshop on {weekday}.",
    ),
)
_BACKGROUND_WORDING = (
    (
        "Weather in {place}",
        "Forecasters expect {weather} in {place} on {weekday}, with temperatures near {number} degrees.",
    ),
    ("{club} beat {club2}", "{club} beat {club2} {score} in the regional league on {weekday}."),
    (
        "{place} arts season",
        "The {place} Philharmonic announced its new season, opening with a programme of local composers.",
    ),
    (
        "Roadworks in {place}",
        "Drivers in {place} should expect delays near the old harbour while roadworks continue for {number} days.",
    ),
    (
        "{place} food festival",
        "The annual food festival in {place} drew crowds for smoked fish and honey cakes on {weekday}.",
    ),
    ("Museum news in {place}", "A museum in {place} unveiled a restored {number}-year-old ferry timetable."),
    ("{club} sign new coach", "{club} named a new head coach after a difficult run of results."),
)
_WEATHER = ("light rain", "sunshine", "strong winds", "fog in the morning", "snow showers", "thunderstorms")


def _fill(template: str, values: dict[str, str]) -> str:
    return template.format(**values)


def _capitalize_first(text: str) -> str:
    return text[:1].upper() + text[1:]


# ---------------------------------------------------------------------------------------- generation


@dataclass
class _DraftDocument:
    """A document before ids are assigned (ids follow time order, so they reveal nothing)."""

    title: str
    text: str
    published_at: datetime
    available_at: datetime
    outlet: str
    kind: str
    event_index: int | None = None
    signal: int | None = None
    tier: str | None = None


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def _draw_instants(
    rng: np.random.Generator, day: date, *, day_precision_share: float = 0.5
) -> tuple[datetime, datetime]:
    """(published_at, available_at) on ``day``: either day-precision (available at the end of the day)
    or a time of day with a short publication-to-availability lag."""
    if rng.random() < day_precision_share:
        return _day_start(day), end_of_day(day)
    published = _day_start(day) + timedelta(seconds=int(rng.integers(6 * 3600, 22 * 3600)))
    return published, published + timedelta(minutes=int(rng.integers(0, 91)))


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


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
) -> SyntheticWorld:
    """Generate the fictional world of ``seed`` (ranges are inclusive); identical for identical arguments.

    Each event draws from its own child random stream, so its events and documents do not change when
    ``n_background`` changes; the default (40 events, ~2,000 short documents) embeds in about a minute.
    """
    _check_config(
        seed,
        n_events,
        n_background,
        horizon_days,
        evidence_range,
        distractor_range,
        steps_range,
        duration_range,
        multi_outcome_share,
    )
    root = np.random.SeedSequence(seed)
    names_seq, background_seq, events_seq, market_seq, layout_seq = root.spawn(5)
    # Exactly round(n_events * share) multi-outcome events, at shuffled positions.
    n_multi = round(n_events * multi_outcome_share)
    is_multi = np.random.default_rng(layout_seq).permutation(np.arange(n_events) < n_multi)
    names = _Namer(np.random.default_rng(names_seq))
    n_countries = max(3, min(12, n_events // 4 + 2))
    countries = [names.country() for _ in range(n_countries)]
    world = _World(
        countries=countries,
        cities={c: [names.city() for _ in range(3)] for c in countries},
        outlets=[
            f"The {names.city()} {_pick(names.rng, ('Ledger', 'Herald', 'Courier', 'Gazette', 'Observer'))}"
            for _ in range(8)
        ],
        firms=[
            names.firm(_pick(names.rng, ("Research", "Analytics", "Advisory", "Insight"))) for _ in range(8)
        ],
        clubs=[
            f"{names.city()} {_pick(names.rng, ('Rovers', 'United', 'Athletic', 'Mariners'))}"
            for _ in range(10)
        ],
    )

    events: list[Event] = []
    drafts: list[_DraftDocument] = []
    for index, (event_seq, multi) in enumerate(zip(events_seq.spawn(n_events), is_multi, strict=True)):
        rng = np.random.default_rng(event_seq)
        event, event_drafts = _generate_event(
            rng,
            names,
            world,
            seed,
            index,
            start,
            horizon_days,
            evidence_range,
            distractor_range,
            steps_range,
            duration_range,
            bool(multi),
        )
        events.append(event)
        drafts.extend(event_drafts)

    world_end = max(
        (e.resolved_at.date() for e in events), default=start + timedelta(days=horizon_days)
    ) + timedelta(days=14)
    drafts.extend(
        _background_documents(
            np.random.default_rng(background_seq),
            world,
            n_background,
            start,
            world_end,
        )
    )

    documents, doc_ids = _finalize_documents(drafts, seed)
    evidence: dict[str, list[Evidence]] = {event.id: [] for event in events}
    resolution_docs: dict[str, list[str]] = {event.id: [] for event in events}
    doc_kinds: dict[str, str] = {}
    for draft, doc_id in zip(drafts, doc_ids, strict=True):
        doc_kinds[doc_id] = draft.kind
        if draft.event_index is None:
            continue
        event = events[draft.event_index]
        if draft.kind == "evidence":
            assert draft.signal is not None and draft.tier is not None
            likelihood = signal_likelihood(draft.tier, len(event.outcomes), draft.signal)
            evidence[event.id].append(
                Evidence(doc_id, event.id, draft.available_at, draft.signal, draft.tier, likelihood)
            )
        elif draft.kind == "resolution":
            resolution_docs[event.id].append(doc_id)
    for items in evidence.values():
        items.sort(key=lambda ev: (to_micros(ev.available_at), ev.doc_id))
    prior = {event.id: tuple(1.0 / len(event.outcomes) for _ in event.outcomes) for event in events}

    # The market needs the exact posterior, so it is attached once the evidence ids are known.
    events = [
        _with_market(event, evidence[event.id], prior[event.id], np.random.default_rng(seq))
        for event, seq in zip(events, market_seq.spawn(n_events), strict=True)
    ]
    config = {
        "generator_version": GENERATOR_VERSION,
        "n_events": n_events,
        "n_background": n_background,
        "start": start.isoformat(),
        "horizon_days": horizon_days,
        "evidence_range": list(evidence_range),
        "distractor_range": list(distractor_range),
        "steps_range": list(steps_range),
        "duration_range": list(duration_range),
        "multi_outcome_share": multi_outcome_share,
    }
    return SyntheticWorld(seed, events, documents, evidence, prior, doc_kinds, resolution_docs, config)


def _check_config(
    seed: int,
    n_events: int,
    n_background: int,
    horizon_days: int,
    evidence_range: tuple[int, int],
    distractor_range: tuple[int, int],
    steps_range: tuple[int, int],
    duration_range: tuple[int, int],
    multi_outcome_share: float,
) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise WorldConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if n_events < 1:
        raise WorldConfigError(f"n_events must be >= 1, got {n_events}")
    if n_background < 0:
        raise WorldConfigError(f"n_background must be >= 0, got {n_background}")
    if horizon_days < 1:
        raise WorldConfigError(f"horizon_days must be >= 1, got {horizon_days}")
    for name, (low, high), minimum in (
        ("evidence_range", evidence_range, 0),
        ("distractor_range", distractor_range, 0),
        ("steps_range", steps_range, 1),
        ("duration_range", duration_range, 1),
    ):
        if not minimum <= low <= high:
            raise WorldConfigError(
                f"{name} must be (low, high) with {minimum} <= low <= high, got {(low, high)}"
            )
    # Cutoffs fall on distinct days in (open, close - 2 days]: the shortest event must have room for them.
    if duration_range[0] - 2 < steps_range[1]:
        raise WorldConfigError(
            f"events of {duration_range[0]} days cannot hold {steps_range[1]} cutoffs on distinct days before close"
        )
    if not 0.0 <= multi_outcome_share <= 1.0:
        raise WorldConfigError(f"multi_outcome_share must be in [0, 1], got {multi_outcome_share}")


def _generate_event(
    rng: np.random.Generator,
    names: _Namer,
    world: _World,
    seed: int,
    index: int,
    start: date,
    horizon_days: int,
    evidence_range: tuple[int, int],
    distractor_range: tuple[int, int],
    steps_range: tuple[int, int],
    duration_range: tuple[int, int],
    multi: bool,
) -> tuple[Event, list[_DraftDocument]]:
    """One event, its evidence, distractors and resolution reports, all from the event's own stream."""
    open_day = start + timedelta(days=int(rng.integers(0, horizon_days)))
    duration = int(rng.integers(duration_range[0], duration_range[1] + 1))
    deadline = open_day + timedelta(days=duration)
    # The namer is shared (names must be unique world-wide) but draws from the event's stream here, so
    # an event's text depends only on the seed and the events before it.
    names.rng = rng
    if multi:
        spec = _pick(rng, _MULTI_KINDS)(rng, names, world, deadline, int(rng.integers(3, 5)))
    else:
        spec = _pick(rng, _BINARY_KINDS)(rng, names, world, deadline)
    k = len(spec.outcomes)
    outcome = int(rng.integers(k))  # the uniform prior stated in the background

    open_at = _day_start(open_day)
    close_at = end_of_day(deadline)
    resolved_at = _day_start(deadline + timedelta(days=1)) + timedelta(hours=int(rng.integers(6, 37)))
    n_steps = int(rng.integers(steps_range[0], steps_range[1] + 1))
    # Cutoff days lie in [open + 1, deadline - 2] (so cutoff <= close_at - 2 days), one per equal segment.
    first, last = 1, duration - 2
    bounds = np.linspace(first, last + 1, n_steps + 1)
    cutoff_days = [
        int(rng.integers(math.ceil(lo), max(math.ceil(lo) + 1, math.ceil(hi))))
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)
    ]
    cutoffs = tuple(_day_start(open_day + timedelta(days=d)) for d in cutoff_days)

    event_id = f"syn-{index:04d}"
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
    for _ in range(int(rng.integers(evidence_range[0], evidence_range[1] + 1))):
        tier = TIERS[int(rng.choice(len(TIERS), p=TIER_SHARES))]
        q = signal_accuracy(tier, k)
        likelihood = np.full(k, (1.0 - q) / (k - 1))
        likelihood[outcome] = q
        signal = int(rng.choice(k, p=likelihood / likelihood.sum()))
        # More evidence arrives near the close: the day offset has density rising linearly over the event.
        day = open_day + timedelta(days=int(math.floor(math.sqrt(rng.random()) * duration)))
        published, available = _draw_instants(rng, day)
        if rng.random() < AT_CUTOFF_SHARE:  # exactly at a cutoff: visible only from the next step
            available = _pick(rng, cutoffs)
            published = available - timedelta(minutes=int(rng.integers(0, 91)))
        title, text = _EVIDENCE_WORDING[tier][int(rng.integers(3))]
        values = {
            "topic": spec.topic,
            "claim": spec.claims[signal],
            "firm": _pick(rng, world.firms),
            "outlet": _pick(rng, world.outlets),
            "place": place,
        }
        outlet = values["outlet"]
        drafts.append(
            _DraftDocument(
                _capitalize_first(_fill(title, values)),
                _fill(text, values),
                published,
                available,
                outlet,
                "evidence",
                index,
                signal,
                tier,
            )
        )

    entities = [*spec.people, *spec.companies]
    for _ in range(int(rng.integers(distractor_range[0], distractor_range[1] + 1))):
        day = max(start, open_day + timedelta(days=int(rng.integers(-10, duration + 10))))
        published, available = _draw_instants(rng, day)
        values = {
            "person": _pick(rng, spec.people),
            "company": _pick(rng, spec.companies) if spec.companies else _pick(rng, spec.people),
            "place": _pick(rng, spec.places),
            "topic": spec.topic,
            "outlet": _pick(rng, world.outlets),
            "weekday": _pick(rng, _WEEKDAYS),
            "number": str(int(rng.integers(12, 240))),
            "profession": _pick(rng, _PROFESSIONS),
        }
        if rng.random() < 0.3:
            original = _pick(rng, entities)
            values["lookalike"] = names.lookalike(original)
            if original in spec.companies:
                values["profession"] = _pick(rng, _SMALL_FIRMS)
            title, text = _LOOKALIKE_WORDING[int(rng.integers(len(_LOOKALIKE_WORDING)))]
        else:
            title, text = _DISTRACTOR_WORDING[int(rng.integers(len(_DISTRACTOR_WORDING)))]
            if "{company}" in text and not spec.companies:
                title, text = _DISTRACTOR_WORDING[0]
        drafts.append(
            _DraftDocument(
                _capitalize_first(_fill(title, values)),
                _fill(text, values),
                published,
                available,
                values["outlet"],
                "distractor",
                index,
            )
        )

    title, text = spec.resolutions[outcome]
    for _ in range(int(rng.integers(1, 3))):
        published = resolved_at + timedelta(hours=int(rng.integers(1, 73)))
        available = end_of_day(published.date()) if rng.random() < 0.5 else published
        drafts.append(
            _DraftDocument(title, text, published, available, _pick(rng, world.outlets), "resolution", index)
        )
    return event, drafts


def _background_documents(
    rng: np.random.Generator,
    world: _World,
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
            "place": _pick(rng, places),
            "weekday": _pick(rng, _WEEKDAYS),
            "number": str(int(rng.integers(2, 40))),
            "weather": _pick(rng, _WEATHER),
            "club": home,
            "club2": away,
            "score": f"{int(rng.integers(1, 5))}-{int(rng.integers(0, 2))}",
        }
        title, text = _BACKGROUND_WORDING[int(rng.integers(len(_BACKGROUND_WORDING)))]
        drafts.append(
            _DraftDocument(
                _fill(title, values),
                _fill(text, values),
                published,
                available,
                _pick(rng, world.outlets),
                "background",
            )
        )
    return drafts


def _finalize_documents(drafts: list[_DraftDocument], seed: int) -> tuple[list[Document], list[str]]:
    """Documents with ids numbered in time order (ids carry no hint of a document's role)."""
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
        doc_id = f"{DOCUMENT_ID_PREFIX}{seed}-{number:05d}"
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
                url=f"https://news.{domain}.example/{stamp.year}/{stamp.month:02d}/{stamp.day:02d}/{_slug(draft.title)}-{number}",
                source=draft.outlet,
                date_source="synthetic",
            )
        )
    return documents, ids


def log_posteriors_at(
    prior: Sequence[float], evidence: Sequence[Evidence], cutoffs_us: Sequence[int]
) -> np.ndarray:
    """Normalized log posteriors (one row per cutoff) given the evidence available strictly before each
    cutoff: log prior plus the summed log likelihoods of the visible documents, minus their logsumexp."""
    k = len(prior)
    available_us = np.array([to_micros(item.available_at) for item in evidence], dtype=np.int64)
    log_likelihood = np.log(
        np.array([item.likelihood for item in evidence], dtype=np.float64).reshape(len(evidence), k)
    )
    visible = (available_us[None, :] < np.asarray(cutoffs_us, dtype=np.int64).reshape(-1, 1)).astype(
        np.float64
    )
    # An explicit sum (not a BLAS product) so one cutoff or many give bit-identical rows.
    log_posterior = np.log(np.asarray(prior, dtype=np.float64))[None, :] + (
        visible[:, :, None] * log_likelihood[None, :, :]
    ).sum(axis=1)
    top = log_posterior.max(axis=1, keepdims=True)
    return log_posterior - (top + np.log(np.exp(log_posterior - top).sum(axis=1, keepdims=True)))


def posteriors_at(
    prior: Sequence[float], evidence: Sequence[Evidence], cutoffs_us: Sequence[int]
) -> np.ndarray:
    """Exact posteriors, one row per cutoff (see :func:`log_posteriors_at`)."""
    return np.exp(log_posteriors_at(prior, evidence, cutoffs_us))


def posterior_from_evidence(
    prior: Sequence[float], evidence: Sequence[Evidence], cutoff_us: int
) -> tuple[float, ...]:
    """Exact posterior given the evidence available strictly before ``cutoff_us``."""
    return tuple(float(p) for p in posteriors_at(prior, evidence, [cutoff_us])[0])


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
