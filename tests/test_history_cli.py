"""`hag history` as an operator reads it: one clock, culls and restores, a limit, names."""

from __future__ import annotations

import json
from datetime import timedelta

from click.testing import CliRunner

from hag.cli import cli
from hag.nightly import audit
from hag.nightly.sweeps import run_nightly
from tests import factories as f
from tests import session_builders as sb

DAY = timedelta(days=1)


def _invoke(*args):
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_a_restore_follows_its_cull_in_the_memorys_time(db):
    """An edge culled as of a moment ahead of the wall clock, then restored, lists
    created -> culled -> restored, the restore never before the cull."""
    future = f.NOW + 400 * DAY  # a backfilled or simulated memory runs ahead of the clock
    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    edge = f.edge(db, a, b, "related", confidence=0.2, source_type="learned", created_at=f.NOW)
    db.commit()
    assert run_nightly(as_of=future).culled == 1
    assert audit.restore(edge_id=edge).restored == [edge]
    rows = json.loads(_invoke("history", str(edge), "--json").stdout)
    reasons = [r["reason"] for r in rows]
    assert len(rows) == 3 and reasons[1].startswith("culled by the nightly sweep")
    assert reasons[2] == "restored from the cull audit"
    assert rows[1]["new_value"] is None and round(rows[1]["old_value"], 6) == 0.2
    times = [r["at"] for r in rows]
    assert times == sorted(times) and times[1][:10] == future.date().isoformat()
    text = _invoke("history", str(edge)).stdout.splitlines()
    assert (
        text[1].split()[2:5] == ["0.2000", "->", "gone"]
        and "culled by the nightly sweep" in text[1]
    )


def test_history_shows_the_newest_events_up_to_a_limit(db, dials):
    """--limit N shows the newest N events, oldest first; the default is the dial."""
    e = f.entry(db, concept_slug="aes", confidence=0.5)
    db.commit()
    for step in range(1, 8):
        db.execute("UPDATE hag_entries SET confidence = %s WHERE id = %s", (0.5 + step / 100, e))
        db.commit()
    all_rows = json.loads(_invoke("history", str(e), "--json", "--limit", "100").stdout)
    assert [round(r["new_value"], 2) for r in all_rows] == [
        round(0.5 + i / 100, 2) for i in range(8)
    ]
    last3 = _invoke("history", str(e), "--limit", "3")
    assert [line.split()[4] for line in last3.stdout.splitlines()] == ["0.5500", "0.5600", "0.5700"]
    assert "the newest 3 of 8 events" in last3.stderr
    dials(history_default_limit=2)
    assert len(json.loads(_invoke("history", str(e), "--json").stdout)) == 2


def test_after_session_names_concepts_not_bare_ids(db):
    """--after-session prints each entry by topic/concept and each edge by its two ends."""
    a = f.entry(db, concept_slug="aes", maturity="proven", confidence=0.8)
    b = f.entry(db, concept_slug="modes-of-operation", maturity="proven", confidence=0.8)
    db.commit()
    sb.run(db, sb.sequence("s1", a, b, day=0))
    db.commit()
    lines = _invoke("history", "--after-session", "s1").stdout.splitlines()
    assert "edge  0.3000  cryptography/aes -leads_to-> modes-of-operation" in lines
    assert any(line.startswith("entry") and line.endswith("cryptography/aes") for line in lines)
    assert not any(str(a) in line for line in lines)


def test_history_takes_the_short_ids_other_commands_print(db):
    """A culled edge's short id (as the culled-edges artifact prints it), an entry's unique
    prefix or ending name it; a prefix two ids share is refused in one line naming both endings."""
    import uuid

    from hag.cli import main
    from hag.storage import runs

    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="modular-arithmetic")
    twins = [uuid.UUID(f"01a233a7-0000-7000-8000-0000000000{n}") for n in ("a1", "b2")]
    for old, new in zip((a, b), twins, strict=True):
        db.execute("UPDATE hag_entries SET id = %s WHERE id = %s", (new, old))
    edge = f.edge(db, *twins, "related", confidence=0.2, source_type="learned", created_at=f.NOW)
    db.commit()
    assert run_nightly(as_of=f.NOW + 400 * DAY).culled == 1
    rows = json.loads(_invoke("history", runs.short(edge), "--json").stdout)
    assert rows[-1]["reason"].startswith("culled by the nightly sweep")
    db.execute("UPDATE hag_entries SET confidence = 0.6 WHERE id = %s", (twins[1],))
    db.commit()
    for typed in (runs.short(twins[1]), str(twins[1])[:-1]):
        assert json.loads(_invoke("history", typed, "--json").stdout)[-1]["new_value"] == 0.6
    try:
        main(["history", "01a233a7"])
    except SystemExit as exit_:
        assert exit_.code == 1
    else:
        raise AssertionError("an ambiguous prefix was accepted")
