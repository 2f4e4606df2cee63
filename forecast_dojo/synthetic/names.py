"""Pronounceable fictional names for the synthetic world (countries, cities, people, firms, films)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import date
from typing import TypeVar

import numpy as np

from forecast_dojo.synthetic.model import WorldConfigError

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
_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip

T = TypeVar("T")


def pick(rng: np.random.Generator, options: Sequence[T]) -> T:
    """One of ``options``, drawn uniformly with ``rng``."""
    return options[int(rng.integers(len(options)))]


def long_date(day: date) -> str:
    """A day as "March 5, 2031"."""
    return f"{_MONTHS[day.month - 1]} {day.day}, {day.year}"


def slug(text: str) -> str:
    """A URL path segment from a title (lower case, dashes, at most 60 characters)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "item"


class Namer:
    """Pronounceable fictional names, unique within one world (collisions are redrawn)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int) -> str:
        """A capitalized made-up word of ``syllables`` syllables (not reserved)."""
        rng = self.rng
        text = "".join(pick(rng, _ONSETS) + pick(rng, _VOWELS) + pick(rng, _CODAS) for _ in range(syllables))
        return text.capitalize()

    def unique(self, make: Callable[[], str]) -> str:
        """The first name from ``make`` not used yet in this world (then reserved)."""
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
        """A fresh country name."""
        return self.unique(lambda: self.word(int(self.rng.integers(1, 3))) + pick(self.rng, _COUNTRY_ENDINGS))

    def city(self) -> str:
        """A fresh city name."""
        return self.unique(
            lambda: (
                pick(self.rng, _CITY_PREFIXES)
                + self.word(int(self.rng.integers(1, 3)))
                + pick(self.rng, _CITY_ENDINGS)
            )
        )

    def person(self) -> str:
        """A fresh person's given and family name."""

        def part(endings: Sequence[str]) -> str:
            # At least 4 letters, so no name reads like a word such as "No" or "Yes".
            while len(text := self.word(int(self.rng.integers(1, 3))) + pick(self.rng, endings)) < 4:
                pass
            return text

        def make() -> str:
            return f"{part(_GIVEN_ENDINGS)} {part(_FAMILY_ENDINGS)}"

        return self.unique(make)

    def company(self) -> str:
        """A fresh company name."""

        def make() -> str:
            stem = pick(self.rng, _COMPANY_WORDS) if self.rng.random() < 0.4 else self.word(2)
            return f"{stem} {pick(self.rng, _COMPANY_INDUSTRIES)}"

        return self.unique(make)

    def product(self) -> str:
        """A fresh product name."""
        return self.unique(
            lambda: (
                f"{self.word(2)} {pick(self.rng, ('X', 'Pro', 'One', 'Air', 'S'))}{int(self.rng.integers(2, 10))}"
            )
        )

    def film(self) -> str:
        """A fresh film title."""
        return self.unique(lambda: f"The {pick(self.rng, _FILM_NOUNS)} of {self.word(2)}")

    def firm(self, kind: str) -> str:
        """A fresh firm name ending in ``kind`` (e.g. Research)."""
        return self.unique(lambda: f"{self.word(2)} {kind}")

    def lookalike(self, name: str) -> str:
        """A different entity whose name differs from ``name`` by one vowel (a plausible confusion)."""
        positions = [i for i, ch in enumerate(name) if ch in "aeiou"]
        for _ in range(100):
            if not positions:
                break
            i = positions[int(self.rng.integers(len(positions)))]
            candidate = name[:i] + pick(self.rng, [v for v in "aeiou" if v != name[i]]) + name[i + 1 :]
            if candidate not in self.used:
                self.used.add(candidate)
                return candidate
        return self.unique(lambda: name.split()[0] + " " + self.word(2))


def adjective(country: str) -> str:
    """The adjective of a fictional country ("Borania" -> "Boranian")."""
    if country.endswith("a"):
        return country + "n"
    if country.endswith("and"):
        return country + "ic"
    return country + "ian"
