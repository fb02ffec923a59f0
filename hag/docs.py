"""`python -m hag.docs [PAGE]`: the documentation shipped inside the package.

Without PAGE: where the pages are, and their names with their first line. With PAGE
(`api`, `sessions`, ...): that page's text. The wheel carries `docs/` as `hag/_docs`
(pyproject's force-include), so an installed package has the same pages as a checkout.
"""

from __future__ import annotations

import sys

from hag import DOCS_DIR


def pages() -> dict[str, str]:
    """Page name -> its title (the first line, without the `# `)."""
    return {
        p.stem: p.read_text(encoding="utf-8").split("\n", 1)[0].lstrip("# ").strip()
        for p in sorted(DOCS_DIR.glob("*.md"))
    }


def main(argv: list[str]) -> int:
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
