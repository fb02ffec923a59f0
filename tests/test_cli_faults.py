"""Every command under the four faults an operator meets: a stopped database, a database
without the `vector` extension, an unreachable embedder and a wrong embedder. A command
that needs what the fault breaks exits 1 with one `hag: ` line naming the fault, never a
traceback; one that needs none of it must not fail for it (the table says which needs
what). One more: a server that accepts and never answers costs the connect timeout."""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from hag.cli import main
from hag.operations import corpus
from hag.storage import migrate
from tests.fix_cli import leaf_commands
from tests.fix_embedder import forget_process_state, use_stub
from tests.session_builders import ingest, payload, turn

DEMO = "hag/data/demo_corpus.json"
SOME_ID = "00000000-0000-4000-8000-000000000000"

# What each command needs: "server" (a database that answers), "memory" (the schema
# migrated into it, which the `vector` extension comes first for), "embedder" (it embeds
# texts, or records the embedder) and "chat" (it asks the chat model). A fault is tried on
# every command that needs what it breaks. `db stop` and `db url` need nothing: a
# DATABASE_URL to a server hag did not start is not theirs to stop, and the URL is
# configuration. `db start` and `db status` need the server, not the memory (the status
# shows how far it is migrated). `demo` runs on a fresh embedded database of its own,
# never DATABASE_URL; `serve` embeds nothing itself (its flow runs do, each failing in its
# own run).
NEEDS: dict[str, set[str]] = {
    "db start": {"server"},
    "db stop": set(),
    "db status": {"server"},
    "db url": set(),
    "migrate": {"server", "memory", "embedder"},
    "load-corpus": {"server", "memory", "embedder"},
    "export": {"server", "memory"},
    "settings list": {"server", "memory"},
    "settings get": {"server", "memory"},
    "settings set": {"server", "memory"},
    "settings reset": {"server", "memory"},
    "settings profile": {"server", "memory"},
    "demo": {"embedder"},
    "retrieve": {"server", "memory", "embedder"},
    "ingest": {"server", "memory"},
    "process-sessions": {"server", "memory", "embedder"},
    "nightly": {"server", "memory"},
    "audit culled": {"server", "memory"},
    "audit restore": {"server", "memory"},
    "history": {"server", "memory"},
    "explain": {"server", "memory"},
    "learner export": {"server", "memory"},
    "learner erase": {"server", "memory"},
    "check": {"server", "memory"},
    "enrich": {"server", "memory", "chat"},
    "serve": {"server", "memory"},
    "simulate": {"server", "memory", "embedder"},
    "reembed": {"server", "memory", "embedder"},
    "runs": {"server", "memory"},
    "service": {"server", "memory"},
}

# Where a command needs the broken thing and still, by design, does not fail.
EXEMPT: dict[tuple[str, str], str] = {
    ("retrieve", "unreachable embedder"): "answers from the concept pass and the edge walk, "
    "exit 0, with one `hag: embedder unavailable` line (tests/test_embedder_faults.py)",
    ("reembed", "wrong embedder"): "it is the command that moves a memory to the configured "
    "embedder (tests/test_reembed.py)",
    ("demo", "wrong embedder"): "its memory is new: it records the configured embedder",
}

# Commands the walk does not run where they meet none of the fault: `serve` would start a
# Prefect server and `service` an HTTP server, each running until stopped, `demo` a whole demo on a database of its own, and
# `db stop` would stop the test's own server, which DATABASE_URL reaches by its socket.
NOT_RUN_UNLESS_NEEDED = {"serve", "service", "demo", "db stop"}

# Provenance a command says on stderr before it meets the fault (not part of the error).
NOTES = ("embedder: ", "proposer: ", "demo database: ")

# Which resource each fault breaks.
BREAKS = {
    "stopped database": {"server"},
    "missing extension": {"memory"},
    "unreachable embedder": {"embedder", "chat"},  # one OpenAI endpoint serves both
    "wrong embedder": {"embedder"},
}


def _args(tmp: Path) -> dict[str, list[str]]:
    """Valid arguments for each command: what it would run with on a healthy memory."""
    session = tmp / "session.json"
    session.write_text(json.dumps(payload("s-faults", [turn(0)])))
    return {
        "db start": ["db", "start"],
        "db stop": ["db", "stop"],
        "db status": ["db", "status"],
        "db url": ["db", "url"],
        "migrate": ["migrate"],
        "load-corpus": ["load-corpus", DEMO],
        "export": ["export", "entries"],
        "settings list": ["settings", "list"],
        "settings get": ["settings", "get", "floor_proven"],
        "settings set": ["settings", "set", "floor_proven", "0.5"],
        "settings reset": ["settings", "reset", "floor_proven"],
        "settings profile": ["settings", "profile", "seed"],
        "demo": ["demo", "--sessions", "1", "--days", "1"],
        "retrieve": ["retrieve", "--topic", "cryptography", "--learner", "ada", "--message", "rsa"],
        "ingest": ["ingest", str(session)],
        "process-sessions": ["process-sessions"],
        "nightly": ["nightly", "--no-check"],
        "audit culled": ["audit", "culled"],
        "audit restore": ["audit", "restore", SOME_ID],
        "history": ["history", SOME_ID],
        "explain": ["explain", SOME_ID],
        "learner export": ["learner", "export", "ada", "--out", str(tmp / "ada.jsonl")],
        "learner erase": ["learner", "erase", "ada", "--dry-run"],
        "check": ["check"],
        "enrich": ["enrich", "--dry-run"],
        "serve": ["serve", "--home", str(tmp / "prefect")],
        "simulate": [
            *("simulate", "--database", "configured", "--learners", "1", "--sessions", "1"),
            *("--days", "1", "--out", str(tmp / "simulation")),
        ],
        "reembed": ["reembed"],
        "runs": ["runs"],
        "service": ["service", "--port", str(_closed_port())],
    }


@pytest.fixture(autouse=True)
def _forget_after():
    """No configuration, pool or cache of a fault outlives its test, even one that failed
    between two commands (the next modules would meet the dead server)."""
    yield
    forget_process_state()


@pytest.fixture(autouse=True, scope="module")
def _gx_imported():
    """Great Expectations imported before the walk: `check` starts importing it on a thread
    (hag/quality/_gx.py) that a failing command would leave running into the next one."""
    from hag.quality import _gx

    _gx.import_gx()


def test_every_command_says_what_it_needs():
    """A new command cannot be added without saying which faults it meets."""
    assert sorted(NEEDS) == leaf_commands()
    assert {path for path, _ in EXEMPT} <= set(NEEDS)
    assert {fault for _, fault in EXEMPT} <= set(BREAKS)


def _run(args: list[str], capsys) -> tuple[int, str]:
    """`hag ARGS` in this process, from a clean slate: (exit code, stderr)."""
    forget_process_state()
    migrate._checked = False
    capsys.readouterr()
    try:
        main(args)
        code = 0
    except SystemExit as stopped:
        code = int(stopped.code or 0)
    finally:
        forget_process_state()
    return code, capsys.readouterr().err


def _meets(path: str, fault: str) -> bool:
    """Whether the command needs what the fault breaks (and is not exempt from it)."""
    return bool(BREAKS[fault] & NEEDS[path]) and (path, fault) not in EXEMPT


def _walk(fault: str, tmp: Path, capsys, *names: str) -> None:
    """Run every command under `fault`: one that needs what it breaks must exit 1 with one
    line naming it; any other must not fail for it (nor print a traceback)."""
    args = _args(tmp)
    wrong = []
    # Those the fault stops first: an exempt one may change the memory (`reembed` moves it).
    for path in sorted(leaf_commands(), key=lambda p: not _meets(p, fault)):
        meets = _meets(path, fault)
        if path in NOT_RUN_UNLESS_NEEDED and not meets:
            continue
        code, err = _run(args[path], capsys)
        lines = [line for line in err.splitlines() if not line.startswith(NOTES)]
        named = [line for line in lines if all(n.lower() in line.lower() for n in names)]
        if not meets:
            if (code != 0 and named) or "Traceback" in err:
                wrong.append((path, "failed for a fault it does not meet", code, err[-600:]))
            continue
        if code != 1 or len(lines) != 1 or not named or not lines[0].startswith("hag: "):
            wrong.append((path, "not one line naming the fault", code, err[-600:]))
        elif "Traceback" in err:
            wrong.append((path, "a traceback", code, err[-600:]))
    assert wrong == [], wrong


def _sandbox(monkeypatch, tmp: Path) -> None:
    """Whatever a command would start or write (the embedded servers, the demo's database
    and reports) goes under `tmp`, never into the checkout."""
    import hag_lab.demo

    monkeypatch.setenv("HAG_DATA_DIR", str(tmp / "data"))
    monkeypatch.setenv("HAG_SERVICE_TOKEN", "walk")  # so `service` meets the fault, not its token
    monkeypatch.setattr(hag_lab.demo, "work_dir", lambda: tmp)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("where", ["tcp", "socket"])
def test_a_stopped_database(where, monkeypatch, tmp_path, capsys):
    """DATABASE_URL names a server that does not run (a port nothing listens on, or the
    socket folder of a stopped embedded server): one line saying it cannot connect."""
    if where == "tcp":
        url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    else:  # a data folder as `hag demo --keep-running` prints it, its server stopped
        pgdata = tmp_path / "stopped" / "pgdata"
        pgdata.mkdir(parents=True)
        (pgdata / "PG_VERSION").write_text("18\n")
        url = f"postgresql://postgres:@/postgres?host={pgdata}"
    monkeypatch.setenv("DATABASE_URL", url)
    _sandbox(monkeypatch, tmp_path)
    _walk("stopped database", tmp_path, capsys, "cannot connect to the database")


@pytest.fixture
def without_vector(database_url):
    """A database owned by a role that may not create extensions, `vector` not in it."""
    role, name = f"hag_app_{uuid.uuid4().hex[:8]}", f"hag_novector_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"CREATE DATABASE {name} OWNER {role}")
    try:
        yield make_conninfo(database_url, dbname=name, user=role)
    finally:
        forget_process_state()
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_a_missing_vector_extension(without_vector, monkeypatch, tmp_path, capsys):
    """No `vector` and a role that may not create it: one line saying that an administrator
    must run CREATE EXTENSION vector."""
    monkeypatch.setenv("DATABASE_URL", without_vector)
    _sandbox(monkeypatch, tmp_path)
    _walk("missing extension", tmp_path, capsys, "administrator", "CREATE EXTENSION vector")


def _demo_with_a_pending_session(conn) -> None:
    """The demo corpus, and one pending session whose observation must be embedded."""
    corpus.load(conn, corpus.read(DEMO), 1536)
    conn.commit()
    obs = {"graph": "topic", "concept": "keys", "text": "Keys come in pairs."}
    ingest(conn, payload("s-pending", [turn(0, observations=[obs])]))
    conn.commit()


def test_an_unreachable_embedder(
    own_memory, private_db, openai_stub, monkeypatch, tmp_path, capsys
):
    """A memory built with the openai embedder, its endpoint down: one line naming it."""
    from hag.vectors.embeddings import get_embedder

    use_stub(monkeypatch, openai_stub.base_url)
    migrate.record_embedder(private_db, get_embedder())
    _demo_with_a_pending_session(private_db)
    down = f"http://127.0.0.1:{_closed_port()}/v1"
    use_stub(monkeypatch, down)
    _sandbox(monkeypatch, tmp_path)
    _walk("unreachable embedder", tmp_path, capsys, down, "connection error")


def test_a_wrong_embedder(own_memory, private_db, openai_stub, monkeypatch, tmp_path, capsys):
    """A memory built offline, the openai embedder configured: one line naming both."""
    from hag.vectors.embeddings import get_embedder

    migrate.record_embedder(private_db, get_embedder())
    _demo_with_a_pending_session(private_db)
    use_stub(monkeypatch, openai_stub.base_url)
    _sandbox(monkeypatch, tmp_path)
    _walk(
        "wrong embedder",
        tmp_path,
        capsys,
        "this memory was embedded with offline/hash-v1",
        "the configured embedder is openai/",
    )


@pytest.fixture
def hung_server():
    """The URL of a port that accepts connections and never answers (a hung server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"postgresql://postgres@127.0.0.1:{sock.getsockname()[1]}/postgres"


@pytest.mark.timeout(90)  # psycopg's own default would wait 130 s
def test_a_hung_database_is_one_line_after_the_connect_timeout(
    hung_server, monkeypatch, tmp_path, capsys
):
    """A server that never answers: HAG_DATABASE_CONNECT_TIMEOUT_SECONDS bounds the wait,
    then the one `cannot connect` line (a connect_timeout in the URL wins over it)."""
    from hag.storage import db

    _sandbox(monkeypatch, tmp_path)
    monkeypatch.setenv("DATABASE_URL", hung_server)
    monkeypatch.setenv("HAG_DATABASE_CONNECT_TIMEOUT_SECONDS", "2")
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    code, err = _run(["settings", "list"], capsys)
    assert code == 1 and len(err.splitlines()) == 1, err
    assert err.startswith("hag: cannot connect to the database: ") and "timeout" in err, err
    forget_process_state()
    assert db.connection_kwargs(url=hung_server)["connect_timeout"] == 2
    assert "connect_timeout" not in db.connection_kwargs(url=hung_server + "?connect_timeout=5")


def test_an_online_read_waits_for_a_connection_no_longer_than_one_takes_to_make(
    monkeypatch, tmp_path
):
    """The read pool's wait is the connect timeout (URL, then PGCONNECT_TIMEOUT, then
    the HAG setting), not psycopg_pool's 30 s: a refusing server is a quick 503."""
    from hag import config
    from hag.storage import db

    _sandbox(monkeypatch, tmp_path)
    monkeypatch.setenv("HAG_DATABASE_CONNECT_TIMEOUT_SECONDS", "7")
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    config.reset_config()
    dead = "postgresql://nobody@127.0.0.1:9/nothing"
    assert db.connect_wait_seconds(dead) == 7
    assert db.connect_wait_seconds(dead + "?connect_timeout=3") == 3
    assert db.connect_wait_seconds(dead + "?connect_timeout=0") == 7  # 0 is libpq's "forever"
    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")
    assert db.connect_wait_seconds(dead) == 4
    monkeypatch.setenv("DATABASE_URL", dead + "?connect_timeout=3")
    config.reset_config()
    try:
        assert db.read_pool().timeout == 3
    finally:
        db.close_all()
        config.reset_config()
