"""Scale benchmark: a corpus of millions of documents that opens in seconds and is shared by workers.

Subcommands (each prints markdown tables; ``--json`` appends machine-readable results):

    # 1. write a corpus of N rows: text of realistic length, vectors as hard as real ones (below)
    python benchmarks/scale.py build --rows 2000000 --out /tmp/scale-2m [--dtype float16]
    # 2. open time, memory after open / after 1,000 queries, p50/p95 latency and recall@10 against
    #    the exact filtered scan (streamed over the shards) at 10/50/100 % visible, IVF-SQ8 and IVF-PQ
    python benchmarks/scale.py bench --corpus /tmp/scale-2m
    # 3. resident memory (PSS) of 1 and 8 AsyncVectorEnv workers searching and reading one corpus
    python benchmarks/scale.py workers --corpus /tmp/scale-2m --workers 1 8
    # 4. the real Wikipedia corpus: recall@10 / latency curve over probes and re-rank depth
    python benchmarks/scale.py real --source ~/.cache/forecast_dojo/corpora/wce-static --work /tmp/wce-v2

Vectors "as hard as real ones": rows are real ``static-minilm-256`` embeddings of the Wikipedia
Current Events corpus (113k summaries, kept in time order), mapped isometrically into 384
dimensions by a random orthonormal matrix, plus Gaussian noise of norm ``--sigma`` (0.5), then
re-normalized. Row ``i`` of ``N`` copies a summary from around position ``i / N`` of the real corpus
(time locality of news topics). With sigma 0.5 the IVF-Flat recall@10 curve over nprobe matches
the real corpus's at the same size (measured: real 0.803/0.890/0.941/0.974/0.990 at nprobe
4/8/16/32/64 vs generated 0.771/0.875/0.943/0.975/0.993), while synthetic Gaussian clusters give
recall 1.000 to every index and cannot tell them apart. Texts are real summaries concatenated to a
log-normal length (median ``--text-chars``), titles real, ids and dates synthetic and increasing.
Queries are held-out vectors of the same generator.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from tqdm.auto import tqdm

FRACTIONS = (0.1, 0.5, 1.0)
TOP_K = 10
CHUNK = 65_536
DIM = 384
DEFAULT_REAL = Path("~/.cache/forecast_dojo/corpora/wce-static").expanduser()


def memory() -> dict[str, int]:
    """This process's resident memory in bytes: RSS (``/proc/self/status``) and PSS (``smaps_rollup``)."""
    return process_memory(os.getpid())


def process_memory(pid: int) -> dict[str, int]:
    """RSS, PSS and their anonymous/file parts of one process, in bytes."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        if key in ("Rss", "Pss", "Pss_Anon", "Pss_File", "Private_Clean", "Private_Dirty"):
            out[key] = int(value.split()[0]) * 1024
    return out


def mb(value: float) -> str:
    """Bytes as MB with one decimal."""
    return f"{value / 2**20:.1f}"


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print a markdown table."""
    print(f"\n### {title}\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "|".join("---" for _ in columns) + "|")
    for row in rows:
        print("| " + " | ".join(str(cell) for cell in row) + " |")
    sys.stdout.flush()


def in_fresh_process(command: str, payload: str) -> dict[str, Any]:
    """Run a hidden subcommand of this script in a new process (honest open time and memory); its JSON."""
    done = subprocess.run([sys.executable, __file__, command, payload], capture_output=True, text=True)
    if done.returncode:
        print(done.stderr[-3000:], file=sys.stderr)
        raise SystemExit(done.returncode)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def append_json(path: str | None, record: dict[str, Any]) -> None:
    """Append one result record (JSON line) when ``--json`` was given."""
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps(record) + "\n")


# --- the generator ---------------------------------------------------------------------------------


class Generator:
    """Real summaries (vectors and texts, time-ordered) expanded to any number of rows."""

    def __init__(self, real_dir: Path, sigma: float, seed: int = 0) -> None:
        from forecast_dojo.corpus.store import Corpus

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a format-1 source corpus loads in memory, read-only
            real = Corpus.load(real_dir, verify=False)
        self.base = np.asarray(real.embeddings, dtype=np.float32)
        self.texts = real.table.column("text").to_pylist()
        self.titles = real.table.column("title").to_pylist()
        self.sigma = sigma
        rng = np.random.default_rng(seed)
        self.rotation = np.linalg.qr(rng.standard_normal((DIM, self.base.shape[1])))[0].astype(np.float32)

    def vectors(self, positions: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Vectors for rows at relative positions in [0, 1): (vectors, the real rows they copy)."""
        b = self.base.shape[0]
        source = np.clip(np.round(positions * b + rng.normal(0, 0.02 * b, positions.size)), 0, b - 1)
        source = source.astype(np.int64)
        noise = rng.normal(0, self.sigma / np.sqrt(DIM), (positions.size, DIM)).astype(np.float32)
        out = self.base[source] @ self.rotation.T + noise
        return out / np.linalg.norm(out, axis=1, keepdims=True), source

    def text(self, source: int, length: int) -> str:
        """Consecutive real summaries from ``source`` on, up to about ``length`` characters."""
        parts, total, row = [], 0, source
        while total < length:
            parts.append(self.texts[row % len(self.texts)])
            total += len(parts[-1]) + 1
            row += 1
        return "\n".join(parts)[:length]


def build(args: argparse.Namespace) -> None:
    """Write an N-row corpus in chunks, then build IVF-SQ8 and IVF-PQ indexes; print the timings."""
    import faiss

    from forecast_dojo.corpus.index import build_dense_index
    from forecast_dojo.corpus.store import DOCUMENT_SCHEMA, CorpusWriter

    faiss.omp_set_num_threads(args.threads)
    out = Path(args.out)
    gen = Generator(Path(args.real), args.sigma)
    rng = np.random.default_rng(1)
    n = args.rows
    start_us = int(datetime(2002, 1, 1, tzinfo=UTC).timestamp() * 1e6)
    span_us = int(24 * 365.25 * 86400 * 1e6)
    started = time.perf_counter()
    writer = CorpusWriter(
        out, embedder_name="scale-generator-384", dim=DIM, vector_dtype=args.dtype, overwrite=True
    )
    text_bytes = 0
    for lo in tqdm(range(0, n, CHUNK), desc=f"writing {n:,} rows", unit="chunk"):
        rows = np.arange(lo, min(n, lo + CHUNK))
        vectors, source = gen.vectors(rows / n, rng)
        lengths = np.minimum(rng.lognormal(np.log(args.text_chars), 0.6, rows.size), 40_000).astype(int)
        texts = [gen.text(int(s), int(length)) for s, length in zip(source, lengths, strict=True)]
        text_bytes += sum(len(t) for t in texts)
        when = start_us + rows * (span_us // n)
        chunk = pa.Table.from_pydict(
            {
                "id": [f"scale-{r:09d}" for r in rows],
                "title": [gen.titles[int(s)] for s in source],
                "text": texts,
                "url": [f"https://news.example/{r}" for r in rows],
                "source": ["generated"] * rows.size,
                "published_at": when,
                "available_at": when,
                "date_source": ["published"] * rows.size,
            },
            schema=DOCUMENT_SCHEMA,
        )
        writer.add(chunk, vectors.astype(args.dtype))
    corpus = writer.finish({"generator": {"sigma": args.sigma, "real": str(args.real)}}, verify=False)
    write_s = time.perf_counter() - started
    # Held-out queries of the same generator (never in the corpus).
    queries, _ = gen.vectors(np.random.default_rng(2).random(args.queries), np.random.default_rng(3))
    np.save(out / "bench-queries.npy", queries.astype(np.float32))
    started = time.perf_counter()
    corpus.verify(progress=True)
    verify_s = time.perf_counter() - started
    timings: list[list[Any]] = []
    for kind in args.kinds:
        options: dict[str, Any] = {"train_size": args.train_size}
        if kind == "ivf-pq":
            options["pq_m"] = args.pq_m
        if args.nlist:
            options["nlist"] = args.nlist
        started = time.perf_counter()
        index = build_dense_index(corpus, kind, **options)
        seconds = time.perf_counter() - started
        size = (out / "index" / f"dense-{kind}.faiss").stat().st_size
        timings.append(
            [
                kind,
                f"{seconds:.0f}",
                f"{size / n:.1f}",
                index.params.nlist,
                index.params.nprobe,
                index.params.rerank,
            ]
        )
    disk = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    table(
        f"Build: {n:,} rows x {DIM} ({args.dtype}), text {text_bytes / n:.0f} chars/row",
        ["step", "seconds", "B/doc", "nlist", "calibrated nprobe", "rerank"],
        [
            ["write documents + vectors (CorpusWriter)", f"{write_s:.0f}", "-", "-", "-", "-"],
            ["full verify (every byte)", f"{verify_s:.0f}", "-", "-", "-", "-"],
            *timings,
        ],
    )
    print(f"\non disk: {disk / 2**30:.2f} GiB ({disk / n:.0f} B/doc in all)")
    append_json(
        args.json,
        {
            "what": "build",
            "rows": n,
            "dtype": args.dtype,
            "write_s": write_s,
            "verify_s": verify_s,
            "text_chars": text_bytes / n,
            "disk_bytes": disk,
            "indexes": timings,
        },
    )


# --- open, memory, latency, recall --------------------------------------------------------------


def exact_truth(corpus: Any, queries: np.ndarray, cache: Path) -> dict[float, list[list[int]]]:
    """Exact top-10 rows per visible fraction, streamed over the memory-mapped shards (cached on disk)."""
    from forecast_dojo.corpus.index import exact_search

    if cache.exists():
        saved = json.loads(cache.read_text())
        if saved.get("n") == len(corpus) and saved.get("q") == len(queries):
            return {float(k): v for k, v in saved["truth"].items()}
    truth = {}
    for fraction in FRACTIONS:
        n_visible = int(fraction * len(corpus))
        started = time.perf_counter()
        found = exact_search(corpus.embeddings, queries, n_visible, TOP_K)
        truth[fraction] = [[row for row, _ in hits] for hits in found]
        print(
            f"exact scan of {n_visible:,} rows for {len(queries)} queries: {time.perf_counter() - started:.1f} s",
            flush=True,
        )
    cache.write_text(json.dumps({"n": len(corpus), "q": len(queries), "truth": truth}))
    return truth


def measure(
    index: Any, queries: np.ndarray, n_visible: int, truth: list[list[int]], repeat_to: int = 0
) -> dict[str, float]:
    """Single-query latency (wall and this thread's CPU time) and recall@10 against ``truth``."""
    latencies, cpu, hits = [], [], 0
    for q in range(max(len(truth), repeat_to)):
        vector = queries[q % len(queries)]
        t0, c0 = time.perf_counter(), time.thread_time()
        found = index.search(vector, n_visible, TOP_K)[0]
        cpu.append((time.thread_time() - c0) * 1000)
        latencies.append((time.perf_counter() - t0) * 1000)
        if q < len(truth):
            hits += len({row for row, _ in found} & set(truth[q]))
    return {
        "p50_ms": float(np.percentile(latencies, 50)),
        "p95_ms": float(np.percentile(latencies, 95)),
        "cpu_p50_ms": float(np.percentile(cpu, 50)),
        "cpu_p95_ms": float(np.percentile(cpu, 95)),
        "recall": hits / (TOP_K * max(1, len(truth))),
    }


def bench_one(
    corpus_dir: Path, kind: str, settings: list[tuple[int, int]], n_queries: int, n_truth: int
) -> dict[str, Any]:
    """In this (fresh) process: open, query 1,000 times, then sweep settings; returns the numbers."""
    import faiss

    faiss.omp_set_num_threads(1)
    from forecast_dojo.corpus.index import IVFIndex, load_dense_index
    from forecast_dojo.corpus.store import Corpus

    before = memory()
    started = time.perf_counter()
    corpus = Corpus.load(corpus_dir)
    index = load_dense_index(corpus, kind)
    opened_s = time.perf_counter() - started
    after_open = memory()
    queries = np.load(corpus_dir / "bench-queries.npy")
    n = len(corpus)
    rng = np.random.default_rng(4)
    for q in range(n_queries):  # 1,000 single queries at random visible fractions, as an agent would
        index.search(queries[q % len(queries)], int(rng.choice(FRACTIONS) * n), TOP_K)
    after_queries = memory()
    truth = exact_truth(corpus, queries[:n_truth], corpus_dir / "bench-truth.json")
    curve: list[dict[str, Any]] = []
    baseline: list[dict[str, Any]] = []
    for nprobe, rerank in settings:
        index.params.nprobe, index.params.rerank = nprobe, rerank
        for fraction in FRACTIONS:
            n_visible = int(fraction * n)
            point = measure(index, queries, n_visible, truth[fraction], repeat_to=200)
            curve.append({"nprobe": nprobe, "rerank": rerank, "visible": fraction, **point})
    # Baseline in the same run: the same index read fully into RAM (faiss's default, no mmap).
    nprobe, rerank = settings[0]
    in_ram = IVFIndex(
        kind=kind,
        index=faiss.read_index(str(corpus_dir / "index" / f"dense-{kind}.faiss")),
        vectors=corpus.embeddings,
        params=replace(index.params, nprobe=nprobe, rerank=rerank),
    )
    index.params.nprobe, index.params.rerank = nprobe, rerank
    for fraction in FRACTIONS:
        n_visible = int(fraction * n)
        for label, which in (("in RAM (baseline)", in_ram), ("memory-mapped", index)):
            point = measure(which, queries, n_visible, truth[fraction], repeat_to=200)
            baseline.append(
                {"nprobe": nprobe, "rerank": rerank, "visible": fraction, "index": label, **point}
            )
    size = sum(meta["bytes"] for meta in corpus.index_entry(f"dense-{kind}", verify=False)["files"].values())
    return {
        "kind": kind,
        "rows": n,
        "open_s": opened_s,
        "before": before,
        "after_open": after_open,
        "after_queries": after_queries,
        "index_bytes_per_doc": size / n,
        "curve": curve,
        "baseline": baseline,
        "calibrated": [index.params.nlist],
    }


def bench(args: argparse.Namespace) -> None:
    """Each index kind in a fresh process (honest open time and memory); print the tables."""
    results = []
    for kind in args.kinds:
        settings = SETTINGS[kind]
        if args.settings:
            settings = [tuple(int(x) for x in s.split(":")) for s in args.settings]
        payload = json.dumps(
            {
                "corpus": str(args.corpus),
                "kind": kind,
                "settings": settings,
                "n_queries": args.queries,
                "n_truth": args.truth,
            }
        )
        result = in_fresh_process("_bench_one", payload)
        results.append(result)
        append_json(args.json, {"what": "bench", **result})
    n = results[0]["rows"]

    def grew(r: dict[str, Any], when: str, key: str) -> str:
        return mb(r[when][key] - r["before"][key])

    table(
        f"Open and memory: {n:,} rows (each index in a fresh process; growth over the process before opening)",
        [
            "index",
            "open s",
            "RSS after open MB",
            "anon after open MB",
            "RSS after 1,000 queries MB",
            "anon after 1,000 queries MB",
            "file-backed after 1,000 queries MB",
            "index B/doc",
        ],
        [
            [
                r["kind"],
                f"{r['open_s']:.2f}",
                grew(r, "after_open", "Rss"),
                grew(r, "after_open", "Pss_Anon"),
                grew(r, "after_queries", "Rss"),
                grew(r, "after_queries", "Pss_Anon"),
                grew(r, "after_queries", "Pss_File"),
                f"{r['index_bytes_per_doc']:.1f}",
            ]
            for r in results
        ],
    )
    print(
        "\n(anon: private heap; file-backed: pages of the memory-mapped corpus and index this process touched,"
        " shared through the page cache with every other process that opens the corpus)"
    )
    rows = []
    for r in results:
        for point in r["curve"]:
            rows.append(
                [
                    r["kind"],
                    point["nprobe"],
                    point["rerank"],
                    f"{point['visible']:.0%}",
                    f"{point['p50_ms']:.2f}",
                    f"{point['p95_ms']:.2f}",
                    f"{point['cpu_p50_ms']:.2f}",
                    f"{point['cpu_p95_ms']:.2f}",
                    f"{point['recall']:.3f}",
                ]
            )
    table(
        f"Latency (single query, 1 thread) and recall@10 vs the exact filtered scan: {n:,} rows "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)",
        ["index", "nprobe", "rerank", "visible", "p50 ms", "p95 ms", "CPU p50 ms", "CPU p95 ms", "recall@10"],
        rows,
    )
    rows = [
        [
            r["kind"],
            p["index"],
            p["nprobe"],
            p["rerank"],
            f"{p['visible']:.0%}",
            f"{p['p50_ms']:.2f}",
            f"{p['cpu_p50_ms']:.2f}",
            f"{p['recall']:.3f}",
        ]
        for r in results
        for p in r.get("baseline", [])
    ]
    table(
        "Same run, same queries: the index memory-mapped vs read into RAM (faiss's default)",
        ["index", "inverted lists", "nprobe", "rerank", "visible", "p50 ms", "CPU p50 ms", "recall@10"],
        rows,
    )


SETTINGS: dict[str, list[tuple[int, int]]] = {
    "ivf-sq8": [(16, 40), (32, 40), (64, 100)],
    "ivf-pq": [(32, 200), (64, 400), (128, 800)],
    "ivf-flat": [(16, 0), (32, 0), (64, 0), (128, 0)],
}


# --- workers sharing one corpus -----------------------------------------------------------------


class RetrievalEnv:
    """A minimal gymnasium env over one corpus: each step searches at a cutoff and reads the hits.

    The path every forecast-dojo env takes to the corpus (``TemporalGateway`` -> dense index ->
    memory-mapped documents), without events: what the workers' memory is about.
    """

    def __init__(self, corpus_dir: str, kind: str) -> None:
        import gymnasium as gym

        self.corpus_dir, self.kind = corpus_dir, kind
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(1_000)
        self.metadata: dict[str, Any] = {}
        self.render_mode = None
        self.spec = None
        self.np_random = np.random.default_rng(0)
        self._gateway: Any = None

    def _open(self) -> None:
        import faiss

        from forecast_dojo.corpus.index import load_dense_index
        from forecast_dojo.corpus.store import Corpus
        from forecast_dojo.gateway import TemporalGateway

        faiss.omp_set_num_threads(1)
        corpus = Corpus.load(self.corpus_dir)
        index = load_dense_index(corpus, self.kind)

        class Dense:
            name = "dense"

            def search(self, vector: np.ndarray, n_visible: int, top_k: int) -> list[tuple[int, float]]:
                return index.search(vector, n_visible, top_k)[0]

        self._corpus = corpus
        self._gateway = TemporalGateway(corpus, Dense())
        self._queries = np.load(Path(self.corpus_dir) / "bench-queries.npy")

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        """Open the corpus on first use (inside the worker)."""
        if self._gateway is None:
            self._open()
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        return np.zeros(1, np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        """One search at a random cutoff, then a read of every hit's text."""
        corpus = self._corpus
        row = int(self.np_random.integers(len(corpus) // 10, len(corpus)))
        view = self._gateway.at(corpus.available_at(row))
        hits = view.search(self._queries[int(action) % len(self._queries)], TOP_K)
        chars = sum(len(view.get(corpus.field("id", r)).text) for r, _ in hits)
        return np.array([chars / 1e5], np.float32), 0.0, False, False, {"pid": os.getpid()}

    def close(self) -> None:
        """Nothing to release: the maps go with the process."""


def workers(args: argparse.Namespace) -> None:
    """Total PSS/RSS of N AsyncVectorEnv workers (fork) after each ran ``--steps`` search+read steps."""
    import faiss  # noqa: F401  (imported before the fork, as an env process would)
    import gymnasium as gym

    import forecast_dojo.corpus.store  # noqa: F401

    rows = []
    base = None
    for count in args.workers:
        envs = gym.vector.AsyncVectorEnv(
            [lambda: RetrievalEnv(str(args.corpus), args.kind) for _ in range(count)],
            context="fork",
            autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
        )
        started = time.perf_counter()
        envs.reset(seed=list(range(count)))
        reset_s = time.perf_counter() - started
        started = time.perf_counter()
        for step in range(args.steps):
            envs.step(np.full(count, step))
        step_ms = (time.perf_counter() - started) * 1000 / args.steps
        pids = [process.pid for process in envs.processes]
        measured = [process_memory(pid) for pid in pids]
        pss = sum(m["Pss"] for m in measured)
        rss = sum(m["Rss"] for m in measured)
        private = sum(m["Private_Clean"] + m["Private_Dirty"] for m in measured)
        envs.close()
        base = base or pss
        rows.append(
            [count, f"{reset_s:.2f}", f"{step_ms:.1f}", mb(pss), mb(rss), mb(private), f"{pss / base:.2f}"]
        )
        append_json(
            args.json,
            {
                "what": "workers",
                "workers": count,
                "pss": pss,
                "rss": rss,
                "private": private,
                "reset_s": reset_s,
                "step_ms": step_ms,
                "kind": args.kind,
            },
        )
    table(
        f"AsyncVectorEnv workers sharing one corpus ({args.kind}, {args.steps} search+read steps each)",
        [
            "workers",
            "reset (open) s",
            "ms per vector step",
            "total PSS MB",
            "total RSS MB",
            "total private MB",
            "PSS vs 1 worker",
        ],
        rows,
    )


# --- the real corpus ------------------------------------------------------------------------------


def real(args: argparse.Namespace) -> None:
    """Copy the real Wikipedia corpus, migrate the copy, build indexes, sweep probes and re-rank depth."""
    import faiss

    from forecast_dojo.corpus.embedders import get_embedder
    from forecast_dojo.corpus.index import build_dense_index, exact_search, load_dense_index
    from forecast_dojo.corpus.store import Corpus, migrate_corpus

    faiss.omp_set_num_threads(1)
    work = Path(args.work)
    if not (work / "manifest.json").exists():
        shutil.copytree(Path(args.source).expanduser(), work)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        corpus = Corpus.load(work, verify=False)
    if corpus.format_version == 1:
        started = time.perf_counter()
        corpus = migrate_corpus(work, progress=False)
        print(f"migrated the copy to format 2 in {time.perf_counter() - started:.1f} s")
    n = len(corpus)
    embedder = get_embedder(corpus.embedder_name)
    rng = np.random.default_rng(5)
    picks = rng.choice(n, size=args.queries, replace=False)
    texts = [" ".join(corpus.text(int(i)).split()[:8]) for i in picks]
    queries = np.ascontiguousarray(embedder.encode(texts), dtype=np.float32)
    truth = {
        f: [[r for r, _ in hits] for hits in exact_search(corpus.embeddings, queries, int(f * n), TOP_K)]
        for f in FRACTIONS
    }
    rows = []
    for kind in args.kinds:
        name = f"dense-{kind}"
        if name not in corpus.indexes():
            started = time.perf_counter()
            build_dense_index(corpus, kind, progress=False, exact_below=0)
            print(f"built {kind} in {time.perf_counter() - started:.1f} s", flush=True)
            corpus = Corpus.load(work)
        index = load_dense_index(corpus, kind)
        size = sum(m["bytes"] for m in corpus.index_entry(name, verify=False)["files"].values()) / n
        for nprobe, rerank in REAL_SETTINGS[kind]:
            index.params.nprobe, index.params.rerank, index.params.exact_below = nprobe, rerank, 0
            for fraction in FRACTIONS:
                n_visible = int(fraction * n)
                point = measure(index, queries, n_visible, truth[fraction])
                rows.append(
                    [
                        kind,
                        nprobe,
                        rerank,
                        f"{fraction:.0%}",
                        f"{point['p50_ms']:.2f}",
                        f"{point['p95_ms']:.2f}",
                        f"{point['cpu_p50_ms']:.2f}",
                        f"{point['recall']:.3f}",
                        f"{size:.0f}",
                    ]
                )
                append_json(
                    args.json,
                    {
                        "what": "real",
                        "kind": kind,
                        "nprobe": nprobe,
                        "rerank": rerank,
                        "visible": fraction,
                        "bytes_per_doc": size,
                        **point,
                    },
                )
    table(
        f"Real: Wikipedia Current Events, {n:,} summaries, {corpus.embedder_name} ({corpus.dim}-d), "
        f"{len(queries)} text queries (first 8 words of a summary), exact_below=0, "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        ["index", "nprobe", "rerank", "visible", "p50 ms", "p95 ms", "CPU p50 ms", "recall@10", "B/doc"],
        rows,
    )


def profile(args: argparse.Namespace) -> None:
    """Where one IVF query's time goes: the probe plan, faiss's scan of the probed lists, the exact re-rank.

    The three phases are the steps of ``IVFIndex._search_ivf``, called one by one so each is timed.
    """
    import faiss

    from forecast_dojo.corpus.index import load_dense_index
    from forecast_dojo.corpus.store import Corpus

    faiss.omp_set_num_threads(1)
    corpus = Corpus.load(args.corpus, verify=False)
    queries = np.load(args.corpus / "bench-queries.npy").astype(np.float32)
    n = len(corpus)
    rows = []
    for setting in args.settings:
        kind, nprobe, rerank = setting.split(":")
        index = load_dense_index(corpus, kind, verify=False, nprobe=int(nprobe), rerank=int(rerank))
        for q in queries[: args.warmup]:  # warm the page cache the way a running env would
            index.search(q[None], n // 2, TOP_K)
        parts: dict[str, list[float]] = {"plan": [], "scan": [], "rerank": []}
        fetch = max(TOP_K, int(rerank))
        for fraction in FRACTIONS:
            n_visible = int(fraction * n)
            for q in queries[args.warmup : args.warmup + args.queries]:
                query = np.ascontiguousarray(q[None], dtype=np.float32)
                t0 = time.perf_counter()
                lists, centroid_scores = index.probe_plan(query, n_visible, fetch)
                t1 = time.perf_counter()
                params = faiss.SearchParametersIVF(  # type: ignore[call-arg]
                    sel=faiss.IDSelectorRange(0, n_visible, True), nprobe=lists.shape[1]
                )
                scores = np.empty((1, fetch), np.float32)
                found = np.empty((1, fetch), np.int64)
                lists = np.ascontiguousarray(lists, dtype=np.int64)
                centroid_scores = np.ascontiguousarray(centroid_scores, dtype=np.float32)
                index.index.search_preassigned_c(
                    1,
                    faiss.swig_ptr(query),
                    fetch,
                    faiss.swig_ptr(lists),
                    faiss.swig_ptr(centroid_scores),
                    faiss.swig_ptr(scores),
                    faiss.swig_ptr(found),
                    False,
                    params,
                )
                t2 = time.perf_counter()
                candidates = found[0][found[0] >= 0]
                if int(rerank):
                    index._vectors_of(candidates) @ query[0]
                t3 = time.perf_counter()
                parts["plan"].append(t1 - t0)
                parts["scan"].append(t2 - t1)
                parts["rerank"].append(t3 - t2)
        medians = {k: 1000 * float(np.median(v)) for k, v in parts.items()}
        total = 1000 * float(np.median(np.sum([parts[k] for k in parts], axis=0)))
        rows.append([kind, nprobe, rerank, *(f"{medians[k]:.2f}" for k in parts), f"{total:.2f}"])
        append_json(
            args.json,
            {"what": "profile", "kind": kind, "nprobe": int(nprobe), "rerank": int(rerank), **medians},
        )
    table(
        f"Where a query's time goes: {n:,} rows, medians over {args.queries} queries x 3 visible fractions "
        f"after {args.warmup} warm-up queries, one thread; load average {os.getloadavg()[0]:.1f}",
        ["index", "nprobe", "rerank", "probe plan ms", "faiss scan ms", "exact re-rank ms", "total ms"],
        rows,
    )


BM25_MODES = {
    "in-memory build (baseline)": "memory-build",
    "streaming build (build_bm25_index)": "stream-build",
    "load, memory-mapped": "load",
}


def bm25_one(corpus_dir: Path, mode: str, n_queries: int) -> dict[str, Any]:
    """One BM25 measurement in this (fresh) process: build or load, peak and resident memory, latency."""
    import resource

    from forecast_dojo.corpus.bm25 import BM25Index, build_bm25_index
    from forecast_dojo.corpus.store import Corpus

    corpus = Corpus.load(corpus_dir, verify=False)
    before = memory()
    peak_anon = [before["Pss_Anon"]]
    done = threading.Event()

    def sample_anon() -> None:  # ru_maxrss also counts mapped file pages; the private peak is sampled
        while not done.wait(0.1):
            peak_anon[0] = max(peak_anon[0], memory()["Pss_Anon"])

    sampler = threading.Thread(target=sample_anon, daemon=True)
    sampler.start()
    started = time.perf_counter()
    if mode == "memory-build":  # what the code did before streaming: every text in a list, then build
        index = BM25Index.build(corpus.texts(), progress=False)
    elif mode == "stream-build":
        index = build_bm25_index(corpus, progress=False)
    else:
        index = BM25Index.load(corpus, verify=False)
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    after = memory()
    rng = np.random.default_rng(11)
    picks = rng.choice(len(corpus), size=n_queries, replace=len(corpus) < n_queries)
    queries = [" ".join(corpus.text(int(i)).split()[:8]) for i in picks]
    latencies = []
    for query, fraction in zip(queries, np.resize(FRACTIONS, len(queries)), strict=True):
        t0 = time.perf_counter()
        index.search(query, int(fraction * len(corpus)), TOP_K)
        latencies.append((time.perf_counter() - t0) * 1000)
    after_queries = memory()
    return {
        "mode": mode,
        "rows": len(corpus),
        "seconds": seconds,
        "peak_rss_growth": peak - before["Rss"],
        "peak_anon_growth": peak_anon[0] - before["Pss_Anon"],
        "rss_growth": after["Rss"] - before["Rss"],
        "anon_growth": after["Pss_Anon"] - before["Pss_Anon"],
        "anon_growth_after_queries": after_queries["Pss_Anon"] - before["Pss_Anon"],
        "p50_ms": float(np.percentile(latencies, 50)),
        "p95_ms": float(np.percentile(latencies, 95)),
        "index_bytes": index.memory_bytes(),
    }


def bm25(args: argparse.Namespace) -> None:
    """BM25 at scale: the streaming build and the memory-mapped load against the in-memory baseline."""
    rows = []
    modes = dict(BM25_MODES)
    manifest = json.loads((args.corpus / "manifest.json").read_text())
    entry = manifest.get("indexes", {}).get("bm25")
    if entry and "layout" not in entry["params"]:  # an index of the first layout: measure its load first
        modes = {"load, first layout (npz + JSON, read into RAM)": "load", **modes}
    for label, mode in modes.items():
        payload = json.dumps({"corpus": str(args.corpus), "mode": mode, "n_queries": args.queries})
        r = in_fresh_process("_bm25_one", payload)
        append_json(args.json, {"what": "bm25", **r})
        rows.append(
            [
                label,
                f"{r['seconds']:.2f}",
                mb(r["peak_rss_growth"]),
                mb(r["peak_anon_growth"]),
                mb(r["rss_growth"]),
                mb(r["anon_growth"]),
                mb(r["anon_growth_after_queries"]),
                f"{r['p50_ms']:.2f}",
                f"{r['p95_ms']:.2f}",
                mb(r["index_bytes"]),
            ]
        )
    table(
        f"BM25: {r['rows']:,} rows, {args.queries} queries (first 8 words of a row) at 10/50/100 % visible; "
        f"memory is growth over the opened corpus, in a fresh process per row; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores",
        [
            "BM25",
            "seconds",
            "peak RSS growth MB",
            "peak anon growth MB",
            "RSS after MB",
            "anon after MB",
            "anon after queries MB",
            "p50 ms",
            "p95 ms",
            "index MB",
        ],
        rows,
    )


REAL_SETTINGS: dict[str, list[tuple[int, int]]] = {
    "ivf-flat": [(32, 0), (64, 0), (128, 0), (192, 0), (256, 0)],
    "ivf-sq8": [(64, 40), (128, 100), (192, 100), (256, 100)],
    "ivf-pq": [(64, 200), (128, 400), (128, 800), (192, 800), (256, 1000)],
}


def main(argv: list[str] | None = None) -> int:
    """Parse the subcommand and run it."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", help="append results as JSON lines to this file")
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("build", help="write an N-row corpus and its indexes")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--out", required=True)
    p.add_argument("--real", default=str(DEFAULT_REAL), help="real corpus the generator draws from")
    p.add_argument("--sigma", type=float, default=0.5)
    p.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    p.add_argument("--text-chars", type=int, default=2000, help="median text length (log-normal)")
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument(
        "--kinds", nargs="*", default=["ivf-sq8", "ivf-pq"], help="IVF indexes to build (--kinds alone: none)"
    )
    p.add_argument("--nlist", type=int, default=0, help="0: 2 sqrt(N)")
    p.add_argument("--train-size", type=int, default=100_000)
    p.add_argument("--pq-m", type=int, default=48)
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(func=build)
    p = commands.add_parser("bench", help="open, memory, latency and recall")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--kinds", nargs="+", default=["ivf-sq8", "ivf-pq"])
    p.add_argument("--queries", type=int, default=1000, help="queries before the memory reading")
    p.add_argument("--truth", type=int, default=100, help="queries with an exact filtered scan (recall)")
    p.add_argument("--settings", nargs="*", help="nprobe:rerank pairs (default: a sweep per kind)")
    p.set_defaults(func=bench)
    p = commands.add_parser("workers", help="PSS of N AsyncVectorEnv workers on one corpus")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument("--kind", default="ivf-pq")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 8])
    p.add_argument("--steps", type=int, default=200)
    p.set_defaults(func=workers)
    p = commands.add_parser("real", help="the real Wikipedia corpus: recall/latency curve")
    p.add_argument("--source", default=str(DEFAULT_REAL))
    p.add_argument("--work", required=True, help="where the copy (migrated to format 2) and its indexes go")
    p.add_argument("--kinds", nargs="+", default=["ivf-flat", "ivf-sq8", "ivf-pq"])
    p.add_argument("--queries", type=int, default=300)
    p.set_defaults(func=real)
    p = commands.add_parser("profile", help="where one IVF query's time goes (plan, scan, re-rank)")
    p.add_argument("--corpus", type=Path, required=True)
    p.add_argument(
        "--settings",
        nargs="+",
        default=["ivf-sq8:32:40", "ivf-pq:64:400", "ivf-pq:128:800"],
        help="kind:nprobe:rerank",
    )
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--warmup", type=int, default=300)
    p.set_defaults(func=profile)
    p = commands.add_parser("bm25", help="BM25: streaming build and memory-mapped load vs in memory")
    p.add_argument("--corpus", type=Path, required=True, help="a format-2 corpus (its BM25 index is rebuilt)")
    p.add_argument("--queries", type=int, default=300)
    p.set_defaults(func=bm25)
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "_bm25_one":
        spec = json.loads(sys.argv[2])
        print(json.dumps(bm25_one(Path(spec["corpus"]), spec["mode"], spec["n_queries"])))
        return 0
    if argv is None and len(sys.argv) > 2 and sys.argv[1] == "_bench_one":
        spec = json.loads(sys.argv[2])
        result = bench_one(
            Path(spec["corpus"]),
            spec["kind"],
            [tuple(s) for s in spec["settings"]],
            spec["n_queries"],
            spec["n_truth"],
        )
        print(json.dumps(result))
        return 0
    args = parser.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
