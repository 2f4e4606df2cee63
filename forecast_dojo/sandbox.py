"""Run untrusted, model-written Python in a bubblewrap sandbox.

The forecasting environments expose a ``python(code)`` tool to the agent. That code is untrusted, so it
runs in a separate ``bwrap`` process with fresh user/pid/net/ipc/uts/cgroup namespaces, an empty root
file system holding only read-only binds of ``/usr``, the interpreter and its standard library, and an
allowlist of computing packages (numpy, pandas, scipy, ...; never ``forecast_dojo``, its caches or data),
a small private ``/tmp``, no ``/proc``, no ``/etc``, no host environment, no network, a seccomp filter
that forbids creating processes, threads, shared memory and any socket but ``AF_UNIX``, rlimits on
memory, CPU, files and descriptors, a memory cgroup where the host allows one, and a clock that reads
the step's cutoff (libfaketime) instead of today's date. A wall-clock deadline kills the whole sandbox.

The module fails closed: when ``bwrap`` or ``libfaketime`` is missing or the self-test fails,
:func:`run_python` returns an error result and runs nothing. There is no unsandboxed fallback. See
``docs/sandbox.md`` for the threat model and the residual risks.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import glob
import importlib.metadata
import itertools
import math
import os
import platform
import re
import selectors
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from forecast_dojo.errors import ConfigError, SandboxUnavailableError

__all__ = [
    "ALLOWED_DISTRIBUTIONS",
    "DEFAULT_LIMITS",
    "DEFAULT_NOW",
    "SandboxLimits",
    "SandboxResult",
    "frame_output",
    "reset_sandbox_cache",
    "run_python",
    "sandbox_available",
    "sandbox_python_runner",
]


@dataclasses.dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run, shaped so the tool layer can show it to the agent verbatim."""

    ok: bool  # ran to completion with exit code 0
    stdout: str  # truncated to the output cap
    stderr: str  # truncated; Python tracebacks appear here
    exit_code: int | None  # None when the sandbox was killed by us or never started
    timed_out: bool
    truncated: bool
    error: str | None  # sandbox unavailable (fail closed) or a limit was hit, phrased for the agent


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one run; defaults suit short numeric forecasting scripts."""

    timeout_s: float = 10.0
    memory_mb: int = 512
    max_output_bytes: int = 16_000
    max_code_bytes: int = 100_000
    # RLIMIT_NPROC inside the sandbox. Defence in depth only: the seccomp filter already forbids
    # fork/clone, and the kernel ignores RLIMIT_NPROC for tasks whose host uid is 0 (see docs).
    max_processes: int = 32
    # RLIMIT_NOFILE inside the sandbox. Every descriptor can pin kernel memory (a pipe buffer holds up
    # to 1 MiB), so this also bounds memory that RLIMIT_AS does not see.
    max_open_files: int = 64

    def validate(self) -> None:
        """Reject limits that cannot be enforced, so a caller bug never silently disables a limit.

        Raises:
            ValueError: a limit is non-positive, not finite, or too small for the interpreter.
        """
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ConfigError(f"timeout_s must be a positive finite number, got {self.timeout_s!r}")
        if self.memory_mb < 64:
            raise ConfigError(
                f"memory_mb must be at least 64 (the interpreter needs it), got {self.memory_mb}"
            )
        if self.max_open_files < 16:
            raise ConfigError(
                f"max_open_files must be at least 16 (the interpreter needs it), got {self.max_open_files}"
            )
        for name in ("max_output_bytes", "max_code_bytes", "max_processes"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be positive, got {getattr(self, name)}")


DEFAULT_LIMITS = SandboxLimits()
# The sandbox's clock when the caller gives no `now`: a fixed date, never the host's.
DEFAULT_NOW = datetime(2000, 1, 1, tzinfo=UTC)

# Size of the private /tmp tmpfs. tmpfs pages are host memory outside RLIMIT_AS, so this is fixed and small.
_TMP_SIZE_BYTES = 64 * 1024 * 1024
# Largest single file the code may write (RLIMIT_FSIZE); Python ignores SIGXFSZ, so writes raise OSError.
_MAX_FILE_BYTES = 32 * 1024 * 1024
# The memory cgroup's limit is RLIMIT_AS plus this: the /tmp tmpfs, pipe and socket buffers, bwrap
# itself and the page cache of the libraries it reads.
_CGROUP_HEADROOM_BYTES = _TMP_SIZE_BYTES + 96 * 1024 * 1024
# Output beyond max_output_bytes is discarded; beyond this multiple of it the sandbox is killed.
_HARD_OUTPUT_FACTOR = 8
_READ_CHUNK = 65536
_SELF_TEST_LIMITS = SandboxLimits(timeout_s=20.0, memory_mb=256, max_output_bytes=1000)
# Inside the sandbox the allowlisted packages appear here (and nowhere else).
_SANDBOX_SITE = "/site-packages"

_SANDBOX_ENV: tuple[tuple[str, str], ...] = (
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("HOME", "/tmp"),
    ("LANG", "C.UTF-8"),
    ("TZ", "UTC"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
    ("PYTHONHASHSEED", "0"),
    ("PYTHONUNBUFFERED", "1"),
    # Threads are forbidden by the seccomp filter; keep BLAS/OpenMP from trying to start any.
    ("OPENBLAS_NUM_THREADS", "1"),
    ("OMP_NUM_THREADS", "1"),
    ("MKL_NUM_THREADS", "1"),
    # libfaketime (LD_PRELOAD and FAKETIME are set per call): every clock starts at the cutoff and
    # advances in real time. Monotonic clocks are shifted too: with FAKETIME_DONT_FAKE_MONOTONIC=1,
    # libfaketime 0.9.10 makes time.sleep() fail with EINVAL. libfaketime re-reads FAKETIME from the
    # environment when its cache expires (10 s by default), so code that set os.environ["FAKETIME"]
    # = "+0" would see the real clock; a cache longer than any call makes the first reading final.
    ("FAKETIME_CACHE_DURATION", "1000000"),
)

# Computing packages the agent's code may import, by distribution name, with their installed
# dependencies. Anything else installed (forecast_dojo above all) is not bound into the sandbox.
ALLOWED_DISTRIBUTIONS: tuple[str, ...] = (
    "numpy",
    "pandas",
    "scipy",
    "statsmodels",
    "patsy",
    "python-dateutil",
    "pytz",
    "tzdata",
    "six",
)
# Never bound, even if some allowlisted package were to depend on them.
_FORBIDDEN_DISTRIBUTIONS = frozenset({"forecast-dojo", "forecast_dojo"})

# Marker in the bootstrap's argv, so a host-side `ps` (and the orphan test) can recognise sandboxes.
BOOTSTRAP_MARKER = "# forecast_dojo.sandbox bootstrap"

# Runs inside the sandbox before the agent's code. It is trusted and passed as an argv element (no shell
# is involved); the agent's code arrives on stdin. Lowered hard limits cannot be raised again because the
# sandbox holds no capabilities in the initial user namespace.
_BOOTSTRAP = (
    BOOTSTRAP_MARKER
    + """
import _socket, os, resource, sys, time
time.time()  # libfaketime reads FAKETIME now, before the agent's code could change the environment
_as, _cpu, _fsize, _nproc, _nofile = (int(v) for v in sys.argv[1:6])
sys.path[:] = sys.argv[6:]
for _kind, _soft, _hard in (
    (resource.RLIMIT_AS, _as, _as),
    (resource.RLIMIT_CPU, _cpu, _cpu + 1),
    (resource.RLIMIT_FSIZE, _fsize, _fsize),
    (resource.RLIMIT_NPROC, _nproc, _nproc),
    (resource.RLIMIT_NOFILE, _nofile, _nofile),
    (resource.RLIMIT_MSGQUEUE, 0, 0),
    (resource.RLIMIT_SIGPENDING, 64, 64),
    (resource.RLIMIT_CORE, 0, 0),
):
    resource.setrlimit(_kind, (_soft, _hard))
_source = sys.stdin.buffer.read().decode("utf-8")
# The code arrived on an anonymous file whose inode carries the real time: stdin becomes the read end of
# an AF_UNIX socket whose peer is closed (at EOF, and a socket's inode carries no time).
_ends = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
os.dup2(_ends[0].fileno(), 0)
for _end in _ends:
    _end.close()
# The private /tmp was mounted just now: give it the fixed time of the other mount points.
os.utime("/tmp", (_FIXED_TIME, _FIXED_TIME))
sys.argv[:] = ["<agent>"]
del _as, _cpu, _fsize, _nproc, _nofile, _kind, _soft, _hard, _ends, _end, _socket, os, resource, time


def _report(exc, tb):
    # Imported lazily: traceback/linecache cost milliseconds of start-up on every successful run.
    import linecache, traceback
    linecache.cache["<agent>"] = (len(_source), None, _source.splitlines(True), "<agent>")
    traceback.print_exception(type(exc), exc, tb)
    sys.exit(1)


try:
    _code = compile(_source, "<agent>", "exec", dont_inherit=True)
except (SyntaxError, ValueError) as _exc:
    _report(_exc, None)
# A fresh __main__ module, so `import __main__`, pickle and dataclasses see the agent's namespace.
_main = type(sys)("__main__")
_main.__builtins__ = __builtins__
sys.modules["__main__"] = _main
try:
    exec(_code, _main.__dict__)
except SystemExit:
    raise
except BaseException as _exc:
    _report(_exc, _exc.__traceback__.tb_next)
"""
).replace("_FIXED_TIME", str(int(DEFAULT_NOW.timestamp())))

# --- seccomp ---------------------------------------------------------------------------------------------
# A classic-BPF filter handed to bwrap via --seccomp. It denies (EPERM) every way to create a task, every
# way to create memory that RLIMIT_AS does not count (memfd, SysV shared memory, message queues, extended
# attributes), every kernel interface that tells the real date despite libfaketime (NTP state, socket
# timestamps, absolute waits against the real-time clock, timerfds, fresh pipe inodes), and a list of
# kernel interfaces sandboxed numeric code never needs. socket()/socketpair() succeed only for AF_UNIX (the
# network namespace does not cover AF_VSOCK, for one). Task creation must be denied because the kernel
# exempts host uid 0 from RLIMIT_NPROC, so without this a fork or thread bomb would be bounded only by the
# host's pid space.
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_EPERM = 1
_EAFNOSUPPORT = 97
_AF_UNIX = 1
_BPF_LD_W_ABS = 0x20
_BPF_ALU_AND_K = 0x54
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_JSET_K = 0x45
_BPF_RET_K = 0x06
_SECCOMP_DATA_NR = 0
_SECCOMP_DATA_ARCH = 4


def _arg_low(index: int) -> int:
    """Offset of the low 32 bits of syscall argument ``index`` in ``struct seccomp_data`` (little-endian)."""
    return 16 + 8 * index


# x86_64 syscall numbers (asm/unistd_64.h) whose first argument is a socket family.
_SOCKET_SYSCALLS_X86_64: dict[str, int] = {"socket": 41, "socketpair": 53}

# x86_64 syscall numbers (asm/unistd_64.h).
_DENIED_SYSCALLS_X86_64: dict[str, int] = {
    # task creation
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "clone3": 435,
    # memory outside RLIMIT_AS: memfd, SysV shared memory/semaphores/message queues, POSIX queues, and
    # extended attributes (tmpfs keeps them in kernel memory that its size= does not count)
    "memfd_create": 319,
    "memfd_secret": 447,
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "shmdt": 67,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "semtimedop": 220,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "mq_open": 240,
    "mq_unlink": 241,
    "mq_timedsend": 242,
    "mq_timedreceive": 243,
    "mq_notify": 244,
    "mq_getsetattr": 245,
    "setxattr": 188,
    "lsetxattr": 189,
    "fsetxattr": 190,
    "setxattrat": 463,
    # the real date: NTP state (struct timex holds the time), timerfds (an absolute real-time timer
    # tells whether a guessed date has passed), futex_waitv (absolute timeouts on a chosen clock) and
    # pipes (a fresh pipe's inode carries the real time; AF_UNIX socket inodes carry none)
    "adjtimex": 159,
    "clock_adjtime": 305,
    "timerfd_create": 283,
    "timerfd_settime": 286,
    "timerfd_gettime": 287,
    "futex_waitv": 449,
    "pipe": 22,
    "pipe2": 293,
    # kernel interfaces numeric code never needs
    "ptrace": 101,
    "syslog": 103,
    "uselib": 134,
    "vhangup": 153,
    "pivot_root": 155,
    "chroot": 161,
    "acct": 163,
    "mount": 165,
    "umount2": 166,
    "swapon": 167,
    "swapoff": 168,
    "reboot": 169,
    "iopl": 172,
    "ioperm": 173,
    "init_module": 175,
    "delete_module": 176,
    "quotactl": 179,
    "kexec_load": 246,
    "add_key": 248,
    "request_key": 249,
    "keyctl": 250,
    "unshare": 272,
    "perf_event_open": 298,
    "fanotify_init": 300,
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "finit_module": 313,
    "kexec_file_load": 320,
    "bpf": 321,
    "userfaultfd": 323,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "pidfd_getfd": 438,
    "mount_setattr": 442,
}

# Calls denied (EPERM) only for some arguments: each reveals the real date when used that way.
_SOL_SOCKET = 1
# SO_TIMESTAMP{,NS,ING}_OLD and _NEW: received datagrams carry the real time of arrival (asm-generic/socket.h).
_TIMESTAMP_SOCKOPTS = (29, 35, 37, 63, 64, 65)
_TIMER_ABSTIME = 1
# CLOCK_REALTIME, CLOCK_REALTIME_ALARM, CLOCK_TAI: clocks whose absolute value is the date.
_REALTIME_CLOCKS = (0, 8, 11)
_FUTEX_CLOCK_REALTIME = 256
_FUTEX_CMD_MASK = 127
_FUTEX_LOCK_PI = 6  # its timeout is always absolute on CLOCK_REALTIME
_SETSOCKOPT, _CLOCK_NANOSLEEP, _TIMER_SETTIME, _FUTEX = 54, 230, 223, 202
_ARGUMENT_CHECKED_SYSCALLS_X86_64: dict[str, int] = {
    "setsockopt": _SETSOCKOPT,  # level SOL_SOCKET and a timestamping option
    "clock_nanosleep": _CLOCK_NANOSLEEP,  # TIMER_ABSTIME on a real-time clock
    "timer_settime": _TIMER_SETTIME,  # TIMER_ABSTIME (the timer's clock is not visible to the filter)
    "futex": _FUTEX,  # FUTEX_CLOCK_REALTIME or FUTEX_LOCK_PI
}


class _Assembler:
    """Classic BPF with forward jumps to named labels (resolved at :meth:`program`)."""

    def __init__(self) -> None:
        self.insns: list[tuple[int, int | str, int | str, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.insns)

    def op(self, code: int, k: int, jt: int | str = 0, jf: int | str = 0) -> None:
        self.insns.append((code, jt, jf, k))

    def program(self) -> bytes:
        out = []
        for at, (code, jt, jf, k) in enumerate(self.insns):
            offsets = []
            for target in (jt, jf):
                offset = target if isinstance(target, int) else self.labels[target] - at - 1
                if not 0 <= offset <= 255:
                    raise OSError(f"seccomp jump out of range ({offset})")
                offsets.append(offset)
            out.append(struct.pack("=HBBI", code, offsets[0], offsets[1], k))
        return b"".join(out)


def _deny_values_when(asm: _Assembler, gate: tuple[int, int, int], arg: int, values: Iterable[int]) -> None:
    """Filter code that denies a call when its ``gate`` argument passes a test and argument ``arg`` is in ``values``.

    ``gate`` is ``(argument, jump opcode, constant)``, e.g. ``(1, _BPF_JEQ_K, _SOL_SOCKET)``; a call whose
    gate argument fails the test, or whose ``arg`` is none of ``values``, is allowed.
    """
    gate_arg, test, constant = gate
    asm.op(_BPF_LD_W_ABS, _arg_low(gate_arg))
    asm.op(test, constant, 0, "allow")
    asm.op(_BPF_LD_W_ABS, _arg_low(arg))
    for value in values:
        asm.op(_BPF_JEQ_K, value, "deny")
    asm.op(_BPF_RET_K, _SECCOMP_RET_ALLOW)


def seccomp_program() -> bytes:
    """Compile the seccomp filter for x86_64; other architectures are refused (fail closed).

    Returns:
        The classic-BPF program as bwrap's ``--seccomp`` expects it (``struct sock_filter[]``).

    Raises:
        OSError: the machine is not x86_64.
    """
    machine = platform.machine()
    if machine not in ("x86_64", "AMD64"):
        raise SandboxUnavailableError(f"no seccomp filter is defined for architecture {machine!r}")
    asm = _Assembler()
    asm.op(_BPF_LD_W_ABS, _SECCOMP_DATA_ARCH)
    asm.op(_BPF_JEQ_K, _AUDIT_ARCH_X86_64, 1, 0)
    asm.op(_BPF_RET_K, _SECCOMP_RET_KILL_PROCESS)
    asm.op(_BPF_LD_W_ABS, _SECCOMP_DATA_NR)
    asm.op(_BPF_JGE_K, _X32_SYSCALL_BIT, "deny")
    for nr in sorted(set(_SOCKET_SYSCALLS_X86_64.values())):
        asm.op(_BPF_JEQ_K, nr, "socket")
    for nr in sorted(set(_ARGUMENT_CHECKED_SYSCALLS_X86_64.values())):
        asm.op(_BPF_JEQ_K, nr, f"args_{nr}")
    for nr in sorted(set(_DENIED_SYSCALLS_X86_64.values())):
        asm.op(_BPF_JEQ_K, nr, "deny")
    asm.op(_BPF_RET_K, _SECCOMP_RET_ALLOW)

    asm.label("socket")  # only AF_UNIX sockets
    asm.op(_BPF_LD_W_ABS, _arg_low(0))
    asm.op(_BPF_JEQ_K, _AF_UNIX, "allow")
    asm.op(_BPF_RET_K, _SECCOMP_RET_ERRNO | _EAFNOSUPPORT)

    asm.label(f"args_{_SETSOCKOPT}")  # setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP*, ...)
    _deny_values_when(asm, (1, _BPF_JEQ_K, _SOL_SOCKET), 2, _TIMESTAMP_SOCKOPTS)

    asm.label(f"args_{_CLOCK_NANOSLEEP}")  # clock_nanosleep(realtime clock, TIMER_ABSTIME, ...)
    _deny_values_when(asm, (1, _BPF_JSET_K, _TIMER_ABSTIME), 0, _REALTIME_CLOCKS)

    asm.label(f"args_{_TIMER_SETTIME}")  # timer_settime(timer, TIMER_ABSTIME, ...)
    asm.op(_BPF_LD_W_ABS, _arg_low(1))
    asm.op(_BPF_JSET_K, _TIMER_ABSTIME, "deny", "allow")

    asm.label(f"args_{_FUTEX}")  # futex(addr, op | FUTEX_CLOCK_REALTIME or FUTEX_LOCK_PI, ...)
    asm.op(_BPF_LD_W_ABS, _arg_low(1))
    asm.op(_BPF_JSET_K, _FUTEX_CLOCK_REALTIME, "deny")
    asm.op(_BPF_ALU_AND_K, _FUTEX_CMD_MASK)
    asm.op(_BPF_JEQ_K, _FUTEX_LOCK_PI, "deny")

    asm.label("allow")
    asm.op(_BPF_RET_K, _SECCOMP_RET_ALLOW)
    asm.label("deny")
    asm.op(_BPF_RET_K, _SECCOMP_RET_ERRNO | _EPERM)
    return asm.program()


# --- the clock -------------------------------------------------------------------------------------------

_LIBFAKETIME_CANDIDATES = (
    "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
    "/usr/lib64/faketime/libfaketime.so.1",
    "/usr/lib/faketime/libfaketime.so.1",
    "/usr/local/lib/faketime/libfaketime.so.1",
)


def _find_libfaketime() -> str | None:
    """The single-threaded libfaketime (Debian package ``libfaketime``), which must live under /usr."""
    for path in _LIBFAKETIME_CANDIDATES:
        if os.path.isfile(path):
            return path
    return None


def _faketime_spec(now: datetime) -> str:
    """The ``FAKETIME`` value for libfaketime: start the clock at ``now`` (UTC, whole seconds), let it run."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return "@" + now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


# --- file system layout ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Layout:
    """Host paths the sandbox needs, resolved once per process."""

    interpreter: str
    ro_binds: tuple[tuple[str, str], ...]  # (host source, sandbox destination), in mount order
    hidden: tuple[str, ...]  # paths inside a bound directory covered by an empty read-only tmpfs
    symlinks: tuple[tuple[str, str], ...]  # (target, link path)
    sys_path: tuple[str, ...]
    packages: tuple[str, ...]  # allowlisted distributions found and bound, "name version"
    libfaketime: str
    # Host directory holding the sandbox's root file system (every mount point, with fixed times) and an
    # empty directory bound over hidden paths; made by :func:`_ensure_skeleton`.
    skeleton: str = ""
    # Where we can (see :func:`_bounded_tmp_wrapper`): the command that mounts the private /tmp with an inode
    # limit in a mount namespace of its own and then runs bwrap, which binds it. Empty: bwrap's own tmpfs.
    # Used only for calls without a memory cgroup (the cgroup counts the inodes' memory; the wrapper
    # costs about 15 ms a call).
    tmp_wrapper: tuple[str, ...] = ()

    @property
    def root(self) -> str:
        """The host directory bound read-only as the sandbox's ``/``."""
        return os.path.join(self.skeleton, "root")

    @property
    def tmp_mount(self) -> str:
        """The host directory over which the bounded /tmp is mounted (in the call's own mount namespace)."""
        return os.path.join(self.skeleton, "tmp-mount")

    @property
    def empty(self) -> str:
        """The empty host directory bound read-only over every hidden path."""
        return os.path.join(self.skeleton, "empty")


def _is_under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(dist: importlib.metadata.Distribution) -> list[str]:
    """Names of the unconditional (non-extra) requirements of an installed distribution."""
    names = []
    for requirement in dist.requires or ():
        spec, _, marker = requirement.partition(";")
        if "extra" in marker:
            continue
        match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        if match:
            names.append(match.group(1))
    return names


def _site_dirs() -> list[str]:
    """Every directory from which the host interpreter can import installed distributions."""
    dirs = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with contextlib.suppress(Exception):
        import site

        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    dirs.update(p for p in sys.path if p and os.path.basename(p) in ("site-packages", "dist-packages"))
    return sorted({os.path.realpath(d) for d in dirs if d})


def _system_site_dirs() -> list[str]:
    """Site directories of other interpreters under /usr (Debian's dist-packages above all).

    The sandbox's interpreter never puts them on ``sys.path``, but the agent's code could, and they hold
    whatever the system package manager installed (yaml, cryptography, apt_pkg, ...).
    """
    patterns = (
        "/usr/lib/python3/dist-packages",
        "/usr/lib/python*/dist-packages",
        "/usr/lib/python*/site-packages",
        "/usr/lib64/python*/dist-packages",
        "/usr/lib64/python*/site-packages",
        "/usr/local/lib/python*/dist-packages",
        "/usr/local/lib/python*/site-packages",
        "/usr/share/pyshared",
    )
    found = {os.path.realpath(path) for pattern in patterns for path in glob.glob(pattern)}
    return sorted(path for path in found if os.path.isdir(path))


def _forbidden_paths() -> list[str]:
    """Host paths the sandbox must never show, wherever they live: the package, its caches and data."""
    home = os.path.expanduser("~")
    paths = [
        os.path.dirname(os.path.abspath(__file__)),  # the forecast_dojo package itself
        os.path.join(home, ".cache", "forecast_dojo"),
    ]
    for var in ("FORECAST_DOJO_CACHE", "FORECAST_DOJO_DATA", "FORECAST_DOJO_ENVS"):
        for value in os.environ.get(var, "").split(os.pathsep):
            if value:
                paths.append(os.path.abspath(value))
    return sorted({os.path.realpath(p) for p in paths})


def _allowed_package_binds() -> tuple[list[tuple[str, str]], list[str]]:
    """(source, destination) binds for the allowlisted distributions and their dependencies.

    Each top-level entry a distribution installed (its package directories, single-module files and its
    ``.libs`` directory of vendored shared libraries) is bound on its own under ``/site-packages``; the
    site-packages directories themselves never are. ``.dist-info`` directories are left out: every bind
    costs bwrap a pass over the mount table (about 1 ms each on a busy machine), and the allowlisted
    packages do not read their own metadata at import.
    """
    binds: dict[str, str] = {}
    found: list[str] = []
    queue = list(ALLOWED_DISTRIBUTIONS)
    seen: set[str] = set()
    forbidden = _forbidden_paths()
    while queue:
        name = _normalize(queue.pop(0))
        if name in seen or name in _FORBIDDEN_DISTRIBUTIONS:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        files = dist.files
        if not files:
            continue
        base = os.path.realpath(str(dist.locate_file("")))
        tops = {
            p.parts[0]
            for p in files
            if p.parts and p.parts[0] not in ("..", "__pycache__") and not p.parts[0].endswith(".dist-info")
        }
        entries = []
        for top in sorted(tops):
            source = os.path.join(base, top)
            if not os.path.exists(source) or top == "forecast_dojo" or _is_under(source, forbidden):
                continue
            if any(_is_under(f, [source]) for f in forbidden):
                continue
            entries.append((os.path.realpath(source), f"{_SANDBOX_SITE}/{top}"))
        if not entries:
            continue
        for source, destination in entries:
            binds.setdefault(destination, source)
        found.append(f"{dist.metadata['Name']} {dist.version}")
        queue.extend(_requirement_names(dist))
    return [(source, dest) for dest, source in sorted(binds.items())], found


def _python_layout() -> _Layout:
    """Find the interpreter, its stdlib, the allowlisted packages and the minimal set of host dirs to bind.

    Raises:
        OSError: the interpreter cannot be located, or libfaketime is not installed.
    """
    libfaketime = _find_libfaketime()
    if libfaketime is None:
        raise SandboxUnavailableError(
            "libfaketime is not installed (apt-get install -y libfaketime); without it the sandbox "
            "would show the real date"
        )
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    prefix = os.path.realpath(sys.base_prefix)
    interpreter = os.path.join(prefix, "bin", f"python{version}")
    if not os.path.isfile(interpreter):
        interpreter = os.path.realpath(sys.executable)
    # The standard library (and its compiled modules in lib-dynload) belong to the base interpreter;
    # inside a virtualenv ``platstdlib`` points into the venv, which holds no stdlib at all.
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    stdlib_candidates = [
        os.path.join(prefix, "lib", f"python{sys.version_info.major}{sys.version_info.minor}.zip"),
        base["stdlib"],
        base["platstdlib"],
        os.path.join(base["platstdlib"], "lib-dynload"),
    ]
    sys_path: list[str] = []
    for path in stdlib_candidates:
        real = os.path.realpath(path)
        if os.path.exists(real) and real not in sys_path:
            sys_path.append(real)

    binds: list[tuple[str, str]] = [("/usr", "/usr")]
    roots = ["/usr"]

    def bind(path: str) -> None:
        if not _is_under(path, roots):
            binds.append((path, path))
            roots.append(path)

    # The interpreter's install prefix as one bind (each bind costs bwrap a pass over the mount table);
    # its site-packages directories are covered below, so only the interpreter and stdlib show.
    bind(prefix)
    bind(interpreter)
    for path in sys_path:
        bind(path)
    # A shared libpython (pyenv, python.org builds) lives in LIBDIR beside lib/pythonX.Y; bind the file.
    libdir = sysconfig.get_config_var("LIBDIR")
    soname = sysconfig.get_config_var("INSTSONAME")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and soname:
        libpython = os.path.join(os.path.realpath(libdir), soname)
        if os.path.isfile(libpython):
            bind(libpython)
    if not _is_under(libfaketime, roots):
        raise SandboxUnavailableError(
            f"libfaketime at {libfaketime} is outside the directories bound into the sandbox"
        )

    # Site directories (and the package, its caches and data) inside a bound directory are covered by
    # an empty read-only tmpfs: the stdlib directory holds site-packages, /usr holds dist-packages.
    hidden = sorted(
        {
            p
            for p in (*_site_dirs(), *_system_site_dirs(), *_forbidden_paths())
            if os.path.isdir(p) and _is_under(p, roots)
        }
    )
    package_binds, packages = _allowed_package_binds()
    binds.extend(package_binds)
    sys_path.append(_SANDBOX_SITE)

    symlinks: list[tuple[str, str]] = []
    # Merged-/usr systems have /bin, /lib... as symlinks into /usr; older ones have real directories.
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            symlinks.append((os.readlink(top), top))
        elif os.path.isdir(top):
            binds.insert(1, (top, top))
    layout = _Layout(
        interpreter,
        tuple(binds),
        tuple(hidden),
        tuple(symlinks),
        tuple(sys_path),
        tuple(packages),
        libfaketime,
        tempfile.mkdtemp(prefix="forecast-dojo-sandbox-root-"),
    )
    _skeletons.append((os.getpid(), layout.skeleton))
    _ensure_skeleton(layout)
    return layout


# Every file time the sandbox's own mount points show (directories and mount-point files of its root):
# a fixed date, so that listing "/" or "/dev" does not tell when the call started.
_SKELETON_TIME = DEFAULT_NOW.timestamp()  # the bootstrap gives /tmp the same time
# Device nodes bound from the host's /dev (what bwrap's --dev offers, less ptys, /dev/shm and /dev/tty).
_DEVICES = ("null", "zero", "full", "random", "urandom")
# (creating pid, path) of every skeleton made; removed at exit by the process that made it (a forked child
# that exits normally must not remove its parent's).
_skeletons: list[tuple[int, str]] = []
_skeleton_lock = threading.Lock()
# Owner of the skeleton's device nodes: a host uid that the sandbox's user namespace does not map (it maps
# only the caller's uid), so the sandbox's code is never their owner. 65534 unless we are 65534.
_UNMAPPED_UID = 65534 if os.getuid() != 65534 else 65533


@atexit.register
def _remove_skeletons() -> None:
    for pid, path in _skeletons:
        if pid == os.getpid():
            shutil.rmtree(path, ignore_errors=True)
    _skeletons.clear()


def _ensure_skeleton(layout: _Layout) -> None:
    """(Re)build the host directory that becomes the sandbox's read-only root, unless it is complete.

    It holds exactly the mount points (directories, and empty files where a single file is bound), the
    merged-/usr symlinks, ``/tmp`` and ``/dev`` with the device mount points, all with the fixed time
    :data:`_SKELETON_TIME`. bwrap then has nothing to create, so nothing in the sandbox's tree of mount
    points carries the real time (the mounted host directories keep their own times).
    """
    marker = os.path.join(layout.skeleton, "complete")
    if os.path.exists(marker):
        return
    with _skeleton_lock:
        if not os.path.exists(marker):
            _build_skeleton(layout, marker)


def _build_skeleton(layout: _Layout, marker: str) -> None:
    root, empty = layout.root, layout.empty
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    os.makedirs(empty, exist_ok=True)
    os.makedirs(layout.tmp_mount, exist_ok=True)
    directories = {"/tmp", "/dev", _SANDBOX_SITE}
    files = set()
    for name in _DEVICES:
        # A device node of our own carries the fixed time; where the host forbids making one, the host's
        # node is bound over an empty file (and shows the host's time for it).
        node = f"{root}/dev/{name}"
        os.makedirs(os.path.dirname(node), mode=0o755, exist_ok=True)
        try:
            os.mknod(node, stat.S_IFCHR | 0o666, os.stat(f"/dev/{name}").st_rdev)
            os.chmod(node, 0o666)
            os.chown(node, _UNMAPPED_UID, _UNMAPPED_UID)
            with open(node, "rb", buffering=0) as device:
                device.read(1)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(node)
            files.add(f"/dev/{name}")
    for source, destination in layout.ro_binds:
        if _is_under(destination, ["/tmp"]):  # created by bwrap inside the private /tmp
            continue
        (directories if os.path.isdir(source) else files).add(destination)
    for path in sorted(directories):
        os.makedirs(root + path, mode=0o755, exist_ok=True)
    for path in sorted(files):
        os.makedirs(os.path.dirname(root + path), mode=0o755, exist_ok=True)
        if not os.path.exists(root + path):
            with open(root + path, "wb"):
                pass
    for target, link in layout.symlinks:
        if not os.path.lexists(root + link):
            os.symlink(target, root + link)
    for base, names, leaves in os.walk(root, topdown=False):
        for name in (*names, *leaves):
            path = os.path.join(base, name)
            if os.path.islink(path):
                pass
            elif os.path.isdir(path):
                os.chmod(path, 0o755)
            elif os.path.isfile(path):
                os.chmod(path, 0o644)
            os.utime(path, (_SKELETON_TIME, _SKELETON_TIME), follow_symlinks=False)
    for path in (root, empty):
        os.chmod(path, 0o755 if path == root else 0o555)
        os.utime(path, (_SKELETON_TIME, _SKELETON_TIME))
    with open(marker, "wb"):
        pass


def _bwrap_argv(
    bwrap: str, layout: _Layout, seccomp_fd: int, limits: SandboxLimits, now: datetime
) -> list[str]:
    """The full bwrap + interpreter argv. Everything after '--' is fixed; the agent's code is on stdin."""
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",  # explicit: --unshare-all only *tries* it, and --disable-userns requires it
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        "65534",
        "--gid",
        "65534",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for name, value in _SANDBOX_ENV:
        argv += ["--setenv", name, value]
    argv += ["--setenv", "LD_PRELOAD", layout.libfaketime, "--setenv", "FAKETIME", _faketime_spec(now)]
    # The root is the skeleton (read-only, every mount point already there with a fixed time).
    argv += ["--ro-bind", layout.root, "/"]
    # The private /tmp comes next, so that binds below it (a virtualenv under /tmp) stay visible.
    if layout.tmp_wrapper:  # mounted by the wrapper, with an inode limit as well as a size
        argv += ["--bind", layout.tmp_mount, "/tmp"]
    else:
        argv += ["--perms", "1777", "--size", str(_TMP_SIZE_BYTES), "--tmpfs", "/tmp"]
    for source, destination in layout.ro_binds:
        argv += ["--ro-bind", source, destination]
    for path in layout.hidden:
        # An empty read-only directory with a fixed time (a tmpfs would show when the call started).
        argv += ["--ro-bind", layout.empty, path]
    # The merged-/usr symlinks (/bin -> usr/bin, ...) are part of the skeleton (bwrap 0.8 refuses to
    # --symlink over an existing link).
    # Each device is its own mount (bwrap binds everything else nodev): the skeleton's node where we
    # could make one (owned by a host uid the sandbox does not map, so the code can use it but not chmod
    # or re-time it), else the host's node bound over an empty file.
    for name in _DEVICES:
        node = f"{layout.root}/dev/{name}"
        source = node if stat.S_ISCHR(os.lstat(node).st_mode) else f"/dev/{name}"
        argv += ["--dev-bind", source, f"/dev/{name}"]
    argv += [
        # No --proc: a fresh procfs exposes the host-global sysctls under /proc/sys, which are writable
        # by host uid 0 even inside a user namespace (bwrap's /proc/sys cover is skipped as root).
        "--remount-ro",
        "/",
        "--chdir",
        "/tmp",
        "--seccomp",
        str(seccomp_fd),
        "--",
        layout.interpreter,
        "-s",  # no user site-packages
        "-S",  # no site module: no .pth files, which could point at host paths
        "-B",
        "-c",
        _BOOTSTRAP,
        str(limits.memory_mb * 1024 * 1024),
        str(math.ceil(limits.timeout_s) + 1),
        str(_MAX_FILE_BYTES),
        str(limits.max_processes),
        str(limits.max_open_files),
        *layout.sys_path,
    ]
    return argv


# --- memory cgroup ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _CgroupParent:
    """A cgroup directory (v1 memory hierarchy or v2 unified) under which per-call groups are made."""

    version: int
    path: str


_cgroup_counter = itertools.count()


def _mountinfo() -> list[tuple[str, str, str, str]]:
    """(root, mount point, fs type, super options) of every mount of this process."""
    rows = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3:
                rows.append((fields[3], fields[4], tail[0], tail[2]))
    return rows


def _cgroup_dir(
    mounts: list[tuple[str, str, str, str]], fstype: str, controller: str | None, rel: str
) -> str | None:
    for root, point, kind, options in mounts:
        if kind != fstype or (controller and controller not in options.split(",")):
            continue
        if rel == root or rel.startswith(root.rstrip("/") + "/") or root == "/":
            suffix = rel[len(root) :] if root != "/" else rel
            candidate = os.path.normpath(os.path.join(point, suffix.lstrip("/")))
            if os.path.isdir(candidate):
                return candidate
    return None


def _find_cgroup_parent() -> tuple[_CgroupParent | None, str]:
    """Where this process may create memory-limited child cgroups, and a sentence on why (not)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return None, f"no memory cgroup: cannot read /proc/self/cgroup ({exc})"
    mounts = _mountinfo()
    v1_rel = v2_rel = None
    for line in lines:
        hierarchy, controllers, rel = line.split(":", 2)
        if hierarchy == "0" and controllers == "":
            v2_rel = rel
        elif "memory" in controllers.split(","):
            v1_rel = rel
    if v1_rel is not None:
        path = _cgroup_dir(mounts, "cgroup", "memory", v1_rel)
        if path and os.access(path, os.W_OK):
            return _CgroupParent(1, path), f"memory cgroup v1 under {path}"
    if v2_rel is not None:
        path = _cgroup_dir(mounts, "cgroup2", None, v2_rel)
        if path and os.access(path, os.W_OK):
            try:
                if "memory" not in Path(path, "cgroup.controllers").read_text().split():
                    return None, f"no memory cgroup: the memory controller is not available in {path}"
                control = Path(path, "cgroup.subtree_control")
                if "memory" not in control.read_text().split():
                    # Fails with EBUSY when this cgroup holds processes (the "no internal processes" rule).
                    control.write_text("+memory")
            except OSError as exc:
                return None, f"no memory cgroup: cannot enable the memory controller in {path} ({exc})"
            return _CgroupParent(2, path), f"memory cgroup v2 under {path}"
    return (
        None,
        "no memory cgroup: no writable memory cgroup hierarchy (rlimits and seccomp still bound memory)",
    )


def _remove_stale_cgroups(parent: _CgroupParent) -> None:
    """Remove per-call cgroups left behind by processes that died mid-call (they hold no tasks)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(parent.path):
            match = re.fullmatch(r"forecast-dojo-sandbox-(\d+)-\d+", entry.name)
            if match and entry.is_dir() and not os.path.exists(f"/proc/{match.group(1)}"):
                with contextlib.suppress(OSError):
                    os.rmdir(entry.path)


class _Cgroup:
    """One per-call memory cgroup: created with a limit, joined by the sandbox, removed afterwards."""

    def __init__(self, parent: _CgroupParent, limit_bytes: int) -> None:
        self.parent = parent
        self.path = os.path.join(parent.path, f"forecast-dojo-sandbox-{os.getpid()}-{next(_cgroup_counter)}")
        os.mkdir(self.path)
        try:
            if parent.version == 1:
                self._write("memory.limit_in_bytes", str(limit_bytes))
                with contextlib.suppress(OSError):  # only with swap accounting; forbids swapping out
                    self._write("memory.memsw.limit_in_bytes", str(limit_bytes))
                with contextlib.suppress(OSError):
                    self._write("memory.swappiness", "0")
            else:
                self._write("memory.max", str(limit_bytes))
                with contextlib.suppress(OSError):
                    self._write("memory.swap.max", "0")
                with contextlib.suppress(OSError):
                    self._write("memory.oom.group", "1")
        except BaseException:
            self.remove(wait_s=1.0)
            raise

    @property
    def procs(self) -> str:
        """The file a process writes its pid to in order to join this cgroup."""
        return os.path.join(self.path, "cgroup.procs")

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.path, name), "w") as handle:
            handle.write(value)

    def _read(self, name: str) -> str:
        try:
            with open(os.path.join(self.path, name)) as handle:
                return handle.read()
        except OSError:
            return ""

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer killed a process of this cgroup at its limit."""
        text = self._read("memory.oom_control" if self.parent.version == 1 else "memory.events")
        match = re.search(r"^oom_kill (\d+)$", text, re.MULTILINE)
        return bool(match and int(match.group(1)) > 0)

    def peak_bytes(self) -> int:
        """Highest memory use of the cgroup; -1 when the kernel does not report it (v2 before 5.19)."""
        name = "memory.max_usage_in_bytes" if self.parent.version == 1 else "memory.peak"
        if not os.path.exists(os.path.join(self.path, name)):
            return -1
        text = self._read(name).strip()
        return int(text) if text.isdigit() else 0

    def remove(self, wait_s: float = 0.0) -> bool:
        """Remove the cgroup; False while the sandbox's last processes are still being reaped.

        Args:
            wait_s: How long to keep retrying (0: try once).
        """
        deadline = time.monotonic() + wait_s
        while True:
            try:
                os.rmdir(self.path)
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.005)


# Per-call cgroups whose sandbox was still exiting when the call returned; removed on a later call.
_pending_cgroups: list[_Cgroup] = []
_pending_lock = threading.Lock()


def _retire(cgroup: _Cgroup | None) -> None:
    """Remove this call's cgroup, or leave it for later, and remove any earlier ones now empty."""
    with _pending_lock:
        if cgroup is not None:
            _pending_cgroups.append(cgroup)
        _pending_cgroups[:] = [group for group in _pending_cgroups if not group.remove()]


@atexit.register
def _remove_pending_cgroups() -> None:
    with _pending_lock:
        for group in _pending_cgroups:
            group.remove(wait_s=1.0)
        _pending_cgroups.clear()


# --- running ---------------------------------------------------------------------------------------------


def _memfd_with(name: str, data: bytes) -> int:
    """An anonymous in-memory file holding data, positioned at 0 (never touches the host file system)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL bwrap's process group.

    ``--die-with-parent`` then kills the sandbox's pid 1, which takes down every process in the sandbox's
    pid namespace.
    """
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


# Inodes the private /tmp may hold. Each costs kernel memory that the tmpfs's size= does not count (about
# 1 KiB with its dentry); without a limit a 10 s call made 600,000 directories (630 MiB).
_TMP_INODES = 16384
# Run by `unshare --user --map-root-user --mount` (a user and mount namespace of the call's own, so the
# mount is invisible to the host and to other calls and vanishes with the call): mount the bounded tmpfs
# over the skeleton's tmp-mount directory, then become bwrap (which binds it as /tmp).
_TMP_MOUNT_SCRIPT = '"$0" -t tmpfs -o "$1" forecast-dojo-tmp "$2" && shift 2 && exec "$@"'


def _bounded_tmp_wrapper(layout: _Layout) -> tuple[tuple[str, ...], str]:
    """The argv prefix that gives the call a /tmp bounded in inodes as well as size, if this host allows it.

    bubblewrap 0.8's ``--tmpfs`` takes a size but no ``nr_inodes``. Tried once per self-test with
    ``/bin/true``; where ``unshare``/``mount`` are missing or user namespaces may not mount a tmpfs, the
    prefix is empty and bwrap's own tmpfs (size-bounded only) is used.

    Returns:
        ``(prefix, note)``: the prefix (empty when unavailable) and a sentence for the availability reason.
    """
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if unshare is None or mount is None:
        return (), "no inode limit on /tmp: unshare or mount is not installed"
    options = f"size={_TMP_SIZE_BYTES},nr_inodes={_TMP_INODES},mode=1777"
    prefix = (unshare, "--user", "--map-root-user", "--mount", "--propagation", "private",
              "/bin/sh", "-c", _TMP_MOUNT_SCRIPT, mount, options, layout.tmp_mount)  # fmt: skip
    try:
        probe = subprocess.run([*prefix, "/bin/true"], env={}, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return (), f"no inode limit on /tmp: {exc}"
    if probe.returncode != 0:
        detail = (probe.stderr.strip().splitlines() or [f"exit code {probe.returncode}"])[0]
        return (), f"no inode limit on /tmp: {detail}"
    return prefix, f"without a memory cgroup /tmp is limited to {_TMP_INODES} inodes"


# Joins the cgroup, then becomes bwrap: everything bwrap starts is created inside the cgroup. If joining
# fails the call still runs, bounded by the rlimits and seccomp (the self-test checks that joining works).
_CGROUP_TRAMPOLINE = 'echo $$ > "$0" 2>/dev/null; exec "$@"'


def _execute(
    bwrap: str,
    layout: _Layout,
    source: bytes,
    limits: SandboxLimits,
    now: datetime,
    cgroup_parent: _CgroupParent | None,
    probe: list[int] | None = None,
) -> SandboxResult:
    """Start bwrap, stream its output under the caps, enforce the deadline, and summarise."""
    cap = limits.max_output_bytes
    hard_cap = cap * _HARD_OUTPUT_FACTOR
    cgroup = None
    if cgroup_parent is not None:
        cgroup = _Cgroup(cgroup_parent, limits.memory_mb * 1024 * 1024 + _CGROUP_HEADROOM_BYTES)
    try:
        _ensure_skeleton(layout)
        # The program's stdout and stderr are AF_UNIX sockets, not pipes: a pipe's inode carries the real
        # time (os.fstat(1).st_mtime), a socket's carries none.
        out_read, out_write = socket.socketpair()
        err_read, err_write = socket.socketpair()
        try:
            code_fd = _memfd_with("sandbox-code", source)
            try:
                seccomp_fd = _memfd_with("sandbox-seccomp", seccomp_program())
                try:
                    # The inode-bounded /tmp only where no memory cgroup counts the inodes' kernel memory.
                    call_layout = layout if cgroup is None else dataclasses.replace(layout, tmp_wrapper=())
                    argv = [
                        *call_layout.tmp_wrapper,
                        *_bwrap_argv(bwrap, call_layout, seccomp_fd, limits, now),
                    ]
                    if cgroup is not None:
                        argv = ["/bin/sh", "-c", _CGROUP_TRAMPOLINE, cgroup.procs, *argv]
                    start = time.monotonic()
                    proc = subprocess.Popen(
                        argv,
                        stdin=code_fd,
                        stdout=out_write.fileno(),
                        stderr=err_write.fileno(),
                        pass_fds=(seccomp_fd,),
                        env={},
                        start_new_session=True,
                        close_fds=True,
                    )
                finally:
                    os.close(seccomp_fd)
            finally:
                os.close(code_fd)
        finally:
            out_write.close()
            err_write.close()
        try:
            result = _collect(proc, out_read.fileno(), err_read.fileno(), start, limits, cap, hard_cap)
        finally:
            out_read.close()
            err_read.close()
        if cgroup is not None:
            if probe is not None:
                probe.append(cgroup.peak_bytes())
            if result.exit_code in (-signal.SIGKILL, 128 + signal.SIGKILL) and cgroup.oom_killed():
                limit_mb = (limits.memory_mb * 1024 * 1024 + _CGROUP_HEADROOM_BYTES) // (1024 * 1024)
                message = f"memory limit of {limit_mb} MiB exceeded; the process was killed"
                result = SandboxResult(
                    ok=False,
                    stdout=result.stdout,
                    stderr=result.stderr,
                    exit_code=None,
                    timed_out=result.timed_out,
                    truncated=result.truncated,
                    error="; ".join(filter(None, [message, result.error])),
                )
        return result
    finally:
        _retire(cgroup)


def _timeout_message(limits: SandboxLimits) -> str:
    return f"timed out after {limits.timeout_s:g} s; the process was killed"


def _collect(
    proc: subprocess.Popen[bytes],
    stdout_fd: int,
    stderr_fd: int,
    start: float,
    limits: SandboxLimits,
    cap: int,
    hard_cap: int,
) -> SandboxResult:
    """Read the sandbox's output (the host ends of its stdout/stderr) under the caps until it exits or the deadline passes."""
    deadline = start + limits.timeout_s
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    seen = {"stdout": 0, "stderr": 0}
    timed_out = False
    flooded = False
    try:
        with selectors.DefaultSelector() as selector:
            for name, fd in (("stdout", stdout_fd), ("stderr", stderr_fd)):
                os.set_blocking(fd, False)
                selector.register(fd, selectors.EVENT_READ, name)
            while selector.get_map() and not flooded:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                for key, _ in selector.select(remaining):
                    try:
                        chunk = os.read(key.fd, _READ_CHUNK)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    name = key.data
                    room = cap - len(kept[name])
                    if room > 0:
                        kept[name] += chunk[:room]
                    seen[name] += len(chunk)
                    if seen[name] > hard_cap:
                        flooded = True
        if timed_out or flooded:
            _kill_group(proc)
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
            proc.wait()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise

    truncated = seen["stdout"] > cap or seen["stderr"] > cap
    killed = timed_out or flooded
    problems: list[str] = []
    if timed_out:
        problems.append(_timeout_message(limits))
    if flooded:
        problems.append(f"output exceeded {hard_cap} bytes; the process was killed")
    if truncated:
        problems.append(f"output truncated to the first {cap} bytes of each stream")
    exit_code = None if killed else proc.returncode
    return SandboxResult(
        ok=exit_code == 0,
        stdout=kept["stdout"].decode("utf-8", errors="replace"),
        stderr=kept["stderr"].decode("utf-8", errors="replace"),
        exit_code=exit_code,
        timed_out=timed_out,
        truncated=truncated,
        error="; ".join(problems) or None,
    )


# --- availability (fail closed) --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Availability:
    ok: bool
    reason: str
    bwrap: str | None = None
    layout: _Layout | None = None
    cgroup: _CgroupParent | None = None


_cache_lock = threading.Lock()
_cache: _Availability | None = None


def reset_sandbox_cache() -> None:
    """Forget the self-test result so the next call re-checks (e.g. after PATH or bwrap changed)."""
    global _cache
    with _cache_lock:
        _cache = None


_SELF_TEST_CODE = b"import time\nprint(6 * 7, time.gmtime().tm_year)\n"


def _self_test() -> _Availability:
    """Locate bwrap and libfaketime and run a tiny program through the exact production command line."""
    if not sys.platform.startswith("linux"):
        return _Availability(False, f"bubblewrap sandboxing needs Linux, this is {sys.platform}")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return _Availability(False, "bwrap (bubblewrap) is not installed or not on PATH")
    try:
        layout = _python_layout()
    except OSError as exc:
        return _Availability(False, str(exc))
    wrapper, tmp_note = _bounded_tmp_wrapper(layout)
    layout = dataclasses.replace(layout, tmp_wrapper=wrapper)
    cgroup, cgroup_note = _find_cgroup_parent()
    if cgroup is not None:
        _remove_stale_cgroups(cgroup)
    try:
        peak: list[int] = []
        try:
            result = _execute(bwrap, layout, _SELF_TEST_CODE, _SELF_TEST_LIMITS, DEFAULT_NOW, cgroup, peak)
        except OSError as exc:
            if cgroup is None:
                raise
            cgroup, cgroup_note = None, f"no memory cgroup: cannot create one ({exc})"
            result = _execute(bwrap, layout, _SELF_TEST_CODE, _SELF_TEST_LIMITS, DEFAULT_NOW, None)
        if cgroup is not None and result.ok and peak == [0]:
            # The sandbox did not join the cgroup (or the kernel does not account it): run without.
            cgroup, cgroup_note = None, "no memory cgroup: the sandbox could not join one"
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return _Availability(False, f"self-test could not start bwrap: {exc}")
    expected = f"42 {DEFAULT_NOW.year}\n"
    if not result.ok or result.stdout != expected:
        detail = (result.stderr.strip().splitlines() or [result.error or f"exit code {result.exit_code}"])[0]
        if result.ok:
            detail = f"printed {result.stdout!r}, expected {expected!r} (is the clock faked?)"
        return _Availability(False, f"self-test failed: {detail}")
    return _Availability(
        True, f"bubblewrap sandbox via {bwrap}; {cgroup_note}; {tmp_note}", bwrap, layout, cgroup
    )


def _availability() -> _Availability:
    global _cache
    with _cache_lock:
        if _cache is None:
            _cache = _self_test()
        return _cache


def sandbox_available() -> tuple[bool, str]:
    """Whether sandboxed execution works here (cached self-test), and why not when it does not.

    Returns:
        ``(ok, reason)``; the reason also says whether a memory cgroup bounds each call.
    """
    state = _availability()
    return state.ok, state.reason


def sandbox_packages() -> tuple[str, ...]:
    """The allowlisted distributions found on this host and visible inside the sandbox ("name version")."""
    state = _availability()
    return state.layout.packages if state.layout is not None else ()


def _refusal(error: str) -> SandboxResult:
    return SandboxResult(
        ok=False, stdout="", stderr="", exit_code=None, timed_out=False, truncated=False, error=error
    )


def run_python(
    code: str, limits: SandboxLimits = DEFAULT_LIMITS, *, now: datetime | None = None
) -> SandboxResult:
    """Run agent-written Python in the sandbox; never runs it unsandboxed.

    Args:
        code: The program, as text.
        limits: Resource limits for this run.
        now: What the sandbox's wall clock reads at start (it then advances in real time); naive
            datetimes are taken as UTC. ``None`` means :data:`DEFAULT_NOW`, never the host's date.

    Returns:
        The run's outcome; ``error`` is set (and nothing ran) when the sandbox is unavailable.

    Raises:
        ValueError: ``limits`` is invalid (a caller bug, not an agent error).
    """
    limits.validate()
    state = _availability()
    if not state.ok or state.bwrap is None or state.layout is None:
        return _refusal(f"python sandbox unavailable: {state.reason}")
    try:
        source = code.encode("utf-8")
    except UnicodeEncodeError:
        return _refusal("code is not valid UTF-8 text; nothing was run")
    if len(source) > limits.max_code_bytes:
        return _refusal(
            f"code is {len(source)} bytes, over the limit of {limits.max_code_bytes} bytes; nothing was run"
        )
    try:
        return _execute(state.bwrap, state.layout, source, limits, now or DEFAULT_NOW, state.cgroup)
    except (OSError, subprocess.SubprocessError) as exc:
        return _refusal(f"python sandbox unavailable: could not start bwrap: {exc}")


# --- framing for the agent -------------------------------------------------------------------------------

STDOUT_OPEN, STDOUT_CLOSE = "<python_stdout>", "</python_stdout>"
STDERR_OPEN, STDERR_CLOSE = "<python_stderr>", "</python_stderr>"
# Anything in the program's output that could be read as one of the frame's tags (any case, spaces or a
# slash after '<') has its '<' replaced by "&lt;", so the program cannot close its frame and forge text
# outside it.
_TAG_LIKE = re.compile(r"<(?=\s*/?\s*python_std(?:out|err))", re.IGNORECASE)


def _neutralize(text: str) -> str:
    return _TAG_LIKE.sub("&lt;", text)


def frame_output(result: SandboxResult) -> tuple[str, str | None]:
    """Render a run for the agent: (framed program output, env error or None).

    The program's stdout (always) and stderr (when not empty) are wrapped in ``<python_stdout>`` /
    ``<python_stderr>`` blocks; whatever the program prints can neither close a block nor open one, so
    all text outside the blocks, and the tool layer's ``Error: ...`` line before them, is the env's.

    Args:
        result: What :func:`run_python` returned.

    Returns:
        ``(content, error)``: the framed output, and the env's error for a failed run (sandbox refused,
        limit hit, non-zero exit code), else ``None``.
    """
    blocks = []
    for opening, closing, text in (
        (STDOUT_OPEN, STDOUT_CLOSE, result.stdout),
        (STDERR_OPEN, STDERR_CLOSE, result.stderr),
    ):
        if text or opening == STDOUT_OPEN:
            body = _neutralize(text)
            if body and not body.endswith("\n"):
                body += "\n"
            blocks.append(f"{opening}\n{body}{closing}")
    content = "\n".join(blocks)
    if result.error:
        return content, result.error
    if not result.ok:
        return content, f"the program exited with code {result.exit_code}"
    return content, None


def sandbox_python_runner(code: str, now: datetime, timeout_s: float | None = None) -> tuple[str, str | None]:
    """The env's python tool: run ``code`` with the clock at ``now`` (the step's cutoff) and frame it.

    Fails closed: when no sandbox is available the error says so and nothing runs.

    Args:
        code: The agent's program.
        now: The forecast step's cutoff; the sandbox's clock reads it.
        timeout_s: What is left of the step's python time budget: the call's timeout is the smaller of
            this and the default. When the budget is what stops the program, the error says so.

    Returns:
        ``(content, error)`` as :func:`frame_output` gives them.
    """
    limits = DEFAULT_LIMITS
    budget_cut = timeout_s is not None and timeout_s < limits.timeout_s
    if budget_cut:
        assert timeout_s is not None
        limits = dataclasses.replace(limits, timeout_s=max(timeout_s, 0.001))
    result = run_python(code, limits, now=now)
    if budget_cut and result.timed_out and result.error is not None:
        # Not "timed out after 3.14159 s": the same code gives the same message whatever was left.
        message = _timeout_message(limits)
        result = dataclasses.replace(
            result,
            error=result.error.replace(
                message, "the python time budget of this step ran out; the process was killed"
            ),
        )
    return frame_output(result)
