"""The repository stands alone: its own contract, no references to files outside it."""

from __future__ import annotations

import re
import subprocess

import pytest

from hag import PROJECT_ROOT
from hag.errors import MigrationError
from hag.storage import migrate
from hag.storage.schema import EDGE_TYPES


def _tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [p for p in listed if not p.endswith((".png", ".lock"))]


def test_no_file_refers_outside_the_repository():
    """No file names ../shared or shared/..., which a clone does not have."""
    hits = []
    for path in _tracked_text_files():
        try:
            text = (PROJECT_ROOT / path).read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        if path == "tests/test_standing_alone.py":
            continue
        hits += [f"{path}: {m.group(0)}" for m in re.finditer(r"\S*\bshared/\S*", text)]
    assert hits == []


def test_the_readme_and_the_docs_link_only_inside_the_repository():
    """Every Markdown link of README.md and docs/ (the journal too) is a relative path to a
    file of the checkout: no web address (a local server's, like the Prefect UI's, aside),
    nothing above the repository's root."""
    pages = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").rglob("*.md"))]
    bad = []
    for page in pages:
        for target in re.findall(r"\]\(<?([^)\s>]+)>?\)|<(\w+://[^>]+)>", page.read_text()):
            link = (target[0] or target[1]).split("#")[0]
            if not link or re.match(r"http://(127\.0\.0\.1|localhost)[:/]", link):
                continue
            resolved = (page.parent / link).resolve()
            if re.match(r"\w+:", link) or not resolved.is_relative_to(PROJECT_ROOT.resolve()):
                bad.append(f"{page.name}: {link} leaves the repository")
            elif not resolved.exists():
                bad.append(f"{page.name}: {link} does not exist")
    assert bad == []


def test_the_readmes_quick_start_is_two_commands():
    """README's quick start is one shell block of exactly two commands: make demo, make test."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```sh\n(.*?)```", section, re.DOTALL)
    commands = [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]
    assert commands == ["make demo", "make test"]


def test_the_readme_links_the_projects_own_contract():
    """README links docs/contract.md, which names every edge type and the four passes."""
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert "(docs/contract.md)" in readme
    contract = (PROJECT_ROOT / "docs" / "contract.md").read_text()
    assert all(f"`{t}`" in contract for t in EDGE_TYPES)
    for words in ("topic, semantic", "topic, by concept", "**tutor**", "**student**"):
        assert words in contract


def test_a_ledger_from_before_a_comment_rewording_still_migrates(fresh):
    """010's comment was reworded: a ledger holding its old checksum is accepted; any other
    checksum is still refused."""
    migrate.migrate(fresh, 8)
    name = "010_retrieval_storage_and_tutor_index.sql"
    [old] = migrate.REWORDED[name]
    fresh.execute("UPDATE hag_schema_migrations SET checksum = %s WHERE filename = %s", (old, name))
    fresh.commit()
    assert migrate.migrate(fresh, 8) == []
    fresh.execute("UPDATE hag_schema_migrations SET checksum = 'x' WHERE filename = %s", (name,))
    fresh.commit()
    with pytest.raises(MigrationError, match=f"{name} changed after it was applied"):
        migrate.migrate(fresh, 8)
