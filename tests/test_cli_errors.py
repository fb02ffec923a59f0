"""The command line's one error convention, held over every command (hag/cli/__init__.py).

One line on stderr starting `hag: `, no traceback; exit 1 for a refused or failed value (bad
value, unknown topic, dial, file, session or id), exit 2 for a malformed command line.
"""

from __future__ import annotations

import pytest

from hag.cli import main
from tests.fix_cli import leaf_commands

NOT_AN_ID = "not-an-id"
MISSING = "00000000-0000-4000-8000-000000000000"

# Every leaf command: the mistakes an operator makes with it, the exit code, and what the
# one line must name. Unknown-option (exit 2) is checked for every command separately.
CASES: dict[str, list[tuple[list[str], int, str]]] = {
    "db start": [(["db", "start", "extra"], 2, "unexpected extra argument")],
    "db stop": [(["db", "stop", "extra"], 2, "unexpected extra argument")],
    "db status": [(["db", "status", "extra"], 2, "unexpected extra argument")],
    "db url": [(["db", "url", "extra"], 2, "unexpected extra argument")],
    "migrate": [(["migrate", "extra"], 2, "unexpected extra argument")],
    "load-corpus": [
        (["load-corpus", "/nonexistent/corpus.json"], 1, "/nonexistent/corpus.json"),
        (["load-corpus"], 2, "missing argument"),
    ],
    "export": [
        (["export", "edges", "--topic", "nowhere"], 1, "unknown topic 'nowhere'"),
        (["export", "entries", "--topic", "nowhere"], 1, "unknown topic 'nowhere'"),
        (["export", "rows"], 1, "'rows'"),
    ],
    "settings list": [(["settings", "list", "extra"], 2, "unexpected extra argument")],
    "settings get": [(["settings", "get", "no_such_dial"], 1, "no_such_dial")],
    "settings set": [
        (["settings", "set", "cull_max_confidence", "-0.1"], 1, "between 0 and 1"),
        (["settings", "set", "no_such_dial", "1"], 1, "no_such_dial"),
        (["settings", "set", "floor_proven"], 2, "missing argument"),
    ],
    "settings reset": [(["settings", "reset", "no_such_dial"], 1, "no_such_dial")],
    "settings profile": [(["settings", "profile", "nonsense"], 1, "'nonsense'")],
    "demo": [(["demo", "extra"], 2, "unexpected extra argument")],
    "retrieve": [
        (
            ["retrieve", "--topic", "nowhere", "--learner", "ada", "--message", "hi"],
            1,
            "unknown topic 'nowhere'",
        ),
        (["retrieve", "--learner", "ada", "--message", "hi"], 2, "missing option"),
    ],
    "ingest": [
        (["ingest", "/nonexistent/sessions.jsonl"], 1, "/nonexistent/sessions.jsonl"),
        (["ingest", "--quarantined", "--limit", "0"], 1, "--limit"),
        (["ingest", "--quarantined", "sessions.jsonl"], 2, "give it no FILE"),
    ],
    "process-sessions": [(["process-sessions", "--limit", "0"], 1, "--limit")],
    "nightly": [(["nightly", "--as-of", "yesterday"], 1, "'yesterday'")],
    "audit culled": [
        (["audit", "culled", "--run", NOT_AN_ID], 1, NOT_AN_ID),
        (["audit", "culled", "--limit", "0"], 1, "--limit"),
    ],
    "audit restore": [
        (["audit", "restore", NOT_AN_ID], 1, NOT_AN_ID),
        (["audit", "restore", MISSING], 1, MISSING),
        (["audit", "restore"], 2, "give exactly one"),
    ],
    "history": [
        (["history", NOT_AN_ID], 1, NOT_AN_ID),
        (["history", MISSING], 1, MISSING),
        (["history", "--after-session", "no-such-session"], 1, "no-such-session"),
        (["history"], 2, "give exactly one"),
        (["history", "abc"], 1, "too short"),
        (["history", "ffffeeee"], 1, "no entry or edge 'ffffeeee'"),
        (["history", MISSING, "--limit", "3000000000"], 1, "--limit"),  # past an integer
    ],
    "explain": [
        (["explain", NOT_AN_ID], 1, NOT_AN_ID),
        (["explain", MISSING], 1, MISSING),
        (["explain"], 2, "Missing argument"),
        (["explain", "abc"], 1, "too short"),
    ],
    "runs": [
        (["runs", "--limit", "0"], 1, "--limit"),
        (["runs", "--kind", "nighlty"], 1, "'nighlty' is not a kind of run"),
        (["runs", "--limit", "2147483648"], 1, "--limit"),
        (["runs", "extra"], 2, "unexpected extra argument"),
    ],
    "learner export": [
        (["learner", "export", "nobody", "--out", "/tmp/hag-nobody.jsonl"], 1, "'nobody'"),
        (["learner", "export", "no body", "--out", "/tmp/x.jsonl"], 1, "not a learner id"),
        (["learner", "export", "nobody", "--out", "/nonexistent/x.jsonl"], 1, "does not exist"),
        (["learner", "export", "nobody"], 2, "missing option"),
    ],
    "learner erase": [
        (["learner", "erase", "nobody"], 1, "unknown learner 'nobody'"),
        (["learner", "erase", "nobody", "--dry-run"], 1, "unknown learner 'nobody'"),
        (["learner", "erase", "no body"], 1, "not a learner id"),
        (["learner", "erase"], 2, "missing argument"),
    ],
    "check": [(["check", "extra"], 2, "unexpected extra argument")],
    "enrich": [
        (["enrich", "--topic", "nowhere", "--dry-run"], 1, "unknown topic 'nowhere'"),
        (["enrich", "--limit", "0"], 1, "--limit"),
    ],
    "serve": [(["serve", "--port", "0"], 1, "--port")],
    "service": [
        (["service"], 1, "HAG_SERVICE_TOKEN"),
        (["service", "--port", "0"], 1, "--port"),
    ],
    "reembed": [(["reembed", "--batch-size", "0"], 1, "--batch-size")],
    "simulate": [
        (["simulate", "--learners", "0"], 1, "--learners"),
        (["simulate", "--error-kinds", "sloppy"], 1, "--error-kinds"),
        (["simulate", "--world", "random:99"], 1, "--world"),
        (["simulate", "--world", "cryptography,random:30"], 1, "several only with --error-kinds"),
        (["simulate", "--misconception-share", "2"], 1, "--misconception-share"),
        (
            ["simulate", "--database", "configured", "--drop-databases"],
            2,
            "private databases only",
        ),
    ],
}


def _run(args: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        main(args)
    return int(stopped.value.code or 0), capsys.readouterr().err


def test_every_command_has_error_cases():
    """A new command cannot be added without its mistakes in this table."""
    assert sorted(CASES) == leaf_commands()


# `settings set KEY VALUE` reads anything after KEY as the value, so that -0.1 is a value.
@pytest.mark.parametrize("path", [p for p in leaf_commands() if p != "settings set"])
def test_an_unknown_option_is_exit_2_and_one_line(path, capsys):
    """Every command refuses an unknown option the same way: exit 2, one line naming it."""
    code, err = _run([*path.split(), "--no-such-option"], capsys)
    assert code == 2
    assert err.splitlines() == [f"hag: No such option '--no-such-option' (see `hag {path} --help`)"]


@pytest.mark.parametrize("path", sorted(CASES))
def test_each_mistake_is_one_line_with_the_conventional_code(path, db, capsys):
    """Bad values and unknown names exit 1, bad command lines exit 2; one `hag: ` line each."""
    for args, want_code, names in CASES[path]:
        code, err = _run(args, capsys)
        lines = [line for line in err.splitlines() if not line.startswith("embedder: ")]
        assert (code, len(lines)) == (want_code, 1), (args, err)
        assert lines[0].startswith("hag: ") and "Traceback" not in err, (args, err)
        assert names.lower() in lines[0].lower(), (args, lines[0])


def test_an_ingest_file_that_cannot_be_read_is_one_line_before_anything_is_queued(
    db, capsys, tmp_path
):
    """A file named to `hag ingest` that exists but may not be read (a mode-000 file, or as
    root a kernel file root may not read) is exit 1 with one line naming it, and a readable
    file named before it is not queued."""
    import os

    locked = tmp_path / "locked.json"
    locked.write_text("{}")
    locked.chmod(0)
    unreadable = [
        p
        for p in (str(locked), "/sys/bus/cpu/uevent", "/sys/bus/pci/rescan")
        if os.path.isfile(p) and not os.access(p, os.R_OK) or _refuses(p)
    ]
    if not unreadable:
        pytest.skip("no file this user may not read (root, and no such kernel file here)")
    first = tmp_path / "first.jsonl"
    first.write_text('{"session_id": "s"}\n')
    code, err = _run(["ingest", str(first), unreadable[0]], capsys)
    assert code == 1 and len(err.splitlines()) == 1, err
    assert f"{unreadable[0]} cannot be read" in err and "Traceback" not in err
    assert db.execute("SELECT count(*) AS n FROM hag_session_quarantine").fetchone()["n"] == 0
    db.rollback()


def _refuses(path: str) -> bool:
    try:
        with open(path, "rb"):
            return False
    except PermissionError:
        return True
    except OSError:
        return False
