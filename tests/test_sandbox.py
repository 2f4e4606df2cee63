"""Adversarial tests for forecast_dojo.sandbox: the agent's code must not see or touch the host.

These tests need a working bubblewrap (`apt-get install -y bubblewrap`). They fail, not skip, when it is
missing: a CI run that silently skipped them would prove nothing about isolation.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from forecast_dojo import sandbox
from forecast_dojo.sandbox import SandboxLimits, run_python, sandbox_available

REPO_ROOT = Path(__file__).resolve().parents[1]
FAST = SandboxLimits(timeout_s=5.0, memory_mb=256)


@pytest.fixture(scope="module", autouse=True)
def _require_sandbox() -> Iterator[None]:
    sandbox.reset_sandbox_cache()
    ok, reason = sandbox_available()
    assert ok, f"bubblewrap sandbox unavailable ({reason}); install it with `apt-get install -y bubblewrap`"
    yield
    sandbox.reset_sandbox_cache()


def tmp_bind_roots() -> list[str]:
    """First components of binds below /tmp (an interpreter installed under /tmp shows in /tmp)."""
    layout = sandbox._availability().layout
    assert layout is not None
    return sorted({Path(dest).parts[2] for _, dest in layout.ro_binds if Path(dest).parts[1:2] == ("tmp",)})


def run(code: str, limits: SandboxLimits = FAST) -> sandbox.SandboxResult:
    return run_python(textwrap.dedent(code), limits)


def run_json(code: str) -> dict[str, object]:
    result = run(code)
    assert result.ok, result
    return json.loads(result.stdout)


# --- ordinary use ------------------------------------------------------------------------------------------


def test_stdout_is_returned_and_deterministic() -> None:
    code = "import random\nprint(6 * 7)\nprint(hash('forecast'))\nprint(sorted({'b', 'a', 'c'}))\n"
    first = run(code)
    second = run(code)
    assert first.ok and first.exit_code == 0 and first.error is None
    assert first.stdout.splitlines()[0] == "42"
    assert first == second  # same code, same result (PYTHONHASHSEED=0, no timestamps in messages)


def test_code_runs_as_a_real_main_module() -> None:
    result = run(
        """
        import __main__, dataclasses, pickle
        @dataclasses.dataclass
        class Point:
            x: int
        LIMIT = 5
        print(__name__, __main__.LIMIT, pickle.loads(pickle.dumps(Point(3))))
        """
    )
    assert result.ok, result
    assert result.stdout == "__main__ 5 Point(x=3)\n"


def test_exception_gives_traceback_and_not_ok() -> None:
    result = run("x = 1\nraise ValueError('bad forecast')\n")
    assert not result.ok and result.exit_code == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert 'File "<agent>", line 2' in result.stderr
    assert "raise ValueError('bad forecast')" in result.stderr  # source line shown to the agent
    assert "ValueError: bad forecast" in result.stderr
    assert "bootstrap" not in result.stderr


def test_syntax_error_and_exit_code() -> None:
    syntax = run("def f(:\n")
    assert not syntax.ok and "SyntaxError" in syntax.stderr
    exited = run("import sys\nprint('partial')\nsys.exit(3)\n")
    assert exited.exit_code == 3 and not exited.ok and exited.stdout == "partial\n"


def test_scientific_imports_work() -> None:
    result = run(
        """
        import datetime, json, math, statistics
        import numpy as np
        a = np.array([0.2, 0.4, 0.6])
        print(json.dumps([float(a.mean()), statistics.median([1, 3, 2]), math.log(1.0),
                          datetime.date(2024, 1, 2).isoformat()]))
        """
    )
    assert result.ok, result
    assert json.loads(result.stdout) == [pytest.approx(0.4), 2, 0.0, "2024-01-02"]


# --- host files ------------------------------------------------------------------------------------------


def test_host_files_are_invisible(tmp_path: Path) -> None:
    secret = tmp_path / "outcomes.jsonl"
    secret.write_text('{"resolved": "YES"}\n')
    probes = ["/etc/passwd", "/etc/shadow", "/etc/hostname", "/work", str(REPO_ROOT),
              str(REPO_ROOT / "pyproject.toml"), str(secret), "/proc/self/environ",
              "/proc/sys/kernel/pid_max", "/sys/kernel", "/home", "/var", "/run", "/root/.bash_history"]  # fmt: skip
    seen = run_json(
        f"""
        import json, os
        probes = {probes!r}
        out = {{"exists": {{p: os.path.exists(p) for p in probes}}, "listings": {{}}}}
        for d in ["/", "/root", "/etc", "/tmp"]:
            out["listings"][d] = sorted(os.listdir(d)) if os.path.isdir(d) else None
        try:
            open("/etc/passwd").read()
            out["passwd"] = "readable"
        except OSError as exc:
            out["passwd"] = type(exc).__name__
        print(json.dumps(out))
        """
    )
    assert seen["exists"] == {p: False for p in probes}
    assert seen["passwd"] == "FileNotFoundError"
    listings = seen["listings"]
    assert isinstance(listings, dict)
    assert listings["/etc"] is None
    assert listings["/tmp"] == tmp_bind_roots()  # a fresh tmpfs, not the host's /tmp
    # "/" and "/root" may only show the path components leading to the read-only binds.
    prefix_parts = Path(os.path.realpath(sys.base_prefix)).parts
    allowed_top = {"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "tmp", "dev", "site-packages"}
    allowed_top.add(prefix_parts[1])
    assert set(listings["/"]) <= allowed_top
    if listings["/root"] is not None:
        assert prefix_parts[1] == "root" and listings["/root"] == [prefix_parts[2]]


def test_parent_environment_is_not_inherited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORECAST_DOJO_API_KEY", "sk-do-not-leak-1234")
    result = run("import os, json\nprint(json.dumps(dict(os.environ)))\n")
    assert result.ok, result
    env = json.loads(result.stdout)
    assert "sk-do-not-leak-1234" not in result.stdout
    assert set(env) == {name for name, _ in sandbox._SANDBOX_ENV} | {"PWD", "LD_PRELOAD", "FAKETIME"}
    assert env["HOME"] == "/tmp" and env["PYTHONHASHSEED"] == "0"


def test_writes_outside_tmp_fail_and_tmp_is_private() -> None:
    prefix = os.path.realpath(sys.base_prefix)
    targets = [
        "/evil",
        "/usr/evil",
        "/dev/evil",
        "/dev/shm/evil",
        f"{prefix}/evil",
        "/root/evil",
        "/etc/evil",
    ]
    seen = run_json(
        f"""
        import json
        out = {{}}
        for path in {targets!r}:
            try:
                with open(path, "w") as fh:
                    fh.write("x")
                out[path] = "written"
            except OSError as exc:
                out[path] = exc.errno
        with open("/tmp/scratch.txt", "w") as fh:
            fh.write("scratch")
        out["tmp"] = open("/tmp/scratch.txt").read()
        print(json.dumps(out))
        """
    )
    assert seen.pop("tmp") == "scratch"
    assert all(value != "written" for value in seen.values()), seen
    for path in targets:
        assert not os.path.exists(path), path
    assert run("import os\nprint(os.listdir('/tmp'))\n").stdout == f"{tmp_bind_roots()}\n"  # nothing persists


def test_file_size_limit() -> None:
    result = run("open('/tmp/big', 'wb').write(b'0' * (40 * 1024 * 1024))\n")
    assert not result.ok and "File too large" in result.stderr


# --- network, processes, kernel surface -------------------------------------------------------------------


def test_network_is_unreachable() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        result = run(
            f"""
            import socket
            try:
                s = socket.socket()
                s.settimeout(2)
                s.connect(("127.0.0.1", {port}))
                print("connected")
            except OSError as exc:
                print("blocked", exc.errno)
            """
        )
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever reached the host listener
    assert result.ok, result
    assert result.stdout.startswith("blocked")


def test_fork_bomb_is_bounded() -> None:
    result = run(
        """
        import os, subprocess, threading
        forked = 0
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError as exc:
                print("fork denied", exc.errno)
                break
            if pid == 0:
                os._exit(0)
            forked += 1
            os.waitpid(pid, 0)
        print("forked", forked)
        try:
            subprocess.run(["/bin/true"])
            print("subprocess ran")
        except OSError as exc:
            print("subprocess denied", exc.errno)
        try:
            threading.Thread(target=lambda: None).start()
            print("thread ran")
        except RuntimeError:
            print("thread denied")
        """
    )
    assert result.ok, result
    assert result.stdout.splitlines() == ["fork denied 1", "forked 0", "subprocess denied 1", "thread denied"]


def test_kernel_escape_hatches_are_denied() -> None:
    result = run(
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        for name, nr, arg in [("unshare", 272, 0x10000000), ("ptrace", 101, 0), ("mount", 165, 0),
                              ("bpf", 321, 0), ("keyctl", 250, 0)]:
            rc = libc.syscall(nr, arg, 0, 0, 0)
            print(name, rc, ctypes.get_errno())
        print("uid", os.getuid(), os.getgid())
        """
    )
    assert result.ok, result
    lines = result.stdout.splitlines()
    assert lines[:-1] == [f"{name} -1 1" for name in ("unshare", "ptrace", "mount", "bpf", "keyctl")]
    assert lines[-1] == "uid 65534 65534"


def test_seccomp_program_layout() -> None:
    program = sandbox.seccomp_program()
    assert len(program) % 8 == 0
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    denied = set(sandbox._DENIED_SYSCALLS_X86_64.values())
    sockets = set(sandbox._SOCKET_SYSCALLS_X86_64.values())
    assert len(insns) == 5 + len(sockets) + len(denied) + 6
    ret_errno = 0x00050000
    deny = len(insns) - 1
    assert insns[deny] == (0x06, 0, 0, ret_errno | 1)  # EPERM
    # Every denied number jumps to the final EPERM, every socket call to the AF_UNIX check.
    targets = {}
    for index, (code, jt, _jf, k) in enumerate(insns):
        if code == 0x15 and index >= 5 and k in denied | sockets:
            targets[k] = index + 1 + jt
    assert {k for k, t in targets.items() if t == deny} == denied
    check = {t for k, t in targets.items() if k in sockets}
    assert len(check) == 1
    (at,) = check
    assert insns[at] == (0x20, 0, 0, 16)  # load args[0]
    assert insns[at + 1][0] == 0x15 and insns[at + 1][3] == 1  # AF_UNIX
    assert insns[at + 2] == (0x06, 0, 0, ret_errno | 97)  # EAFNOSUPPORT


# --- limits -------------------------------------------------------------------------------------------------


def test_infinite_loop_times_out() -> None:
    started = time.monotonic()
    result = run("print('started')\nwhile True:\n    pass\n", SandboxLimits(timeout_s=0.5))
    elapsed = time.monotonic() - started
    assert result.timed_out and not result.ok and result.exit_code is None
    assert result.error == "timed out after 0.5 s; the process was killed"
    assert result.stdout == "started\n"  # output before the kill is kept
    assert elapsed < 2.5


def _sandbox_pids() -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if sandbox.BOOTSTRAP_MARKER.encode() in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
            except OSError:
                continue
    return pids


def test_no_orphan_after_timeout() -> None:
    before = _sandbox_pids()
    result = run("import time\ntime.sleep(60)\n", SandboxLimits(timeout_s=0.5))
    assert result.timed_out
    deadline = time.monotonic() + 3.0
    leftovers = _sandbox_pids() - before
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = _sandbox_pids() - before
    assert not leftovers


def test_big_allocation_fails_with_memory_error() -> None:
    result = run("x = bytearray(2 * 1024 ** 3)\nprint('allocated')\n", SandboxLimits(memory_mb=256))
    assert not result.ok and not result.timed_out
    assert "MemoryError" in result.stderr and "allocated" not in result.stdout


def test_huge_output_is_truncated_and_killed() -> None:
    limits = SandboxLimits(max_output_bytes=1000)
    result = run("import sys\nsys.stdout.write('x' * 10_000_000)\nprint('done')\n", limits)
    assert result.truncated and not result.ok and result.exit_code is None
    assert result.stdout == "x" * 1000
    assert result.error is not None and "output exceeded 8000 bytes" in result.error


def test_modest_overflow_is_truncated_but_completes() -> None:
    result = run("print('y' * 5000)\nimport sys\nprint('e' * 3000, file=sys.stderr)\n",
                 SandboxLimits(max_output_bytes=2000))  # fmt: skip
    assert result.ok and result.exit_code == 0 and result.truncated
    assert result.stdout == "y" * 2000 and result.stderr == "e" * 2000
    assert result.error == "output truncated to the first 2000 bytes of each stream"


def test_oversized_code_is_refused_without_running() -> None:
    result = run_python("#" * 2000, SandboxLimits(max_code_bytes=1000))
    assert not result.ok and result.exit_code is None
    assert result.error == "code is 2000 bytes, over the limit of 1000 bytes; nothing was run"


def test_invalid_limits_raise() -> None:
    with pytest.raises(ValueError):
        run_python("print(1)", SandboxLimits(timeout_s=0))
    with pytest.raises(ValueError):
        run_python("print(1)", SandboxLimits(memory_mb=8))


# --- fail closed --------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    sandbox.reset_sandbox_cache()
    yield
    sandbox.reset_sandbox_cache()


def test_fails_closed_without_bwrap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_cache: None
) -> None:
    marker = tmp_path / "ran"
    monkeypatch.setenv("PATH", str(tmp_path))
    ok, reason = sandbox_available()
    assert not ok and "not installed" in reason
    result = run_python(f"open({str(marker)!r}, 'w').write('unsandboxed')\n")
    assert result == sandbox.SandboxResult(
        ok=False,
        stdout="",
        stderr="",
        exit_code=None,
        timed_out=False,
        truncated=False,
        error=f"python sandbox unavailable: {reason}",
    )
    assert not marker.exists()


def test_fails_closed_when_bwrap_self_test_fails(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_cache: None
) -> None:
    """A bwrap that cannot create namespaces (e.g. userns disabled) must disable the tool entirely."""
    calls = tmp_path / "calls.log"
    fake = tmp_path / "bwrap"
    fake.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"open({str(calls)!r}, 'a').write('call\\n')\n"
        "sys.stderr.write('bwrap: No permissions to creating new namespace\\n')\n"
        "sys.exit(1)\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tmp_path))
    ok, reason = sandbox_available()
    assert not ok and reason == "self-test failed: bwrap: No permissions to creating new namespace"
    result = run_python("print('hello')\n")
    assert not result.ok and result.error == f"python sandbox unavailable: {reason}"
    assert calls.read_text() == "call\n"  # only the self-test ran; the agent's code was never handed over
