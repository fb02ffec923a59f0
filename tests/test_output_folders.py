"""Folders hag writes and clears (issue 24): `hag simulate --out` and the private databases
of the simulator and the demo clear only folders they made (a marker file), never an
operator's."""

from __future__ import annotations

import pytest

from hag.errors import FolderError
from hag_lab.simulate.sandbox import MARKER, claim_folder, private_database
from tests.fix_cli import run_hag


def operators_folder(root):
    """A folder shaped like an operator's embedded database under OUT/db, and a file of theirs."""
    pgdata = root / "db" / "pgdata"
    pgdata.mkdir(parents=True)
    (pgdata / "PG_VERSION").write_text("18\n")
    (root / "notes.txt").write_text("mine\n")
    return sorted(p.relative_to(root) for p in root.rglob("*"))


def test_simulate_refuses_an_out_folder_it_did_not_make(database_url, tmp_path):
    """`--out` over a non-empty folder without the marker: exit 1, one line naming --out,
    and every file left where it was (the old code deleted OUT/db recursively)."""
    out = tmp_path / "operator"
    before = operators_folder(out)
    result = run_hag(database_url, "simulate", "--sessions", "1", "--days", "1", "--out", str(out))
    errors = [line for line in result.stderr.splitlines() if line.startswith("hag:")]
    assert result.returncode == 1
    assert errors == [
        f"hag: --out {out} is not empty and hag did not make it (no {MARKER}): "
        "choose a new or empty folder"
    ]
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_a_private_database_refuses_a_folder_it_did_not_make(tmp_path):
    """The simulator's and the demo's database folder: refused unless new, empty or marked,
    before any server is stopped or file removed."""
    folder = tmp_path / "demo"
    (folder / "pgdata").mkdir(parents=True)
    (folder / "pgdata" / "PG_VERSION").write_text("18\n")
    with (
        pytest.raises(FolderError, match="database folder .* hag did not make it"),
        private_database(folder),
    ):
        pass
    assert (folder / "pgdata" / "PG_VERSION").read_text() == "18\n"
    assert not (folder / MARKER).exists()


def test_claim_folder_takes_new_empty_and_marked_folders_only(tmp_path):
    """A new folder is made with the marker; an empty one and a marked one are taken; a
    non-empty unmarked one and a file are refused."""
    made = claim_folder(tmp_path / "a" / "b", "--out")
    assert (made / MARKER).is_file()
    (made / "report.json").write_text("{}")
    assert claim_folder(made, "--out") == made  # an earlier run of ours
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (claim_folder(empty, "--out") / MARKER).is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "x").write_text("")
    with pytest.raises(FolderError, match="not empty"):
        claim_folder(other, "--out")
    with pytest.raises(FolderError, match="is a file"):
        claim_folder(other / "x", "--out")
    assert sorted(p.name for p in other.iterdir()) == ["x"]


def test_a_dropped_private_database_goes_only_after_its_block_finished(tmp_path):
    """`drop`: the folder is removed once the block has finished; a block that raised keeps
    it (a failed run's memory stays to be read), its server stopped either way."""
    from hag.storage import db

    done = tmp_path / "done"
    with private_database(done, drop=True):
        assert (done / "pgdata" / "PG_VERSION").is_file()
    assert not done.exists()
    failed = tmp_path / "failed"
    with pytest.raises(RuntimeError, match="run failed"), private_database(failed, drop=True):
        raise RuntimeError("run failed")
    assert (failed / "pgdata" / "PG_VERSION").is_file()
    assert db.running_postmaster(failed / "pgdata") is None
