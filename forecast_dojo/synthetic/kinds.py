"""The ten event kinds of the synthetic world (five Yes/No, five multi-outcome) and their templates.

A kind draws its entities and writes the question, the outcomes, the claim each outcome's evidence
makes, the resolution reports, the background and the resolution criteria; dates and documents are
attached by the generator (``world.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import numpy as np

from forecast_dojo.synthetic.names import Namer, adjective, long_date, pick

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
_GAMES = ("Coastal", "Northern", "Highland", "Island", "Continental", "Lakeside")


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
class Geography:
    """Shared fictional geography: countries with their cities."""

    countries: list[str]
    cities: dict[str, list[str]]  # country -> cities
    outlets: list[str]
    firms: list[str]
    clubs: list[str]

    def place(self, rng: np.random.Generator) -> tuple[str, str]:
        """A random (country, one of its cities)."""
        country = pick(rng, self.countries)
        return country, pick(rng, self.cities[country])


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


def _multi_spec(
    kind: str,
    question: str,
    outcomes: tuple[str, ...],
    claim: Callable[[str], str],
    resolution: Callable[[str], tuple[str, str]],
    **rest: Any,
) -> _EventSpec:
    """A multi-outcome event: ``claim(o)`` is what evidence for ``o`` asserts, ``resolution(o)`` its report."""
    return _EventSpec(
        kind=kind,
        question=question,
        outcomes=outcomes,
        claims=tuple(claim(o) for o in outcomes),
        resolutions=tuple(resolution(o) for o in outcomes),
        **rest,
    )


def _legislation(rng: np.random.Generator, names: Namer, world: Geography, deadline: date) -> _EventSpec:
    country, city = world.place(rng)
    adj = adjective(country)
    act = names.scoped_unique(country, lambda: f"{pick(rng, _ACT_THEMES)} {pick(rng, _ACT_KINDS)}")
    minister, opponent = names.person(), names.person()
    when = long_date(deadline)
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


def _acquisition(rng: np.random.Generator, names: Namer, world: Geography, deadline: date) -> _EventSpec:
    buyer, target = names.company(), names.company()
    country, city = world.place(rng)
    ceo = names.person()
    when = long_date(deadline)
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


def _launch(rng: np.random.Generator, names: Namer, world: Geography, deadline: date) -> _EventSpec:
    maker, product = names.company(), names.product()
    country, city = world.place(rng)
    lead = names.person()
    when = long_date(deadline)
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


def _strike(rng: np.random.Generator, names: Namer, world: Geography, deadline: date) -> _EventSpec:
    country = pick(rng, world.countries)
    city = names.city()
    world.cities[country].append(city)
    union_leader, mayor = names.person(), names.person()
    when = long_date(deadline)
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


def _rates(rng: np.random.Generator, names: Namer, world: Geography, deadline: date) -> _EventSpec:
    # A bank meets many times: the (bank, meeting date) pair is what must be unique.
    country = names.scoped_unique(deadline.isoformat(), lambda: pick(rng, world.countries))
    bank = f"Central Bank of {country}"
    governor = names.person()
    when = long_date(deadline)
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


def _election(rng: np.random.Generator, names: Namer, world: Geography, deadline: date, k: int) -> _EventSpec:
    country = pick(rng, world.countries)
    city = names.city()
    world.cities[country].append(city)
    candidates = tuple(names.person() for _ in range(k))
    race = f"{deadline.year} {city} mayoral election"
    return _multi_spec(
        "election",
        f"Who will win the {race}?",
        candidates,
        lambda c: f"{c} will win the {race}",
        lambda c: (f"{c} wins the {race}", f"{c} won the {race} and will take office next month."),
        context=f"{k} candidates are running for mayor of {city}, {country}: {', '.join(candidates)}. Voting closes on {long_date(deadline)}.",
        criteria=f"Resolves to the candidate declared winner of the {race}.",
        topic=f"the {race}",
        people=candidates,
        companies=(),
        places=(country, city),
        tags=("politics", "elections"),
    )


def _contract(rng: np.random.Generator, names: Namer, world: Geography, deadline: date, k: int) -> _EventSpec:
    country, city = world.place(rng)
    bidders = tuple(names.company() for _ in range(k))
    project = names.unique(
        lambda: f"{city} {pick(rng, ('port expansion', 'metro extension', 'water plant', 'bridge'))} contract"
    )
    official = names.person()
    return _multi_spec(
        "contract",
        f"Which company will win the {project}?",
        bidders,
        lambda b: f"{b} will be awarded the {project}",
        lambda b: (f"{b} wins the {project}", f"The {project} was awarded to {b}."),
        context=f"{k} companies bid for the {project} in {country}: {', '.join(bidders)}. Procurement chief {official} "
        f"oversees the tender, due to be decided by {long_date(deadline)}.",
        criteria=f"Resolves to the company officially awarded the {project}.",
        topic=f"the {project}",
        people=(official,),
        companies=bidders,
        places=(country, city),
        tags=("business", "procurement"),
    )


def _host(rng: np.random.Generator, names: Namer, world: Geography, deadline: date, k: int) -> _EventSpec:
    country = pick(rng, world.countries)
    cities = tuple(names.city() for _ in range(k))
    world.cities[country].extend(cities)
    games = names.unique(lambda: f"{deadline.year + 3} {names.word(2)} {pick(rng, _GAMES)} Games")
    chair = names.person()
    return _multi_spec(
        "host",
        f"Which city will be chosen to host the {games}?",
        cities,
        lambda c: f"{c} will be picked to host the {games}",
        lambda c: (f"{c} to host the {games}", f"The selection committee chose {c} to host the {games}."),
        context=f"The committee chaired by {chair} is choosing among {k} candidate cities for the {games}: "
        f"{', '.join(cities)}. A decision is expected by {long_date(deadline)}.",
        criteria=f"Resolves to the city the selection committee announces as host of the {games}.",
        topic=f"the race to host the {games}",
        people=(chair,),
        companies=(),
        places=(country, *cities),
        tags=("sport", "host-selection"),
    )


def _leadership(
    rng: np.random.Generator, names: Namer, world: Geography, deadline: date, k: int
) -> _EventSpec:
    country = pick(rng, world.countries)
    party = f"{names.scoped_unique(country, lambda: pick(rng, _PARTIES))} of {country}"
    contenders = tuple(names.person() for _ in range(k))
    return _multi_spec(
        "leadership",
        f"Who will be elected leader of the {party}?",
        contenders,
        lambda c: f"{c} will be elected leader of the {party}",
        lambda c: (f"{c} elected {party} leader", f"Members of the {party} elected {c} as their new leader."),
        context=f"The {party} holds a leadership ballot closing on {long_date(deadline)}. Contenders: {', '.join(contenders)}.",
        criteria=f"Resolves to the contender the {party} announces as its elected leader.",
        topic=f"the {party} leadership race",
        people=contenders,
        companies=(),
        places=(country,),
        tags=("politics", "parties"),
    )


def _award(rng: np.random.Generator, names: Namer, world: Geography, deadline: date, k: int) -> _EventSpec:
    country, city = world.place(rng)
    films = tuple(names.film() for _ in range(k))
    prize = names.unique(
        lambda: f"Golden {pick(rng, _AWARD_BIRDS)} of the {deadline.year} {city} Film Festival"
    )
    director = names.person()
    return _multi_spec(
        "award",
        f"Which film will win the {prize}?",
        films,
        lambda f: f"{f} will win the {prize}",
        lambda f: (f"{f} wins the {prize}", f"The jury awarded the {prize} to {f}."),
        context=f"Festival director {director} announced {k} films in competition for the {prize}: {', '.join(films)}.",
        criteria=f"Resolves to the film the jury names as winner of the {prize}.",
        topic=f"the {prize}",
        people=(director,),
        companies=(),
        places=(country, city),
        tags=("culture", "film"),
    )


BINARY_KINDS = (_legislation, _acquisition, _launch, _strike, _rates)
MULTI_KINDS = (_election, _contract, _host, _leadership, _award)
