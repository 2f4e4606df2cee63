"""Cleaning stages between import and indexing; each one is configurable and counted in the build report.

Stages, in order: ``normalize`` (Unicode NFC, whitespace), ``market_sites`` (drop prediction-market
pages: their prices must never reach the agent), ``language`` (English identification with py3langid,
whose model ships in the package), ``quality`` (Gopher/C4/FineWeb-style heuristics), then three
duplicate filters that keep the EARLIEST available member of each duplicate group: ``dedup_url``
(canonical URL), ``dedup_title`` (identical title within a window), ``dedup_minhash`` (MinHash-LSH over
lower-cased word 5-grams). Per-document stages are plain functions so a parallel runner (Ray) can
apply them to batches; the duplicate filters need the whole collection.
"""

from __future__ import annotations

import hashlib
import re
import time as _time
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from functools import lru_cache
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit

import numpy as np

from forecast_dojo.errors import CleaningConfigError as CleaningConfigError
from forecast_dojo.schema import Document
from forecast_dojo.timeutil import to_micros

MARKET_DOMAINS = (
    "polymarket.com",
    "manifold.markets",
    "metaculus.com",
    "kalshi.com",
    "predictit.org",
    "gjopen.com",
    "goodjudgment.com",
    "goodjudgment.io",
    "infer-pub.com",
    "randforecastinginitiative.org",
    "insightprediction.com",
    "smarkets.com",
    "betfair.com",
    "electionbettingodds.com",
    "predictwise.com",
    "futuur.com",
    "hypermind.com",
    "augur.net",
    "limitless.exchange",
)
MARKET_SOURCE_NAMES = (
    "polymarket",
    "manifold",
    "manifold markets",
    "metaculus",
    "kalshi",
    "predictit",
    "good judgment",
    "good judgment open",
    "gjopen",
    "infer",
    "infer public",
    "rand forecasting initiative",
    "insight prediction",
    "smarkets",
    "betfair",
    "election betting odds",
    "predictwise",
    "futuur",
    "hypermind",
)
GOPHER_STOP_WORDS = frozenset({"the", "be", "to", "of", "and", "that", "have", "with"})
TRACKING_PARAMETERS = re.compile(
    r"^(utm_.*|fbclid|gclid|dclid|mc_[ce]id|ocid|cmpid|smid|ref|ref_src|_ga|igshid|taid)$"
)
_INVISIBLE = re.compile("[\u200b\u200c\u200d\u2060\ufeff\u00ad]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_INLINE_SPACE = re.compile(r"[^\S\n]+")
_MANY_NEWLINES = re.compile(r"\n{3,}")
_WORD_TOKEN = re.compile(r"\w+")
_TERMINAL = (".", "!", "?", '"', "'", "”", "’", ")", ":")
_BULLETS = ("•", "●", "○", "■", "□", "▪", "‣", "–", "-", "*", "·")
_MERSENNE = np.uint64((1 << 61) - 1)
_MAX_HASH = np.uint64((1 << 32) - 1)


NormalForm = Literal["NFC", "NFD", "NFKC", "NFKD"]
"""The Unicode normal forms :func:`unicodedata.normalize` accepts."""


@dataclass(frozen=True)
class NormalizeConfig:
    """Unicode normal form of text and title; whitespace and invisible characters are always cleaned."""

    enabled: bool = True
    form: NormalForm = "NFC"


@dataclass(frozen=True)
class MarketSitesConfig:
    """Prediction-market sites, by URL domain (and subdomains) or source name."""

    enabled: bool = True
    domains: tuple[str, ...] = MARKET_DOMAINS
    source_names: tuple[str, ...] = MARKET_SOURCE_NAMES


@dataclass(frozen=True)
class LanguageConfig:
    """Remove a text identified as another language with at least ``min_confidence``.

    Texts shorter than ``min_chars`` are not judged: identification of one headline is unreliable
    (py3langid calls some short English headlines Nigerian Pidgin or Bikol).
    """

    enabled: bool = True
    languages: tuple[str, ...] = ("en",)
    min_confidence: float = 0.5
    min_chars: int = 80


@dataclass(frozen=True)
class QualityConfig:
    """Thresholds of the quality heuristics; ``None`` switches a rule off."""

    enabled: bool = True
    min_words: int | None = 50
    max_words: int | None = 100_000
    min_mean_word_length: float | None = 3.0
    max_mean_word_length: float | None = 10.0
    max_symbol_word_ratio: float | None = 0.1
    max_bullet_line_ratio: float | None = 0.9
    max_ellipsis_line_ratio: float | None = 0.3
    min_alpha_word_ratio: float | None = 0.8
    min_stop_words: int | None = 2
    min_punctuated_line_ratio: float | None = 0.12
    max_duplicate_line_ratio: float | None = 0.3
    bad_substrings: tuple[str, ...] = ("lorem ipsum",)


@dataclass(frozen=True)
class UrlDedupConfig:
    """Remove later copies of a canonical URL."""

    enabled: bool = True


@dataclass(frozen=True)
class TitleDedupConfig:
    """Remove a document whose title repeats one kept within ``window_days``."""

    enabled: bool = True
    window_days: float = 7.0


@dataclass(frozen=True)
class MinHashConfig:
    """MinHash-LSH near-duplicates: ``bands * rows`` must equal ``num_perm``."""

    enabled: bool = True
    num_perm: int = 128
    bands: int = 8
    rows: int = 16
    ngram: int = 5
    seed: int = 1


def _known(name: str, known: Iterable[str], unknown: str) -> None:
    """Raise :class:`CleaningConfigError` ``unknown`` (listing the ``known`` names) when ``name`` is not one of them."""
    if name not in known:
        raise CleaningConfigError(f"{unknown}; known: {', '.join(known)}")


@dataclass(frozen=True)
class CleaningConfig:
    """All stages' settings; ``from_dict`` reads the ``[cleaning.*]`` tables of a recipe."""

    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    market_sites: MarketSitesConfig = field(default_factory=MarketSitesConfig)
    language: LanguageConfig = field(default_factory=LanguageConfig)
    quality: QualityConfig = field(default_factory=QualityConfig)
    dedup_url: UrlDedupConfig = field(default_factory=UrlDedupConfig)
    dedup_title: TitleDedupConfig = field(default_factory=TitleDedupConfig)
    dedup_minhash: MinHashConfig = field(default_factory=MinHashConfig)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, base: CleaningConfig | None = None) -> CleaningConfig:
        """Override ``base`` (default settings if None) with the given tables; unknown keys are errors."""
        base = base or cls()
        data = data or {}
        stages = {f.name: f for f in fields(cls)}
        changes = {}
        for stage, options in data.items():
            _known(stage, stages, f"unknown cleaning stage [cleaning.{stage}]")
            if not isinstance(options, dict):
                raise CleaningConfigError(f"[cleaning.{stage}] must be a table of options")
            current = getattr(base, stage)
            known = {f.name: f for f in fields(current)}
            values = {}
            for key, value in options.items():
                _known(key, known, f"unknown option cleaning.{stage}.{key}")
                default = getattr(current, key)
                if isinstance(default, tuple):
                    if not isinstance(value, (list, tuple)):
                        raise CleaningConfigError(f"cleaning.{stage}.{key} must be a list")
                    value = tuple(str(v) for v in value)
                elif isinstance(default, bool):
                    if not isinstance(value, bool):
                        raise CleaningConfigError(
                            f"cleaning.{stage}.{key} must be true or false, got {value!r}"
                        )
                elif value is False or value is None:
                    if "None" not in str(known[key].type):
                        raise CleaningConfigError(f"cleaning.{stage}.{key} cannot be switched off")
                    value = None  # TOML has no null: `false` switches a threshold off
                elif isinstance(default, (int, float)) or default is None:
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        raise CleaningConfigError(
                            f"cleaning.{stage}.{key} must be a number or false, got {value!r}"
                        )
                elif isinstance(default, str) and not isinstance(value, str):
                    raise CleaningConfigError(f"cleaning.{stage}.{key} must be text, got {value!r}")
                values[key] = value
            changes[stage] = replace(current, **values)
        return replace(base, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Every stage's settings as plain TOML/JSON values (tuples as lists)."""
        return {
            f.name: {
                k.name: _plain(getattr(getattr(self, f.name), k.name)) for k in fields(getattr(self, f.name))
            }
            for f in fields(self)
        }


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass
class StageReport:
    """How many documents one stage saw and removed, and why."""

    stage: str
    documents_in: int
    removed: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    modified: int = 0
    seconds: float = 0.0
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The counts as plain JSON values (``out`` = in - removed)."""
        return {
            "stage": self.stage,
            "enabled": self.enabled,
            "in": self.documents_in,
            "removed": self.removed,
            "out": self.documents_in - self.removed,
            "reasons": dict(sorted(self.reasons.items())),
            "modified": self.modified,
            "seconds": round(self.seconds, 3),
        }


# ---------------------------------------------------------------- per-document stages


def normalize_text(text: str, form: NormalForm = "NFC") -> str:
    """Unicode normal form, no invisible or control characters, single spaces, at most one blank line."""
    text = unicodedata.normalize(form, text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", _INVISIBLE.sub("", text)).replace("\t", " ")
    lines = [_INLINE_SPACE.sub(" ", line).strip() for line in text.split("\n")]
    return _MANY_NEWLINES.sub("\n\n", "\n".join(lines)).strip()


def normalize_document(document: Document, config: NormalizeConfig) -> Document | None:
    """The document with normalized text and title, or None when no text is left."""
    text = normalize_text(document.text, config.form)
    if not text:
        return None
    title = " ".join(normalize_text(document.title, config.form).split())
    if text == document.text and title == document.title:
        return document
    return replace(document, text=text, title=title)


def _registered_host(url: str | None) -> str:
    if not url:
        return ""
    host = (urlsplit(url if "//" in url else f"//{url}").hostname or "").lower().rstrip(".")
    return host


def market_site_reason(document: Document, config: MarketSitesConfig) -> str | None:
    """Why a document comes from a prediction-market site (URL domain or source name), or None."""
    host = _registered_host(document.url)
    for domain in config.domains:
        if host == domain or host.endswith("." + domain):
            return f"domain {domain}"
    if document.source:
        for part in re.split(r";|\bvia\b", document.source.lower()):
            name = " ".join(part.replace(".com", "").split())
            if name in config.source_names:
                return f"source {name}"
    return None


@lru_cache(maxsize=1)
def _language_identifier() -> Any:
    """py3langid's model, loaded once per process from the file inside the package (no download)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def identify_language(text: str) -> tuple[str, float]:
    """(ISO 639-1 code, normalized probability) of a text."""
    language, probability = _language_identifier().classify(text)
    return str(language), float(probability)


def language_reason(document: Document, config: LanguageConfig) -> str | None:
    """Why a document is confidently in another language than the wanted ones, or None."""
    if len(document.text) < config.min_chars:
        return None
    language, probability = identify_language(document.text)
    if language not in config.languages and probability >= config.min_confidence:
        return f"language {language}"
    return None


def quality_reason(document: Document, config: QualityConfig) -> str | None:
    """The first quality rule a document fails, or None (rules from Gopher, C4 and FineWeb)."""
    text = document.text
    words = text.split()
    n_words = len(words)
    if config.min_words is not None and n_words < config.min_words:
        return "too few words"
    if config.max_words is not None and n_words > config.max_words:
        return "too many words"
    if n_words == 0:
        return "too few words"
    mean_length = sum(len(w) for w in words) / n_words
    if config.min_mean_word_length is not None and mean_length < config.min_mean_word_length:
        return "mean word length too short"
    if config.max_mean_word_length is not None and mean_length > config.max_mean_word_length:
        return "mean word length too long"
    if config.max_symbol_word_ratio is not None:
        symbols = text.count("#") + text.count("...") + text.count("…")
        if symbols / n_words > config.max_symbol_word_ratio:
            return "symbol to word ratio"
    if config.min_alpha_word_ratio is not None:
        alpha = sum(1 for w in words if any(c.isalpha() for c in w))
        if alpha / n_words < config.min_alpha_word_ratio:
            return "too few alphabetic words"
    if config.min_stop_words is not None:
        lowered = {w.lower().strip(".,;:!?\"'()") for w in words}
        if len(lowered & GOPHER_STOP_WORDS) < config.min_stop_words:
            return "too few stop words"
    lines = [line for line in text.split("\n") if line.strip()]
    if lines:
        if config.max_bullet_line_ratio is not None:
            bullets = sum(1 for line in lines if line.lstrip().startswith(_BULLETS))
            if bullets / len(lines) > config.max_bullet_line_ratio:
                return "bullet lines"
        if config.max_ellipsis_line_ratio is not None:
            ellipsis = sum(1 for line in lines if line.rstrip().endswith(("...", "…")))
            if ellipsis / len(lines) > config.max_ellipsis_line_ratio:
                return "lines ending in ellipsis"
        if config.min_punctuated_line_ratio is not None:
            punctuated = sum(1 for line in lines if line.rstrip().endswith(_TERMINAL))
            if punctuated / len(lines) < config.min_punctuated_line_ratio:
                return "too few lines ending in punctuation"
        if config.max_duplicate_line_ratio is not None and len(lines) > 1:
            duplicates = len(lines) - len(set(lines))
            if duplicates / len(lines) > config.max_duplicate_line_ratio:
                return "duplicate lines"
    lowered_text = text.lower()
    for needle in config.bad_substrings:
        if needle.lower() in lowered_text:
            return f"contains {needle!r}"
    return None


# ---------------------------------------------------------------- duplicate filters (whole collection)


def availability_order(documents: Sequence[Document]) -> list[Document]:
    """Documents sorted as the corpus stores them: by ``available_at``, then id (earliest first)."""
    return sorted(documents, key=lambda d: (to_micros(d.available_at), d.id))


def canonical_url(url: str | None) -> str | None:
    """A URL reduced to what identifies the page.

    Host without www/m, path without trailing slash, query without tracking parameters (sorted), no
    scheme, port or fragment.
    """
    if not url or not url.strip():
        return None
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower().rstrip(".")
    for prefix in ("www.", "m.", "amp."):
        host = host.removeprefix(prefix)
    if not host:
        return None
    path = re.sub(r"/{2,}", "/", parts.path or "/")
    path = re.sub(r"/(index\.html?|amp)?$", "", path) or ""
    query = sorted(
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not TRACKING_PARAMETERS.match(k.lower())
    )
    return host + path + ("?" + urlencode(query) if query else "")


def duplicate_urls(documents: Sequence[Document]) -> list[bool]:
    """For documents in availability order: is each one a later copy of an earlier canonical URL?"""
    seen: set[str] = set()
    flags = []
    for document in documents:
        key = canonical_url(document.url)
        flags.append(key is not None and key in seen)
        if key is not None:
            seen.add(key)
    return flags


def duplicate_titles(documents: Sequence[Document], window_days: float) -> list[bool]:
    """Identical (case/space-folded) non-empty title within ``window_days`` of the last kept one."""
    window = int(timedelta(days=window_days).total_seconds() * 1_000_000)
    kept_at: dict[str, int] = {}
    flags = []
    for document in documents:
        key = " ".join(document.title.lower().split())
        at = to_micros(document.available_at)
        duplicate = bool(key) and key in kept_at and at - kept_at[key] <= window
        if key and not duplicate:
            kept_at[key] = at
        flags.append(duplicate)
    return flags


@lru_cache(maxsize=8)
def _permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    a = rng.randint(1, int(_MERSENNE), size=num_perm, dtype=np.uint64)
    b = rng.randint(0, int(_MERSENNE), size=num_perm, dtype=np.uint64)
    return a, b


def shingles(text: str, n: int) -> list[str]:
    """Lower-cased word n-grams (the whole text as one shingle when it is shorter than n words)."""
    tokens = _WORD_TOKEN.findall(text.lower())
    if not tokens:
        return []
    if len(tokens) < n:
        return [" ".join(tokens)]
    return [" ".join(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


def minhash_signatures(texts: Sequence[str], config: MinHashConfig) -> np.ndarray:
    """``(len(texts), num_perm)`` uint32 MinHash signatures; an all-max row marks a text with no words."""
    a, b = _permutations(config.num_perm, config.seed)
    out = np.full((len(texts), config.num_perm), int(_MAX_HASH), dtype=np.uint32)
    for row, text in enumerate(texts):
        grams = set(shingles(text, config.ngram))
        if not grams:
            continue
        hashes = np.fromiter(
            (
                int.from_bytes(hashlib.blake2b(g.encode("utf-8"), digest_size=4).digest(), "little")
                for g in grams
            ),
            dtype=np.uint64,
            count=len(grams),
        )
        permuted = ((a[:, None] * hashes[None, :] + b[:, None]) % _MERSENNE) & _MAX_HASH
        out[row] = permuted.min(axis=1).astype(np.uint32)
    return out


def duplicate_minhash(signatures: np.ndarray, config: MinHashConfig) -> list[bool]:
    """Flag near-duplicates by LSH banding over signatures in availability order.

    Any shared band bucket joins two documents into one duplicate group (union-find); all but the
    earliest member of each group are flagged.
    """
    if config.bands * config.rows != config.num_perm:
        raise CleaningConfigError(
            f"dedup_minhash: bands x rows ({config.bands} x {config.rows}) must equal num_perm ({config.num_perm})"
        )
    n = signatures.shape[0]
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    empty = np.all(signatures == np.uint32(_MAX_HASH), axis=1)
    for band in range(config.bands):
        buckets: dict[bytes, int] = {}
        block = np.ascontiguousarray(signatures[:, band * config.rows : (band + 1) * config.rows])
        for row in range(n):
            if empty[row]:
                continue
            key = block[row].tobytes()
            first = buckets.setdefault(key, row)
            if first != row:
                root_a, root_b = find(first), find(row)
                if root_a != root_b:  # the smaller index (earlier document) stays the root
                    parent[max(root_a, root_b)] = min(root_a, root_b)
    return [find(row) != row for row in range(n)]


# ---------------------------------------------------------------- running the stages

PER_DOCUMENT_STAGES = ("normalize", "market_sites", "language", "quality")
COLLECTION_STAGES = ("dedup_url", "dedup_title", "dedup_minhash")
STAGES = PER_DOCUMENT_STAGES + COLLECTION_STAGES
# The recipe option that decides each removal reason (quality reasons name their own threshold).
REASON_OPTIONS = {
    "too few words": "min_words",
    "too many words": "max_words",
    "mean word length too short": "min_mean_word_length",
    "mean word length too long": "max_mean_word_length",
    "symbol to word ratio": "max_symbol_word_ratio",
    "too few alphabetic words": "min_alpha_word_ratio",
    "too few stop words": "min_stop_words",
    "bullet lines": "max_bullet_line_ratio",
    "lines ending in ellipsis": "max_ellipsis_line_ratio",
    "too few lines ending in punctuation": "min_punctuated_line_ratio",
    "duplicate lines": "max_duplicate_line_ratio",
}
STAGE_OPTIONS = {
    "normalize": "enabled",
    "market_sites": "domains / source_names",
    "language": "min_chars / min_confidence / languages",
    "quality": "enabled",
    "dedup_url": "enabled",
    "dedup_title": "window_days / enabled",
    "dedup_minhash": "bands / rows / enabled",
}


def apply_document_stage(
    stage: str, document: Document, config: CleaningConfig
) -> tuple[Document | None, str | None]:
    """Run one per-document stage: (kept document or None, removal reason or None)."""
    if stage == "normalize":
        kept = normalize_document(document, config.normalize)
        return kept, None if kept is not None else "empty after normalization"
    checks: dict[str, Callable[[], str | None]] = {
        "market_sites": lambda: market_site_reason(document, config.market_sites),
        "language": lambda: language_reason(document, config.language),
        "quality": lambda: quality_reason(document, config.quality),
    }
    reason = checks[stage]()
    return (None, reason) if reason else (document, None)


@dataclass(frozen=True)
class Verdict:
    """What the per-document stages made of one document.

    Attributes:
        document: The document as cleaned (normalized text and title) if kept, else as it came in.
        removed_by: The stage that removed it, or ``""`` if it was kept.
        reason: Why that stage removed it (``""`` if kept).
        modified: Whether a stage changed its text or title.
    """

    document: Document
    removed_by: str = ""
    reason: str = ""
    modified: bool = False


def clean_document(
    document: Document, config: CleaningConfig, *, seconds: dict[str, float] | None = None
) -> Verdict:
    """Run every enabled per-document stage on one document, stopping at the first that removes it.

    Both corpus-build executors call this; ``seconds`` (if given) accumulates each stage's time.
    """
    current = document
    for stage in PER_DOCUMENT_STAGES:
        if not getattr(config, stage).enabled:
            continue
        started = _time.perf_counter() if seconds is not None else 0.0
        result, reason = apply_document_stage(stage, current, config)
        if seconds is not None:
            seconds[stage] = seconds.get(stage, 0.0) + _time.perf_counter() - started
        if result is None:
            return Verdict(current, stage, reason or stage, current is not document)
        current = result
    return Verdict(current, modified=current is not document)


def count_document_stages(
    verdicts: Iterable[tuple[str, str, bool]],
    n_documents: int,
    config: CleaningConfig,
    seconds: dict[str, float] | None = None,
) -> list[StageReport]:
    """One report per per-document stage from ``(removed_by, reason, modified)`` of every document.

    ``normalize``'s ``modified`` counts the documents that normalization changed (kept or later removed).
    """
    removed: dict[str, Counter[str]] = {stage: Counter() for stage in PER_DOCUMENT_STAGES}
    modified = 0
    for removed_by, reason, changed in verdicts:
        if removed_by:
            removed[removed_by][reason] += 1
        modified += changed
    reports = []
    remaining = n_documents
    for stage in PER_DOCUMENT_STAGES:
        report = StageReport(stage, remaining, enabled=getattr(config, stage).enabled)
        report.reasons = removed[stage]
        report.removed = sum(report.reasons.values())
        report.seconds = (seconds or {}).get(stage, 0.0)
        if stage == "normalize":
            report.modified = modified
        remaining -= report.removed
        reports.append(report)
    return reports


def run_collection_stage(
    stage: str,
    documents: list[Document],
    config: CleaningConfig,
    *,
    signatures: np.ndarray | None = None,
    progress: bool = False,
) -> tuple[list[Document], StageReport, np.ndarray | None]:
    """Apply a duplicate filter to documents in availability order; keeps signatures aligned."""
    report = StageReport(stage, len(documents), enabled=getattr(config, stage).enabled)
    if not report.enabled:
        return documents, report, signatures
    started = _time.perf_counter()
    if stage == "dedup_url":
        flags = duplicate_urls(documents)
    elif stage == "dedup_title":
        flags = duplicate_titles(documents, config.dedup_title.window_days)
    elif stage == "dedup_minhash":
        if signatures is None:
            signatures = minhash_signatures(
                _progress_texts(documents, progress, "clean: minhash"), config.dedup_minhash
            )
        flags = duplicate_minhash(signatures, config.dedup_minhash)
    else:
        raise CleaningConfigError(f"unknown duplicate filter {stage!r}")
    keep = [not f for f in flags]
    report.removed = len(flags) - sum(keep)
    if report.removed:
        report.reasons["duplicate"] = report.removed
    report.seconds = _time.perf_counter() - started
    kept_signatures = signatures[np.asarray(keep, dtype=bool)] if signatures is not None else None
    return [d for d, k in zip(documents, keep, strict=True) if k], report, kept_signatures


def run_collection_stages(
    documents: Sequence[Document],
    config: CleaningConfig,
    *,
    signatures: np.ndarray | None = None,
    progress: bool = False,
) -> tuple[list[Document], list[StageReport]]:
    """Put documents in availability order and run the duplicate filters over the whole collection.

    ``signatures`` (MinHash rows aligned with ``documents``, e.g. computed in parallel) are reordered
    with them; without them the MinHash stage computes its own.
    """
    order = sorted(
        range(len(documents)), key=lambda i: (to_micros(documents[i].available_at), documents[i].id)
    )
    current = [documents[i] for i in order]
    if signatures is not None:
        signatures = signatures[np.asarray(order, dtype=np.int64)] if order else signatures
    reports = []
    for stage in COLLECTION_STAGES:
        current, report, signatures = run_collection_stage(
            stage, current, config, signatures=signatures, progress=progress
        )
        reports.append(report)
    return current, reports


def _progress_texts(documents: Sequence[Document], progress: bool, desc: str) -> list[str]:
    from tqdm.auto import tqdm

    return [d.text for d in tqdm(documents, desc=desc, unit="doc", disable=not progress, leave=False)]


def clean_documents(
    documents: Sequence[Document], config: CleaningConfig | None = None, *, progress: bool = True
) -> tuple[list[Document], list[StageReport]]:
    """Run every stage in order; returns the survivors in availability order and one report per stage."""
    from tqdm.auto import tqdm

    config = config or CleaningConfig()
    seconds: dict[str, float] = {}
    verdicts = [
        clean_document(document, config, seconds=seconds)
        for document in tqdm(documents, desc="cleaning", unit="doc", disable=not progress, leave=False)
    ]
    reports = count_document_stages(
        ((v.removed_by, v.reason, v.modified) for v in verdicts), len(verdicts), config, seconds
    )
    kept = [v.document for v in verdicts if not v.removed_by]
    kept, collection_reports = run_collection_stages(kept, config, progress=progress)
    return kept, reports + collection_reports


def removal_warnings(reports: Sequence[StageReport], *, threshold: float = 0.5, top: int = 3) -> list[str]:
    """A warning for each stage that removed more than ``threshold`` of its input.

    Each names the stage, its top reasons and the ``[cleaning.<stage>]`` option that decides them.
    """
    warnings = []
    for report in reports:
        if (
            not report.enabled
            or report.documents_in == 0
            or report.removed <= threshold * report.documents_in
        ):
            continue
        reasons = report.reasons.most_common(top)
        options = []
        for reason, _ in reasons:
            option = REASON_OPTIONS.get(reason, STAGE_OPTIONS[report.stage])
            if option not in options:
                options.append(option)
        warnings.append(
            f"cleaning stage {report.stage!r} removed {report.removed} of {report.documents_in} documents "
            f"({report.removed / report.documents_in:.0%}); top reasons: "
            + ", ".join(f"{reason} ({count})" for reason, count in reasons)
            + f"; to change it, set {' or '.join(f'[cleaning.{report.stage}] {o}' for o in options)} in the recipe"
        )
    return warnings
