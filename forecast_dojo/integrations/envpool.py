"""A small pool of pre-built envs for a server's new sessions (``forecast-dojo serve --warm N``).

A session that opens takes a built env from the pool (:meth:`EnvPool.take`, never waits), so its first
reset does not build one; a background thread builds replacements one at a time, and only once the
server has been quiet (no env call started or finished) for ``quiet_s`` seconds, so a refill does not
compete with live sessions for the CPU and the GIL: a trainer opens its rollouts' sessions in a burst,
and the pool refills in the pause that follows. An empty pool is never waited for: the session builds
its own env, as without a pool. Envs are never returned to the pool: every session gets a fresh one.
Memory: at most ``size`` envs that no session holds (an env shares the corpus and its index with every
other; on the synthetic world each holds about 20 KB of its own).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from forecast_dojo.errors import ConfigError

log = logging.getLogger(__name__)

QUIET_S = 0.1  # a refill waits for this long without env calls
RETRY_S = (1.0, 30.0)  # after a failed build: first and longest wait before the next try


class EnvPool:
    """Up to ``size`` envs built ahead of the sessions that will take them.

    Args:
        make_env: Builds one env.
        size: How many envs to hold (0: none; :meth:`take` then always returns None).
        quiet_s: The refill thread builds only after this many seconds without :meth:`touch`.
        initial: Envs already built (the server's probe) to hold first; beyond ``size`` they are closed.
    """

    def __init__(
        self,
        make_env: Callable[[], Any],
        size: int,
        *,
        quiet_s: float = QUIET_S,
        initial: list[Any] | None = None,
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigError(f"the pool's size (--warm) must be a non-negative integer, not {size!r}")
        self.make_env = make_env
        self.size = size
        self.quiet_s = quiet_s
        self.taken = 0  # sessions that got a pre-built env
        self.missed = 0  # sessions that found the pool empty
        self.built = 0  # envs the refill thread built
        self._ready: deque[Any] = deque()
        self._condition = threading.Condition()
        self._last_activity = time.monotonic()
        self._closed = False
        self._thread: threading.Thread | None = None
        for env in initial or ():
            if len(self._ready) < size:
                self._ready.append(env)
            else:
                env.close()

    @property
    def ready(self) -> int:
        """Envs held now."""
        with self._condition:
            return len(self._ready)

    def start(self) -> EnvPool:
        """Start the refill thread (a daemon; :meth:`close` stops it)."""
        with self._condition:
            if self._thread is None and self.size > 0 and not self._closed:
                self._thread = threading.Thread(
                    target=self._refill, name="forecast-dojo-env-pool", daemon=True
                )
                self._thread.start()
        return self

    def take(self) -> Any | None:
        """A pre-built env, or None when the pool is empty (the caller builds one). Never waits."""
        with self._condition:
            if self._closed or not self._ready:
                if self.size:
                    self.missed += 1
                return None
            env = self._ready.popleft()
            self.taken += 1
            self._condition.notify_all()
            return env

    def touch(self) -> None:
        """Note activity (an env call started or ended): the refill waits until ``quiet_s`` after the last."""
        self._last_activity = time.monotonic()

    def stats(self) -> dict[str, int]:
        """``size``, ``ready``, ``taken``, ``missed`` and ``built`` (for the server's facts)."""
        with self._condition:
            return {
                "size": self.size,
                "ready": len(self._ready),
                "taken": self.taken,
                "missed": self.missed,
                "built": self.built,
            }

    def close(self, timeout_s: float = 10.0) -> None:
        """Stop refilling (a build under way finishes first) and close the envs held."""
        with self._condition:
            self._closed = True
            self._condition.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=timeout_s)
        with self._condition:
            envs, self._ready = list(self._ready), deque()
        for env in envs:
            try:
                env.close()
            except Exception as err:  # best effort: the server is shutting down
                log.debug("closing a pooled env: %r", err)

    def _wait_for_a_gap(self) -> bool:
        """Wait (holding the condition) until the pool lacks an env and the server is quiet; False once closed."""
        while not self._closed:
            if len(self._ready) >= self.size:
                self._condition.wait()
                continue
            quiet_for = time.monotonic() - self._last_activity
            if quiet_for >= self.quiet_s:
                return True
            self._condition.wait(timeout=self.quiet_s - quiet_for)
        return False

    def _refill(self) -> None:
        retry = RETRY_S[0]
        while True:
            with self._condition:
                if not self._wait_for_a_gap():
                    return
            try:
                env = self.make_env()
            except Exception as err:  # a session that finds the pool empty builds (and reports) itself
                log.warning("the env pool could not build an env (retrying in %.0f s): %s", retry, err)
                with self._condition:
                    self._condition.wait_for(lambda: self._closed, timeout=retry)
                retry = min(retry * 2, RETRY_S[1])
                continue
            retry = RETRY_S[0]
            with self._condition:
                if self._closed or len(self._ready) >= self.size:
                    surplus = env
                else:
                    self._ready.append(env)
                    self.built += 1
                    surplus = None
            if surplus is not None:
                surplus.close()
