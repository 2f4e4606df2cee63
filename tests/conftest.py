"""Shared fixtures: a tiny hand-made world (instant to build) and the path to the real shared data."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from forecast_dojo.corpus import Corpus, HashingEmbedder, build_corpus
from forecast_dojo.corpus.retrieval import ExactDenseRetriever
from forecast_dojo.env import ForecastDojoEnv
from forecast_dojo.paths import default_data_root
from forecast_dojo.schema import Document, Event, MarketPoint

REPO_ROOT = Path(__file__).resolve().parent.parent
T0 = datetime(2030, 1, 1, tzinfo=UTC)

# Tests that take more than ~5 s (measured with --durations on 2 cores), marked ``slow`` here in one
# place so that ``pytest -m "not slow"`` is a fast loop; CI runs everything. Besides the tests marked
# in their own files: everything that needs these fixtures (a tiny LLM + TRL SFT, a Ray cluster, the
# distilled static embedder, a 300-event synthetic world, the oracle calibration sample) ...
SLOW_FIXTURES = frozenset({"tiny_model", "local_ray", "static_embedder", "big_world", "calibration_data"})
# ... every test of these modules (the LLM agent tests load SmolLM2's tokenizer: ~30 s cold) ...
SLOW_MODULES = ("tests/agents/test_llm.py", "tests/evaluation/test_gate.py")
# ... and these single tests (IVF-PQ training on the recall corpus).
SLOW_TESTS = frozenset(
    {
        "tests/corpus/test_index.py::test_ivf_recall_holds_at_every_visible_fraction[ivf-pq]",
        "tests/corpus/test_index.py::test_persisted_index_reloads_and_matches[ivf-pq]",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests listed above."""
    for item in items:
        if (
            SLOW_FIXTURES & set(getattr(item, "fixturenames", ()))
            or item.nodeid in SLOW_TESTS
            or item.nodeid.startswith(SLOW_MODULES)
        ):
            item.add_marker(pytest.mark.slow)


def shared_data_root() -> Path:
    """The real shared data folder (``$FORECAST_DOJO_DATA`` or ``../shared/data``)."""
    return default_data_root()


@pytest.fixture(scope="session")
def data_root() -> Path:
    root = shared_data_root()
    if not root.is_dir():
        pytest.skip(f"real data not found at {root} (set FORECAST_DOJO_DATA)")
    return root


def tiny_documents() -> list[Document]:
    """Daily documents over 60 days: evidence about two fictional events, noise, and post-resolution leaks."""
    docs = []
    for day in range(60):
        at = T0 + timedelta(days=day, hours=12)
        docs.append(
            Document(
                f"harbor-{day:02d}",
                "Harbor Act",
                f"Day {day}: lawmakers in Valdoria debated the Harbor Act; support appears to be growing.",
                at,
                at,
                source="Valdoria Post",
            )
        )
        docs.append(
            Document(
                f"noise-{day:02d}",
                "Weather",
                f"Day {day}: mild weather in Ostrava with light rain and a football match.",
                at,
                at,
                source="Ostrava Times",
            )
        )
        if day % 3 == 0:
            docs.append(
                Document(
                    f"vote-{day:02d}",
                    "Mayoral race",
                    f"Day {day}: poll shows Mira Tolvanen ahead of Jonas Berg and Ada Quist in Ostrava.",
                    at,
                    at,
                    source="Ostrava Times",
                )
            )
    # Resolution announcements: available after the last cutoff, must never be visible.
    docs.append(
        Document(
            "leak-harbor",
            "Harbor Act passes",
            "FINAL: Valdoria parliament PASSED the Harbor Act; the outcome is Yes.",
            T0 + timedelta(days=45),
            T0 + timedelta(days=45),
            source="Valdoria Post",
        )
    )
    docs.append(
        Document(
            "leak-vote",
            "Tolvanen wins",
            "FINAL: Mira Tolvanen wins the Ostrava mayoral election.",
            T0 + timedelta(days=50),
            T0 + timedelta(days=50),
            source="Ostrava Times",
        )
    )
    # Same-instant boundary document: available exactly at the first harbor cutoff, so invisible at it.
    docs.append(
        Document(
            "boundary-harbor",
            "Harbor Act boundary",
            "Boundary note on the Harbor Act vote schedule.",
            T0 + timedelta(days=10),
            T0 + timedelta(days=10),
            source="Valdoria Post",
        )
    )
    return docs


def tiny_events() -> list[Event]:
    day = lambda n: T0 + timedelta(days=n)  # noqa: E731
    return [
        Event(
            id="harbor",
            question="Will the Valdorian parliament pass the Harbor Act by 2030-02-15?",
            outcomes=("Yes", "No"),
            outcome="Yes",
            open_at=day(1),
            close_at=day(44),
            resolved_at=day(45),
            cutoffs=(day(10), day(20), day(30)),
            background="The Harbor Act would reform port fees in Valdoria.",
            resolution_criteria="Resolves Yes if the Act passes its final vote by 2030-02-15.",
            market=tuple(MarketPoint(day(n), (0.5 + n / 100, 0.5 - n / 100)) for n in range(1, 44, 3)),
        ),
        Event(
            id="mayor",
            question="Who will win the 2030 Ostrava mayoral election?",
            outcomes=("Mira Tolvanen", "Jonas Berg", "Ada Quist"),
            outcome="Mira Tolvanen",
            open_at=day(2),
            close_at=day(49),
            resolved_at=day(50),
            cutoffs=(day(15), day(25), day(35), day(45)),
            background="Three candidates run for mayor of Ostrava.",
        ),
    ]


@pytest.fixture(scope="session")
def tiny_corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "corpus"
    build_corpus(tiny_documents(), out, HashingEmbedder(), progress=False)
    return out


@pytest.fixture(scope="session")
def tiny_corpus(tiny_corpus_dir: Path) -> Corpus:
    return Corpus.load(tiny_corpus_dir)


@pytest.fixture
def make_tiny_env(tiny_corpus: Corpus):
    """Factory for envs over the tiny world; python is disabled unless a runner is passed."""

    def make(**kwargs) -> ForecastDojoEnv:
        kwargs.setdefault("python_runner", None)
        return ForecastDojoEnv(
            tiny_events(), tiny_corpus, ExactDenseRetriever(tiny_corpus, HashingEmbedder()), **kwargs
        )

    return make


@pytest.fixture(scope="session")
def synthetic_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding the default synthetic world embedded with the instant hashing embedder."""
    from forecast_dojo.synthetic import ensure_synthetic_world

    cache = tmp_path_factory.mktemp("synthetic-cache")
    ensure_synthetic_world(0, embedder="hashing", cache_dir=cache, progress=False)
    return cache


@pytest.fixture
def make_synthetic_env(synthetic_cache: Path, monkeypatch: pytest.MonkeyPatch):
    """Factory for envs over the default synthetic world (hashing embedder, python disabled, all 40 events)."""
    from forecast_dojo.registration import make as make_env

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))

    def make(**kwargs) -> ForecastDojoEnv:
        kwargs.setdefault("python_runner", None)
        kwargs.setdefault("split", "all")  # tests choose their events; the library's default is "train"
        return make_env("Synthetic-v0", embedder="hashing", **kwargs)

    return make


def require_smollm2():
    """``forecast_dojo.agents.llm``, or skip the calling test module when SmolLM2's package or gguf is missing."""
    pytest.importorskip("gguf")
    llm = pytest.importorskip("forecast_dojo.agents.llm")
    try:
        llm.smollm2_path()
    except FileNotFoundError as err:  # pragma: no cover - depends on the optional package
        pytest.skip(str(err), allow_module_level=True)
    return llm


def tiny_llama(vocab_size: int, **config_overrides):
    """A 2-layer, 32-wide random Llama (about 3 M parameters, almost all in the embeddings)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    for key, value in config_overrides.items():
        setattr(config, key, value)
    return LlamaForCausalLM(config)
