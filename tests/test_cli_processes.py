"""Processes the command line starts: no Prefect where none is configured, none left behind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from click.testing import CliRunner

from hag import PROJECT_ROOT
from tests import factories as f
from tests.session_builders import ingest, sequence

MARKER = "HAG_TEST_PROCESS_MARKER"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _marked(tag: str) -> list[int]:
    """Every live process whose environment carries MARKER=tag (children inherit it)."""
    needle = f"{MARKER}={tag}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(proc.name))
    return found


def _children(pid: int) -> list[int]:
    try:
        return [
            int(c)
            for t in Path(f"/proc/{pid}/task").iterdir()
            for c in (t / "children").read_text().split()
        ]
    except OSError:
        return []


def _env(database_url: str, tmp_path: Path, tag: str) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": database_url, MARKER: tag}
    env.pop("PREFECT_API_URL", None)
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")  # no profile naming a server
    return env


def _queue_sessions(db, n: int) -> None:
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    db.commit()
    results = ingest(db, *(sequence(f"kill-{i}", a, b, day=i % 20) for i in range(n)))
    assert all(r.accepted for r in results)


def test_process_sessions_without_prefect_api_url_imports_no_prefect(db, database_url, tmp_path):
    """With PREFECT_API_URL unset, process-sessions applies the queue directly: no Prefect, no child."""
    _queue_sessions(db, 3)
    script = (
        "import sys\nfrom hag.cli import main\n"
        "try:\n    main(['process-sessions', '--json'])\n"
        "finally:\n    print('PREFECT' if 'prefect' in sys.modules else 'NO-PREFECT', file=sys.stderr)\n"
    )
    tag = uuid.uuid4().hex
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=_env(database_url, tmp_path, tag),
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "NO-PREFECT"
    assert json.loads(done.stdout)["sessions"] == 3
    assert not (tmp_path / "prefect-home").exists()  # no temporary server's SQLite either
    assert _marked(tag) == []


def test_kill_9_on_process_sessions_leaves_no_process(db, database_url, tmp_path):
    """kill -9 on a working `hag process-sessions` leaves no process of it running."""
    _queue_sessions(db, 60)
    tag = uuid.uuid4().hex
    err = tmp_path / "stderr.txt"
    with open(err, "wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hag.cli", "process-sessions", "--batch-size", "1"],
            env=_env(database_url, tmp_path, tag),
            cwd=PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=sink,
        )
    # Kill it once it is at work: a child process exists (the old temporary Prefect server),
    # or it has applied its first batch.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if _children(proc.pid) or b"batch:" in err.read_bytes():
            break
        time.sleep(0.05)
    working = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert working, "process-sessions finished before it could be killed: " + err.read_text()
    time.sleep(2)  # a child (none is expected) would still be running now
    assert _marked(tag) == []


def test_a_configured_prefect_server_records_each_batch_command_as_a_flow_run(
    db, prefect_harness, monkeypatch
):
    """With PREFECT_API_URL set, process-sessions, nightly and enrich are flow runs there."""
    from prefect.settings import PREFECT_API_URL

    from hag.cli import cli

    url = PREFECT_API_URL.value()
    assert url
    monkeypatch.setenv("PREFECT_API_URL", url)
    _queue_sessions(db, 2)

    async def flow_names() -> list[str]:
        from prefect.client.orchestration import get_client

        async with get_client() as client:
            flows = {f.id: f.name for f in await client.read_flows()}
            runs = await client.read_flow_runs()
        return [flows[r.flow_id] for r in runs if r.state is not None and r.state.is_completed()]

    before = asyncio.run(flow_names())
    runner = CliRunner()
    result = runner.invoke(cli, ["process-sessions", "--json"])
    assert result.exit_code == 0, result.output
    assert f"session-end: a flow run on the Prefect server at {url}" in result.stderr
    assert json.loads(result.stdout)["sessions"] == 2
    nightly = runner.invoke(cli, ["nightly", "--dry-run", "--json"])
    assert nightly.exit_code == 0, nightly.output
    assert json.loads(nightly.stdout)["dry_run"] is True
    enrich = runner.invoke(cli, ["enrich", "--dry-run", "--json"])
    assert enrich.exit_code == 0, enrich.output
    after = asyncio.run(flow_names())
    added = sorted(after)
    for name in before:
        added.remove(name)
    assert added == ["enrichment", "nightly", "session-end"]


def test_the_active_prefect_profile_counts_as_configured(tmp_path, monkeypatch):
    """A PREFECT_API_URL in the active profile of PREFECT_HOME is a configured server too."""
    from hag.cli._common import prefect_api_url

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.delenv("PREFECT_PROFILE", raising=False)
    monkeypatch.setenv("PREFECT_HOME", str(tmp_path))
    assert prefect_api_url() is None
    (tmp_path / "profiles.toml").write_text(
        'active = "local"\n[profiles.local]\nPREFECT_API_URL = "http://127.0.0.1:4321/api"\n'
        "[profiles.ephemeral]\n"
    )
    assert prefect_api_url() == "http://127.0.0.1:4321/api"
    monkeypatch.setenv("PREFECT_PROFILE", "ephemeral")
    assert prefect_api_url() is None


def test_serve_stops_every_child_on_sigterm(database_url, tmp_path):
    """SIGTERM on `hag serve` stops the server and the worker within seconds: no child left."""
    tag = uuid.uuid4().hex
    env = _env(database_url, tmp_path, tag)
    env.update({"PREFECT_UI_ENABLED": "false", "PYTHONUNBUFFERED": "1"})
    out = tmp_path / "stdout.txt"
    with open(out, "wb") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hag.cli",
                "serve",
                "--port",
                str(_free_port()),
                "--home",
                str(tmp_path / "prefect-home"),
            ],
            env=env,
            cwd=PROJECT_ROOT,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 400
        while b"Prefect UI:" not in out.read_bytes():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.5)
        time.sleep(2)  # the worker is up
        assert len(_marked(tag)) >= 3  # hag serve, the server, the worker
        proc.send_signal(signal.SIGTERM)
        started = time.monotonic()
        assert proc.wait(timeout=30) == 0, out.read_text()
        while _marked(tag) and time.monotonic() - started < 15:
            time.sleep(0.2)
        assert _marked(tag) == [], out.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _marked(tag):
            os.kill(pid, signal.SIGKILL)
