"""The Ray Data build on Ray's local mode writes the same corpus as the single-process build."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from forecast_dojo.corpus.embedders import HashingEmbedder  # noqa: E402
from forecast_dojo.corpus.pipeline import build_from_source, default_recipe  # noqa: E402
from forecast_dojo.corpus.ray_pipeline import PrecomputedEmbedder, build_with_ray  # noqa: E402
from forecast_dojo.corpus.store import Corpus  # noqa: E402

ARTICLE = (
    "The regional parliament approved the new water management law on Tuesday after a long debate, and the "
    "ministry said that the detailed rules would be published in the autumn with the help of farmers and towns."
)


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    yield ray
    ray.shutdown()


def _write_inputs(folder: Path) -> Path:
    """Two JSONL files exercising every stage: a market page, a duplicate, a blank, a short and a French text."""
    folder.mkdir()
    first = [
        {
            "id": "a",
            "text": ARTICLE,
            "published_at": "2024-03-01T08:00:00Z",
            "url": "https://a.com/x",
            "title": "Law",
        },
        {"id": "b", "text": ARTICLE, "published_at": "2024-03-02T08:00:00Z", "url": "https://b.com/y"},
        {
            "id": "m",
            "text": ARTICLE + " Odds.",
            "published_at": "2024-03-01",
            "url": "https://polymarket.com/e",
        },
        {"id": "blank", "text": "\u200b", "published_at": "2024-03-01"},
    ]
    second = [
        {"id": "s", "text": "Too short.", "published_at": "2024-03-03"},
        {
            "id": "fr",
            "text": "Le parlement régional a approuvé mardi la nouvelle loi sur la gestion de l'eau. " * 4,
            "published_at": "2024-03-03",
        },
        {
            "id": "c",
            "text": "  The  football club "
            + ARTICLE.replace("water", "stadium").replace("Tuesday", "Friday")
            + " More.",
            "published_at": "2024-03-03",
        },
        {"id": "old", "text": ARTICLE.replace("water", "forest") + " Old.", "published_at": "2023-12-31"},
    ]
    (folder / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    (folder / "2.jsonl").write_text("".join(json.dumps(r) + "\n" for r in second))
    return folder


@pytest.mark.slow
def test_ray_build_equals_single_process_build(local_ray, tmp_path: Path) -> None:
    inputs = _write_inputs(tmp_path / "in")
    recipe = default_recipe("generic")
    single = build_from_source(
        "generic",
        inputs,
        tmp_path / "single",
        recipe=recipe,
        embedder=HashingEmbedder(),
        start=date(2024, 1, 1),
        progress=False,
    )
    parallel = build_with_ray(
        "generic",
        inputs,
        tmp_path / "ray",
        recipe=recipe,
        embedder_name="hashing",
        start=date(2024, 1, 1),
        progress=False,
    )
    a, b = Corpus.load(tmp_path / "single"), Corpus.load(tmp_path / "ray")
    assert a.table.column("id").to_pylist() == ["a", "c"]
    assert a.table.equals(b.table)  # same documents, same order, same text after normalization
    assert a.content_hash == b.content_hash
    assert np.array_equal(a.embeddings, b.embeddings)
    assert a.manifest["embedder"] == b.manifest["embedder"]

    def counts(report: dict) -> list[tuple]:
        return [(s["stage"], s["in"], s["removed"], s["reasons"], s["modified"]) for s in report["cleaning"]]

    assert counts(single.report) == counts(parallel.report)
    assert single.report["warnings"] == parallel.report["warnings"] == []
    assert [s["removed"] for s in single.report["cleaning"]] == [1, 1, 1, 1, 0, 0, 1]
    for key in ("files_seen", "files_imported", "records_seen", "documents", "notes", "date_sources"):
        assert single.report["import"][key] == parallel.report["import"][key], key
    assert (
        parallel.report["runner"] == "ray"
        and json.loads((tmp_path / "ray" / "build_report.json").read_text())["runner"] == "ray"
    )


def test_precomputed_embedder_refuses_unknown_texts() -> None:
    embedder = PrecomputedEmbedder("hashing-bow-4", 4, ["x"], np.ones((1, 4), dtype=np.float32))
    assert embedder.encode(["x", "x"]).shape == (2, 4)
    with pytest.raises(KeyError, match="not embedded"):
        embedder.encode(["y"])
