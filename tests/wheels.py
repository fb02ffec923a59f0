"""Build this checkout's wheel and install it into a fresh virtualenv (tests/test_wheel.py,
tests/test_core_install.py): what a user of the package gets, with or without extras."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from hag import PROJECT_ROOT

# The settings that point a run at this checkout or its servers: an installed wheel sees none.
FOREIGN_ENV = ("HAG_", "DATABASE_URL", "PREFECT_API_URL", "OPENAI_", "VIRTUAL_ENV", "PYTHONPATH")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    bin: Path  # the fresh venv's scripts folder

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def site_packages(self) -> Path:
        (found,) = self.bin.parent.glob("lib/python3*/site-packages")
        return found


def uv() -> str:
    found = shutil.which("uv")
    assert found is not None, "the wheel tests need uv on PATH (`make install` bootstraps it)"
    return found


@contextmanager
def own_folder(prefix: str) -> Iterator[Path]:
    """A folder of the test's own, removed after: not pytest's rotating basetemp, which a
    concurrent pytest run prunes (a venv's embedded server binaries vanish mid-run), and
    readable by all (as root, the embedded server runs its binaries as another user)."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def build_wheel(root: Path) -> Path:
    """`uv build --wheel` of this checkout into `root/dist`; the wheel's path."""
    subprocess.run(
        [uv(), "build", "--wheel", "--out-dir", str(root / "dist"), str(PROJECT_ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = (root / "dist").glob("hag_memory-*.whl")
    return wheel


def install(wheel: Path, venv: Path, extras: str = "") -> Installed:
    """A fresh venv at `venv` with the wheel installed (`extras`: e.g. "all"; "" the core),
    from uv's cache and the package registry."""
    subprocess.run([uv(), "venv", "-q", str(venv), "--python", sys.executable], check=True)
    wanted = f"{wheel}[{extras}]" if extras else str(wheel)
    subprocess.run(
        [uv(), "pip", "install", "-q", "--compile-bytecode", "--python", str(venv), wanted],
        check=True,
        capture_output=True,
    )
    return Installed(wheel, venv / "bin")


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without anything that points at the checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(FOREIGN_ENV)}
    env.update(DO_NOT_TRACK="1", PREFECT_SERVER_ANALYTICS_ENABLED="false", **extra)
    return env
