"""`python -m hag.docs [PAGE | dials [--check]]`: the documentation shipped inside the package.

Without PAGE: where the pages are, and their names with their first line. With PAGE
(`api`, `sessions`, ...): that page's text. The wheel carries `docs/` as `hag/_docs`
(pyproject's force-include), so an installed package has the same pages as a checkout.

`dials` rewrites the tables of dials the pages hold between `<!-- dials:begin SELECTOR -->`
and `<!-- dials:end -->` from the settings registry, so a page never restates a default or
a bound by hand; `dials --check` only names the pages whose tables are stale (exit 1).
A SELECTOR is one or more words, all of which a dial must match:
- `all`: every dial;
- a path (`hag/retrieval`, `hag/sweeps,tasks/sweeps.py`): the dials read there (the
  registry's consumer starts with one of the comma-separated paths);
- `key:PREFIX[,PREFIX]`: the dials whose name starts with one of the prefixes;
- `profile:NAME`: the dials of a profile, with the seed's value and the profile's;
- `values`: the values alone, without the meaning column (and, outside a profile, the reader
  column), for a page whose prose says what each dial sets, such as a formula's legend.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hag import DOCS_DIR, settings
from hag.errors import SettingsError


def pages() -> dict[str, str]:
    """Page name -> its title (the first line, without the `# `)."""
    return {
        p.stem: p.read_text(encoding="utf-8").split("\n", 1)[0].lstrip("# ").strip()
        for p in sorted(DOCS_DIR.glob("*.md"))
    }


# --- generated tables of dials ------------------------------------------------------------

REGENERATE = "python -m hag.docs dials"
# A region's markers stand on lines of their own (a page may quote them in its text).
_REGION = re.compile(
    r"^(?P<begin><!-- dials:begin (?P<selector>[^>\n]*?) -->\n)(?P<body>.*?)^(?P<end><!-- dials:end -->)$",
    re.DOTALL | re.MULTILINE,
)
_BEGIN = re.compile(r"^<!-- dials:begin", re.MULTILINE)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "(none)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else str(value)
    return str(value)


def _bounds(d: settings.Dial) -> str:
    if d.type in ("int", "float"):
        return f"{_value(d.min)} to {_value(d.max)}"
    if d.type == "bool":
        return "on, off"
    # The optional constraints are read with getattr: a registry that drops one still documents.
    choices, forbidden = getattr(d, "choices", ()), getattr(d, "forbidden", ())
    min_items, pattern = getattr(d, "min_items", 0), getattr(d, "pattern", "")
    allowed = [f"one of {', '.join(choices)}"] if choices else []
    allowed += [f"not {', '.join(forbidden)}"] if forbidden else []
    allowed += [f"at least {min_items} item(s)"] if min_items else []
    allowed += [f"matching `{pattern}`"] if pattern else []
    return "; ".join(allowed) or "any text"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def select(selector: str) -> tuple[list[settings.Dial], str | None]:
    """The dials a region's SELECTOR names (registry order), and its profile if it names one."""
    dials = list(settings.REGISTRY.values())
    profile = None
    words = [w for w in selector.split() if w != "values"]  # a column choice, not a filter
    if not words:
        raise ValueError(
            "an empty dials selector (say `all`, a path, key:PREFIX or profile:NAME; "
            "`values` only chooses columns)"
        )
    for word in words:
        kind, _, arg = word.rpartition(":") if ":" in word else ("", "", word)
        options = [a for a in arg.split(",") if a]
        if kind == "" and arg == "all":
            continue
        if kind == "profile":
            profile = arg
            wanted = settings.profile_values(arg)  # a SettingsError names the known profiles
            dials = [d for d in dials if d.key in wanted]
        elif kind == "key":
            dials = [d for d in dials if d.key.startswith(tuple(options))]
        elif kind == "" and "/" in arg:
            dials = [d for d in dials if d.consumer.startswith(tuple(options))]
        else:
            raise ValueError(
                f"unknown dials selector {word!r} (say `all`, a path, key:PREFIX or profile:NAME)"
            )
    if not dials:
        raise ValueError(f"the dials selector {selector!r} names no dial")
    return dials, profile


def dial_table(selector: str) -> str:
    """The Markdown table of the dials a SELECTOR names, as the registry declares them."""
    dials, profile = select(selector)
    if profile is not None:
        seed, chosen = settings.profile_values("seed"), settings.profile_values(profile)
        columns = ["dial", "seed", profile, "meaning"]
        rows = [
            [f"`{d.key}`", _value(seed.get(d.key, d.default)), _value(chosen[d.key]), d.description]
            for d in dials
        ]
    else:
        columns = ["dial", "default", "bounds", "meaning", "read by"]
        rows = [
            [f"`{d.key}`", _value(d.default), _bounds(d), d.description, f"`{d.consumer}`"]
            for d in dials
        ]
    if "values" in selector.split():  # the page's prose says what each dial sets
        columns = columns[:3]
        rows = [row[:3] for row in rows]
    lines = [columns, ["---"] * len(columns)] + [[_cell(c) for c in row] for row in rows]
    return "".join(f"| {' | '.join(line)} |\n" for line in lines)


def regenerate(text: str) -> str:
    """The page's text with every dials region rewritten from the registry."""
    if len(_BEGIN.findall(text)) != len(_REGION.findall(text)):
        raise ValueError("a `<!-- dials:begin ... -->` without its `<!-- dials:end -->`")
    note = f"<!-- generated by `{REGENERATE}` from hag/settings.py: edit there, not here -->\n"
    return _REGION.sub(lambda m: m["begin"] + note + dial_table(m["selector"]) + m["end"], text)


def stale_pages(paths: Iterable[Path]) -> list[Path]:
    """The pages whose dials tables differ from what the registry generates."""
    stale = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        try:
            if regenerate(text) != text:
                stale.append(path)
        except (ValueError, SettingsError) as e:
            raise ValueError(f"{path.name}: {e}") from None
    return stale


def _dials(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("hag: usage: python -m hag.docs dials [--check]", file=sys.stderr)
        return 2
    paths = sorted(DOCS_DIR.glob("*.md"))
    try:
        stale = stale_pages(paths)
    except (ValueError, SettingsError) as e:
        print(f"hag: {e}", file=sys.stderr)
        return 1
    for path in stale:
        if argv:
            print(f"{path.name}: its dials tables are stale (run `{REGENERATE}`)")
        else:
            path.write_text(regenerate(path.read_text(encoding="utf-8")), encoding="utf-8")
            print(f"{path.name}: dials tables rewritten")
    return 1 if argv and stale else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["dials"]:
        return _dials(argv[1:])
    known = pages()
    if not argv:
        print(f"HAG memory's documentation: {DOCS_DIR}")
        width = max(map(len, known), default=0)
        for name, title in known.items():
            print(f"  {name:<{width}}  {title}")
        print("python -m hag.docs PAGE prints one (start with: api)")
        return 0
    name = argv[0].removesuffix(".md")
    if name not in known:
        print(f"hag: no page {name!r}: one of {', '.join(known)}", file=sys.stderr)
        return 1
    print((DOCS_DIR / f"{name}.md").read_text(encoding="utf-8"), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
