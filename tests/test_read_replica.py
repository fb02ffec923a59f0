"""`retrieve` on a real streaming replica: it reads the standby, every write goes to the primary.

The standby is made once per test session from the test's embedded primary with the server's
own binaries (`pg_basebackup -R`, `pg_ctl`), the way an operator would make one. Replication
is asynchronous unless a test says otherwise, so what a read sees right after a write depends
on replay; the tests pause replay to make the stale case certain rather than likely.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hag import config, retrieval
from hag.storage import db as hdb
from tests.fix_retrieval import put
from tests.fix_retrieval import run as retrieve
from tests.session_builders import payload, run, turn

STANDBY_NAME = "hag_test_standby"
REPLAY_TIMEOUT_SECONDS = 30


def _as_server_user(server: Any) -> dict[str, Any]:
    """subprocess arguments that run a server binary as the user that owns the data folders."""
    return {"user": server.system_user} if server.system_user else {}


@pytest.fixture(scope="session")
def standby_url(database_url: str) -> Iterator[str]:
    """The URL of a hot standby streaming from the test session's primary (made once)."""
    if os.environ.get("HAG_TEST_DATABASE_URL"):
        pytest.skip("needs the embedded primary: the standby is made with its binaries")
    with psycopg.connect(database_url) as conn:
        pgdata = Path(conn.execute("SHOW data_directory").fetchone()[0])
        socket_dir = conn.execute("SHOW unix_socket_directories").fetchone()[0].split(",")[0]
    server = hdb.embedded_server(pgdata)  # already running: only its binaries and user
    folder = Path(tempfile.mkdtemp(prefix="hag-test-standby-"))
    folder.chmod(0o755)
    standby = folder / "pgdata"
    standby.mkdir(mode=0o700)
    if server.system_user:
        shutil.chown(standby, server.system_user, server.system_user)
    run_as = _as_server_user(server)
    bin_path = Path(server.bin_path)
    subprocess.run(
        [
            str(bin_path / "pg_basebackup"),
            *("-h", socket_dir, "-U", "postgres", "-D", str(standby)),
            *("-R", "-X", "stream", "-c", "fast", "-d", f"application_name={STANDBY_NAME}"),
        ],
        check=True,
        capture_output=True,
        **run_as,
    )
    # The primary keeps its socket in its data folder: the copy must not inherit its lock.
    for leftover in (*standby.glob(".s.PGSQL.*"), standby / "postmaster.opts"):
        leftover.unlink(missing_ok=True)
    log = folder / "standby.log"
    log.touch()
    if server.system_user:
        shutil.chown(log, server.system_user, server.system_user)
    pg_ctl = [str(bin_path / "pg_ctl"), "-D", str(standby), "-w"]
    subprocess.run(
        [*pg_ctl, "-l", str(log), "-o", f'-h "" -k {standby}', "start"],
        check=True,
        capture_output=True,
        **run_as,
    )
    try:
        yield f"postgresql://postgres:@/postgres?host={standby}"
    finally:
        hdb.close_read_pool()  # the read pool may still hold standby connections
        subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True, **run_as)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def replica(db: Any, standby_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The read path pointed at the standby (HAG_READ_DATABASE_URL), caches empty, in sync."""
    monkeypatch.setenv("HAG_READ_DATABASE_URL", standby_url)
    config.reset_config()
    hdb.close_read_pool()
    retrieval.clear_caches()
    caught_up(db, standby_url)  # the fixture's own reset of the memory has been replayed
    yield standby_url
    hdb.close_read_pool()
    monkeypatch.delenv("HAG_READ_DATABASE_URL")
    config.reset_config()
    retrieval.clear_caches()


def caught_up(primary: Any, standby_url: str) -> None:
    """Wait until the standby has replayed everything the primary has written so far."""
    lsn = primary.execute("SELECT pg_current_wal_lsn()::text AS lsn").fetchone()["lsn"]
    primary.rollback()
    deadline = time.monotonic() + REPLAY_TIMEOUT_SECONDS
    with psycopg.connect(standby_url, autocommit=True) as standby:
        while not standby.execute(
            "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)
        ).fetchone()[0]:
            assert time.monotonic() < deadline, f"the standby did not replay up to {lsn}"
            time.sleep(0.02)


def set_replay(standby_url: str, *, paused: bool) -> None:
    with psycopg.connect(standby_url, autocommit=True) as standby:
        standby.execute(
            "SELECT pg_wal_replay_pause()" if paused else "SELECT pg_wal_replay_resume()"
        )
        if paused:  # a pause is requested, then takes effect: wait for it
            while (
                standby.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] != "paused"
            ):
                time.sleep(0.01)


def topic_ids(result: retrieval.RetrievalResult) -> set[Any]:
    return {a.entry_id for a in result.topic_advisories}


def test_the_read_pool_is_on_the_standby_and_the_write_pool_on_the_primary(replica):
    """With HAG_READ_DATABASE_URL set the read pool is in recovery; db.connect is not."""
    with hdb.read_pool().connection() as reader:
        assert reader.execute("SELECT pg_is_in_recovery() AS r").fetchone()["r"] is True
    with hdb.connect() as writer:
        assert writer.execute("SELECT pg_is_in_recovery() AS r").fetchone()["r"] is False
    assert hdb.read_database_url() == replica != hdb.database_url()


def test_a_read_right_after_a_write_misses_it_until_the_standby_replays(db, replica):
    """Replay paused: the standby's retrieve lacks a committed entry the primary's own read has."""
    old = put(db, 0.7, 10)
    db.commit()
    caught_up(db, replica)
    set_replay(replica, paused=True)
    try:
        new = put(db, 0.9, 11)
        db.commit()
        assert topic_ids(retrieve()) == {old}  # the standby: as of before the write
        assert topic_ids(retrieve(conn=db)) == {old, new}  # the primary has it
    finally:
        set_replay(replica, paused=False)
    caught_up(db, replica)
    retrieval.clear_caches()
    assert topic_ids(retrieve()) == {old, new}


def test_with_the_primary_away_the_standby_answers_with_the_last_dials(
    db, dials, replica, monkeypatch
):
    """The primary unreachable once the dials' snapshot has expired: the retrieve still reads
    the standby, with the dials read last, instead of failing on the dials' reload."""
    from hag import settings
    from tests.fix_db import unreachable_url

    dials(retrieval_cache_ttl_seconds=0)
    old = put(db, 0.7, 10)
    db.commit()
    caught_up(db, replica)
    clock = [1000.0]
    monkeypatch.setattr(settings.time, "monotonic", lambda: clock[0])
    assert topic_ids(retrieve()) == {old}
    with monkeypatch.context() as away:
        away.setenv("DATABASE_URL", unreachable_url())
        config.reset_config()
        hdb.close_all()
        try:
            clock[0] += 61  # the dials' snapshot expired: its reload meets no primary
            retrieval.clear_caches()
            assert topic_ids(retrieve()) == {old}
            assert hdb.read_database_url() == replica
        finally:
            hdb.close_all()
    config.reset_config()


def test_the_result_cache_adds_its_ttl_to_the_replay_lag(db, dials, replica, monkeypatch):
    """After replay a cached answer is still served (the old one) until its TTL runs out."""
    dials(retrieval_cache_ttl_seconds=30)
    clock = [1000.0]
    monkeypatch.setattr(retrieval._results, "_clock", lambda: clock[0])
    old = put(db, 0.7, 10)
    db.commit()
    caught_up(db, replica)
    first = retrieve()
    assert (first.cached, topic_ids(first)) == (False, {old})

    new = put(db, 0.9, 11)
    db.commit()
    caught_up(db, replica)
    clock[0] += 29.0
    stale = retrieve()
    assert (stale.cached, topic_ids(stale)) == (True, {old})  # replayed, but not yet seen
    clock[0] += 1.0
    fresh = retrieve()
    assert (fresh.cached, topic_ids(fresh)) == (False, {old, new})


def test_a_resident_set_on_the_standby_follows_replay(db, dials, replica):
    """The read path's resident sets (hag.retrieval.resident) add no staleness of their own:
    on the standby a held set answers as of the standby's replay, and the first read after
    a write is replayed drops it and has the new row."""
    from hag.retrieval import resident

    dials(retrieval_cache_ttl_seconds=0)
    old = put(db, 0.7, 10)
    db.commit()
    caught_up(db, replica)

    def topic_path() -> tuple[str, set[Any]]:
        result = retrieve()
        path = next(p.path for p in result.passes if p.name == "topic-semantic")
        resident.residents.wait()
        return path, topic_ids(result)

    paths = [topic_path()[0] for _ in range(4)]
    assert paths[-1] == "resident"  # held after resident_load_after_reads reads
    set_replay(replica, paused=True)
    try:
        new = put(db, 0.9, 11)
        db.commit()
        assert topic_path() == ("resident", {old})  # the standby has not replayed the write
    finally:
        set_replay(replica, paused=False)
    caught_up(db, replica)
    path, found = topic_path()
    assert path != "resident" and found == {old, new}


def test_remote_apply_makes_a_write_visible_to_the_very_next_read(db, replica):
    """A writer that commits with synchronous_commit=remote_apply is read back at once."""
    with hdb.connect(autocommit=True) as admin:
        admin.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
        admin.execute("SELECT pg_reload_conf()")
        try:
            deadline = time.monotonic() + REPLAY_TIMEOUT_SECONDS
            while (
                admin.execute(
                    "SELECT count(*) AS n FROM pg_stat_replication WHERE sync_state = 'sync'"
                ).fetchone()["n"]
                != 1
            ):
                assert time.monotonic() < deadline, "the standby never became synchronous"
                time.sleep(0.02)
            db.execute("SET LOCAL synchronous_commit = remote_apply")
            new = put(db, 0.9, 11)
            db.commit()  # returns once the standby has applied it
            assert topic_ids(retrieve()) == {new}
        finally:
            admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
            admin.execute("SELECT pg_reload_conf()")


def test_session_end_writes_to_the_primary_while_reads_use_the_standby(db, replica):
    """Applying a session with a standby configured succeeds, and the standby receives it."""
    target = put(db, 0.8, 10, success_count=0)
    db.commit()
    summary = run(db, payload("s-replica", [turn(0, decision=target, outcome="success")]))
    assert (summary.sessions, summary.rejects) == (1, 0)
    caught_up(db, replica)
    with psycopg.connect(replica, autocommit=True) as standby:
        counts = standby.execute(
            "SELECT success_count FROM hag_entries WHERE id = %s", (target,)
        ).fetchone()
    assert counts == (1,)
