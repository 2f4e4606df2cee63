"""Real events: importers, selection, schedule, split, leakage screen and the build pipeline.

Importers read ForecastBench and Polymarket exports; selection filters drop unusable events; the
forecast-date schedule picks the cutoffs; the temporal split and the leakage screen follow, and
``forecast-dojo events build`` runs them all.

Data flows one way: importers -> selection -> schedule -> leakage screen -> split -> events files.
Submodules are imported explicitly (``from forecast_dojo.events.build import build_events``) so that
importing this package stays cheap for the CLI.
"""
