"""The env for other RL frameworks: an OpenEnv server and client (:mod:`.openenv`), a verifiers environment (:mod:`.verifiers`).

Each module imports its framework (``openenv-core``, ``verifiers``; the ``serve`` and ``verifiers``
extras) when it is imported, so ``import forecast_dojo`` never needs them.
"""
