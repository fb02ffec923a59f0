"""The dials: registry, validation, the 60-second cache, and the promise that each is read."""

from __future__ import annotations

import ast
import dataclasses
import re
import typing
from pathlib import Path

import pytest

from hag import PROJECT_ROOT, settings
from hag.errors import SettingsError
from hag.settings import REGISTRY, Dial

SEARCHED = ("hag", "flows", "tasks", "sql")


def _code_files(path: Path) -> list[Path]:
    """The consumer's own files, and the named-query files (sql/queries) its Python runs:
    a placeholder named after a dial there is bound from the dials (sqlfiles.with_dials)."""
    if path.is_file():
        own = [path]
    elif path.with_suffix(".py").is_file():
        own = [path.with_suffix(".py")]
    elif path.is_dir():
        own = [p for p in path.rglob("*") if p.suffix in (".py", ".sql")]
    else:
        return []
    modules = {m for p in own if p.suffix == ".py" for m in _QUERY.findall(p.read_text())}
    return own + [PROJECT_ROOT / "sql" / "queries" / f"{m}.sql" for m in sorted(modules)]


_QUERY = re.compile(r"""\bquer(?:y|ies)\(\s*["']([a-z_]+)["']""")


def _reads(key: str, path: Path) -> bool:
    """Whether a file reads the dial: as an attribute of a snapshot in Python (`dials.key`),
    by its quoted name in SQL (`hag_setting_float('key')`) or as a placeholder of its name
    in a named query (`%(key)s`)."""
    text = path.read_text()
    if path.suffix == ".sql":
        return re.search(rf"""["']{re.escape(key)}["']|%\({re.escape(key)}\)s""", text) is not None
    return re.search(rf"\.{re.escape(key)}\b", text) is not None


def unread_dials(registry: dict[str, Dial], root: Path = PROJECT_ROOT) -> list[str]:
    """Keys no code under their consumer path reads as an attribute (the call-site check).

    The Settings dataclass declares each key as a field (`key: float`), which is not a read.
    """
    return [
        f"{key} (consumer {d.consumer})"
        for key, d in registry.items()
        if not any(_reads(key, path) for path in _code_files(root / d.consumer))
    ]


def test_registry_holds_at_least_the_seeds_51_dials():
    """The seed has 51 dials; the registry covers at least as many."""
    assert len(REGISTRY) >= 51


def test_every_dial_has_a_reader_in_its_consumer():
    """A dial without a consumer fails the build (SPEC §7)."""
    assert unread_dials(REGISTRY) == []


def test_the_call_site_check_catches_a_dial_without_a_reader():
    """Adding a key that no code reads is reported by the same check."""
    fake = {
        **REGISTRY,
        "made_up_threshold": Dial(
            "made_up_threshold", "float", 0.5, "nobody reads me", "hag/retrieval"
        ),
    }
    new = set(unread_dials(fake)) - set(unread_dials(REGISTRY))
    assert new == {"made_up_threshold (consumer hag/retrieval)"}


def test_the_call_site_check_counts_attribute_reads_only(tmp_path):
    """A quoted key or a field declaration is not a read in Python; `dials.key` is."""
    (tmp_path / "quoted.py").write_text('x = dials["made_up"]\nmade_up: float\n')
    (tmp_path / "attribute.py").write_text("x = dials.made_up\n")
    quoted = Dial("made_up", "float", 0.5, "only quoted", "quoted.py")
    read = Dial("made_up", "float", 0.5, "read", "attribute.py")
    assert unread_dials({"made_up": quoted}, tmp_path) == ["made_up (consumer quoted.py)"]
    assert unread_dials({"made_up": read}, tmp_path) == []


_ATTRIBUTE_TYPES = {"float": float, "int": int, "bool": bool, "str": str, "list": tuple[str, ...]}


def test_snapshot_has_one_attribute_per_dial_with_the_registry_type():
    """The Settings dataclass and the registry name the same dials, each with the same type."""
    hints = typing.get_type_hints(settings.Settings)
    fields = {f.name: hints[f.name] for f in dataclasses.fields(settings.Settings)}
    assert fields == {k: _ATTRIBUTE_TYPES[d.type] for k, d in REGISTRY.items()}


def test_snapshot_values_have_their_attribute_types():
    """Defaults and overrides arrive as the attribute's type (an int default of a float dial too)."""
    snap = settings.defaults().with_overrides(boost_proven=2, topic_scopes="public,algebra")
    for f in dataclasses.fields(snap):
        value = getattr(snap, f.name)
        expected = _ATTRIBUTE_TYPES[REGISTRY[f.name].type]
        assert isinstance(value, typing.get_origin(expected) or expected), (f.name, value)
    assert snap.boost_proven == 2.0 and snap.topic_scopes == ("public", "algebra")


def test_snapshot_is_frozen_and_keeps_the_transitional_mapping_reads():
    """Attributes cannot be assigned; `s["key"]` reads the same value; an unknown key is refused."""
    snap = settings.defaults()
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.floor_proven = 0.9  # type: ignore[misc]
    assert snap.floor_proven == snap.floor_proven == REGISTRY["floor_proven"].default
    assert set(snap) == set(REGISTRY)
    with pytest.raises(SettingsError, match="unknown setting 'floor_provn'"):
        snap["floor_provn"]


def test_every_consumer_path_exists():
    """Each dial names a real module or package as its reader."""
    assert [k for k, d in REGISTRY.items() if not _code_files(PROJECT_ROOT / d.consumer)] == []


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("floor_proven", "1.5", "between 0 and 1"),
        ("floor_proven", "abc", "takes a number"),
        ("floor_proven", "nan", "finite"),
        ("match_count", "2.5", "whole number"),
        ("match_count", "0", "between 1 and 100"),
        ("edge_include_candidate_targets", "maybe", "true or false"),
        ("cull_source_types", "learned,seed", "may never contain seed"),
        ("enrichment_allowed_types", "prerequisite,causes", "not causes"),
        ("no_such_dial", "1", "unknown setting"),
        ("topic_scopes", "", "at least 1 item"),
        ("topic_scopes", '["{}"]', "items must match"),
        ("topic_scopes", "public,student:ada", "items must match"),
        ("topic_scopes", "tutor", "may never contain tutor"),
        ("cull_source_types", "Learned", "items must match"),
        ("session_topic_scope", "visual", "not be tutor, visual"),
    ],
)
def test_validation_refuses_bad_values_with_a_reason(key, value, message):
    """Type, range, allowlists and unknown keys are each refused with a clear message."""
    with pytest.raises(SettingsError, match=message):
        settings.validate(key, value)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("floor_proven", "0.25", 0.25),
        ("match_count", "7", 7),
        ("edge_include_candidate_targets", "off", False),
        ("cull_source_types", "learned, enriched, imported", ["learned", "enriched", "imported"]),
        ("topic_scopes", '["public", "course"]', ["public", "course"]),
    ],
)
def test_validation_coerces_good_values(key, value, expected):
    """CLI text becomes the dial's type."""
    assert settings.validate(key, value) == expected


def test_defaults_pass_their_own_validation():
    """No registry default is out of its own bounds, and ordered pairs are in order."""
    for key, d in REGISTRY.items():
        assert settings.validate(key, d.default) == d.default
    settings.check_order(settings.defaults())


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("band_medium_min", "0.8", "band_medium_min (0.8) may not exceed band_high_min (0.75)"),
        (
            "edge_reinforce_confidence_high",
            "0.2",
            "edge_reinforce_confidence_low (0.3) may not exceed",
        ),
        (
            "edge_confidence_floor",
            "0.4",
            "edge_confidence_floor (0.4) may not exceed edge_new_confidence",
        ),
        (  # strictly: a floor at the walk floor would walk an edge too few learners support
            "edge_min_confidence",
            "0.05",
            "edge_confidence_floor (0.05) must stay below edge_min_confidence (0.05)",
        ),
    ],
)
def test_ordered_dials_cannot_be_inverted(db, key, value, message):
    """A value that would invert an ordered pair of dials is refused and nothing is stored."""
    with pytest.raises(SettingsError, match=re.escape(message)):
        settings.set_value(db, key, value)
    db.rollback()
    stored = db.execute("SELECT value FROM hag_settings WHERE key = %s", (key,)).fetchone()["value"]
    assert stored == REGISTRY[key].default


def test_set_value_persists_and_is_seen_after_invalidation(db):
    """set_value writes the row and drops the cache, so current() sees the new value."""
    settings.set_value(db, "floor_pattern", "0.45")
    db.commit()
    assert settings.current().floor_pattern == 0.45
    row = db.execute(
        "SELECT value, updated_by FROM hag_settings WHERE key = 'floor_pattern'"
    ).fetchone()
    assert (row["value"], row["updated_by"]) == (0.45, "cli")


def test_cache_serves_the_old_value_until_the_ttl_passes(db, monkeypatch):
    """A change made behind the cache's back is seen only after settings_cache_ttl_seconds."""
    clock = [1000.0]
    monkeypatch.setattr(settings.time, "monotonic", lambda: clock[0])
    assert settings.current().floor_pattern == 0.40
    db.execute("UPDATE hag_settings SET value = '0.55' WHERE key = 'floor_pattern'")
    db.commit()
    clock[0] += 59
    assert settings.current().floor_pattern == 0.40
    clock[0] += 2
    assert settings.current().floor_pattern == 0.55


def test_cache_ttl_is_itself_a_dial(db, monkeypatch):
    """With settings_cache_ttl_seconds = 5 a change is seen after five seconds, not sixty."""
    clock = [1000.0]
    monkeypatch.setattr(settings.time, "monotonic", lambda: clock[0])
    settings.set_value(db, "settings_cache_ttl_seconds", 5)
    db.commit()
    assert settings.current().floor_pattern == 0.40
    db.execute("UPDATE hag_settings SET value = '0.55' WHERE key = 'floor_pattern'")
    db.commit()
    clock[0] += 6
    assert settings.current().floor_pattern == 0.55


def test_an_expired_snapshot_serves_the_other_threads_while_one_reloads(db, monkeypatch):
    """While a reload is under way (its lock held), a caller gets the expired snapshot at once
    instead of waiting on the database: a stored change is seen by the reload, not by it."""
    clock = [1000.0]
    monkeypatch.setattr(settings.time, "monotonic", lambda: clock[0])
    assert settings.current().floor_pattern == 0.40
    db.execute("UPDATE hag_settings SET value = '0.55' WHERE key = 'floor_pattern'")
    db.commit()
    clock[0] += 61
    with settings._reload_lock:
        assert settings.current().floor_pattern == 0.40
    assert settings.current().floor_pattern == 0.55


def test_a_reload_that_cannot_reach_the_database_keeps_the_snapshot(db, monkeypatch, caplog):
    """The primary away: the expired snapshot serves on (a warning, one try per TTL); with no
    snapshot the caller fails with the database; once it is back the dials are read again."""
    import psycopg

    from hag import config
    from hag.storage import db as hdb
    from tests.fix_db import unreachable_url

    clock = [1000.0]
    monkeypatch.setattr(settings.time, "monotonic", lambda: clock[0])
    settings.set_value(db, "floor_pattern", 0.55)
    db.commit()
    assert settings.current().floor_pattern == 0.55
    with monkeypatch.context() as away:
        away.setenv("DATABASE_URL", unreachable_url())
        config.reset_config()
        hdb.close_all()
        try:
            clock[0] += 61
            with caplog.at_level("WARNING", logger="hag.settings"):
                assert settings.current().floor_pattern == 0.55
                clock[0] += 59  # within the next TTL: no second try
                assert settings.current().floor_pattern == 0.55
            tries = [r for r in caplog.records if "could not be read again" in r.getMessage()]
            assert len(tries) == 1, caplog.text
            with caplog.at_level("WARNING", logger="hag.settings"):
                clock[0] += 2  # the next try: the snapshot is as old as its last read
                assert settings.current().floor_pattern == 0.55
            assert "the snapshot read 122 s ago" in caplog.records[-1].getMessage()
            settings.invalidate()
            with pytest.raises(psycopg.OperationalError):
                settings.current()
        finally:
            hdb.close_all()
    config.reset_config()
    db.execute("UPDATE hag_settings SET value = '0.6' WHERE key = 'floor_pattern'")
    db.commit()
    assert settings.current().floor_pattern == 0.6


def test_a_reload_under_way_when_the_dials_are_dropped_stores_nothing(db, monkeypatch):
    """`invalidate` while a reload reads (a process moving to another database, a dial set):
    what that reload read is not kept, and the next call reads the dials again."""
    real, calls = settings.load, []

    def dropped_meanwhile(conn):
        calls.append(1)
        loaded = real(conn)
        if len(calls) == 1:
            settings.invalidate()
        return loaded

    monkeypatch.setattr(settings, "load", dropped_meanwhile)
    settings.invalidate()
    settings.current()
    assert settings._cache is None
    settings.current()
    assert len(calls) == 2 and settings._cache is not None


def test_sync_keeps_edited_values_and_resets_out_of_range_ones(db):
    """Re-running the registry sync keeps an operator's edit but repairs an impossible value."""
    db.execute("UPDATE hag_settings SET value = '0.33' WHERE key = 'floor_proven'")
    db.execute("UPDATE hag_settings SET value = '7' WHERE key = 'floor_pattern'")
    settings.sync_registry(db)
    db.commit()
    values = {
        r["key"]: r["value"]
        for r in db.execute(
            "SELECT key, value FROM hag_settings WHERE key IN ('floor_proven', 'floor_pattern')"
        ).fetchall()
    }
    assert values == {"floor_proven": 0.33, "floor_pattern": 0.40}


def test_every_registry_key_is_a_row(db):
    """The migration seeded one hag_settings row per dial, with its consumer recorded."""
    rows = {
        r["key"]: r["consumer"]
        for r in db.execute("SELECT key, consumer FROM hag_settings").fetchall()
    }
    assert rows == {k: d.consumer for k, d in REGISTRY.items()}


def test_sync_moves_an_unedited_value_to_a_changed_default(db):
    """A dial still at its old default follows a new registry default; an edited one stays."""
    old_default = REGISTRY["match_count"].default + 1  # as if the registry had said 6 before
    db.execute(
        "UPDATE hag_settings SET value = %s::jsonb, default_value = %s::jsonb "
        "WHERE key = 'match_count'",
        (str(old_default), str(old_default)),
    )
    db.execute(
        "UPDATE hag_settings SET value = '0.33', default_value = '0.25' WHERE key = 'floor_proven'"
    )
    settings.sync_registry(db)
    db.commit()
    values = {
        r["key"]: r["value"]
        for r in db.execute(
            "SELECT key, value FROM hag_settings WHERE key IN ('match_count', 'floor_proven')"
        ).fetchall()
    }
    assert values == {"match_count": REGISTRY["match_count"].default, "floor_proven": 0.33}


def test_each_dial_is_declared_once_as_a_snapshot_field():
    """The registry is the Settings fields in order, each named once: a second field of
    the same name would silently replace the first, so the source is read for it."""
    tree = ast.parse((PROJECT_ROOT / "hag" / "settings.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Settings")
    names = [n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    assert names == list(REGISTRY)
