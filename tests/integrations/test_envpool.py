"""The pool of pre-built envs a server's new sessions take from: refill when quiet, bounded, closed with the server."""

from __future__ import annotations

import threading
import time

import pytest

from forecast_dojo.errors import ConfigError
from forecast_dojo.integrations.envpool import EnvPool


class FakeEnv:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Factory:
    """Counts builds and the threads they ran in; ``fail`` builds raise."""

    def __init__(self, fail: int = 0) -> None:
        self.calls = 0
        self.threads: list[str] = []
        self.fail = fail
        self.lock = threading.Lock()

    def __call__(self) -> FakeEnv:
        with self.lock:
            self.calls += 1
            self.threads.append(threading.current_thread().name)
            if self.calls <= self.fail:
                raise RuntimeError("no corpus today")
            return FakeEnv(self.calls)


def wait_for(condition, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_take_hands_out_prebuilt_envs_and_never_waits():
    factory = Factory()
    probe = FakeEnv(0)
    pool = EnvPool(factory, 2, initial=[probe])  # not started: nothing is built
    assert pool.take() is probe and pool.take() is None
    assert factory.calls == 0
    assert pool.stats() == {"size": 2, "ready": 0, "taken": 1, "missed": 1, "built": 0}


def test_the_pool_refills_in_its_own_thread_up_to_its_size():
    factory = Factory()
    pool = EnvPool(factory, 3, quiet_s=0.0).start()
    try:
        wait_for(lambda: pool.ready == 3)
        first = [pool.take(), pool.take()]
        assert all(isinstance(env, FakeEnv) for env in first)
        wait_for(lambda: pool.ready == 3)
        time.sleep(0.2)
        assert pool.ready == 3 and factory.calls == 5  # bounded: never more than its size
        assert set(factory.threads) == {"forecast-dojo-env-pool"}
        assert pool.stats()["built"] == 5 and pool.stats()["taken"] == 2
    finally:
        pool.close()


def test_the_pool_builds_only_while_the_server_is_quiet():
    factory = Factory()
    pool = EnvPool(factory, 1, quiet_s=0.3)
    pool.touch()
    pool.start()
    try:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # env calls every 50 ms: never 0.3 s of quiet
            pool.touch()
            time.sleep(0.05)
        assert factory.calls == 0
        wait_for(lambda: pool.ready == 1)  # quiet: it fills
    finally:
        pool.close()


def test_initial_envs_beyond_the_size_are_closed_and_close_closes_the_held_ones():
    extra, kept = FakeEnv(1), FakeEnv(2)
    pool = EnvPool(Factory(), 1, initial=[kept, extra])
    assert extra.closed and not kept.closed and pool.ready == 1
    pool.start()
    pool.close()
    assert kept.closed and pool.ready == 0 and pool.take() is None
    assert EnvPool(Factory(), 0, initial=[probe := FakeEnv(3)]).take() is None and probe.closed


def test_a_failing_build_is_retried_without_killing_the_refill_thread(caplog, monkeypatch):
    import forecast_dojo.integrations.envpool as envpool

    monkeypatch.setattr(envpool, "RETRY_S", (0.05, 0.1))
    factory = Factory(fail=2)
    pool = EnvPool(factory, 1, quiet_s=0.0).start()
    try:
        wait_for(lambda: pool.ready == 1)
        assert factory.calls == 3
        assert "could not build an env" in caplog.text and "no corpus today" in caplog.text
    finally:
        pool.close()


def test_a_bad_size_is_refused():
    for size in (-1, 1.5, True):
        with pytest.raises(ConfigError, match="--warm"):
            EnvPool(Factory(), size)  # type: ignore[arg-type]
