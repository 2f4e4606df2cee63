"""Real events: importers (ForecastBench, Polymarket exports), selection filters, the forecast-date
schedule, the temporal split, the leakage screen and the ``forecast-dojo events build`` pipeline.

Data flows one way: importers -> selection -> schedule -> leakage screen -> split -> events files.
Submodules are imported explicitly (``from forecast_dojo.events.build import build_events``) so that
importing this package stays cheap for the CLI.
"""
