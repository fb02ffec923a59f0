"""Named SQL and the binding of placeholders named after a dial (hag.storage.sqlfiles)."""

from __future__ import annotations

from hag import settings
from hag.storage.sqlfiles import placeholders, query, with_dials


def test_a_placeholder_named_after_a_dial_takes_the_dials_value():
    """`with_dials` binds each dial-named placeholder from the snapshot, a list dial as a
    list, leaves the others to the caller, and a caller's value wins over the dial's."""
    dials = settings.defaults().with_overrides(
        edge_min_confidence=0.42, cull_source_types=["discovered"]
    )
    sql = "SELECT %(edge_min_confidence)s, %(cull_source_types)s, %(topic_id)s"
    assert placeholders(sql) == {"edge_min_confidence", "cull_source_types", "topic_id"}
    assert with_dials(sql, dials, topic_id="t") == {
        "edge_min_confidence": 0.42,
        "cull_source_types": ["discovered"],
        "topic_id": "t",
    }
    assert (
        with_dials(sql, dials, topic_id="t", edge_min_confidence=0.9)["edge_min_confidence"] == 0.9
    )


def test_the_edge_walk_and_the_evidence_query_name_the_walk_floor_as_its_dial():
    """The walk floor reaches both queries under its dial's name, so the walk from the
    registry to where it acts is the registry, then the SQL (no Python binds it by hand)."""
    for module, name in (("retrieval", "edge_walk"), ("evidence", "prerequisite_evidence")):
        assert "edge_min_confidence" in placeholders(query(module, name))
    assert "prerequisite_lift_noise_held_min" in placeholders(
        query("evidence", "prerequisite_evidence")
    )


def test_the_seeds_filters_are_the_seven_tier_dials():
    """The semantic pass's filters (also the resident sets' key) are the confidence floor and
    the three tiers' floors and boosts, read from the dials, nothing else."""
    from hag.retrieval import store

    dials = settings.defaults().with_overrides(floor_proven=0.11, boost_candidate=0.77)
    found = store.filters(dials)
    assert sorted(found) == sorted(
        ["retrieval_min_confidence"]
        + [
            f"{kind}_{tier}"
            for kind in ("floor", "boost")
            for tier in ("proven", "pattern", "candidate")
        ]
    )
    assert (found["floor_proven"], found["boost_candidate"]) == (0.11, 0.77)


def test_every_sweep_dial_is_in_the_runs_rule_values():
    """The nightly's rule values (the run row's record, bound to every sweep query) hold
    each dial a sweep query names, with its value, and the run's as_of."""
    from datetime import UTC, datetime

    from hag.nightly import sweeps

    dials = settings.defaults().with_overrides(cull_max_confidence=0.21)
    values = sweeps.rule_values(dials, datetime(2026, 1, 2, tzinfo=UTC))
    assert values["cull_max_confidence"] == 0.21
    assert values["as_of"] == "2026-01-02T00:00:00+00:00"
    assert {"promotion_min_age_days", "archive_max_confidence", "cull_source_types"} <= set(values)
    assert isinstance(values["cull_source_types"], list)
