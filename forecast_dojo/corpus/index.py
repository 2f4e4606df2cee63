"""Dense vector indexes restricted to a visible prefix of time-ordered rows.

Rows are sorted by ``available_at``, so the documents visible at a cutoff are exactly the rows
``[0, n_visible)``. Every index here honours that filter *inside* the search (never by dropping
results afterwards, which would silently return fewer than ``top_k``):

- ``exact``: a scan of the visible prefix of the float32 matrix. Exact; cost linear in ``n_visible``.
- ``ivf-flat`` / ``ivf-sq8``: faiss inverted lists searched with
  ``SearchParametersIVF(sel=IDSelectorRange(0, n_visible, assume_sorted=True))``. Ids are added in
  row order, so every inverted list is sorted by id and faiss bisects each probed list down to its
  visible part instead of testing ids one by one.
- ``ivf-pq``: product-quantized codes (``m`` bytes per vector) whose candidates are re-ranked exactly
  from the float vectors gathered from the memory-mapped shards: the memory-bound large-scale path.

Recall: ``nprobe`` is calibrated when an IVF index is built (the smallest value on a ladder reaching
recall@10 >= 0.98 against the exact scan, sampled rows as queries) and stored in the manifest.

Tight filters: when only a fraction of the corpus is visible, the ``nprobe`` nearest lists hold few
visible vectors, or none (news topics are local in time, so a query's nearest clusters may lie
entirely after the cutoff), and recall collapses. The IVF indexes therefore plan their probes per
query (:meth:`IVFIndex.probe_plan`): lists in centroid order, skipping lists with no visible vector,
until the visible vectors probed reach the number that ``nprobe`` lists hold at full visibility
(constant cost; a growing share of the visible set as the filter tightens). Per-list visible counts come from prefix checkpoints (rows are time-ordered), and
bisected lists make the invisible part free. Below ``exact_below`` visible rows the exact scan is
both faster and exact, and is used.
HNSW is deliberately absent: a graph walk under a 10 % filter keeps landing on filtered-out nodes and
its recall collapses (see docs/retrieval.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from tqdm.auto import tqdm

from forecast_dojo.corpus.ranking import rank_candidates, top_k_rows
from forecast_dojo.corpus.store import Corpus, CorpusError, ShardedMatrix
from forecast_dojo.errors import ConfigError, DataError

if TYPE_CHECKING:
    import faiss

Vectors = np.ndarray | ShardedMatrix
"""Float32 rows: an array in memory or a corpus's memory-mapped :class:`ShardedMatrix`."""

DENSE_KINDS = ("exact", "ivf-flat", "ivf-sq8", "ivf-pq")
# ``auto`` picks the exact scan up to this many documents (a full scan then costs a few ms)...
AUTO_EXACT_MAX_DOCS = 50_000
# ...IVF-SQ8 up to this many, and the memory-bound IVF-PQ path beyond.
AUTO_SQ8_MAX_DOCS = 5_000_000
EXACT_SCAN_CHUNK_ROWS = 131_072
NPROBE_LADDER = (4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048)


class DenseIndex(Protocol):
    """Top-k inner-product search over the rows ``[0, n_visible)`` for a batch of query vectors."""

    kind: str

    def search(self, queries: np.ndarray, n_visible: int, top_k: int) -> list[list[tuple[int, float]]]:
        """Per query, the ``top_k`` rows among the first ``n_visible`` as ``(row, score)``, best first."""
        ...

    def memory_bytes(self) -> int:
        """Approximate resident size of the index in bytes."""
        ...


def choose_dense_kind(n_documents: int) -> str:
    """The index type ``auto`` means for a corpus of this size."""
    if n_documents <= AUTO_EXACT_MAX_DOCS:
        return "exact"
    return "ivf-sq8" if n_documents <= AUTO_SQ8_MAX_DOCS else "ivf-pq"


def _as_queries(queries: np.ndarray, dim: int) -> np.ndarray:
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if queries.ndim == 1:
        queries = queries[None, :]
    if queries.ndim != 2 or queries.shape[1] != dim:
        raise DataError(f"query vectors must have shape (q, {dim}), got {queries.shape}")
    return queries


def _inner_products(block: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``block @ queries.T``.

    One query goes through numpy's own single-threaded SIMD loop: a BLAS call would wake its thread
    pool, which on a busy machine costs ~100x the arithmetic (measured).
    """
    if queries.shape[0] == 1:
        return np.einsum("ij,j->i", block, queries[0])[:, None]
    return block @ queries.T


def exact_search(
    vectors: Vectors, queries: np.ndarray, n_visible: int, top_k: int
) -> list[list[tuple[int, float]]]:
    """Exact top-k of ``vectors[:n_visible] @ query`` per query, scanned in chunks to bound memory."""
    queries = _as_queries(queries, vectors.shape[1])
    n_visible = max(0, min(int(n_visible), vectors.shape[0]))
    if n_visible == 0 or top_k <= 0:
        return [[] for _ in range(queries.shape[0])]
    rows: list[list[np.ndarray]] = [[] for _ in range(queries.shape[0])]
    scores: list[list[np.ndarray]] = [[] for _ in range(queries.shape[0])]
    for lo in range(0, n_visible, EXACT_SCAN_CHUNK_ROWS):
        hi = min(n_visible, lo + EXACT_SCAN_CHUNK_ROWS)
        block = _inner_products(np.asarray(vectors[lo:hi], dtype=np.float32), queries)
        for q in range(queries.shape[0]):
            best = top_k_rows(block[:, q], top_k, offset=lo)
            rows[q].append(np.fromiter((r for r, _ in best), np.int64, len(best)))
            scores[q].append(block[np.asarray([r - lo for r, _ in best], dtype=np.int64), q])
    if n_visible <= EXACT_SCAN_CHUNK_ROWS:
        return [
            list(zip(rows[q][0].tolist(), scores[q][0].astype(float).tolist(), strict=True))
            for q in range(len(rows))
        ]
    return [
        rank_candidates(np.concatenate(rows[q]), np.concatenate(scores[q]), top_k) for q in range(len(rows))
    ]


@dataclass
class ExactIndex:
    """Exact scan of the visible prefix (no index file; memory is the float matrix itself)."""

    vectors: Vectors
    kind: str = "exact"

    def search(self, queries: np.ndarray, n_visible: int, top_k: int) -> list[list[tuple[int, float]]]:
        """Exact inner-product top-k over the visible prefix of the vectors."""
        return exact_search(self.vectors, queries, n_visible, top_k)

    def memory_bytes(self) -> int:
        """Size of the float32 vectors in bytes."""
        return int(self.vectors.shape[0] * self.vectors.shape[1] * 4)


@dataclass
class IVFParams:
    """How an IVF index is trained and searched (recorded in the manifest with the index)."""

    nlist: int
    nprobe: int = 0  # 0: calibrated at build time to reach ``target_recall`` (see IVFIndex.calibrate)
    pq_m: int = 48  # ivf-pq: bytes per vector (the dim must be divisible by it; default dim / 8)
    pq_bits: int = 8
    train_size: int = 0  # 0: max(40 * nlist, 10_000), capped at the corpus size
    exact_below: int = 16_384  # visible rows under which the exact prefix scan is used
    rerank: int = 0  # candidates re-scored exactly from the float vectors (0: none)
    seed: int = 1234
    target_recall: float = 0.98  # on rows as queries; ~0.95 for short text queries (docs/retrieval.md)

    @staticmethod
    def default(kind: str, n: int, dim: int = 384, **overrides: Any) -> IVFParams:
        """Sizes measured in docs/retrieval.md: about ``2 sqrt(n)`` lists, ``nprobe`` calibrated at build."""
        nlist = max(1, min(int(round(2 * math.sqrt(n))), n // 39 if n >= 39 else 1))
        params = IVFParams(nlist=nlist, pq_m=max(1, dim // 8))
        if kind == "ivf-sq8":
            params.rerank = 40
        elif kind == "ivf-pq":
            params.rerank = 200
        for name, value in overrides.items():
            if not hasattr(params, name):
                raise ConfigError(f"unknown IVF option {name!r}; known: {sorted(vars(params))}")
            setattr(params, name, type(getattr(params, name))(value))
        return params


@dataclass
class IVFIndex:
    """A faiss IVF index over all rows, searched only inside the visible prefix.

    ``vectors`` (the float32 rows, possibly memory-mapped) serve the exact fallback under tight
    filters and the exact re-ranking of quantized candidates.
    """

    kind: str
    index: Any  # faiss.IndexIVF
    vectors: Vectors
    params: IVFParams
    _checkpoints: np.ndarray | None = field(default=None, repr=False)
    _list_of_row: np.ndarray | None = field(default=None, repr=False)
    _step: int = field(default=0, repr=False)

    @classmethod
    def train(cls, kind: str, vectors: Vectors, params: IVFParams, *, progress: bool = True) -> IVFIndex:
        """Train the coarse quantizer (and codebooks) on a sample, then add every row in order."""
        import faiss

        if kind not in ("ivf-flat", "ivf-sq8", "ivf-pq"):
            raise ConfigError(f"not an IVF index kind: {kind!r}")
        n, dim = vectors.shape
        if n < params.nlist:
            raise DataError(f"cannot train {params.nlist} inverted lists on {n} vectors")
        quantizer = faiss.IndexFlatIP(dim)
        index: faiss.IndexIVF
        if kind == "ivf-flat":
            index = faiss.IndexIVFFlat(quantizer, dim, params.nlist, faiss.METRIC_INNER_PRODUCT)
        elif kind == "ivf-sq8":
            index = faiss.IndexIVFScalarQuantizer(
                quantizer, dim, params.nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        else:
            if dim % params.pq_m:
                raise ConfigError(f"ivf-pq: dim {dim} is not divisible by pq_m={params.pq_m}")
            pq_index = faiss.IndexIVFPQ(
                quantizer, dim, params.nlist, params.pq_m, params.pq_bits, faiss.METRIC_INNER_PRODUCT
            )
            # Codebook k-means costs points x 256 x dim x iterations: 64 points per code and 15 rounds
            # train in seconds instead of minutes, and exact re-ranking absorbs the coarser codes.
            pq_index.pq.cp.max_points_per_centroid = 64
            pq_index.pq.cp.niter = 15
            index = pq_index
        index.cp.seed = params.seed
        train_size = params.train_size or max(40 * params.nlist, 10_000)
        if kind == "ivf-pq":
            train_size = max(train_size, 40 * (1 << params.pq_bits))
        train_size = min(n, train_size)
        sample = np.sort(np.random.default_rng(params.seed).choice(n, size=train_size, replace=False))
        with tqdm(
            total=1,
            desc=f"training {kind} ({params.nlist} lists, {train_size} samples)",
            disable=not progress,
        ) as bar:
            index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
            bar.update(1)
        chunk = 65_536
        with tqdm(total=n, desc=f"adding to {kind}", unit="vec", disable=not progress) as bar:
            for lo in range(0, n, chunk):
                block = np.ascontiguousarray(vectors[lo : lo + chunk], dtype=np.float32)
                # Sequential ids == rows, added in order: every inverted list stays sorted by id.
                index.add(block)
                bar.update(block.shape[0])
        built = cls(kind=kind, index=index, vectors=vectors, params=params)
        if params.nprobe <= 0:
            params.nprobe = built.calibrate()
        return built

    def calibrate(self, sample: int = 256, top_k: int = 10) -> int:
        """The cheapest ``nprobe`` (and re-rank depth) whose recall@k reaches ``target_recall``.

        Recall is measured against the exact scan; the re-rank depth matters for quantized codes.
        Sets ``params.rerank`` and returns ``nprobe``.

        Recall depends on the data (real text embeddings need several times the probes of synthetic
        clusters), so it is measured, not guessed: random rows serve as queries, each row itself is
        left out of both rankings, and the whole search path (probing and re-ranking) is measured.
        Product-quantized codes hit a recall ceiling that more probes cannot lift, only a deeper
        exact re-rank can: for ``ivf-pq`` probes stop at 128 and the re-rank depth doubles instead.
        If nothing reaches the target, the most accurate setting tried is kept.
        """
        n = int(self.index.ntotal)
        rng = np.random.default_rng(self.params.seed + 1)
        rows = np.sort(rng.choice(n, size=min(sample, n), replace=False))
        queries = np.ascontiguousarray(np.asarray(self.vectors[rows], dtype=np.float32))
        truth = exact_search(self.vectors, queries, n, top_k + 1)
        max_probe = min(self.params.nlist, 128) if self.kind == "ivf-pq" else self.params.nlist
        ladder = [p for p in NPROBE_LADDER if p < max_probe] + [max_probe]
        depths = (
            [self.params.rerank * 2**i for i in range(3)] if self.kind == "ivf-pq" else [self.params.rerank]
        )
        best = (-1, ladder[-1], depths[-1])
        for rerank in depths:
            for nprobe in ladder:
                self.params.nprobe, self.params.rerank = nprobe, rerank
                found = self._search_ivf(queries, n, top_k + 1)
                hits = 0
                for row, got, want in zip(rows.tolist(), found, truth, strict=True):
                    want_rows = [r for r, _ in want if r != row][:top_k]
                    hits += len({r for r, _ in got if r != row} & set(want_rows))
                if hits >= self.params.target_recall * top_k * len(rows):
                    return nprobe
                best = max(best, (hits, nprobe, rerank))
        _, nprobe, self.params.rerank = best
        return nprobe

    def visibility_arrays(self) -> tuple[np.ndarray, np.ndarray, int]:
        """The inverted list of every row (int32) and per-list counts at prefix checkpoints.

        Checkpoints come every ``step`` rows: what :meth:`probe_plan` needs to count visible vectors per
        list. Persisted beside the index (``*.lists.npy``, memory-mapped and shared between processes)
        or, for an index saved without them, computed from the inverted lists on first use.
        """
        list_of_row = self._list_of_row
        if self._checkpoints is None or list_of_row is None:
            import faiss

            invlists = _inverted_lists(self.index)
            list_of_row = np.empty(self.index.ntotal, dtype=np.int32)
            for lst in range(self.params.nlist):
                size = invlists.list_size(lst)
                if size:
                    list_of_row[faiss.rev_swig_ptr(invlists.get_ids(lst), size)] = lst
            self._list_of_row = list_of_row
        if self._checkpoints is None or self._step == 0:
            step = max(1024, self.index.ntotal // 256)
            blocks = [np.zeros(self.params.nlist, dtype=np.int64)]
            for lo in range(0, self.index.ntotal, step):
                blocks.append(
                    blocks[-1] + np.bincount(list_of_row[lo : lo + step], minlength=self.params.nlist)
                )
            self._step, self._checkpoints = step, np.stack(blocks)
        return list_of_row, self._checkpoints, self._step

    def _visible_per_list(self, n_visible: int) -> np.ndarray:
        """How many of each inverted list's vectors are visible (rows < n_visible), from prefix checkpoints."""
        list_of_row, checkpoints, step = self.visibility_arrays()
        block = n_visible // step
        tail = list_of_row[block * step : n_visible]
        return checkpoints[block] + np.bincount(tail, minlength=self.params.nlist)

    def probe_plan(self, queries: np.ndarray, n_visible: int, fetch: int) -> tuple[np.ndarray, np.ndarray]:
        """Inverted lists each query probes, nearest first (-1: skipped), and their centroid scores.

        Lists are taken in centroid order, skipping those with no visible vector, until the visible
        vectors they hold reach ``nprobe * ntotal / nlist``: as many as ``nprobe`` lists hold at full
        visibility, so the cost of a search stays constant while the share of the visible set it
        scans grows as the filter tightens (queries whose topic is still in the future have their
        true neighbours scattered, and need that). News topics are local in time, so the nearest
        lists are often entirely in the future; counting *visible* vectors keeps recall at every cutoff.
        """
        visible = self._visible_per_list(n_visible)
        budget = max(self.params.nprobe * self.index.ntotal / self.params.nlist, float(fetch))
        # Rank only as many centroids as the budget needs (4x nprobe first, more under tight filters):
        # lists beyond the point where the budget is reached are never probed, so the plan is the
        # same as with every centroid ranked, for a fraction of the sorting.
        k = min(self.params.nlist, max(64, 4 * self.params.nprobe))
        while True:
            scores, lists = self.index.quantizer.search(queries, k)
            held = np.where(lists >= 0, visible[np.maximum(lists, 0)], 0)
            if k >= self.params.nlist or bool(np.all(held.sum(axis=1) >= budget)):
                break
            k = min(self.params.nlist, 4 * k)
        before = np.cumsum(held, axis=1) - held
        lists = np.where((held > 0) & (before < budget), lists, -1)
        width = int(np.max(np.nonzero((lists >= 0).any(axis=0))[0], initial=0)) + 1
        return np.ascontiguousarray(lists[:, :width]), np.ascontiguousarray(scores[:, :width])

    def search(self, queries: np.ndarray, n_visible: int, top_k: int) -> list[list[tuple[int, float]]]:
        """Top-k among the first ``n_visible`` rows: an exact scan for small prefixes, else IVF probing."""
        queries = _as_queries(queries, self.vectors.shape[1])
        n_visible = max(0, min(int(n_visible), int(self.index.ntotal)))
        if n_visible == 0 or top_k <= 0:
            return [[] for _ in range(queries.shape[0])]
        if n_visible <= self.params.exact_below:
            return exact_search(self.vectors, queries, n_visible, top_k)
        return self._search_ivf(queries, n_visible, top_k)

    def _search_ivf(self, queries: np.ndarray, n_visible: int, top_k: int) -> list[list[tuple[int, float]]]:
        import faiss

        fetch = max(top_k, self.params.rerank)
        lists, centroid_scores = self.probe_plan(queries, n_visible, fetch)
        selector = faiss.IDSelectorRange(0, n_visible, True)
        # faiss's class wrappers add keyword construction to every SearchParameters class; its stub omits it.
        search_params = faiss.SearchParametersIVF(sel=selector, nprobe=lists.shape[1])  # type: ignore[call-arg]
        # The Python wrapper of search_preassigned refuses params; the C++ method takes the selector.
        n_queries = queries.shape[0]
        scores = np.empty((n_queries, fetch), dtype=np.float32)
        rows = np.empty((n_queries, fetch), dtype=np.int64)
        lists = np.ascontiguousarray(lists, dtype=np.int64)
        centroid_scores = np.ascontiguousarray(centroid_scores, dtype=np.float32)
        self.index.search_preassigned_c(
            n_queries,
            faiss.swig_ptr(queries),
            fetch,
            faiss.swig_ptr(lists),
            faiss.swig_ptr(centroid_scores),
            faiss.swig_ptr(scores),
            faiss.swig_ptr(rows),
            False,
            search_params,
        )
        results = []
        for q in range(queries.shape[0]):
            found = rows[q][rows[q] >= 0]
            if found.size and found.max() >= n_visible:  # never trust an index with the time filter
                raise CorpusError(
                    f"{self.kind} index returned row {int(found.max())} outside the visible prefix {n_visible}"
                )
            if self.params.rerank and found.size:
                exact = self._vectors_of(found) @ queries[q]
                results.append(rank_candidates(found, exact, top_k))
            else:
                results.append(rank_candidates(rows[q], scores[q], top_k))
        return results

    def _vectors_of(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray(self.vectors[rows], dtype=np.float32)

    def memory_bytes(self) -> int:
        """Bytes the index itself holds (codes, ids, centroids): its serialized size."""
        import faiss

        return int(faiss.serialize_index(self.index).nbytes)

    def save(self, path: Path) -> list[Path]:
        """Write the faiss index and its visibility arrays (``<name>.lists.npz``); returns the files."""
        import faiss

        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        faiss.write_index(self.index, str(tmp))
        tmp.replace(path)
        list_of_row, checkpoints, step = self.visibility_arrays()
        lists = _lists_path(path)
        tmp_lists = lists.with_name("tmp-" + lists.name)
        np.save(tmp_lists, list_of_row)
        tmp_lists.replace(lists)
        marks = _checkpoints_path(path)
        tmp_marks = marks.with_name("tmp-" + marks.name)
        np.save(tmp_marks, np.concatenate([[step], checkpoints.reshape(-1)]).astype(np.int64))
        tmp_marks.replace(marks)
        return [path, lists, marks]

    @classmethod
    def read(cls, kind: str, path: Path, vectors: Vectors, params: IVFParams) -> IVFIndex:
        """Open a saved index memory-mapped read-only, checking it holds exactly ``vectors``' shape."""
        import faiss

        # IO_FLAG_MMAP: the inverted lists (codes and ids) stay in the file, mapped read-only.
        index = faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        if index.ntotal != vectors.shape[0] or index.d != vectors.shape[1]:
            raise CorpusError(
                f"{path}: index holds {index.ntotal} x {index.d} vectors, corpus has {vectors.shape}"
            )
        invlists = faiss.downcast_InvertedLists(_inverted_lists(index))
        if hasattr(invlists, "prefetch_nthread"):
            # faiss would start 32 threads per search to pre-read the probed lists from disk; the
            # lists are in the page cache (shared by every worker), so that only costs CPU.
            invlists.prefetch_nthread = 0
        loaded = cls(kind=kind, index=index, vectors=vectors, params=params)
        lists, marks = _lists_path(path), _checkpoints_path(path)
        if lists.exists() and marks.exists():
            list_of_row = np.load(lists, mmap_mode="r")
            flat = np.load(marks, mmap_mode="r")
            step = int(flat[0])
            n_marks = (index.ntotal + step - 1) // step + 1 if step > 0 else -1
            if list_of_row.shape != (index.ntotal,) or flat.shape != (1 + n_marks * params.nlist,):
                raise CorpusError(f"{lists}: visibility arrays do not match the index ({index.ntotal} rows)")
            loaded._list_of_row, loaded._step = list_of_row, step
            loaded._checkpoints = flat[1:].reshape(n_marks, params.nlist)
        return loaded


def _inverted_lists(index: faiss.Index) -> faiss.InvertedLists:
    """The inverted lists of a faiss IVF index (a trained or loaded IVF index always has them)."""
    import faiss

    invlists = faiss.extract_index_ivf(index).invlists
    if invlists is None:
        raise CorpusError("the faiss IVF index has no inverted lists")
    return invlists


def _lists_path(path: Path) -> Path:
    return path.with_name(path.stem + ".lists.npy")


def _checkpoints_path(path: Path) -> Path:
    return path.with_name(path.stem + ".checkpoints.npy")


def dense_index_name(kind: str) -> str:
    """The manifest name of a persisted dense index of this kind."""
    return f"dense-{kind}"


def build_dense_index(
    corpus: Corpus, kind: str = "auto", *, progress: bool = True, **options: Any
) -> DenseIndex:
    """Build the dense index of a corpus; IVF kinds are persisted under ``index/`` and recorded in the manifest."""
    if kind == "auto":
        kind = choose_dense_kind(len(corpus))
    if kind not in DENSE_KINDS:
        raise ConfigError(f"unknown dense index {kind!r}; known: {DENSE_KINDS} or 'auto'")
    if kind == "exact":
        if options:
            raise ConfigError(f"the exact index takes no options, got {sorted(options)}")
        return ExactIndex(corpus.embeddings)
    params = IVFParams.default(kind, len(corpus), corpus.dim, **options)
    built = IVFIndex.train(kind, corpus.embeddings, params, progress=progress)
    name = dense_index_name(kind)
    files = built.save(corpus.path / f"index/{name}.faiss")
    corpus.register_index(name, kind, [str(f.relative_to(corpus.path)) for f in files], vars(params).copy())
    return built


def load_dense_index(
    corpus: Corpus, kind: str = "auto", *, verify: bool = True, **overrides: Any
) -> DenseIndex:
    """The dense index of a corpus: a persisted IVF index (checked against the manifest) or the exact scan.

    ``auto`` uses the persisted dense index if there is one, else the exact scan. Search-time options
    (``nprobe``, ``exact_below``, ``rerank``) may be overridden; build-time ones may not.
    """
    if kind == "auto":
        persisted = [entry["kind"] for name, entry in corpus.indexes().items() if name.startswith("dense-")]
        kind = next((k for k in ("ivf-flat", "ivf-sq8", "ivf-pq") if k in persisted), "exact")
    if kind not in DENSE_KINDS:
        raise ConfigError(f"unknown dense index {kind!r}; known: {DENSE_KINDS} or 'auto'")
    if kind == "exact":
        return ExactIndex(corpus.embeddings)
    name = dense_index_name(kind)
    try:
        entry = corpus.index_entry(name, verify=verify)
    except CorpusError as err:
        raise CorpusError(
            f"{err}; build it with forecast_dojo.corpus.retrieval.build_indexes(corpus, dense={kind!r})"
        ) from err
    if entry.get("kind") != kind:
        raise CorpusError(f"{corpus.path}: index {name!r} is recorded as {entry.get('kind')!r}, not {kind!r}")
    search_time = {"nprobe", "exact_below", "rerank"}
    if set(overrides) - search_time:
        raise ConfigError(f"only {sorted(search_time)} can change after the build, got {sorted(overrides)}")
    params = IVFParams(**{**entry["params"], **overrides})
    # Inverted lists are memory-mapped (shared page cache, nothing read until probed); the exact
    # fallback and the re-ranking read float vectors straight from the memory-mapped shards.
    faiss_file = next(rel for rel in entry["files"] if rel.endswith(".faiss"))
    return IVFIndex.read(kind, corpus.path / faiss_file, corpus.embeddings, params)
