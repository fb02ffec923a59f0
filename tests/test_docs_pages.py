"""The docs state the design: dated rounds live in docs/journal/, quoted code exists."""

from __future__ import annotations

import re

from hag import PROJECT_ROOT

DOCS = PROJECT_ROOT / "docs"
JOURNAL = DOCS / "journal"
DATED = re.compile(r"\b20\d\d-\d\d-\d\d\b|\bround\b", re.IGNORECASE)


def _entries():
    return sorted(JOURNAL.glob("20*.md"))


def dated_headings_in_design(text: str) -> list[str]:
    """Headings naming a date or a round that stand before the page's `## Journal` section."""
    found = []
    for line in text.split("\n"):
        if line.startswith("## Journal"):
            break
        if line.startswith("#") and DATED.search(line):
            found.append(line)
    return found


def test_no_design_page_holds_a_dated_round():
    """No heading of a docs page names a date or a round, except in its closing Journal
    section: rounds and their figures go to docs/journal/."""
    hits = {
        page.name: dated_headings_in_design(page.read_text(encoding="utf-8"))
        for page in sorted(DOCS.glob("*.md"))
    }
    assert {name: h for name, h in hits.items() if h} == {}


def test_the_check_finds_a_round_before_the_journal_section_only():
    """A dated heading in the design is found; the same heading under `## Journal` is not."""
    page = "# P\n\n## Design\n\n### Third round (2026-12-01)\n\n## Journal\n\n### 2026-12-02\n"
    assert dated_headings_in_design(page) == ["### Third round (2026-12-01)"]
    assert dated_headings_in_design(page.replace("### Third round (2026-12-01)", "")) == []


def test_each_entry_is_named_and_titled_by_its_date():
    """A journal file is YYYY-MM-DD-what.md and its title starts with the same date."""
    assert _entries(), "docs/journal/ holds no entry"
    for path in _entries():
        assert re.fullmatch(r"20\d\d-\d\d-\d\d-[a-z0-9-]+\.md", path.name), path.name
        title = path.read_text(encoding="utf-8").split("\n", 1)[0]
        assert title.startswith(f"# {path.name[:10]}"), (path.name, title)


def test_the_journal_index_lists_every_entry():
    """docs/journal/README.md links every entry, and nothing that is not there."""
    listed = set(re.findall(r"\]\(([^)]+\.md)\)", (JOURNAL / "README.md").read_text()))
    assert listed == {p.name for p in _entries()}


def test_the_rules_pages_worked_example_quotes_code_that_exists():
    """Each hop of docs/rules.md's worked example quotes (in backticks) code that a file it
    names holds, and the first and last hops quote the dial's own line."""
    text = (DOCS / "rules.md").read_text(encoding="utf-8")
    example = text[text.index("## Worked example") :]
    dial = re.search(r"^`(\w+)`", example.split("\n", 2)[2]).group(1)
    hops = re.split(r"\n(?=\d\. )", example)[1:]
    assert len(hops) == 3
    for i, hop in enumerate(hops):
        paths = re.findall(r"`((?:hag|sql)/[\w/]+\.(?:py|sql))", hop)
        code = [" ".join((PROJECT_ROOT / p).read_text(encoding="utf-8").split()) for p in paths]
        ends = i in (0, len(hops) - 1)  # the declaration and the SQL quote the dial's line
        quoted = [
            q
            for q in re.findall(r"`([^`]+)`", hop)
            if q != dial and q not in paths and (dial in q or not ends)
        ]
        assert quoted, hop
        for fragment in quoted:
            assert any(" ".join(fragment.split()) in c for c in code), (paths, fragment)


def test_every_test_a_page_names_exists():
    """A test function a docs page or the README names is defined under tests/ (the journal,
    which records what was, is exempt)."""
    defined = set(
        re.findall(
            r"^\s*(?:async )?def (test_\w+)",
            "".join(p.read_text(encoding="utf-8") for p in (PROJECT_ROOT / "tests").glob("*.py")),
            re.MULTILINE,
        )
    )
    modules = {p.stem for p in (PROJECT_ROOT / "tests").glob("test_*.py")}
    pages = [PROJECT_ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
    missing = []
    for page in pages:
        cited = re.findall(r"\b(test_\w+?)(_\*)?(?=[`\s),.;:/]|$)", page.read_text())
        for name, star in set(cited):
            if name in modules or name in defined:
                continue
            if not (star and any(d.startswith(name + "_") for d in defined)):
                missing.append(f"{page.name}: {name}{star}")
    assert sorted(missing) == []
