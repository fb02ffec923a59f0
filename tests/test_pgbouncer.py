"""The memory through a real PgBouncer in transaction mode (Debian's `pgbouncer` package).

The test starts its own PgBouncer (pool_mode=transaction, trust auth, 127.0.0.1 on a free
port) in front of the test session's embedded server, points DATABASE_URL at it with
HAG_DATABASE_POOLER=transaction, and runs what a deployment runs: a tutor's turns
(retrieve, then the session ingested at its end), session-end with two workers, and the
nightly run. Then it looks at every server connection the pooler holds for anything a
session left behind. Without the setting, the pooler breaks psycopg's prepared statements.
Skipped when pgbouncer is not installed, except under CI, where that fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hag import DEMO_CORPUS, config, quality, retrieval, settings
from hag.nightly.sweeps import run_nightly
from hag.operations import corpus
from hag.quality import _gx as suites_gx
from hag.retrieval import ann
from hag.session.ingest import ingest_payload
from hag.session.process import process_pending
from hag.storage import db as hdb
from tests.session_builders import T0, payload, turn

SESSIONS = 50
TURNS = 10  # 500 tutor turns in all
LEARNERS = 10
POOL_SIZE = 12  # server connections per database and user
MESSAGES = (
    "why can't I just reuse the same key?",
    "what does a hash actually guarantee?",
    "how do I find a file by name?",
    "is a stack the same as a queue?",
    "why does my signature not verify?",
)


def _pgbouncer() -> str:
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("pgbouncer is not installed: CI installs it (.ci/run)")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def pgbouncer_url(database_url: str) -> Iterator[str]:
    """The URL of a PgBouncer in transaction mode in front of the test session's server."""
    binary = _pgbouncer()
    with psycopg.connect(database_url) as conn:
        pgdata = Path(conn.execute("SHOW data_directory").fetchone()[0])
        sockets = conn.execute("SHOW unix_socket_directories").fetchone()[0].split(",")[0]
        port = conn.execute("SHOW port").fetchone()[0]
        dbname = conn.execute("SELECT current_database()").fetchone()[0]
    # PgBouncer refuses to run as root: as root, run it as the user the server runs as
    # (who can reach the server's socket folder), as the standby test runs pg_ctl.
    user = hdb.embedded_server(pgdata).system_user if os.geteuid() == 0 else None
    folder = Path(tempfile.mkdtemp(prefix="hag-test-pgbouncer-"))
    listen = _free_port()
    (folder / "users.txt").write_text('"postgres" ""\n')
    (folder / "pgbouncer.ini").write_text(
        "[databases]\n"
        f"hag = host={sockets} port={port} dbname={dbname} user=postgres\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'users.txt'}\n"
        f"pool_mode = transaction\ndefault_pool_size = {POOL_SIZE}\nmax_client_conn = 200\n"
        f"logfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n"
    )
    if user:
        for path in (folder, *folder.iterdir()):
            shutil.chown(path, user, user)
    proc = subprocess.Popen(
        [binary, str(folder / "pgbouncer.ini")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,  # it logs to its logfile
        **({"user": user} if user else {}),
    )
    url = f"postgresql://postgres@127.0.0.1:{listen}/hag"
    try:
        _wait_until_serving(url, proc, folder / "pgbouncer.log")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until_serving(
    url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 20.0
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            said = log.read_text().strip().splitlines()[-3:] if log.exists() else []
            pytest.fail(f"pgbouncer exited with {proc.returncode}: {' / '.join(said)}")
        try:
            with psycopg.connect(url, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
                return
        except psycopg.OperationalError:
            time.sleep(0.1)
    pytest.fail(f"pgbouncer did not answer on {url} in {timeout} s")


@pytest.fixture
def through_pgbouncer(db, pgbouncer_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The process configured to reach the memory through the PgBouncer, with the setting on."""
    monkeypatch.setenv("DATABASE_URL", pgbouncer_url)
    monkeypatch.setenv("HAG_DATABASE_POOLER", "transaction")
    monkeypatch.delenv("HAG_DIRECT_DATABASE_URL", raising=False)
    config.reset_config()
    hdb.close_all()
    retrieval.clear_caches()
    settings.invalidate()
    yield pgbouncer_url
    hdb.close_all()
    suites_gx.close()  # the suites' engines hold connections through the pooler
    retrieval.clear_caches()
    monkeypatch.undo()
    config.reset_config()
    settings.invalidate()


def _tutor(sessions: int, turns: int) -> int:
    """A tutor's loop: each turn retrieves, each session is ingested as it ends; turns run."""
    topics = ("cryptography", "data-structures", "linux-basics")
    done = 0
    for s in range(sessions):
        topic, learner = topics[s % len(topics)], f"learner-{s % LEARNERS}"
        played = []
        for t in range(turns):
            message = MESSAGES[(s + t) % len(MESSAGES)]
            answer = retrieval.retrieve(topic, learner, f"{message} ({s}.{t})")
            used = answer.used_entry_ids
            played.append(
                turn(
                    t,
                    decision=used[0] if used else None,
                    used=used,
                    rendered=answer.rendered_edge_ids,
                    outcome=("success", "failure", None)[t % 3] if used else None,
                    message=message,
                )
            )
            done += 1
        with hdb.pool().connection() as conn:
            result = ingest_payload(
                conn, payload(f"pooled-{s}", played, learner=learner, topic=topic, day=s % 7)
            )
        assert result.accepted, result
    return done


def _leftovers(url: str, direct: str) -> list[dict[str, Any]]:
    """Each server connection of the pooler, as one transaction apiece sees its settings."""
    clients = [psycopg.connect(url, prepare_threshold=None) for _ in range(POOL_SIZE)]
    try:
        seen = []
        for c in clients:  # each open transaction pins a server connection of its own
            c.execute("BEGIN")
            seen.append(
                c.execute(
                    "SELECT pg_backend_pid() AS pid, "
                    "current_setting('default_transaction_read_only') AS ro, "
                    "current_setting('jit') AS jit, current_setting('plan_cache_mode') AS plans, "
                    "current_setting('lock_timeout') AS lock_timeout, "
                    "current_setting('hnsw.ef_search', true) AS ef_search, "
                    "(SELECT count(*) FROM pg_prepared_statements) AS prepared"
                ).fetchone()
            )
        with psycopg.connect(direct) as conn:
            locks = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
            ).fetchone()
        return [
            dict(zip(("pid", "ro", "jit", "plans", "lock", "ef", "prep"), r, strict=True))
            for r in seen
        ] + [{"advisory_locks": locks[0]}]
    finally:
        for c in clients:
            c.close()


def test_tutor_session_end_and_nightly_through_pgbouncer_in_transaction_mode(
    through_pgbouncer: str, database_url: str
):
    """500 tutor turns, session-end on 2 workers and a nightly, through PgBouncer: no session state."""
    loaded = corpus.load_file(DEMO_CORPUS)
    assert loaded.entries > 0
    assert _tutor(SESSIONS, TURNS) == SESSIONS * TURNS
    summary = process_pending(workers=2, batch_size=10)
    assert (summary.sessions, summary.rejects) == (SESSIONS, 0)
    night = run_nightly(as_of=T0.replace(year=T0.year + 1))
    ann.nightly_upkeep()  # its index builds need HAG_DIRECT_DATABASE_URL: skipped, not failed
    checked = quality.run_all()  # the data-quality suites, through the pooler too
    assert checked.suites and all(s.success for s in checked.suites), checked
    with hdb.connect() as conn:
        statuses = conn.execute("SELECT kind, status FROM hag_runs ORDER BY started_at").fetchall()
        pending = conn.execute(
            "SELECT count(*) AS n FROM hag_sessions WHERE status <> 'processed'"
        ).fetchone()
    assert [(r["kind"], r["status"]) for r in statuses] == [
        ("session_end", "done"),
        ("nightly", "done"),
    ]
    assert pending["n"] == 0 and night.run_id is not None
    hdb.close_all()
    servers = _leftovers(through_pgbouncer, database_url)
    assert servers.pop() == {"advisory_locks": 0}
    assert len({s.pop("pid") for s in servers}) == POOL_SIZE
    clean = {"ro": "off", "jit": "on", "plans": "auto", "lock": "0", "prep": 0}
    assert [s for s in servers if s.pop("ef") not in ("40", None) or s != clean] == []


def test_without_the_setting_the_pooler_breaks_prepared_statements(through_pgbouncer: str):
    """With prepared statements on, two clients through the pooler collide on `_pg3_0`."""
    first, second = (psycopg.connect(through_pgbouncer, prepare_threshold=0) for _ in range(2))
    try:
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement, match="_pg3_0"):
            for _ in range(POOL_SIZE):  # whichever server connection each one lands on
                first.execute("SELECT %s::int", (1,))
                first.commit()
                second.execute("SELECT %s::int + 1", (1,))
                second.commit()
    finally:
        first.close()
        second.close()


HOLD = (
    "import sys, time, uuid; from hag.storage import runs\n"
    "with runs.alive(uuid.UUID(sys.argv[1])):\n"
    "    print('held', flush=True); time.sleep(600)\n"
)


def test_a_killed_run_behind_pgbouncer_is_marked_abandoned(db, through_pgbouncer: str):
    """A run's liveness holds through the pooler while its process lives, and ends when it is killed."""
    import signal
    import sys
    import uuid

    from hag import PROJECT_ROOT
    from hag.storage import runs

    run_id = uuid.uuid4()
    db.execute("INSERT INTO hag_runs (run_id, kind) VALUES (%s, 'nightly')", (run_id,))
    db.commit()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(run_id)],
        env=dict(os.environ),  # DATABASE_URL and HAG_DATABASE_POOLER: the pooler's
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"held"
        with hdb.connect() as conn:
            assert runs.reap(conn) == []  # alive: through the pooler, its lock holds
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None:
            proc.stdout.close()
    deadline = time.monotonic() + 30  # the pooler closes the server connection it held
    reaped: list[uuid.UUID] = []
    while not reaped and time.monotonic() < deadline:
        with hdb.connect() as conn:
            reaped = runs.reap(conn)
        time.sleep(0.05)
    assert reaped == [run_id]
