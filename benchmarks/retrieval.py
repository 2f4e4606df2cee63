"""Time-filtered retrieval benchmark: every index type against the exact filtered scan, in one run.

For each index at 10 %, 50 % and 100 % of the corpus visible it prints p50/p95 latency of a single
query and of a batch of 32, recall@10 against the exact scan of the visible prefix (the baseline,
measured in the same run), index memory per document and build time.

    # synthetic clustered vectors (1M x 384 is the target; smaller for a quick run)
    python benchmarks/retrieval.py --n 1000000 --dim 384
    # a real corpus directory (dense indexes built in memory; BM25 and hybrid too)
    python benchmarks/retrieval.py --corpus /tmp/wiki-static
    # build that corpus first from the Wikipedia Current Events pages with the fast embedder
    python benchmarks/retrieval.py --build-wiki /tmp/wiki-static --embedder static-minilm
    # embedding: build docs/s vs raw SentenceTransformer.encode, and static-vs-MiniLM quality
    python benchmarks/retrieval.py --embedding 300 --quality 1500

Query embedding time is excluded from dense latencies (queries are pre-embedded); BM25 and hybrid
latencies include tokenization, and hybrid reuses cached query vectors.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from forecast_dojo.corpus.index import ExactIndex, IVFIndex, IVFParams, exact_search

FRACTIONS = (0.1, 0.5, 1.0)
KINDS = ("exact", "ivf-flat", "ivf-sq8", "ivf-pq")
BATCH = 32
TOP_K = 10


def data_root() -> Path:
    """The shared data directory: ``$FORECAST_DOJO_DATA`` or ``../shared/data`` from the repository root."""
    from forecast_dojo.paths import default_data_root

    return default_data_root()


def clustered(n: int, dim: int, seed: int, n_topics: int = 2000, chunk: int = 100_000) -> np.ndarray:
    """Unit vectors around topic centres whose popularity drifts with the row (time), like news."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(7).normal(size=(n_topics, dim)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    out = np.empty((n, dim), dtype=np.float32)
    for lo in tqdm(range(0, n, chunk), desc=f"synthetic vectors {n:,} x {dim}", disable=n <= chunk):
        rows = np.arange(lo, min(n, lo + chunk))
        # Half the topics are "current" (move with time), half are evergreen.
        drift = (rows * n_topics // max(n, 1) + rng.integers(0, n_topics // 10, size=rows.size)) % n_topics
        topic = np.where(rng.random(rows.size) < 0.5, drift, rng.integers(0, n_topics, size=rows.size))
        block = centres[topic] + rng.normal(scale=1.0 / np.sqrt(dim) * 1.1, size=(rows.size, dim)).astype(
            np.float32
        )
        out[lo : lo + rows.size] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000.0


def percentiles(samples: Sequence[float]) -> tuple[float, float]:
    return float(np.percentile(samples, 50)), float(np.percentile(samples, 95))


def recall(found: list[list[tuple[int, float]]], truth: list[list[tuple[int, float]]]) -> float:
    hits = sum(len({r for r, _ in f} & {r for r, _ in t}) for f, t in zip(found, truth, strict=True))
    return hits / max(1, sum(len(t) for t in truth))


def print_table(title: str, rows: list[dict[str, object]]) -> None:
    columns = [
        "index",
        "visible",
        "p50 1q ms",
        "p95 1q ms",
        "p50 b32 ms",
        "p95 b32 ms",
        "recall@10",
        "B/doc",
        "build s",
    ]
    print(f"\n### {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column, "-")
            cells.append(
                f"{value:.3f}"
                if isinstance(value, float) and column == "recall@10"
                else f"{value:.2f}"
                if isinstance(value, float)
                else str(value)
            )
        print("| " + " | ".join(cells) + " |")
    sys.stdout.flush()


def bench_dense(
    vectors: np.ndarray,
    queries: np.ndarray,
    kinds: Sequence[str],
    *,
    exact_queries: int,
    overrides: dict[str, object],
) -> list[dict[str, object]]:
    """Build each index on ``vectors`` and measure it against the exact scan at every visible fraction."""
    n, dim = vectors.shape
    truth: dict[float, list[list[tuple[int, float]]]] = {}
    for fraction in FRACTIONS:
        n_visible = int(n * fraction)
        truth[fraction] = []
        for lo in tqdm(range(0, len(queries), 64), desc=f"exact ground truth @ {fraction:.0%}", leave=False):
            truth[fraction].extend(exact_search(vectors, queries[lo : lo + 64], n_visible, TOP_K))
    rows: list[dict[str, object]] = []
    for kind in kinds:
        start = time.perf_counter()
        if kind == "exact":
            index: ExactIndex | IVFIndex = ExactIndex(vectors)
        else:
            params = IVFParams.default(kind, n, dim, **{k: v for k, v in overrides.items() if v is not None})
            index = IVFIndex.train(kind, vectors, params, progress=True)
        build_s = time.perf_counter() - start
        bytes_per_doc = index.memory_bytes() / n
        for fraction in FRACTIONS:
            n_visible = int(n * fraction)
            count = exact_queries if kind == "exact" else len(queries)
            single = [
                timed(lambda q=q, ix=index, nv=n_visible: ix.search(queries[q : q + 1], nv, TOP_K))
                for q in range(count)
            ]
            batches = range(0, max(count, 2 * BATCH) - BATCH + 1, BATCH)  # >= 2 batches, even for exact
            batch = [
                timed(lambda lo=lo, ix=index, nv=n_visible: ix.search(queries[lo : lo + BATCH], nv, TOP_K))
                for lo in batches
            ]
            found = index.search(queries, n_visible, TOP_K)
            p50, p95 = percentiles(single)
            b50, b95 = percentiles(batch) if batch else (float("nan"), float("nan"))
            rows.append(
                {
                    "index": kind,
                    "visible": f"{fraction:.0%}",
                    "p50 1q ms": p50,
                    "p95 1q ms": p95,
                    "p50 b32 ms": b50,
                    "p95 b32 ms": b95,
                    "recall@10": recall(found, truth[fraction]),
                    "B/doc": f"{bytes_per_doc:.0f}",
                    "build s": f"{build_s:.1f}",
                }
            )
            print_table(f"progress ({kind})", rows[-1:])
        del index
    return rows


def bench_lexical(corpus_dir: Path, queries: list[str], rows: list[dict[str, object]]) -> None:
    """BM25 and hybrid (exact dense + BM25, RRF) on a real corpus; recall is not comparable, so '-'."""
    from forecast_dojo.corpus.bm25 import BM25Index
    from forecast_dojo.corpus.embedders import get_embedder
    from forecast_dojo.corpus.hybrid import HybridRetriever
    from forecast_dojo.corpus.retrieval import BM25Retriever, DenseRetriever
    from forecast_dojo.corpus.store import Corpus

    corpus = Corpus.load(corpus_dir, verify=False)
    start = time.perf_counter()
    bm25 = BM25Index.build(corpus.texts(), progress=True)
    build_s = time.perf_counter() - start
    embedder = get_embedder(corpus.embedder_name)
    dense = DenseRetriever(
        corpus,
        embedder,
        IVFIndex.train(
            "ivf-sq8", corpus.embeddings, IVFParams.default("ivf-sq8", len(corpus), corpus.dim), progress=True
        ),
    )
    hybrid = HybridRetriever([dense, BM25Retriever(bm25)])
    for query in queries:
        dense.embed_query(query)  # hybrid latency below excludes query embedding
    for name, retriever, memory in (
        ("bm25", BM25Retriever(bm25), bm25.memory_bytes()),
        ("hybrid(sq8+bm25)", hybrid, None),
    ):
        for fraction in FRACTIONS:
            n_visible = int(len(corpus) * fraction)
            single = [timed(lambda q=q, r=retriever, nv=n_visible: r.search(q, nv, TOP_K)) for q in queries]
            batch = [
                timed(
                    lambda lo=lo, r=retriever, nv=n_visible: [
                        r.search(q, nv, TOP_K) for q in queries[lo : lo + BATCH]
                    ]
                )
                for lo in range(0, len(queries) - BATCH + 1, BATCH)
            ]
            p50, p95 = percentiles(single)
            b50, b95 = percentiles(batch)
            rows.append(
                {
                    "index": name,
                    "visible": f"{fraction:.0%}",
                    "p50 1q ms": p50,
                    "p95 1q ms": p95,
                    "p50 b32 ms": b50,
                    "p95 b32 ms": b95,
                    "B/doc": f"{memory / len(corpus):.0f}" if memory else "-",
                    "build s": f"{build_s:.1f}" if memory else "-",
                }
            )


def wiki_documents(start: date, end: date) -> list:
    from forecast_dojo.corpus.importers.wikipedia import load_wikipedia_current_events

    docs, _ = load_wikipedia_current_events(
        data_root() / "wikipedia-current-events", start=start, end=end, progress=True
    )
    return docs


def bench_embedding(n_docs: int) -> None:
    """Corpus build docs/s with MiniLM against raw ``SentenceTransformer.encode`` on the same texts."""
    from forecast_dojo.corpus.embedders import MiniLMEmbedder, get_embedder
    from forecast_dojo.corpus.store import build_corpus, embedding_text

    docs = wiki_documents(date(2025, 1, 1), date(2025, 12, 31))[:n_docs]
    texts = [embedding_text(d.title, d.text) for d in docs]
    embedder = MiniLMEmbedder()
    embedder.model.encode(texts[:16])  # warm-up
    rows = []
    raw_s = timed(lambda: embedder.model.encode(texts, batch_size=64, normalize_embeddings=True)) / 1000
    with tempfile.TemporaryDirectory() as tmp:
        build_s = timed(lambda: build_corpus(docs, Path(tmp) / "c", embedder, progress=False)) / 1000
    rows.append(("SentenceTransformer.encode (raw, baseline)", len(docs) / raw_s, 1.0))
    rows.append(("build_corpus with MiniLMEmbedder", len(docs) / build_s, raw_s / build_s))
    static = get_embedder("static-minilm")
    with tempfile.TemporaryDirectory() as tmp:
        static_s = timed(lambda: build_corpus(docs, Path(tmp) / "c", static, progress=False)) / 1000
    rows.append(("build_corpus with static-minilm-256", len(docs) / static_s, raw_s / static_s))
    print(f"\n### Embedding throughput ({len(docs)} Wikipedia Current Events documents of 2025)\n")
    print("| path | docs/s | x raw encode |\n|---|---|---|")
    for name, rate, ratio in rows:
        print(f"| {name} | {rate:.1f} | {ratio:.2f} |")


def bench_quality(n_docs: int, n_queries: int = 200) -> None:
    """Static (distilled) embedder against MiniLM on real text: top-10 agreement and title-query nDCG@10."""
    from forecast_dojo.corpus.bm25 import BM25Index
    from forecast_dojo.corpus.embedders import MiniLMEmbedder, get_embedder

    docs = wiki_documents(date(2024, 1, 1), date(2025, 12, 31))
    rng = np.random.default_rng(0)
    docs = [docs[i] for i in np.sort(rng.choice(len(docs), size=min(n_docs, len(docs)), replace=False))]
    texts = [
        d.text for d in docs
    ]  # titles excluded: the title-query task must not be a string match on titles
    topics = [d.title.split(" > ")[-1] for d in docs]
    counts: dict[str, int] = {}
    for topic in topics:
        counts[topic] = counts.get(topic, 0) + 1
    candidates = sorted(t for t, c in counts.items() if 3 <= c <= 40)
    title_queries = [
        candidates[i]
        for i in rng.choice(len(candidates), size=min(n_queries, len(candidates)), replace=False)
    ]
    text_queries = [
        " ".join(texts[i].split()[:8]) for i in rng.choice(len(texts), size=n_queries, replace=False)
    ]
    minilm, static = MiniLMEmbedder(), get_embedder("static-minilm")
    results: dict[str, dict[str, list[list[int]]]] = {}
    timings = {}
    for name, embedder in (("MiniLM", minilm), ("static-minilm-256", static)):
        start = time.perf_counter()
        matrix = embedder.encode(texts, batch_size=64, progress=True)
        timings[name] = len(texts) / (time.perf_counter() - start)
        results[name] = {}
        for task, queries in (("title", title_queries), ("text", text_queries)):
            q = embedder.encode(queries)
            results[name][task] = [
                [r for r, _ in hits] for hits in exact_search(matrix, q, len(texts), TOP_K)
            ]
    bm25 = BM25Index.build(texts, progress=False)
    results["bm25"] = {
        task: [[r for r, _ in bm25.search(q, len(texts), TOP_K)] for q in queries]
        for task, queries in (("title", title_queries), ("text", text_queries))
    }

    def ndcg(ranked: list[int], relevant: set[int]) -> float:
        dcg = sum(1.0 / np.log2(i + 2) for i, r in enumerate(ranked) if r in relevant)
        ideal = sum(1.0 / np.log2(i + 2) for i in range(min(len(relevant), TOP_K)))
        return dcg / ideal

    print(f"\n### Static embedder vs MiniLM ({len(texts)} Wikipedia Current Events summaries 2024-2025)\n")
    print(
        "| model | docs/s | nDCG@10 title->topic | overlap@10 with MiniLM (title q) | overlap@10 with MiniLM (text q) |"
    )
    print("|---|---|---|---|---|")
    for name in ("MiniLM", "static-minilm-256", "bm25"):
        scores = [
            ndcg(r, {i for i, t in enumerate(topics) if t == q})
            for r, q in zip(results[name]["title"], title_queries, strict=True)
        ]
        overlap = {
            task: np.mean(
                [
                    len(set(a) & set(b)) / TOP_K
                    for a, b in zip(results[name][task], results["MiniLM"][task], strict=True)
                ]
            )
            for task in ("title", "text")
        }
        rate = f"{timings[name]:.0f}" if name in timings else "-"
        print(f"| {name} | {rate} | {np.mean(scores):.3f} | {overlap['title']:.3f} | {overlap['text']:.3f} |")


def build_wiki(out: Path, embedder_name: str) -> None:
    """A real corpus from every Wikipedia Current Events page (importer + build_corpus), for --corpus."""
    from forecast_dojo.corpus.embedders import get_embedder
    from forecast_dojo.corpus.store import build_corpus

    docs = wiki_documents(date(2002, 1, 1), date(2026, 12, 31))
    start = time.perf_counter()
    corpus = build_corpus(docs, out, get_embedder(embedder_name), batch_size=256)
    print(f"built {out}: {len(corpus)} documents with {embedder_name} in {time.perf_counter() - start:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="synthetic corpus size (target: 1000000)")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=256, help="queries per measurement")
    parser.add_argument(
        "--exact-queries", type=int, default=64, help="single queries timed on the slow exact scan"
    )
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument(
        "--corpus", type=Path, help="benchmark a real corpus directory instead of synthetic vectors"
    )
    parser.add_argument(
        "--build-wiki", type=Path, help="build a Wikipedia Current Events corpus here and exit"
    )
    parser.add_argument("--embedder", default="static-minilm", help="embedder for --build-wiki")
    parser.add_argument(
        "--embedding", type=int, default=0, help="measure build docs/s vs raw encode on N docs"
    )
    parser.add_argument("--quality", type=int, default=0, help="static vs MiniLM quality on N docs")
    parser.add_argument("--nprobe", type=int)
    parser.add_argument("--rerank", type=int)
    parser.add_argument("--exact-below", type=int)
    args = parser.parse_args(argv)
    overrides = {"nprobe": args.nprobe, "rerank": args.rerank, "exact_below": args.exact_below}
    kinds = [k for k in args.kinds.split(",") if k]
    if args.build_wiki:
        build_wiki(args.build_wiki, args.embedder)
        return 0
    if args.embedding:
        bench_embedding(args.embedding)
    if args.quality:
        bench_quality(args.quality)
    if args.embedding or args.quality:
        return 0
    if args.corpus:
        from forecast_dojo.corpus.embedders import get_embedder
        from forecast_dojo.corpus.store import Corpus

        corpus = Corpus.load(args.corpus, verify=False)
        rng = np.random.default_rng(0)
        picks = rng.choice(len(corpus), size=args.queries, replace=False)
        texts = [" ".join(corpus.text(int(i)).split()[:8]) for i in picks]
        queries = get_embedder(corpus.embedder_name).encode(texts)
        rows = bench_dense(
            corpus.embeddings, queries, kinds, exact_queries=args.exact_queries, overrides=overrides
        )
        bench_lexical(args.corpus, texts, rows)
        title = f"real corpus {args.corpus} ({len(corpus):,} docs, {corpus.embedder_name})"
    else:
        vectors = clustered(args.n, args.dim, seed=1)
        queries = clustered(args.queries, args.dim, seed=2)
        rows = bench_dense(vectors, queries, kinds, exact_queries=args.exact_queries, overrides=overrides)
        title = f"synthetic clustered vectors {args.n:,} x {args.dim}"
    print_table(title, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
