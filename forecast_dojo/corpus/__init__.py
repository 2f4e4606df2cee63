"""Corpora: dated documents on disk, their embeddings, and time-filtered retrieval over them."""

from forecast_dojo.corpus.embedders import Embedder, HashingEmbedder, MiniLMEmbedder, get_embedder
from forecast_dojo.corpus.retrieval import ExactDenseRetriever, Retriever, make_retriever
from forecast_dojo.corpus.store import Corpus, CorpusError, build_corpus

__all__ = [
    "Corpus",
    "CorpusError",
    "Embedder",
    "ExactDenseRetriever",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "Retriever",
    "build_corpus",
    "get_embedder",
    "make_retriever",
]
