"""`hag serve`: the local Prefect recipe of docs/operations.md in one step.

Starts a Prefect server on 127.0.0.1 with its own SQLite database in `.hag/prefect`
(PREFECT_HOME; the memory itself stays in PostgreSQL), creates the `process` work pool
named in prefect.yaml, registers every deployment (`prefect deploy --all`) and starts a
worker, then waits until Ctrl-C or SIGTERM and stops what it started (every child, within a
few seconds; a child also gets SIGTERM if `hag serve` itself is killed). Telemetry is off.
The steps are plain functions so tests drive the same recipe on a temporary home and port.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import FrameType
from typing import IO, Any

import click

from hag import PROJECT_ROOT
from hag.errors import HagError

WORK_POOL = "hag-process"  # the name prefect.yaml's definitions give the pool


def prefect_env(home: Path, port: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment every Prefect process of the recipe shares (home, API, no telemetry)."""
    env = dict(os.environ if base is None else base)
    env.update(
        {
            "PREFECT_HOME": str(home),
            "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
            "PREFECT_SERVER_API_HOST": "127.0.0.1",
            "PREFECT_SERVER_API_PORT": str(port),
            "DO_NOT_TRACK": "1",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "PREFECT_UI_ENABLED": env.get("PREFECT_UI_ENABLED", "true"),
        }
    )
    env.pop("PREFECT_API_KEY", None)  # a local server; never a cloud workspace
    # A deployment's run works in a clone in a temporary folder, where the data folder's
    # default (the checkout's `.hag`), or a relative one, would be deleted with the run: its
    # files (a learner's export) go to this process's data folder, made absolute here.
    from hag.config import get_config

    given = env.get("HAG_DATA_DIR")
    env["HAG_DATA_DIR"] = str((Path(given) if given else get_config().data_dir).resolve())
    return env


def _die_with_parent() -> None:
    """In a child before exec: its own process group, and SIGTERM when `hag serve` dies.

    The group lets stop() end the child and whatever it spawned; the parent-death signal
    (Linux prctl PR_SET_PDEATHSIG) covers a `hag serve` killed with SIGKILL, which runs no
    handler of its own, so no Prefect server or worker is ever left running under init.
    """
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class Stopped(Exception):
    """SIGTERM or SIGHUP reached `hag serve`: stop the children, then exit."""


def _on_stop_signal(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


def _prefect(*args: str) -> list[str]:
    return [sys.executable, "-m", "prefect", *args]


def start_server(
    env: dict[str, str], port: int, log: IO[Any] | None = None, timeout: float = 120.0
) -> subprocess.Popen[bytes]:
    """Start `prefect server start` on 127.0.0.1:port and wait until its API answers."""
    Path(env["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        _prefect("server", "start", "--host", "127.0.0.1", "--port", str(port)),
        env=env,
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    try:
        _wait_healthy(proc, port, timeout)
    except BaseException:  # a signal or a timeout while starting: never leave it behind
        stop(proc)
        raise
    return proc


def _wait_healthy(proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise HagError(f"the Prefect server exited with code {proc.returncode} while starting")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise HagError(f"the Prefect server did not answer on port {port} within {timeout:.0f} s")


def _run(env: dict[str, str], args: list[str], what: str, timeout: float) -> str:
    done = subprocess.run(
        args, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
        raise HagError(f"{what} failed: " + " | ".join(tail))
    return done.stdout


def create_work_pool(env: dict[str, str], name: str = WORK_POOL) -> None:
    """Create (or keep) the process work pool the deployments name."""
    _run(
        env,
        _prefect("work-pool", "create", name, "--type", "process", "--overwrite"),
        f"creating work pool {name}",
        120,
    )


SOURCE_VARIABLES = ("hag_repository", "hag_branch")  # prefect.yaml's pull step reads them


def set_source_variables(
    env: dict[str, str], repository: str | Path = PROJECT_ROOT, branch: str | None = None
) -> dict[str, str]:
    """Point prefect.yaml's pull step at a repository (default: this checkout, its branch),
    unless the server already names one; returns what the variables hold.

    A flow run then clones the committed code of that branch, so a worker needs no
    checkout; a local `hag serve` runs what is committed, not the working tree's edits."""
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.variables import Variable

    if branch is None:
        found = subprocess.run(
            ["git", "-C", str(repository), "rev-parse", "--abbrev-ref", "HEAD"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        branch = "" if found in ("", "HEAD") else found  # detached: the default branch
    wanted = {"hag_repository": str(repository), "hag_branch": branch}
    with temporary_settings(updates={PREFECT_API_URL: env["PREFECT_API_URL"]}):
        for name, value in wanted.items():
            current = Variable.get(name)
            if current is None:
                Variable.set(name, value)
            else:
                wanted[name] = str(current)
    return wanted


def deployments() -> list[str]:
    """The deployments prefect.yaml names, in its order."""
    import yaml

    return [
        d["name"]
        for d in yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())["deployments"]
    ]


def deploy_all(env: dict[str, str]) -> str:
    """`prefect deploy --all` from the repository root (reads prefect.yaml)."""
    return _run(env, _prefect("--no-prompt", "deploy", "--all"), "prefect deploy --all", 300)


def start_worker(
    env: dict[str, str],
    name: str = WORK_POOL,
    log: IO[Any] | None = None,
    cwd: Path = PROJECT_ROOT,
) -> subprocess.Popen[bytes]:
    """A process worker on the pool; flow runs start as its child processes, each in a
    temporary folder where the pull step clones the repository."""
    return subprocess.Popen(
        _prefect("worker", "start", "--pool", name),
        env=env,
        cwd=cwd,
        stdout=log or subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )


def stop(proc: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """Stop a process this recipe started, and its process group: SIGTERM, then SIGKILL.

    The group gets SIGKILL after the leader is gone too, so nothing it spawned outlives it.
    """
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, theirs, ...), from /proc (Linux; none elsewhere).

    A flow run the process worker starts is its child in a session of its own."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended while we looked
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def active_flow_runs(env: dict[str, str], pool: str = WORK_POOL) -> list[Any]:
    """The pool's flow runs that are not over (pending, running, paused, cancelling)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        WorkPoolFilter,
        WorkPoolFilterName,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.settings import PREFECT_API_URL, temporary_settings

    live = [StateType.PENDING, StateType.RUNNING, StateType.PAUSED, StateType.CANCELLING]
    with (
        temporary_settings(updates={PREFECT_API_URL: env["PREFECT_API_URL"]}),
        get_client(sync_client=True) as client,
    ):
        return list(
            client.read_flow_runs(
                flow_run_filter=FlowRunFilter(
                    state=FlowRunFilterState(type=FlowRunFilterStateType(any_=live))
                ),
                work_pool_filter=WorkPoolFilter(name=WorkPoolFilterName(any_=[pool])),
            )
        )


def _end_processes(pids: set[int], grace: float) -> None:
    """SIGTERM each process's group (a flow run leads its own session), SIGKILL what is
    left after `grace` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(os.getpgid(pid), sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)
        pids = {p for p in pids if _alive(p)}
        if not pids:
            return


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped by its parent, is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def end_flow_runs(
    env: dict[str, str], worker: subprocess.Popen[bytes] | None, grace: float = 5.0
) -> list[str]:
    """Cancel the flow runs of the pool and end their processes; returns their ids.

    The worker's descendants are collected before the worker stops (they would be orphaned
    after), and the pool's live flow runs are read from the API (their infrastructure pid
    names the process on this host). The processes are stopped; each flow run is then set
    Cancelled in Prefect, and its run row, still `running` (or marked failed by the signal
    since `hag serve` began stopping), becomes `cancelled`.
    """
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Cancelled

    from hag.storage import runs

    since = time.time()
    flow_runs = active_flow_runs(env)
    pids = set(descendants(worker.pid)) if worker is not None else set()
    for run in flow_runs:
        host, _, pid = str(run.infrastructure_pid or "").rpartition(":")
        if pid.isdigit() and host in ("", socket.gethostname()):
            pids.add(int(pid))
    if worker is not None:
        stop(worker)  # no new flow run starts while they are ended
    _end_processes({p for p in pids if _alive(p)}, grace)
    why = "cancelled: hag serve stopped while the run was not over"
    with (
        temporary_settings(updates={PREFECT_API_URL: env["PREFECT_API_URL"]}),
        get_client(sync_client=True) as client,
    ):
        for run in flow_runs:
            client.set_flow_run_state(run.id, Cancelled(message=why), force=True)
    ids = [str(run.id) for run in flow_runs]
    if ids:
        runs.mark_cancelled(ids, why, since=since)
    return ids


@click.command()
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=4200,
    show_default=True,
    help="Port of the Prefect server (and UI) on 127.0.0.1.",
)
@click.option(
    "--home",
    type=click.Path(path_type=Path),
    default=None,
    help="PREFECT_HOME (its SQLite database lives here). Default: .hag/prefect.",
)
@click.option("--no-worker", is_flag=True, help="Register everything but start no worker.")
def serve(port: int, home: Path | None, no_worker: bool) -> None:
    """Prefect server + work pool + every deployment + a worker, until Ctrl-C."""
    from hag import checkout
    from hag.cli._common import note, ready
    from hag.config import get_config
    from hag.storage import db as hdb

    if checkout() is None:
        raise HagError(
            "hag serve deploys prefect.yaml's flows, which only a checkout of the repository "
            "has (the wheel carries the library only)"
        )
    from hag.support import extras

    extras.require("jobs", "hag serve")
    ready()  # the flows need a migrated memory
    home = home or get_config().data_dir / "prefect"
    env = prefect_env(home.resolve(), port)
    # The worker's flow runs reach the memory this command resolved (the embedded one when
    # DATABASE_URL is unset): a deployment's flow run never starts a database of its own.
    env["DATABASE_URL"] = hdb.database_url()
    logs = home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started: list[subprocess.Popen[bytes]] = []
    worker: subprocess.Popen[bytes] | None = None
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _on_stop_signal)
    try:
        note(f"starting the Prefect server on http://127.0.0.1:{port} (PREFECT_HOME={home})")
        with open(logs / "server.log", "ab") as server_log:
            started.append(start_server(env, port, server_log))
        note(f"creating work pool {WORK_POOL}; registering prefect.yaml's deployments")
        create_work_pool(env)
        source = set_source_variables(env)
        note(
            f"flow runs clone {source['hag_repository']} "
            f"({source['hag_branch'] or 'its default branch'}): committed code only"
        )
        deploy_all(env)
        if not no_worker:
            with open(logs / "worker.log", "ab") as worker_log:
                worker = start_worker(env, log=worker_log)
                started.append(worker)
        click.echo(
            f"Prefect UI: http://127.0.0.1:{port}  (deployments: {', '.join(deployments())})"
        )
        click.echo(f"In another shell: export PREFECT_API_URL=http://127.0.0.1:{port}/api")
        click.echo(
            "  prefect deployment run enrichment/enrichment --param topic=cryptography --param limit=5"
        )
        click.echo(f"Logs in {logs}. Ctrl-C (or SIGTERM) stops the server and the worker.")
        while all(p.poll() is None for p in started):
            time.sleep(1)
        raise HagError("a Prefect process exited; see the logs in " + str(logs))
    except (KeyboardInterrupt, Stopped) as why:
        note(f"stopping ({why or 'SIGINT'})")
    finally:
        # Further signals must not cut the cleanup short.
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_IGN)
        if started and started[0].poll() is None:  # the API is up: end the flow runs first
            try:
                for flow_run_id in end_flow_runs(env, worker):
                    note(f"cancelled flow run {flow_run_id}")
            except Exception as exc:  # the server and worker must still stop
                note(
                    f"could not cancel the flow runs: {str(exc).splitlines()[0] if str(exc) else exc!r}"
                )
        for proc in reversed(started):
            stop(proc)
