"""World mode (FutureSim's setting): one episode is a calendar of days over many open questions.

The agent lives through the days, researches with the fixed-date env's tools gated at each day,
revises its standing forecasts with ``submit_forecasts`` and calls ``next_day``; every open question
is scored every day (:func:`forecast_dojo.scoring.free_form_score`). ``make_world("Synthetic-v0")``
or ``gymnasium.make("forecast_dojo/SyntheticSim-v0")`` builds one.
"""

from forecast_dojo.world.calendar import Calendar, day_instant
from forecast_dojo.world.env import REWARD_MODES, WorldBudgets, WorldEnv
from forecast_dojo.world.oracle import free_form_variant, oracle_scores, regret
from forecast_dojo.world.registration import WORLD_IDS, make_world, register_world_envs
from forecast_dojo.world.tools import read_free_form, world_tool_schemas

__all__ = [
    "REWARD_MODES",
    "WORLD_IDS",
    "Calendar",
    "WorldBudgets",
    "WorldEnv",
    "day_instant",
    "free_form_variant",
    "make_world",
    "oracle_scores",
    "read_free_form",
    "regret",
    "register_world_envs",
    "world_tool_schemas",
]
