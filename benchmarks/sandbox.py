"""Cost of one trivial ``python`` tool call in the sandbox, against bare interpreter start-up.

Baselines, measured in the same run and interleaved with the sandboxed calls (so machine load hits
all rows alike):

* ``python -c pass``: a bare subprocess of the same interpreter (``-s -S -B``, like the sandbox);
* ``bwrap ... true``: bubblewrap's namespaces alone, running ``/bin/true`` (no interpreter).

Rows: ``run_python("pass")`` (the whole sandbox: memory cgroup where available, seccomp, rlimits,
libfaketime, package binds, output capture) and ``sandbox_python_runner`` (the env's tool, which adds
the output frame). Overhead = sandboxed median minus the ``python -c pass`` median. Target: a trivial
call under 50 ms (issue 9).

    python benchmarks/sandbox.py                 # 30 rounds
    python benchmarks/sandbox.py --repeats 100 --json
    python benchmarks/sandbox.py --compare /path/to/main/forecast_dojo/sandbox.py   # previous version as a row
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime

from forecast_dojo import sandbox

TARGET_MS = 50.0


def timed_ms(function: Callable[[], object]) -> float:
    """Wall time of one call, in milliseconds."""
    start = time.perf_counter()
    function()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    """Measure every row ``--repeats`` times, interleaved, and print a table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--compare",
        metavar="SANDBOX_PY",
        help="another version of forecast_dojo/sandbox.py (e.g. from a checkout of main) to time as a row",
    )
    args = parser.parse_args()

    ok, reason = sandbox.sandbox_available()
    if not ok:
        sys.exit(f"sandbox unavailable: {reason}")
    bwrap = shutil.which("bwrap")
    assert bwrap is not None
    interpreter = sandbox._availability().layout.interpreter  # type: ignore[union-attr]
    now = datetime(2024, 3, 5, tzinfo=UTC)

    def bare_python() -> None:
        subprocess.run([interpreter, "-s", "-S", "-B", "-c", "pass"], check=True)

    def bare_bwrap() -> None:
        subprocess.run(
            [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--", "/bin/true"],
            check=True,
        )  # fmt: skip

    def sandboxed() -> None:
        result = sandbox.run_python("pass", now=now)
        assert result.ok, result

    def tool() -> None:
        content, error = sandbox.sandbox_python_runner("pass", now)
        assert error is None, error

    rows: dict[str, Callable[[], None]] = {
        "python -c pass (baseline)": bare_python,
        "bwrap --unshare-all true": bare_bwrap,
        "run_python('pass')": sandboxed,
        "sandbox_python_runner('pass')": tool,
    }
    if args.compare:
        spec = importlib.util.spec_from_file_location("compared_sandbox", args.compare)
        assert spec is not None and spec.loader is not None
        other = importlib.util.module_from_spec(spec)
        sys.modules["compared_sandbox"] = other  # dataclasses look their module up here
        spec.loader.exec_module(other)
        assert other.sandbox_available()[0], other.sandbox_available()

        def compared() -> None:
            assert other.run_python("pass").ok

        rows["--compare run_python('pass')"] = compared
    for function in rows.values():  # warm-up: page cache, the self-test, the cgroup hierarchy
        function()
    samples: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(args.repeats):
        for name, function in rows.items():
            samples[name].append(timed_ms(function))

    baseline = statistics.median(samples["python -c pass (baseline)"])
    figures = {
        name: {
            "median_ms": round(statistics.median(values), 1),
            "p90_ms": round(sorted(values)[int(0.9 * (len(values) - 1))], 1),
            "min_ms": round(min(values), 1),
            "overhead_vs_baseline_ms": round(statistics.median(values) - baseline, 1),
        }
        for name, values in samples.items()
    }
    sandboxed_median = figures["run_python('pass')"]["median_ms"]
    summary = {
        "repeats": args.repeats,
        "sandbox": reason,
        "target_ms": TARGET_MS,
        "meets_target": sandboxed_median < TARGET_MS,
        "rows": figures,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"sandbox: {reason}")
    print(f"{'call':34} {'median ms':>10} {'p90 ms':>8} {'min ms':>8} {'vs baseline':>12}")
    for name, row in figures.items():
        print(
            f"{name:34} {row['median_ms']:>10.1f} {row['p90_ms']:>8.1f} {row['min_ms']:>8.1f}"
            f" {row['overhead_vs_baseline_ms']:>+12.1f}"
        )
    verdict = "meets" if summary["meets_target"] else "MISSES"
    print(
        f"trivial sandboxed call: {sandboxed_median:.1f} ms median; {verdict} the {TARGET_MS:.0f} ms target"
    )


if __name__ == "__main__":
    main()
