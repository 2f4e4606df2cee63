"""The embedded default: a deterministic fictional world with a known Bayes-optimal forecast.

``generate_world(seed)`` builds it in memory, ``ensure_synthetic_world(seed)`` builds, embeds and
caches it on disk once, and ``oracle_forecast`` / ``oracle_table`` give the exact posterior that an
agent's score is compared with (evaluation only, never shown to the agent).
"""

from forecast_dojo.synthetic.cache import SyntheticPaths, default_cache_dir, ensure_synthetic_world
from forecast_dojo.synthetic.model import (
    TIER_LIKELIHOOD_RATIO,
    TIERS,
    TRAIN_EVENT_PREFIX,
    Evidence,
    SyntheticWorld,
    WorldConfigError,
    signal_accuracy,
    signal_likelihood,
    train_event_id,
)
from forecast_dojo.synthetic.oracle import (
    OracleError,
    brier_loss,
    load_oracle,
    log_loss,
    oracle_forecast,
    oracle_table,
    posterior_from_evidence,
    posteriors_at,
    save_oracle,
)
from forecast_dojo.synthetic.world import GENERATOR_VERSION, generate_world

__all__ = [
    "GENERATOR_VERSION",
    "TIERS",
    "TIER_LIKELIHOOD_RATIO",
    "TRAIN_EVENT_PREFIX",
    "Evidence",
    "OracleError",
    "SyntheticPaths",
    "SyntheticWorld",
    "WorldConfigError",
    "brier_loss",
    "default_cache_dir",
    "ensure_synthetic_world",
    "generate_world",
    "load_oracle",
    "log_loss",
    "oracle_forecast",
    "oracle_table",
    "posterior_from_evidence",
    "posteriors_at",
    "save_oracle",
    "signal_accuracy",
    "signal_likelihood",
    "train_event_id",
]
