"""Dial writes and stored values (issue 24): writers of an ordered pair take turns, a stored
value its dial refuses names its repair, and numbers are ASCII text."""

from __future__ import annotations

import json
import math
import random
import threading
from typing import Any

import pytest

from hag import settings
from hag.errors import SettingsError
from hag.settings import ORDERED, REGISTRY
from hag.storage import db as hdb
from tests.fix_cli import run_hag

pytestmark = pytest.mark.pg_versions  # also run on PostgreSQL 16 (make test-pg16)

FUZZ_SEED = 24
FUZZ_TRIES = 40  # races of two writers whose values are each valid and together invalid


def racing_values(rng: random.Random, values: dict[str, Any]) -> tuple[str, Any, str, Any] | None:
    """An ordered pair (low, high) and a value for each that passes the order check alone
    against `values` but inverts the pair together; None when this draw has none."""
    low, high = rng.choice([p for p in ORDERED if REGISTRY[p[0]].type in ("float", "int")])
    lo, hi = values[low], values[high]
    if hi <= lo:
        return None
    a, b = sorted(rng.uniform(lo, hi) for _ in range(2))
    new_low, new_high = round(b, 4), round(a, 4)
    if REGISTRY[low].type == "int":
        new_low, new_high = math.ceil(b), math.floor(a)
    if new_low <= new_high:
        return None
    try:
        settings.check_order({**values, low: settings.validate(low, new_low)})
        settings.check_order({**values, high: settings.validate(high, new_high)})
    except SettingsError:
        return None
    return low, new_low, high, new_high


def write(start: threading.Barrier, outcomes: list[str], key: str, value: Any) -> None:
    """One writer on its own connection, at the same moment as the other."""
    with hdb.connect() as conn:
        start.wait()
        try:
            settings.set_value(conn, key, value, by="fuzz")
            conn.commit()
            outcomes.append("committed")
        except SettingsError:
            conn.rollback()
            outcomes.append("refused")


def test_concurrent_writers_of_an_ordered_pair_never_commit_an_inverted_one(db):
    """Two threads, each on its own connection, set the two dials of an ordered pair at
    once to values valid alone and inverted together: the second always sees the first's
    commit, so the stored dials never break the order (FUZZ_TRIES races)."""
    rng = random.Random(FUZZ_SEED)
    defaults = dict(settings.defaults())
    races = refused = 0
    invalid: list[tuple[str, Any, str, Any]] = []  # committed combinations that break the order
    while races < FUZZ_TRIES:
        drawn = racing_values(rng, defaults)
        if drawn is None:
            continue
        races += 1
        low, new_low, high, new_high = drawn
        start = threading.Barrier(2)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=write, args=(start, outcomes, key, value))
            for key, value in ((low, new_low), (high, new_high))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        db.rollback()
        settings.invalidate()
        try:
            settings.check_order(settings.load(db))
        except SettingsError:
            invalid.append((low, new_low, high, new_high))
        refused += outcomes.count("refused")
        db.execute(
            "UPDATE hag_settings SET value = default_value WHERE key IN (%s, %s)", (low, high)
        )
        db.commit()
    assert invalid == [], f"{len(invalid)} of {FUZZ_TRIES} races committed an inverted pair"
    assert refused == FUZZ_TRIES  # in every race, one writer saw the other's commit


def store_raw(db: Any, key: str, raw_json: str) -> None:
    db.execute("UPDATE hag_settings SET value = %s::jsonb WHERE key = %s", (raw_json, key))
    db.commit()
    settings.invalidate()


BANANA = (
    'hag: the stored value of floor_candidate, "banana", is invalid (floor_candidate takes a '
    "number (ASCII digits, nothing around), not 'banana'); repair it with "
    "`hag settings reset floor_candidate`"
)


def test_an_invalid_stored_value_stops_readers_with_its_repair(db, database_url):
    """retrieve and process-sessions refuse with one line naming the dial, the stored value
    and `hag settings reset floor_candidate`, rather than run with the dial at its default."""
    store_raw(db, "floor_candidate", '"banana"')
    with pytest.raises(SettingsError, match="hag settings reset floor_candidate"):
        settings.load(db)
    db.rollback()
    for args in (
        ("retrieve", "--topic", "cryptography", "--learner", "ada", "--message", "hi"),
        ("process-sessions",),
    ):
        result = run_hag(database_url, *args)
        errors = [line for line in result.stderr.splitlines() if line.startswith("hag:")]
        assert (result.returncode, errors) == (1, [BANANA]), result.stderr


def test_settings_get_list_set_and_reset_work_whatever_is_stored(db, database_url):
    """`settings get` and `list` show the invalid value marked; `set` of another dial works;
    `reset` repairs it, after which every reader runs again."""
    store_raw(db, "floor_candidate", '"banana"')
    got = run_hag(database_url, "settings", "get", "floor_candidate")
    assert got.returncode == 0 and got.stdout.startswith('"banana" (invalid: ')
    assert "hag settings reset floor_candidate" in got.stdout
    as_json = json.loads(
        run_hag(database_url, "settings", "get", "floor_candidate", "--json").stdout
    )
    assert as_json["value"] == "banana" and "takes a number" in as_json["invalid"]
    listed = run_hag(database_url, "settings", "list").stdout.splitlines()
    assert any(line.split()[:2] == ["floor_candidate", '"banana"'] for line in listed)
    assert any("(invalid)" in line for line in listed if line.startswith("floor_candidate"))
    assert run_hag(database_url, "settings", "set", "floor_pattern", "0.45").returncode == 0
    reset = run_hag(database_url, "settings", "reset", "floor_candidate")
    assert reset.returncode == 0, reset.stderr
    db.rollback()
    assert settings.load(db).floor_candidate == REGISTRY["floor_candidate"].default
    store_raw(db, "floor_candidate", '"banana"')
    assert run_hag(database_url, "settings", "set", "floor_candidate", "0.65").returncode == 0
    db.rollback()
    assert settings.load(db).floor_candidate == 0.65


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("floor_proven", "0.5\n"),
        ("floor_proven", " 0.5"),
        ("floor_proven", "٠.٥"),
        ("floor_proven", "1_0"),
        ("match_count", "1_0"),
        ("match_count", "٥"),
        ("match_count", "5\n"),
        ("floor_proven", "Infinity"),
    ],
)
def test_numbers_are_ascii_digits_and_nothing_around(key, value):
    """float() and int() take trailing newlines, other scripts' digits and underscores;
    a dial does not."""
    with pytest.raises(SettingsError, match=r"ASCII digits, nothing around"):
        settings.validate(key, value)


def test_minus_zero_is_stored_as_zero(db):
    """-0.0 (as text or as a number) becomes 0.0, so stored values compare and print once."""
    for raw in ("-0.0", "-0", -0.0):
        value = settings.validate("floor_proven", raw)
        assert value == 0 and math.copysign(1, value) == 1
    settings.set_value(db, "archive_max_confidence", "-0.0")
    stored = db.execute(
        "SELECT value::text AS v FROM hag_settings WHERE key = 'archive_max_confidence'"
    ).fetchone()["v"]
    assert stored == "0.0"
    db.rollback()


def test_a_bound_moved_past_stored_edges_moves_them_with_their_history(db, database_url):
    """Under the seed rules no rule re-weighs an edge when the floor rises or the ceiling
    falls: the write moves every edge outside the new bounds to the nearer one, with a
    history row naming the dial, so the edges suite (bounds as in force) still holds."""
    from hag import quality
    from tests import factories as f

    a = f.entry(db, concept_slug="rsa")
    b = f.entry(db, concept_slug="primes")
    low = f.edge(db, a, b, "related", confidence=0.05, source_type="learned")
    high = f.edge(db, b, a, "leads_to", confidence=0.95, source_type="seed")
    mid = f.edge(db, a, b, "prerequisite", confidence=0.5, source_type="seed")
    db.commit()
    raised = run_hag(database_url, "settings", "set", "edge_confidence_floor", "0.1")
    assert raised.returncode == 0, raised.stderr
    shown = run_hag(database_url, "settings", "set", "edge_confidence_ceiling", "0.9")
    assert "1 edge confidence(s) moved within the edge bounds" in shown.stdout, shown.stderr
    stored = {
        r["id"]: r["confidence"]
        for r in db.execute("SELECT id, confidence FROM hag_edges").fetchall()
    }
    assert stored == {low: 0.1, high: 0.9, mid: 0.5}
    moves = db.execute(
        "SELECT entity_id, old_value, new_value, reason FROM hag_confidence_history "
        "WHERE entity_kind = 'edge' AND reason LIKE 'dial %%' ORDER BY history_id"
    ).fetchall()
    db.rollback()
    assert [(m["entity_id"], m["old_value"], m["new_value"]) for m in moves] == [
        (low, 0.05, 0.1),
        (high, 0.95, 0.9),
    ]
    assert moves[0]["reason"] == "dial edge_confidence_floor: clamped to the edge bounds"
    assert quality.run_all(db, suites=("edges",)).success
