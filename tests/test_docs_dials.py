"""The tables of dials in docs/ are generated from the settings registry, and stay current."""

from __future__ import annotations

import dataclasses

import pytest

from hag import DOCS_DIR, docs, settings
from hag.errors import SettingsError

PAGE = """# A page

Some design.

<!-- dials:begin {selector} -->
| an old table |
<!-- dials:end -->

More design.
"""


def test_every_pages_dials_tables_are_current():
    """Each page's generated tables equal what the registry generates now."""
    stale = [p.name for p in docs.stale_pages(sorted(DOCS_DIR.glob("*.md")))]
    assert stale == [], f"stale dials tables in {stale}: run `{docs.REGENERATE}`"


def test_the_dials_page_lists_every_dial_of_the_registry():
    """docs/dials.md holds the whole registry, one row per dial, in its generated table."""
    text = (DOCS_DIR / "dials.md").read_text(encoding="utf-8")
    assert "<!-- dials:begin all -->" in text
    for key in settings.REGISTRY:
        assert f"| `{key}` |" in text, key


def test_a_changed_default_makes_the_page_stale_until_regenerated(tmp_path, monkeypatch):
    """A default edited in the registry makes a page's table stale; the command rewrites it."""
    page = tmp_path / "page.md"
    page.write_text(docs.regenerate(PAGE.format(selector="hag/nightly")), encoding="utf-8")
    assert docs.stale_pages([page]) == []
    moved = dataclasses.replace(settings.REGISTRY["cull_min_age_days"], default=91)
    monkeypatch.setitem(settings.REGISTRY, "cull_min_age_days", moved)
    assert docs.stale_pages([page]) == [page]
    page.write_text(docs.regenerate(page.read_text(encoding="utf-8")), encoding="utf-8")
    assert "| `cull_min_age_days` | 91 | 0 to 36500 |" in page.read_text(encoding="utf-8")
    assert "Some design." in page.read_text() and "More design." in page.read_text()


def test_a_table_shows_default_bounds_meaning_and_reader():
    """A row carries the registry's default, bounds, description and consumer."""
    table = docs.dial_table("key:edge_min_confidence")
    d = settings.REGISTRY["edge_min_confidence"]
    assert table.splitlines()[2] == (
        f"| `edge_min_confidence` | {d.default} | {d.min:g} to {d.max:g} "
        f"| {d.description} | `{d.consumer}` |"
    )
    assert "| `topic_scopes` | public | not tutor, visual;" in docs.dial_table("key:topic_scopes")


def test_selectors_pick_by_reader_by_name_and_both():
    """A path picks the dials read there, key: by name prefix; several words must all match."""
    keys = lambda selector: [d.key for d in docs.select(selector)[0]]  # noqa: E731
    assert set(keys("hag/enrichment")) == {
        k for k, d in settings.REGISTRY.items() if d.consumer == "hag/enrichment"
    }
    assert keys("hag/nightly,tasks/sweeps.py key:cull_guard") == [
        "cull_guard_max_edges",
        "cull_guard_max_share",
        "cull_guard_min_edges",
        "cull_guard_timeout_seconds",
    ]
    assert keys("all") == list(settings.REGISTRY)


def test_the_profile_table_shows_the_seeds_value_and_the_profiles():
    """profile:NAME lists the profile's dials with the seed's value beside the profile's."""
    table = docs.dial_table("profile:evidence")
    assert table.startswith("| dial | seed | evidence | meaning |")
    spread = settings.EVIDENCE_PROFILE["prerequisite_lift_chance_spread"]
    assert f"| `prerequisite_lift_chance_spread` | 0 | {spread:g} |" in table
    assert len(table.splitlines()) == 2 + len(settings.EVIDENCE_PROFILE)


def test_values_leaves_the_meaning_out_for_a_page_whose_prose_gives_it():
    """`values` keeps the dial and its values, drops the meaning (and reader) columns, and
    filters nothing: the same dials as without it."""
    table = docs.dial_table("profile:evidence values")
    k = settings.EVIDENCE_PROFILE["prerequisite_lift_k"]
    assert table.splitlines()[:2] == ["| dial | seed | evidence |", "| --- | --- | --- |"]
    assert f"| `prerequisite_lift_k` | 2 | {k:g} |" in table.splitlines()
    assert len(table.splitlines()) == 2 + len(settings.EVIDENCE_PROFILE)
    edge = settings.REGISTRY["edge_min_confidence"]
    assert docs.dial_table("key:edge_min_confidence values").splitlines()[2] == (
        f"| `edge_min_confidence` | {edge.default} | {edge.min:g} to {edge.max:g} |"
    )
    with pytest.raises(ValueError, match="an empty dials selector"):
        docs.dial_table("values")


@pytest.mark.parametrize(
    ("selector", "error"),
    [
        ("hag/nowhere", "names no dial"),
        ("colour:red", "unknown dials selector 'colour:red'"),
        ("retrieval", "unknown dials selector 'retrieval'"),
        (" ", "an empty dials selector"),
    ],
)
def test_a_bad_selector_is_refused_naming_it(selector, error):
    """A selector that names nothing, or that the generator does not know, is refused."""
    with pytest.raises(ValueError, match=error):
        docs.dial_table(selector)


def test_an_unknown_profile_is_refused_naming_the_known_ones():
    """profile:NAME of no profile is refused with the known profiles' names."""
    with pytest.raises(SettingsError, match="unknown profile 'fast'"):
        docs.dial_table("profile:fast")


def test_a_region_without_its_end_is_refused_naming_the_page(tmp_path):
    """A begin marker without its end marker names the page instead of eating the rest of it."""
    page = tmp_path / "broken.md"
    page.write_text("<!-- dials:begin all -->\n| x |\n", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.md: a `<!-- dials:begin"):
        docs.stale_pages([page])


def test_the_command_checks_and_refuses_stray_words(capsys):
    """`python -m hag.docs dials --check` exits 0 on current pages; other words are usage (2)."""
    assert docs.main(["dials", "--check"]) == 0
    assert docs.main(["dials", "--force"]) == 2
    assert "hag: usage: python -m hag.docs dials [--check]" in capsys.readouterr().err


def test_markers_quoted_inside_a_line_are_prose_not_a_region(tmp_path):
    """A page that quotes `<!-- dials:begin all -->` in its text is left as it is."""
    page = tmp_path / "prose.md"
    page.write_text("Fill `<!-- dials:begin all -->` ... `<!-- dials:end -->`.\n", encoding="utf-8")
    assert docs.stale_pages([page]) == []
