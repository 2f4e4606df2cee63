"""Inner virtual environments for the install tests, which see the packages of the running environment."""

from __future__ import annotations

import site
import subprocess
import sys
from pathlib import Path


def outer_site_dirs() -> list[str]:
    """The running environment's own site directories when it is a virtualenv, else none.

    ``python -m venv --system-site-packages`` run from inside a virtualenv makes an environment on top of
    the *base* interpreter: it sees the base's packages, not the outer virtualenv's (where the README's
    ``pip install`` put torch, gymnasium, ...). Outside a virtualenv there is nothing to add.
    """
    if sys.prefix == sys.base_prefix:
        return []
    return [path for path in site.getsitepackages() if Path(path).is_dir()]


def make_venv(path: Path, timeout: float = 300) -> Path:
    """Create a virtualenv at ``path`` that sees every package the running interpreter sees.

    It is made with ``--system-site-packages``; inside an outer virtualenv a ``.pth`` file in its own
    site-packages also adds the outer one's site directories (with ``site.addsitedir``, so their ``.pth``
    files run too). They come after the new environment's own packages and before the base interpreter's,
    as in the outer environment.

    Args:
        path: Where to create it.
        timeout: Seconds allowed for ``python -m venv``.

    Returns:
        The new environment's ``python``.
    """
    # --without-pip: ensurepip alone took over 300 s on a loaded 2-core machine; the wheel goes in with the
    # running environment's pip (see :func:`pip_install`).
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)],
                   check=True, timeout=timeout)  # fmt: skip
    python = path / "bin" / "python"
    outer = outer_site_dirs()
    if outer:
        purelib = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        lines = [f"import site; site.addsitedir({directory!r})" for directory in outer]
        (Path(purelib) / "_outer_environment.pth").write_text("\n".join(lines) + "\n")
    return python


def pip_install(python: Path, *args: str, timeout: float = 300) -> None:
    """``pip install *args`` into the environment of ``python`` (made by :func:`make_venv`, which has no pip).

    Runs the running environment's pip with ``--python``, so the new environment needs no pip of its own.
    """
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", *args],
                   check=True, capture_output=True, timeout=timeout)  # fmt: skip
