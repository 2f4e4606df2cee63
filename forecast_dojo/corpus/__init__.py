"""Corpora: dated documents on disk, their embeddings, and time-filtered retrieval over them."""

from forecast_dojo.corpus.embedders import (
    Embedder,
    HashingEmbedder,
    MiniLMEmbedder,
    StaticMiniLMEmbedder,
    get_embedder,
)
from forecast_dojo.corpus.retrieval import (
    BM25Retriever,
    DenseRetriever,
    ExactDenseRetriever,
    HybridRetriever,
    Retriever,
    build_indexes,
    make_retriever,
)
from forecast_dojo.corpus.store import Corpus, CorpusError, build_corpus

__all__ = [
    "BM25Retriever",
    "Corpus",
    "CorpusError",
    "DenseRetriever",
    "Embedder",
    "ExactDenseRetriever",
    "HashingEmbedder",
    "HybridRetriever",
    "MiniLMEmbedder",
    "Retriever",
    "StaticMiniLMEmbedder",
    "build_corpus",
    "build_indexes",
    "get_embedder",
    "make_retriever",
]
