"""Question-to-document relevance over a time window of a corpus.

The evidence filter and the leakage screen share it.

A document matches a question when it shares enough of the question's *salient terms* (content
words minus question-frame words such as "will", "by", "end", month names and years), optionally
also with a minimum cosine similarity in the corpus's own embedding space. The lexical rule runs
without any model and behaves the same on every corpus; the cosine rule is useful with semantic
embeddings (MiniLM) and is off by default, because a 256-dim hashing embedding of one-sentence news
is dominated by function words.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from forecast_dojo.corpus.embedders import Embedder, get_embedder
from forecast_dojo.corpus.store import Corpus, CorpusError
from forecast_dojo.timeutil import to_micros

_TOKEN = re.compile(r"[^\W_]+(?:[-'][^\W_]+)*", re.UNICODE)
_FRAME_WORDS = frozenset(
    str.split(
        """a an the of and or to in on at by for from with without into onto over under about as is are was were be
    been being will would shall should can could may might must do does did have has had not no yes any all
    some more most less least than then this that these those which who whom whose what when where why how
    it its their there they them he she his her him we our us you your i my me if else whether before after
    until till between during end ending start next new first last least top other another
    per via such same each every many much few one two three four five six seven eight nine ten
    happen happens happened occur occurs become becomes get gets reach reaches remain remains still
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec week weeks month months year years day days date
    q1 q2 q3 q4 quarter today tomorrow yesterday time times least greater higher lower above below
    market markets question resolve resolves resolved resolution"""
    )
)


def _stem(word: str) -> str:
    """A deliberately crude stem (possessive and plural ``s`` removed) so "elections" meets "election"."""
    word = word.lower().removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def stem(word: str) -> str:
    """The crude stem the relevance rules compare words by (see :func:`_stem`)."""
    return _stem(word)


def terms(text: str) -> frozenset[str]:
    """Stemmed lowercase words of a text."""
    return frozenset(_stem(w) for w in _TOKEN.findall(text))


def salient_terms(question: str) -> frozenset[str]:
    """The question's content terms: no frame words, no bare numbers, at least two characters."""
    out = set()
    for word in _TOKEN.findall(question):
        stem = _stem(word)
        if stem in _FRAME_WORDS or word.lower() in _FRAME_WORDS or stem.isdigit() or len(stem) < 2:
            continue
        out.add(stem)
    return frozenset(out)


def name_terms(question: str) -> frozenset[str]:
    """Salient terms written with a capital letter somewhere other than the question's first word.

    These are the names (people, places, organisations, titles) that make a match specific to this
    question.
    """
    words = _TOKEN.findall(question)
    salient = salient_terms(question)
    return frozenset(
        _stem(w) for i, w in enumerate(words) if i > 0 and w[:1].isupper() and _stem(w) in salient
    )


@dataclass(frozen=True)
class MatchRule:
    """When a document matches a question (what :meth:`RelevanceIndex.matches` applies).

    Attributes:
        min_coverage: Share of the question's ``n`` salient terms the document must contain.
        min_shared: Salient terms it must share at least (all of them when ``n`` is smaller).
        min_similarity: Cosine similarity in the corpus's embedding space it must reach (0: not asked).
        require_name: It must contain one of the question's names when the question has any.
    """

    min_coverage: float
    min_shared: int = 2
    min_similarity: float = 0.0
    require_name: bool = True

    def needed(self, n_terms: int) -> int:
        """How many of a question's ``n_terms`` salient terms a matching document shares at least."""
        return min(n_terms, max(self.min_shared, math.ceil(self.min_coverage * n_terms)))


@dataclass(frozen=True)
class Match:
    """One relevant document: its row, the share of salient terms it contains, and its similarity."""

    row: int
    coverage: float
    shared: tuple[str, ...]
    similarity: float


class RelevanceIndex:
    """Finds documents available in a time window that match a question (terms are cached per row)."""

    def __init__(self, corpus: Corpus, embedder: Embedder | None = None) -> None:
        if embedder is not None and embedder.name != corpus.embedder_name:
            raise CorpusError(
                f"corpus {corpus.path} was embedded with {corpus.embedder_name!r}, not {embedder.name!r}"
            )
        self.corpus = corpus
        self._embedder = embedder
        self._terms: list[frozenset[str] | None] = [None] * len(corpus)
        self._texts = corpus.table.column("text")
        self._titles = corpus.table.column("title")

    @property
    def embedder(self) -> Embedder:
        """The corpus's own embedder, created on first use (only the cosine rule needs it)."""
        if self._embedder is None:
            self._embedder = get_embedder(self.corpus.embedder_name)
        return self._embedder

    def rows_between(self, start: datetime | None, end: datetime) -> tuple[int, int]:
        """Row range of documents with ``start <= available_at < end`` (the corpus is sorted by time)."""
        lo = 0 if start is None else self.corpus.n_visible(to_micros(start))
        return lo, max(lo, self.corpus.n_visible(to_micros(end)))

    def row_terms(self, row: int) -> frozenset[str]:
        """The stemmed words of a row's title and text (computed once per row)."""
        cached = self._terms[row]
        if cached is None:
            title = self._titles[row].as_py() or ""
            cached = terms(f"{title}\n{self._texts[row].as_py()}")
            self._terms[row] = cached
        return cached

    def similarities(self, text: str, lo: int, hi: int) -> np.ndarray:
        """Cosine similarity of ``text`` to rows ``[lo, hi)`` in the corpus's embedding space."""
        if hi <= lo:
            return np.zeros(0, dtype=np.float32)
        return self.corpus.embeddings[lo:hi] @ self.embedder.encode([text])[0]

    def matches(
        self,
        question: str,
        lo: int,
        hi: int,
        *,
        min_coverage: float,
        min_shared: int = 2,
        min_similarity: float = 0.0,
        require_name: bool = True,
        top_k: int | None = None,
    ) -> list[Match]:
        """Rows in ``[lo, hi)`` that match the question, best first (:meth:`find` with these thresholds).

        A row matches when it shares at least ``max(min_shared, ceil(min_coverage * n))`` of the
        question's ``n`` salient terms (all of them when ``n`` is smaller) and, with ``require_name``,
        at least one of its names when it has any. Order: by coverage, then similarity, then row.
        """
        rule = MatchRule(min_coverage, min_shared, min_similarity, require_name)
        return self.find(question, lo, hi, rule, top_k=top_k)

    def find(
        self, question: str, lo: int, hi: int, rule: MatchRule, *, top_k: int | None = None
    ) -> list[Match]:
        """Rows in ``[lo, hi)`` that match the question by ``rule``, best first (at most ``top_k``).

        Args:
            question: The question.
            lo: The first row of the window.
            hi: The row after the window's last.
            rule: The thresholds (see :class:`MatchRule`).
            top_k: Keep only the best ``top_k`` (None: all).

        Returns:
            The matches, by coverage, then similarity, then row.
        """
        wanted = salient_terms(question)
        names = name_terms(question) if rule.require_name else frozenset()
        if not wanted or hi <= lo:
            return []
        need = rule.needed(len(wanted))
        found: list[tuple[int, tuple[str, ...]]] = []
        for row in range(lo, hi):
            shared = wanted & self.row_terms(row)
            if len(shared) >= need and (not names or names & shared):
                found.append((row, tuple(sorted(shared))))
        if not found:
            return []
        sims = np.zeros(len(found), dtype=np.float32)
        min_similarity = rule.min_similarity
        if min_similarity > 0:
            vector = self.embedder.encode([question])[0]
            sims = self.corpus.embeddings[[row for row, _ in found]] @ vector
        out = [
            Match(row, len(shared) / len(wanted), shared, float(sim))
            for (row, shared), sim in zip(found, sims, strict=True)
            if min_similarity <= 0 or sim >= min_similarity
        ]
        out.sort(key=lambda m: (-m.coverage, -m.similarity, m.row))
        return out if top_k is None else out[:top_k]
