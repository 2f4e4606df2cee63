"""Run untrusted, model-written Python in a bubblewrap sandbox.

The forecasting environments expose a ``python(code)`` tool to the agent. That code is untrusted, so it
runs in a separate ``bwrap`` process with fresh user/pid/net/ipc/uts/cgroup namespaces, an empty root
file system holding only read-only binds of ``/usr`` and the interpreter's install, a small private
``/tmp``, no ``/proc``, no ``/etc``, no host environment, no network, a seccomp filter that forbids
creating processes or threads, and rlimits on memory, CPU and file size. A wall-clock deadline kills the
whole sandbox.

The module fails closed: when ``bwrap`` is missing or the self-test fails, :func:`run_python` returns an
error result and runs nothing. There is no unsandboxed fallback. See ``docs/sandbox.md`` for the threat
model and the residual risks.
"""

from __future__ import annotations

import contextlib
import math
import os
import platform
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass

__all__ = [
    "DEFAULT_LIMITS",
    "SandboxLimits",
    "SandboxResult",
    "reset_sandbox_cache",
    "run_python",
    "sandbox_available",
]


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of one sandboxed run, shaped so the tool layer can show it to the agent verbatim."""

    ok: bool  # ran to completion with exit code 0
    stdout: str  # truncated to the output cap
    stderr: str  # truncated; Python tracebacks appear here
    exit_code: int | None  # None when the sandbox was killed by us or never started
    timed_out: bool
    truncated: bool
    error: str | None  # sandbox unavailable (fail closed) or a limit was hit, phrased for the agent


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits for one run; defaults suit short numeric forecasting scripts."""

    timeout_s: float = 10.0
    memory_mb: int = 512
    max_output_bytes: int = 16_000
    max_code_bytes: int = 100_000
    # RLIMIT_NPROC inside the sandbox. Defence in depth only: the seccomp filter already forbids
    # fork/clone, and the kernel ignores RLIMIT_NPROC for tasks whose host uid is 0 (see docs).
    max_processes: int = 32

    def validate(self) -> None:
        """Reject limits that cannot be enforced, so a caller bug never silently disables a limit."""
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"timeout_s must be a positive finite number, got {self.timeout_s!r}")
        if self.memory_mb < 64:
            raise ValueError(
                f"memory_mb must be at least 64 (the interpreter needs it), got {self.memory_mb}"
            )
        for name in ("max_output_bytes", "max_code_bytes", "max_processes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")


DEFAULT_LIMITS = SandboxLimits()

# Size of the private /tmp tmpfs. tmpfs pages are host memory outside RLIMIT_AS, so this is fixed and small.
_TMP_SIZE_BYTES = 64 * 1024 * 1024
# Largest single file the code may write (RLIMIT_FSIZE); Python ignores SIGXFSZ, so writes raise OSError.
_MAX_FILE_BYTES = 32 * 1024 * 1024
# Output beyond max_output_bytes is discarded; beyond this multiple of it the sandbox is killed.
_HARD_OUTPUT_FACTOR = 8
_READ_CHUNK = 65536
_SELF_TEST_LIMITS = SandboxLimits(timeout_s=20.0, memory_mb=256, max_output_bytes=1000)

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
)

# Marker in the bootstrap's argv, so a host-side `ps` (and the orphan test) can recognise sandboxes.
BOOTSTRAP_MARKER = "# forecast_dojo.sandbox bootstrap"

# Runs inside the sandbox before the agent's code. It is trusted and passed as an argv element (no shell
# is involved); the agent's code arrives on stdin. Lowered hard limits cannot be raised again because the
# sandbox holds no capabilities in the initial user namespace.
_BOOTSTRAP = (
    BOOTSTRAP_MARKER
    + """
import resource, sys
_as, _cpu, _fsize, _nproc = (int(v) for v in sys.argv[1:5])
sys.path[:] = sys.argv[5:]
for _kind, _soft, _hard in (
    (resource.RLIMIT_AS, _as, _as),
    (resource.RLIMIT_CPU, _cpu, _cpu + 1),
    (resource.RLIMIT_FSIZE, _fsize, _fsize),
    (resource.RLIMIT_NPROC, _nproc, _nproc),
    (resource.RLIMIT_CORE, 0, 0),
):
    resource.setrlimit(_kind, (_soft, _hard))
_source = sys.stdin.buffer.read().decode("utf-8")
sys.argv[:] = ["<agent>"]
del _as, _cpu, _fsize, _nproc, _kind, _soft, _hard, resource


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
)

# --- seccomp ---------------------------------------------------------------------------------------------
# A classic-BPF filter handed to bwrap via --seccomp. It denies (EPERM) every way to create a task and a
# list of kernel interfaces sandboxed numeric code never needs. Task creation must be denied because the
# kernel exempts host uid 0 from RLIMIT_NPROC, so without this a fork or thread bomb would be bounded
# only by the host's pid space.
_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_RET_KILL_PROCESS = 0x80000000
_SECCOMP_RET_ERRNO = 0x00050000
_SECCOMP_RET_ALLOW = 0x7FFF0000
_EPERM = 1
_BPF_LD_W_ABS = 0x20
_BPF_JEQ_K = 0x15
_BPF_JGE_K = 0x35
_BPF_RET_K = 0x06
_SECCOMP_DATA_NR = 0
_SECCOMP_DATA_ARCH = 4

# x86_64 syscall numbers (asm/unistd_64.h).
_DENIED_SYSCALLS_X86_64: dict[str, int] = {
    "clone": 56,
    "fork": 57,
    "vfork": 58,
    "clone3": 435,
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
    "name_to_handle_at": 303,
    "open_by_handle_at": 304,
    "setns": 308,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
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
    "mount_setattr": 442,
}


def _bpf(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program() -> bytes:
    """Compile the deny-list filter for x86_64; other architectures are refused (fail closed)."""
    machine = platform.machine()
    if machine not in ("x86_64", "AMD64"):
        raise OSError(f"no seccomp filter is defined for architecture {machine!r}")
    denied = sorted(set(_DENIED_SYSCALLS_X86_64.values()))
    # Layout: [0] load arch, [1] arch ok?, [2] kill, [3] load nr, [4] x32 ABI?, [5..] denied nrs,
    # [5 + n] allow, [6 + n] deny.
    deny_at = 6 + len(denied)
    program = [
        _bpf(_BPF_LD_W_ABS, 0, 0, _SECCOMP_DATA_ARCH),
        _bpf(_BPF_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        _bpf(_BPF_RET_K, 0, 0, _SECCOMP_RET_KILL_PROCESS),
        _bpf(_BPF_LD_W_ABS, 0, 0, _SECCOMP_DATA_NR),
        _bpf(_BPF_JGE_K, deny_at - 4 - 1, 0, _X32_SYSCALL_BIT),
    ]
    for index, nr in enumerate(denied, start=5):
        program.append(_bpf(_BPF_JEQ_K, deny_at - index - 1, 0, nr))
    program.append(_bpf(_BPF_RET_K, 0, 0, _SECCOMP_RET_ALLOW))
    program.append(_bpf(_BPF_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _EPERM))
    assert len(program) == deny_at + 1
    return b"".join(program)


# --- command line ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Host paths the sandbox needs, resolved once per process."""

    interpreter: str
    ro_binds: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]  # (target, link path)
    sys_path: tuple[str, ...]


def _python_layout() -> _Layout:
    """Find the interpreter, its stdlib and site-packages, and the minimal set of host dirs to bind."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    prefix = os.path.realpath(sys.base_prefix)
    interpreter = os.path.join(prefix, "bin", f"python{version}")
    if not os.path.isfile(interpreter):
        interpreter = os.path.realpath(sys.executable)
    paths = sysconfig.get_paths()
    # The standard library (and its compiled modules in lib-dynload) belong to the base interpreter;
    # inside a virtualenv ``platstdlib`` points into the venv, which holds no stdlib at all.
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_prefix})
    candidates = [
        os.path.join(prefix, "lib", f"python{sys.version_info.major}{sys.version_info.minor}.zip"),
        base["stdlib"],
        base["platstdlib"],
        os.path.join(base["platstdlib"], "lib-dynload"),
        paths["purelib"],
        paths["platlib"],
    ]
    sys_path: list[str] = []
    for path in candidates:
        real = os.path.realpath(path)
        if os.path.exists(real) and real not in sys_path:
            sys_path.append(real)

    roots = ["/usr"]
    if not _is_under(prefix, roots):
        roots.append(prefix)
    # A virtualenv's site-packages lives outside base_prefix: bind just that directory, never its parents.
    for path in sys_path:
        if not _is_under(path, roots):
            roots.append(path)
    if not _is_under(interpreter, roots):
        raise OSError(f"interpreter {interpreter} is outside the directories bound into the sandbox")

    ro_binds = list(roots)
    symlinks: list[tuple[str, str]] = []
    # Merged-/usr systems have /bin, /lib... as symlinks into /usr; older ones have real directories.
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            symlinks.append((os.readlink(top), top))
        elif os.path.isdir(top):
            ro_binds.append(top)
    return _Layout(interpreter, tuple(ro_binds), tuple(symlinks), tuple(sys_path))


def _is_under(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _bwrap_argv(bwrap: str, layout: _Layout, seccomp_fd: int, limits: SandboxLimits) -> list[str]:
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
    # The private /tmp comes first, so that binds below it (a virtualenv under /tmp) stay visible.
    argv += ["--perms", "1777", "--size", str(_TMP_SIZE_BYTES), "--tmpfs", "/tmp"]
    for path in layout.ro_binds:
        argv += ["--ro-bind", path, path]
    for target, link in layout.symlinks:
        argv += ["--symlink", target, link]
    argv += [
        "--dev",
        "/dev",
        "--remount-ro",
        "/dev",
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
        *layout.sys_path,
    ]
    return argv


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
    """SIGKILL bwrap's process group; --die-with-parent then kills the sandbox's pid 1, which takes down
    every process in the sandbox's pid namespace."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


def _execute(bwrap: str, layout: _Layout, source: bytes, limits: SandboxLimits) -> SandboxResult:
    """Start bwrap, stream its output under the caps, enforce the deadline, and summarise."""
    cap = limits.max_output_bytes
    hard_cap = cap * _HARD_OUTPUT_FACTOR
    code_fd = _memfd_with("sandbox-code", source)
    try:
        seccomp_fd = _memfd_with("sandbox-seccomp", seccomp_program())
        try:
            argv = _bwrap_argv(bwrap, layout, seccomp_fd, limits)
            start = time.monotonic()
            proc = subprocess.Popen(
                argv,
                stdin=code_fd,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                pass_fds=(seccomp_fd,),
                env={},
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(seccomp_fd)
    finally:
        os.close(code_fd)

    deadline = start + limits.timeout_s
    kept = {"stdout": bytearray(), "stderr": bytearray()}
    seen = {"stdout": 0, "stderr": 0}
    timed_out = False
    flooded = False
    assert proc.stdout is not None and proc.stderr is not None
    try:
        with selectors.DefaultSelector() as selector:
            for name, stream in (("stdout", proc.stdout), ("stderr", proc.stderr)):
                os.set_blocking(stream.fileno(), False)
                selector.register(stream.fileno(), selectors.EVENT_READ, name)
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
    finally:
        proc.stdout.close()
        proc.stderr.close()

    truncated = seen["stdout"] > cap or seen["stderr"] > cap
    killed = timed_out or flooded
    problems: list[str] = []
    if timed_out:
        problems.append(f"timed out after {limits.timeout_s:g} s; the process was killed")
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


@dataclass(frozen=True)
class _Availability:
    ok: bool
    reason: str
    bwrap: str | None = None
    layout: _Layout | None = None


_cache_lock = threading.Lock()
_cache: _Availability | None = None


def reset_sandbox_cache() -> None:
    """Forget the self-test result so the next call re-checks (e.g. after PATH or bwrap changed)."""
    global _cache
    with _cache_lock:
        _cache = None


def _self_test() -> _Availability:
    """Locate bwrap and run a tiny program through the exact production command line."""
    if not sys.platform.startswith("linux"):
        return _Availability(False, f"bubblewrap sandboxing needs Linux, this is {sys.platform}")
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return _Availability(False, "bwrap (bubblewrap) is not installed or not on PATH")
    try:
        layout = _python_layout()
        result = _execute(bwrap, layout, b"print(6 * 7)\n", _SELF_TEST_LIMITS)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return _Availability(False, f"self-test could not start bwrap: {exc}")
    if not result.ok or result.stdout != "42\n":
        detail = (result.stderr.strip().splitlines() or [result.error or f"exit code {result.exit_code}"])[0]
        return _Availability(False, f"self-test failed: {detail}")
    return _Availability(True, f"bubblewrap sandbox via {bwrap}", bwrap, layout)


def _availability() -> _Availability:
    global _cache
    with _cache_lock:
        if _cache is None:
            _cache = _self_test()
        return _cache


def sandbox_available() -> tuple[bool, str]:
    """Whether sandboxed execution works here (cached self-test), and why not when it does not."""
    state = _availability()
    return state.ok, state.reason


def _refusal(error: str) -> SandboxResult:
    return SandboxResult(
        ok=False, stdout="", stderr="", exit_code=None, timed_out=False, truncated=False, error=error
    )


def run_python(code: str, limits: SandboxLimits = DEFAULT_LIMITS) -> SandboxResult:
    """Run agent-written Python in the sandbox; never runs it unsandboxed."""
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
        return _execute(state.bwrap, state.layout, source, limits)
    except (OSError, subprocess.SubprocessError) as exc:
        return _refusal(f"python sandbox unavailable: could not start bwrap: {exc}")
